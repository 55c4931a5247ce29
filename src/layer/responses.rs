//! `POST /v1/responses`: the Responses dialect of the rule (design.md
//! section 10). The same selection, plan, decision and programs as chat
//! completions; only the shapes are the Responses API's.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE};
use http::{Request, Response};
use serde_json::Value;

use super::embedded::{not_handed_out, resume_with, run_new, ProgramCall, Resumed};
use super::forward::{
    read_client_body, read_upstream_body, relay, relay_head, respond_with, send, upstream_headers,
    upstream_uri,
};
use super::round::{check_event_stream, check_identity, next_round, response_parts, tag, Target};
use super::stores::RequestStores;
use super::{State, Upstream};
use crate::body::{full, ProxyBody};
use crate::dialect::Dialect;
use crate::error::ProxyError;
use crate::intercept::add_usage;
use crate::mode::Mode;
use crate::plan::ToolPlan;
use crate::responses::completion::{give_up, judge_response};
use crate::responses::embedded::{client_response, replayable, response_as_sse};
use crate::responses::history::{pair, ItemReader};
use crate::responses::items;
use crate::responses::request::ResponsesRequest;
use crate::responses::stream::ResponsesJudge;
use crate::runtime::{ExecutionLookup, Step, MAX_PROGRAMS_PER_REQUEST};
use crate::select::Selection;
use crate::splice::TenantSplices;
use crate::sse::DEFAULT_MAX_EVENT_BYTES;
use crate::stream::{intercept_stream, HeldProgram, Next, RepairFuture, RepairTarget};
use crate::tenant::Tenant;
use crate::turn::{self, Bounds, Decision, Fate, Summary};

pub(crate) async fn responses(
    state: &Arc<State>,
    inner: Upstream,
    selection: Selection,
    req: Request<ProxyBody>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let (parts, body) = req.into_parts();
    let bytes = read_client_body(&parts.headers, body, state.config.max_body_bytes).await?;
    let uri = upstream_uri(state, "/v1/responses", &parts.uri)?;
    let preset = &selection.preset;
    let timeout = state.config.upstream_timeout;

    // Native with nothing to add or hide: the bytes go through unparsed.
    if selection.mode == Mode::Native && !preset.restricts_tools() && preset.sections.is_empty() {
        let target = Target {
            uri,
            headers: upstream_headers(state, &parts.headers, false),
        };
        let res = send(inner, target.request(bytes), timeout).await?;
        return Ok(tag(relay(res), &selection, None));
    }

    let mut request = ResponsesRequest::parse(&bytes)?;
    let stores = RequestStores::new(state, Tenant::of(&parts.headers, &selection.scope));
    let plan = state.plans.get_or_build_for(
        Dialect::Responses,
        request.field("tools"),
        preset,
        selection.mode,
        state.config.runtime,
    )?;
    let limits = &state.config.limits;
    let read = |stores: &RequestStores, request: &mut ResponsesRequest| {
        if plan.runs_code {
            read_history(stores, request, limits)?;
        }
        request.rewrite(&plan, &stores.splices)
    };
    stores
        .read_ahead(|stores| {
            let mut copy = request.clone();
            if plan.runs_code {
                let reader = ItemReader::new(&stores.executions, &stores.tenant);
                let _ = reader.trailing_results(copy.input_items());
            }
            let _ = read(stores, &mut copy);
        })
        .await?;
    if plan.runs_code {
        if let Some(res) = resume(state, &stores, &request, &plan).await? {
            return Ok(tag(res, &selection, None));
        }
    }
    read(&stores, &mut request)?;
    stores.flush().await?;
    let splices = stores.splices;
    let target = Target {
        uri,
        headers: upstream_headers(state, &parts.headers, true),
    };
    if !plan.can_deny() && !plan.runs_code {
        let res = send(inner, target.request(request.to_bytes()), timeout).await?;
        return Ok(tag(relay(res), &selection, None));
    }
    if request.stream {
        return streamed(state, inner, target, request, plan, &selection, splices).await;
    }
    intercepted(state, inner, &target, request, &plan, &selection, &splices).await
}

/// Shows the model its programs in the history: a continuation of a
/// minted response goes on from the program's own turn in the provider's
/// stored conversation.
fn read_history(
    stores: &RequestStores,
    request: &mut ResponsesRequest,
    limits: &crate::runtime::Limits,
) -> Result<(), ProxyError> {
    let reader = ItemReader::new(&stores.executions, &stores.tenant);
    match minted_previous(request) {
        Some(exec_id) => {
            let exec = stores
                .executions
                .get(&stores.tenant, &exec_id)
                .filter(|e| e.upstream_response.is_some())
                .ok_or_else(|| ProxyError::InvalidRequest(lost_previous(&exec_id)))?;
            if let Some(input) = request.input_mut() {
                reader.rewrite_continued(input, &exec, limits);
            }
            let previous = exec.upstream_response.clone().unwrap_or_default();
            request.set_field("previous_response_id", &Value::String(previous));
        }
        None => {
            if let Some(input) = request.input_mut() {
                reader.rewrite(input, limits);
            }
        }
    }
    Ok(())
}

/// Outputs the client returns for a program: resume it. `Some` is the
/// client's next response (the program's next calls).
async fn resume(
    state: &State,
    stores: &RequestStores,
    request: &ResponsesRequest,
    plan: &ToolPlan,
) -> Result<Option<Response<ProxyBody>>, ProxyError> {
    let input = request.input_items();
    if input.is_empty() {
        return Ok(None);
    }
    let reader = ItemReader::new(&stores.executions, &stores.tenant);
    let trailing = reader
        .trailing_results(input)
        .map_err(|ids| not_handed_out(&ids))?;
    let Some(trailing) = trailing else {
        return Ok(None);
    };
    match resume_with(state, stores, trailing).await? {
        Resumed::Hand(exec, range) => {
            let model = request
                .field("model")
                .and_then(|m| serde_json::from_str(m.get()).ok())
                .unwrap_or(Value::Null);
            let response = client_response(&exec, range, plan, &model, None, true);
            Ok(Some(respond(request.stream, &response)))
        }
        Resumed::AskModel => Ok(None),
    }
}

/// The execution a minted `previous_response_id` names, if it names one.
fn minted_previous(request: &ResponsesRequest) -> Option<String> {
    let id: String = serde_json::from_str(request.field("previous_response_id")?.get()).ok()?;
    let rest = id.strip_prefix(crate::responses::embedded::MINTED_RESPONSE_PREFIX)?;
    let (exec, _) = rest.rsplit_once('_')?;
    Some(exec.to_owned())
}

fn lost_previous(exec_id: &str) -> String {
    format!(
        "`previous_response_id` names a response codemode-proxy minted for program `{exec_id}`, \
         whose record it no longer holds (it restarted, or the record expired), or whose model \
         turn the provider did not store; send the whole conversation as `input` (with \
         `store: false`) instead"
    )
}

/// A response the proxy wrote, as JSON or as the event stream asked for.
fn respond(stream: bool, response: &Value) -> Response<ProxyBody> {
    respond_in(Response::new(()).into_parts().0, stream, response)
}

fn respond_in(
    mut parts: http::response::Parts,
    stream: bool,
    response: &Value,
) -> Response<ProxyBody> {
    parts.headers.remove(CONTENT_LENGTH);
    parts.headers.remove(CONTENT_ENCODING);
    let (content_type, body) = if stream {
        ("text/event-stream", response_as_sse(response))
    } else {
        ("application/json", Bytes::from(response.to_string()))
    };
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    Response::from_parts(parts, full(body))
}

/// Starts the model's program from its judged turn.
async fn start_program(
    state: &State,
    tenant: &Tenant,
    plan: &ToolPlan,
    turn_items: &[Value],
    calls: &[turn::JudgedCall],
    response_id: Option<String>,
) -> Result<(Arc<crate::runtime::Execution>, Step), ProxyError> {
    let program = calls.iter().find(|c| c.fate == Fate::Program);
    let Some(program) = program else {
        return Err(ProxyError::UpstreamInvalid("no program to run".into()));
    };
    let (denied_calls, denials) = items::program_denials(calls);
    let text: String = turn_items
        .iter()
        .filter_map(crate::responses::completion::message_text)
        .collect();
    let model_turn = replayable(turn_items, &program.id, &denied_calls);
    let call = ProgramCall {
        id: program.id.clone(),
        arguments: program.arguments.clone(),
        content: (!text.is_empty()).then_some(text),
        turn: None,
        response_id,
    };
    run_new(state, tenant, plan, call, model_turn, denied_calls, denials).await
}

/// The checked path: every round's calls are judged and the turn decided
/// by [`turn::decide`], as on chat completions.
async fn intercepted(
    state: &State,
    inner: Upstream,
    target: &Target,
    mut request: ResponsesRequest,
    plan: &ToolPlan,
    selection: &Selection,
    splices: &TenantSplices,
) -> Result<Response<ProxyBody>, ProxyError> {
    let timeout = state.config.upstream_timeout;
    let mut usage: Option<Value> = None;
    let mut repairs = 0u32;
    let mut programs = 0u32;
    loop {
        let res = send(inner.clone(), target.request(request.to_bytes()), timeout).await?;
        let (mut parts, body) = res.into_parts();
        let round = crate::telemetry::Round::of_response(&mut parts.extensions);
        let body = read_upstream_body(body, timeout, state.config.max_upstream_body_bytes).await?;
        if !parts.status.is_success() {
            return Ok(tag(respond_with(parts, body), selection, Some(repairs)));
        }
        check_identity(&parts.headers)?;
        let mut response: Value = serde_json::from_slice(&body)
            .map_err(|e| ProxyError::UpstreamInvalid(format!("the response is not JSON: {e}")))?;
        add_usage(&mut usage, response.get("usage"));
        round.usage(response.get("usage"));
        // Denials are events of the round that made them; the round ends here.
        let (judged, summary) = round.in_scope(|| {
            let judged = judge_response(&mut response, plan);
            let summary = Summary::of(&judged.calls, false);
            (judged, summary)
        });
        drop(round);
        let bounds = Bounds {
            repairs,
            max_repairs: state.config.max_repairs,
            programs,
            max_programs: MAX_PROGRAMS_PER_REQUEST,
        };
        let decision = turn::decide(summary, bounds);
        crate::observe::ledger::judged(&judged.calls, decision);
        match decision {
            Decision::Final => {}
            Decision::Splice => {
                if let Some((keys, splice)) = items::splice(&judged.calls) {
                    splices.put(&keys, Arc::new(splice));
                    splices.settle().await?;
                }
            }
            Decision::Repair => {
                repairs += 1;
                tracing::info!(target: "codemode::repair", round = repairs, scope = %selection.scope, "re-asking the model after denials");
                request.push_items(&items::repair_items(&judged.items, &judged.calls));
                continue;
            }
            Decision::Program => {
                let tenant = splices.tenant();
                let response_id = response
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let (exec, step) = start_program(
                    state,
                    tenant,
                    plan,
                    &judged.items,
                    &judged.calls,
                    response_id,
                )
                .await?;
                match step {
                    Step::Waiting(range) => {
                        let model = response.get("model").cloned().unwrap_or(Value::Null);
                        let out = client_response(&exec, range, plan, &model, usage.clone(), true);
                        let res = respond_in(response_parts(parts), false, &out);
                        return Ok(tag(res, selection, Some(repairs)));
                    }
                    Step::Ended => {
                        programs += 1;
                        request.push_items(&pair(&exec));
                        continue;
                    }
                }
            }
            Decision::GiveUp => give_up(&mut response, &turn::give_up_note(&judged.calls)),
        }
        if repairs > 0 || programs > 0 {
            if let Some(total) = usage {
                response["usage"] = total;
            }
        }
        let res = respond_in(response_parts(parts), false, &response);
        return Ok(tag(res, selection, Some(repairs)));
    }
}

/// The checked streaming path: the first round's headers go out at once,
/// the body is judged event by event.
async fn streamed(
    state: &Arc<State>,
    inner: Upstream,
    target: Target,
    request: ResponsesRequest,
    plan: Arc<ToolPlan>,
    selection: &Selection,
    splices: TenantSplices,
) -> Result<Response<ProxyBody>, ProxyError> {
    let timeout = state.config.upstream_timeout;
    let res = send(inner.clone(), target.request(request.to_bytes()), timeout).await?;
    if !res.status().is_success() {
        return Ok(tag(relay(res), selection, None));
    }
    check_event_stream(&res)?;
    let judge = ResponsesJudge::new(plan.clone(), state.config.max_repairs);
    let reasker = Reasker {
        state: state.clone(),
        plan,
        inner,
        target: Arc::new(target),
        request: Arc::new(Mutex::new(request)),
        tenant: *splices.tenant(),
    };
    let res = intercept_stream(
        relay_head(res),
        judge,
        Box::new(reasker),
        splices,
        DEFAULT_MAX_EVENT_BYTES,
    );
    Ok(tag(res, selection, None))
}

/// Later rounds of a stream: the input grows by each round's items.
struct Reasker {
    state: Arc<State>,
    plan: Arc<ToolPlan>,
    inner: Upstream,
    target: Arc<Target>,
    request: Arc<Mutex<ResponsesRequest>>,
    tenant: Tenant,
}

fn grown(
    request: &Mutex<ResponsesRequest>,
    target: &Target,
    items: &[Value],
) -> Request<ProxyBody> {
    let mut request = request.lock().unwrap_or_else(|p| p.into_inner());
    request.push_items(items);
    target.request(request.to_bytes())
}

impl RepairTarget for Reasker {
    fn reask(&mut self, items: Vec<Value>) -> RepairFuture {
        let req = grown(&self.request, &self.target, &items);
        Box::pin(next_round(
            self.inner.clone(),
            req,
            self.state.config.upstream_timeout,
            self.state.config.max_upstream_body_bytes,
        ))
    }

    fn run_program(&mut self, program: HeldProgram) -> RepairFuture {
        let state = self.state.clone();
        let plan = self.plan.clone();
        let inner = self.inner.clone();
        let target = self.target.clone();
        let request = self.request.clone();
        let tenant = self.tenant;
        Box::pin(async move {
            let turn_items = match program.turn {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            };
            let model_turn = replayable(&turn_items, &program.id, &program.denied_calls);
            let call = ProgramCall {
                id: program.id,
                arguments: program.arguments,
                content: program.content,
                turn: None,
                response_id: program.response_id,
            };
            let (exec, step) = run_new(
                &state,
                &tenant,
                &plan,
                call,
                model_turn,
                program.denied_calls,
                program.denials,
            )
            .await?;
            match step {
                Step::Waiting(range) => {
                    let model = {
                        let r = request.lock().unwrap_or_else(|p| p.into_inner());
                        r.field("model")
                            .and_then(|m| serde_json::from_str(m.get()).ok())
                            .unwrap_or(Value::Null)
                    };
                    Ok(Next::HandOff(client_response(
                        &exec, range, &plan, &model, None, false,
                    )))
                }
                Step::Ended => {
                    let req = grown(&request, &target, &pair(&exec));
                    let max_body = state.config.max_upstream_body_bytes;
                    next_round(inner, req, state.config.upstream_timeout, max_body).await
                }
            }
        })
    }
}
