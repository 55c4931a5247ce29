//! `POST /v1/messages` and `/v1/messages/count_tokens`: Anthropic's
//! Messages dialect of the rule (design.md section 11). The same selection,
//! plan, decision and programs as chat completions; only the shapes (and
//! the upstream) are Anthropic's.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE};
use http::{Request, Response};
use serde_json::{json, Value};

use super::embedded::{not_handed_out, resume_with, run_new, ProgramCall, Resumed};
use super::forward::{
    anthropic_headers, anthropic_uri, read_client_body, read_upstream_body, relay, relay_head,
    respond_with, send,
};
use super::round::{check_event_stream, check_identity, next_round, response_parts, tag, Target};
use super::stores::RequestStores;
use super::{State, Upstream};
use crate::body::{full, ProxyBody};
use crate::dialect::Dialect;
use crate::error::ProxyError;
use crate::intercept::add_usage;
use crate::messages::completion::{give_up, judge_message};
use crate::messages::embedded::{client_message, pair, replayable};
use crate::messages::history::MessageReader;
use crate::messages::items;
use crate::messages::request::MessagesRequest;
use crate::messages::stream::MessagesJudge;
use crate::mode::Mode;
use crate::plan::ToolPlan;
use crate::runtime::{Step, MAX_PROGRAMS_PER_REQUEST};
use crate::select::Selection;
use crate::splice::TenantSplices;
use crate::sse::DEFAULT_MAX_EVENT_BYTES;
use crate::stream::{intercept_stream, HeldProgram, Next, RepairFuture, RepairTarget};
use crate::tenant::Tenant;
use crate::turn::{self, Bounds, Decision, Fate, Summary};

/// `POST /v1/messages` (a model turn, judged), or with `counting`
/// `POST /v1/messages/count_tokens` (rewritten as its messages request
/// would be, so the count is what the model will see; not judged).
pub(crate) async fn messages(
    state: &Arc<State>,
    inner: Upstream,
    selection: Selection,
    counting: bool,
    req: Request<ProxyBody>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let (parts, body) = req.into_parts();
    let bytes = read_client_body(&parts.headers, body, state.config.max_body_bytes).await?;
    let path = if counting {
        "/v1/messages/count_tokens"
    } else {
        "/v1/messages"
    };
    let uri = anthropic_uri(state, path, &parts.uri)?;
    let preset = &selection.preset;
    let timeout = state.config.upstream_timeout;

    // Native with nothing to add or hide: the bytes go through unparsed.
    if selection.mode == Mode::Native && !preset.restricts_tools() && preset.sections.is_empty() {
        let target = Target {
            uri,
            headers: anthropic_headers(state, &parts.headers, false),
        };
        let res = send(inner, target.request(bytes), timeout).await?;
        return Ok(tag(relay(res), &selection, None));
    }

    let mut request = MessagesRequest::parse(&bytes)?;
    let stores = RequestStores::new(state, Tenant::of(&parts.headers, &selection.scope));
    let plan = state.plans.get_or_build_for(
        Dialect::Messages,
        request.field("tools"),
        preset,
        selection.mode,
        state.config.runtime,
    )?;
    let limits = &state.config.limits;
    let read = |stores: &RequestStores, request: &mut MessagesRequest| {
        if plan.runs_code {
            MessageReader::new(&stores.executions, &stores.tenant)
                .rewrite(request.messages_mut(), limits);
        }
        request.rewrite(&plan, &stores.splices)
    };
    stores
        .read_ahead(|stores| {
            let mut copy = request.clone();
            if plan.runs_code && !counting {
                let reader = MessageReader::new(&stores.executions, &stores.tenant);
                let _ = reader.trailing_results(copy.messages());
            }
            let _ = read(stores, &mut copy);
        })
        .await?;
    if plan.runs_code && !counting {
        if let Some(res) = resume(state, &stores, &request).await? {
            return Ok(tag(res, &selection, None));
        }
    }
    read(&stores, &mut request)?;
    stores.flush().await?;
    let splices = stores.splices;
    let target = Target {
        uri,
        headers: anthropic_headers(state, &parts.headers, true),
    };
    if counting || (!plan.can_deny() && !plan.runs_code) {
        let res = send(inner, target.request(request.to_bytes()), timeout).await?;
        return Ok(tag(relay(res), &selection, None));
    }
    if request.stream {
        return streamed(state, inner, target, request, plan, &selection, splices).await;
    }
    intercepted(state, inner, &target, request, &plan, &selection, &splices).await
}

fn model_of(request: &MessagesRequest) -> Value {
    request
        .field("model")
        .and_then(|m| serde_json::from_str(m.get()).ok())
        .unwrap_or(Value::Null)
}

/// Results the client returns for a program: resume it. `Some` is the
/// client's next message (the program's next calls).
async fn resume(
    state: &State,
    stores: &RequestStores,
    request: &MessagesRequest,
) -> Result<Option<Response<ProxyBody>>, ProxyError> {
    let reader = MessageReader::new(&stores.executions, &stores.tenant);
    let trailing = reader
        .trailing_results(request.messages())
        .map_err(|ids| not_handed_out(&ids))?;
    let Some(trailing) = trailing else {
        return Ok(None);
    };
    match resume_with(state, stores, trailing).await? {
        Resumed::Hand(exec, range) => {
            let message = client_message(&exec, range, &model_of(request), None, true);
            Ok(Some(respond(request.stream, &message)))
        }
        Resumed::AskModel => Ok(None),
    }
}

/// A message the proxy wrote, as JSON or as the event stream asked for.
fn respond(stream: bool, message: &Value) -> Response<ProxyBody> {
    respond_in(Response::new(()).into_parts().0, stream, message)
}

fn respond_in(
    mut parts: http::response::Parts,
    stream: bool,
    message: &Value,
) -> Response<ProxyBody> {
    parts.headers.remove(CONTENT_LENGTH);
    parts.headers.remove(CONTENT_ENCODING);
    let (content_type, body) = if stream {
        ("text/event-stream", message_as_sse(message))
    } else {
        ("application/json", Bytes::from(message.to_string()))
    };
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    Response::from_parts(parts, full(body))
}

/// A whole message as the event stream a streaming client expects.
fn message_as_sse(message: &Value) -> Bytes {
    let mut out = Vec::new();
    let mut push = |data: Value| {
        let kind = data["type"].as_str().unwrap_or("message").to_owned();
        out.extend_from_slice(&crate::responses::stream::frame(&kind, &data));
    };
    let mut head = message.clone();
    head["content"] = json!([]);
    head["stop_reason"] = Value::Null;
    push(json!({"type": "message_start", "message": head}));
    for (i, block) in message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let mut start = block.clone();
        let delta = match block["type"].as_str() {
            Some("tool_use") => {
                start["input"] = json!({});
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()})
            }
            Some("text") => {
                start["text"] = json!("");
                json!({"type": "text_delta", "text": block["text"]})
            }
            _ => Value::Null,
        };
        push(json!({"type": "content_block_start", "index": i, "content_block": start}));
        if !delta.is_null() {
            push(json!({"type": "content_block_delta", "index": i, "delta": delta}));
        }
        push(json!({"type": "content_block_stop", "index": i}));
    }
    push(json!({"type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
                "usage": {"output_tokens": message["usage"]["output_tokens"]}}));
    push(json!({"type": "message_stop"}));
    Bytes::from(out)
}

/// Starts the model's program from its judged turn.
async fn start_program(
    state: &State,
    tenant: &Tenant,
    plan: &ToolPlan,
    assistant: &Value,
    calls: &[turn::JudgedCall],
    content: Option<String>,
) -> Result<(Arc<crate::runtime::Execution>, Step), ProxyError> {
    let Some(program) = calls.iter().find(|c| c.fate == Fate::Program) else {
        return Err(ProxyError::UpstreamInvalid("no program to run".into()));
    };
    let (denied_calls, denials) = items::program_denials(calls);
    let model_turn = replayable(assistant, &program.id, &denied_calls);
    let call = ProgramCall {
        id: program.id.clone(),
        arguments: program.arguments.clone(),
        content,
        turn: None,
        response_id: None,
    };
    run_new(state, tenant, plan, call, model_turn, denied_calls, denials).await
}

/// The checked path: every round's calls are judged and the turn decided
/// by [`turn::decide`], as on chat completions.
async fn intercepted(
    state: &State,
    inner: Upstream,
    target: &Target,
    mut request: MessagesRequest,
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
        let mut message: Value = serde_json::from_slice(&body)
            .map_err(|e| ProxyError::UpstreamInvalid(format!("the message is not JSON: {e}")))?;
        add_usage(&mut usage, message.get("usage"));
        round.usage(message.get("usage"));
        // Denials are events of the round that made them; the round ends here.
        let (judged, summary) = round.in_scope(|| {
            let judged = judge_message(&mut message, plan);
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
                request.push_messages(&items::repair_messages(&judged.assistant, &judged.calls));
                continue;
            }
            Decision::Program => {
                let (exec, step) = start_program(
                    state,
                    splices.tenant(),
                    plan,
                    &judged.assistant,
                    &judged.calls,
                    judged.text(),
                )
                .await?;
                match step {
                    Step::Waiting(range) => {
                        let model = message.get("model").cloned().unwrap_or(Value::Null);
                        let out = client_message(&exec, range, &model, usage.clone(), true);
                        let res = respond_in(response_parts(parts), false, &out);
                        return Ok(tag(res, selection, Some(repairs)));
                    }
                    Step::Ended => {
                        programs += 1;
                        request.push_messages(&pair(&exec, &[]));
                        continue;
                    }
                }
            }
            Decision::GiveUp => give_up(&mut message, &turn::give_up_note(&judged.calls)),
        }
        if repairs > 0 || programs > 0 {
            if let Some(total) = usage {
                message["usage"] = total;
            }
        }
        let res = respond_in(response_parts(parts), false, &message);
        return Ok(tag(res, selection, Some(repairs)));
    }
}

/// The checked streaming path: the first round's headers go out at once,
/// the body is judged event by event.
async fn streamed(
    state: &Arc<State>,
    inner: Upstream,
    target: Target,
    request: MessagesRequest,
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
    let judge = MessagesJudge::new(plan.clone(), state.config.max_repairs);
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

/// Later rounds of a stream: the conversation grows by each round's turn.
struct Reasker {
    state: Arc<State>,
    plan: Arc<ToolPlan>,
    inner: Upstream,
    target: Arc<Target>,
    request: Arc<Mutex<MessagesRequest>>,
    tenant: Tenant,
}

fn grown(request: &Mutex<MessagesRequest>, target: &Target, more: &[Value]) -> Request<ProxyBody> {
    let mut request = request.lock().unwrap_or_else(|p| p.into_inner());
    request.push_messages(more);
    target.request(request.to_bytes())
}

impl RepairTarget for Reasker {
    fn reask(&mut self, messages: Vec<Value>) -> RepairFuture {
        let req = grown(&self.request, &self.target, &messages);
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
            let model_turn = program
                .turn
                .as_ref()
                .and_then(|t| replayable(t, &program.id, &program.denied_calls));
            let call = ProgramCall {
                id: program.id,
                arguments: program.arguments,
                content: program.content,
                turn: None,
                response_id: None,
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
                        model_of(&r)
                    };
                    Ok(Next::HandOff(client_message(
                        &exec, range, &model, None, false,
                    )))
                }
                Step::Ended => {
                    let req = grown(&request, &target, &pair(&exec, &[]));
                    let max_body = state.config.max_upstream_body_bytes;
                    next_round(inner, req, state.config.upstream_timeout, max_body).await
                }
            }
        })
    }
}
