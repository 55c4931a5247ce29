//! `POST /v1/chat/completions`: rewrite, forward, judge, repair.

use std::sync::{Arc, Mutex};

use http::{Request, Response};
use serde_json::{json, Value};

use super::embedded::{self, Ran, Render};
use super::forward::{
    read_client_body, read_upstream_body, relay, relay_head, respond_with, send, upstream_headers,
    upstream_uri,
};
use super::round::{check_event_stream, check_identity, next_round, response_parts, tag, Target};
use super::stores::RequestStores;
use super::{State, Upstream};
use crate::body::ProxyBody;
use crate::error::ProxyError;
use crate::intercept::{add_usage, give_up, judge_completion};
use crate::mode::Mode;
use crate::plan::ToolPlan;
use crate::rewrite::ChatRequest;
use crate::runtime::{history, MAX_PROGRAMS_PER_REQUEST};
use crate::select::Selection;
use crate::splice::TenantSplices;
use crate::sse::DEFAULT_MAX_EVENT_BYTES;
use crate::stream::{intercept_stream, HeldProgram, Next, RepairFuture, RepairTarget, StreamJudge};
use crate::tenant::Tenant;
use crate::turn::{self, Bounds, Decision, Fate, Summary};

pub(crate) async fn chat_completions(
    state: &Arc<State>,
    inner: Upstream,
    selection: Selection,
    req: Request<ProxyBody>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let (parts, body) = req.into_parts();
    let bytes = read_client_body(&parts.headers, body, state.config.max_body_bytes).await?;
    let uri = upstream_uri(state, "/v1/chat/completions", &parts.uri)?;
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

    let mut chat = ChatRequest::parse(&bytes)?;
    // Executions and stored denials belong to the client's credential and scope.
    let stores = RequestStores::new(state, Tenant::of(&parts.headers, &selection.scope));
    let plan = state.plans.get_or_build(
        chat.field("tools"),
        preset,
        selection.mode,
        state.config.runtime,
    )?;
    let limits = &state.config.limits;
    let read = |stores: &RequestStores, chat: &mut ChatRequest| {
        if plan.runs_code {
            history::Reader::new(&stores.executions, &stores.tenant)
                .rewrite(&mut chat.messages, limits);
        }
        chat.rewrite(&plan, &stores.splices)
    };
    stores
        .read_ahead(|stores| {
            let mut copy = chat.clone();
            if plan.runs_code {
                let reader = history::Reader::new(&stores.executions, &stores.tenant);
                let _ = reader.trailing_results(&copy.messages);
            }
            let _ = read(stores, &mut copy);
        })
        .await?;
    let render = Render::of(&chat);
    if plan.runs_code {
        if let Some(res) = embedded::resume(state, &stores, &chat, render).await? {
            return Ok(tag(res, &selection, None));
        }
    }
    read(&stores, &mut chat)?;
    stores.flush().await?;
    let splices = stores.splices;

    if !plan.can_deny() && !plan.runs_code {
        let target = Target {
            uri,
            headers: upstream_headers(state, &parts.headers, true),
        };
        let res = send(inner, target.request(chat.to_bytes()), timeout).await?;
        return Ok(tag(relay(res), &selection, None));
    }
    if chat.n > 1 {
        return Err(ProxyError::UnsupportedN(chat.n));
    }
    let target = Target {
        uri,
        headers: upstream_headers(state, &parts.headers, true),
    };
    if chat.stream {
        return streamed(state, inner, target, chat, plan, &selection, splices).await;
    }
    intercepted(state, inner, &target, chat, &plan, &selection, &splices).await
}

/// The checked streaming path: the first round's headers go out at once,
/// the body is judged event by event (see `crate::stream`).
async fn streamed(
    state: &Arc<State>,
    inner: Upstream,
    target: Target,
    chat: ChatRequest,
    plan: Arc<ToolPlan>,
    selection: &Selection,
    splices: TenantSplices,
) -> Result<Response<ProxyBody>, ProxyError> {
    let timeout = state.config.upstream_timeout;
    let res = send(inner.clone(), target.request(chat.to_bytes()), timeout).await?;
    if !res.status().is_success() {
        return Ok(tag(relay(res), selection, None));
    }
    check_event_stream(&res)?;
    let judge = StreamJudge::new(plan.clone(), state.config.max_repairs);
    let reasker = Reasker {
        state: state.clone(),
        plan,
        inner,
        target: Arc::new(target),
        chat: Arc::new(Mutex::new(chat)),
        timeout,
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

/// Repair rounds of a stream: the conversation grows by each round's turn and denials.
struct Reasker {
    state: Arc<State>,
    plan: Arc<ToolPlan>,
    inner: Upstream,
    target: Arc<Target>,
    chat: Arc<Mutex<ChatRequest>>,
    timeout: std::time::Duration,
    tenant: Tenant,
}

impl Reasker {
    /// The request for the conversation grown by `messages`.
    fn grown(chat: &Mutex<ChatRequest>, target: &Target, messages: &[Value]) -> Request<ProxyBody> {
        let mut chat = chat.lock().unwrap_or_else(|p| p.into_inner());
        for m in messages {
            chat.push_message(m);
        }
        target.request(chat.to_bytes())
    }
}

impl RepairTarget for Reasker {
    fn reask(&mut self, messages: Vec<Value>) -> RepairFuture {
        let req = Reasker::grown(&self.chat, &self.target, &messages);
        Box::pin(next_round(
            self.inner.clone(),
            req,
            self.timeout,
            self.state.config.max_upstream_body_bytes,
        ))
    }

    fn run_program(&mut self, program: HeldProgram) -> RepairFuture {
        let state = self.state.clone();
        let plan = self.plan.clone();
        let inner = self.inner.clone();
        let target = self.target.clone();
        let chat = self.chat.clone();
        let timeout = self.timeout;
        let tenant = self.tenant;
        Box::pin(async move {
            let call = embedded::ProgramCall {
                id: program.id,
                arguments: program.arguments,
                content: program.content,
                turn: program.turn,
                response_id: None,
            };
            let base = json!({});
            let ran = embedded::start(
                &state,
                &tenant,
                &plan,
                call,
                program.denied_calls,
                program.denials,
                &base,
                None,
            )
            .await?;
            match ran {
                Ran::Waiting(turn) => Ok(Next::HandOff(turn)),
                Ran::Ended(messages) => {
                    let req = Reasker::grown(&chat, &target, &messages);
                    let max_body = state.config.max_upstream_body_bytes;
                    next_round(inner, req, timeout, max_body).await
                }
            }
        })
    }
}

/// The checked path: every round's calls are judged, and the turn decided
/// by [`turn::decide`], as the stream judge does.
async fn intercepted(
    state: &State,
    inner: Upstream,
    target: &Target,
    mut chat: ChatRequest,
    plan: &ToolPlan,
    selection: &Selection,
    splices: &TenantSplices,
) -> Result<Response<ProxyBody>, ProxyError> {
    let timeout = state.config.upstream_timeout;
    let mut usage: Option<Value> = None;
    let mut repairs = 0u32;
    let mut programs = 0u32;
    // What the model wrote beside programs that ended in this request: the
    // client gets it before the final answer, as a stream shows it.
    let mut opening = String::new();
    loop {
        let res = send(inner.clone(), target.request(chat.to_bytes()), timeout).await?;
        let (mut parts, body) = res.into_parts();
        let round = crate::telemetry::Round::of_response(&mut parts.extensions);
        let body = read_upstream_body(body, timeout, state.config.max_upstream_body_bytes).await?;
        if !parts.status.is_success() {
            // Upstream errors reach the client unchanged, whatever the round.
            return Ok(tag(respond_with(parts, body), selection, Some(repairs)));
        }
        check_identity(&parts.headers)?;
        let mut completion: Value = serde_json::from_slice(&body)
            .map_err(|e| ProxyError::UpstreamInvalid(format!("the completion is not JSON: {e}")))?;
        add_usage(&mut usage, completion.get("usage"));
        round.usage(completion.get("usage"));
        // Denials are events of the round that made them; the round ends here.
        let (judged, summary) = round.in_scope(|| {
            let judged = judge_completion(&mut completion, plan);
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
                if let Some((keys, splice)) = turn::splice(&judged.calls) {
                    splices.put(&keys, Arc::new(splice));
                    splices.settle().await?;
                }
            }
            Decision::Repair => {
                repairs += 1;
                tracing::info!(target: "codemode::repair", round = repairs, scope = %selection.scope, "re-asking the model after denials");
                for m in &turn::repair_messages(judged.assistant, &judged.calls) {
                    chat.push_message(m);
                }
                continue;
            }
            Decision::Program => {
                // `decide` chose this for a turn with exactly one program.
                let program = judged.calls.iter().find(|c| c.fate == Fate::Program);
                let Some(program) = program else {
                    return Err(ProxyError::UpstreamInvalid("no program to run".into()));
                };
                let (denied_calls, denials) = turn::program_denials(&judged.calls);
                let call = embedded::ProgramCall {
                    id: program.id.clone(),
                    arguments: program.arguments.clone(),
                    content: judged.content(),
                    turn: Some(judged.assistant.clone()),
                    response_id: None,
                };
                let content = judged.content();
                let ran = embedded::start(
                    state,
                    splices.tenant(),
                    plan,
                    call,
                    denied_calls,
                    denials,
                    &completion,
                    usage.clone(),
                )
                .await?;
                match ran {
                    Ran::Waiting(mut client_turn) => {
                        embedded::open_with(&mut client_turn, &opening);
                        let res = Render::Json.respond(response_parts(parts), &client_turn);
                        return Ok(tag(res, selection, Some(repairs)));
                    }
                    Ran::Ended(messages) => {
                        programs += 1;
                        if let Some(text) = content {
                            if !opening.is_empty() {
                                opening.push_str("\n\n");
                            }
                            opening.push_str(&text);
                        }
                        for m in &messages {
                            chat.push_message(m);
                        }
                        continue;
                    }
                }
            }
            Decision::GiveUp => give_up(&mut completion, &turn::give_up_note(&judged.calls)),
        }
        if repairs > 0 || programs > 0 {
            if let Some(total) = usage {
                completion["usage"] = total;
            }
        }
        embedded::open_with(&mut completion, &opening);
        let res = Render::Json.respond(response_parts(parts), &completion);
        return Ok(tag(res, selection, Some(repairs)));
    }
}
