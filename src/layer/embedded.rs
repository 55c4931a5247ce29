//! The embedded runtime in the chat flow: running the model's `run_code`,
//! sending the program's tool calls to the client as an ordinary assistant
//! turn, and resuming the program when their results come back.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::Response;
use serde_json::{json, Value};

use super::stores::RequestStores;
use super::State;
use crate::body::{full, ProxyBody};
use crate::error::ProxyError;
use crate::plan::ToolPlan;
use crate::rewrite::ChatRequest;
use crate::runtime::{self, history, minted_for, Execution, Step};
use crate::stream::judge::sse_data;
use crate::telemetry;
use crate::tenant::Tenant;
use tracing::Instrument;

/// How the client wants its answer.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Render {
    Json,
    Sse { include_usage: bool },
}

impl Render {
    pub(crate) fn of(chat: &ChatRequest) -> Render {
        if chat.stream {
            let include_usage = chat
                .field("stream_options")
                .and_then(|o| serde_json::from_str::<Value>(o.get()).ok())
                .is_some_and(|o| o.get("include_usage") == Some(&Value::Bool(true)));
            Render::Sse { include_usage }
        } else {
            Render::Json
        }
    }

    /// The response carrying `completion` in this form.
    pub(crate) fn respond(
        self,
        mut parts: http::response::Parts,
        completion: &Value,
    ) -> Response<ProxyBody> {
        parts.headers.remove(http::header::CONTENT_LENGTH);
        parts.headers.remove(http::header::CONTENT_ENCODING);
        let (content_type, body) = match self {
            Render::Json => ("application/json", Bytes::from(completion.to_string())),
            Render::Sse { include_usage } => (
                "text/event-stream",
                completion_as_sse(completion, include_usage),
            ),
        };
        parts
            .headers
            .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        Response::from_parts(parts, full(body))
    }
}

/// A whole completion as the SSE stream a streaming client expects.
pub(crate) fn completion_as_sse(completion: &Value, include_usage: bool) -> Bytes {
    let head = |choices: Value| {
        json!({"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
               "model": completion["model"], "choices": choices})
    };
    let message = &completion["choices"][0]["message"];
    let mut out = Vec::new();
    let mut first = json!({"role": "assistant"});
    if let Some(text) = message.get("content").filter(|c| c.is_string()) {
        first["content"] = text.clone();
    }
    out.extend_from_slice(&sse_data(&head(
        json!([{"index": 0, "delta": first, "finish_reason": null}]),
    )));
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        let deltas: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut d = c.clone();
                d["index"] = json!(i);
                d
            })
            .collect();
        out.extend_from_slice(&sse_data(&head(
            json!([{"index": 0, "delta": {"tool_calls": deltas}, "finish_reason": null}]),
        )));
    }
    let finish = completion["choices"][0]["finish_reason"].clone();
    out.extend_from_slice(&sse_data(&head(
        json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
    )));
    if include_usage {
        if let Some(u) = completion.get("usage").filter(|u| u.is_object()) {
            let mut c = head(json!([]));
            c["usage"] = u.clone();
            out.extend_from_slice(&sse_data(&c));
        }
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    Bytes::from(out)
}

/// The assistant turn that hands a program's waiting calls to the client.
///
/// The first batch carries the model's own words and the other fields of
/// its turn (reasoning, for a client that shows it). A turn no model
/// answered (a later batch) reports zero tokens, so clients that add up
/// usage find it on every turn.
pub(crate) fn client_turn(
    exec: &Execution,
    range: std::ops::Range<usize>,
    base: &Value,
    usage: Option<Value>,
) -> Value {
    let calls: Vec<Value> = range
        .map(|n| {
            json!({"id": exec.call_id(n), "type": "function",
                   "function": {"name": exec.calls[n].name, "arguments": exec.calls[n].args}})
        })
        .collect();
    let first = exec.calls.len() == calls.len();
    let mut message = serde_json::Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert("content".into(), Value::Null);
    if first {
        message.insert("content".into(), json!(exec.assistant_content));
        let turn = exec
            .model_turn
            .as_deref()
            .map(serde_json::from_str::<Value>);
        if let Some(Ok(Value::Object(fields))) = turn {
            for (k, v) in fields {
                if !matches!(
                    k.as_str(),
                    "role" | "content" | "tool_calls" | "function_call"
                ) {
                    message.insert(k, v);
                }
            }
        }
    }
    message.insert("tool_calls".into(), Value::Array(calls));
    json!({
        "id": base.get("id").cloned().unwrap_or_else(|| json!(format!("chatcmpl-{}", exec.id))),
        "object": "chat.completion",
        "created": base.get("created").cloned().unwrap_or_else(|| json!(exec.created_ms / 1000)),
        "model": base.get("model").cloned().unwrap_or(Value::Null),
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
        "usage": usage.unwrap_or_else(zero_usage),
    })
}

/// Puts `opening` (what the model wrote beside programs that ended earlier
/// in the request) before the text of `completion`'s message, a blank line
/// between them.
pub(crate) fn open_with(completion: &mut Value, opening: &str) {
    if opening.is_empty() {
        return;
    }
    let Some(message) = completion
        .pointer_mut("/choices/0/message")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let text = match message.get("content").and_then(Value::as_str) {
        Some(content) if !content.is_empty() => format!("{opening}\n\n{content}"),
        _ => opening.to_owned(),
    };
    message.insert("content".into(), Value::String(text));
}

/// The usage of a turn no model answered.
pub(crate) fn zero_usage() -> Value {
    json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
}

/// Results the client returns for a program: resume it. `Some` is the next
/// turn for the client; `None` means the program ended (or its record did)
/// and the model is asked next, with the history rewritten.
///
/// Only `tenant`'s executions are found: results naming another tenant's
/// execution get the same 400 as an id the proxy never minted. An id minted
/// for this tenant whose record is gone (evicted, a restart) is not an
/// error: the rewritten history tells the model, which runs it again.
pub(crate) async fn resume(
    state: &State,
    stores: &RequestStores,
    chat: &ChatRequest,
    render: Render,
) -> Result<Option<Response<ProxyBody>>, ProxyError> {
    let reader = history::Reader::new(&stores.executions, &stores.tenant);
    let trailing = reader
        .trailing_results(&chat.messages)
        .map_err(|ids| not_handed_out(&ids))?;
    let Some(trailing) = trailing else {
        return Ok(None);
    };
    match resume_with(state, stores, trailing).await? {
        Resumed::Hand(exec, range) => {
            let turn = client_turn(&exec, range, &json!({"model": model_of(chat)}), None);
            Ok(Some(render.respond(ok_parts(), &turn)))
        }
        Resumed::AskModel => Ok(None),
    }
}

/// What results for a program came to.
pub(crate) enum Resumed {
    /// The program waits on these calls: the client's next turn.
    Hand(Arc<Execution>, std::ops::Range<usize>),
    /// It ended, or its record did: the model is asked next, with the
    /// history rewritten.
    AskModel,
}

/// Times a resume reads the record again after another request changed it
/// first, before the client is asked to retry.
const RESUME_ATTEMPTS: usize = 3;

/// Resumes the program the client's trailing results belong to, in any
/// dialect: checks them against the record, records them, and runs the
/// program until it ends or waits again.
///
/// The record is saved only over the revision this request read
/// ([`crate::runtime::ExecutionStore::replace`]): of two requests resuming
/// it at once (two replicas, a client's retry), one saves and the other
/// reads the record again, where it finds its results already recorded
/// (the same next step) or different ones (a 400).
pub(crate) async fn resume_with(
    state: &State,
    stores: &RequestStores,
    trailing: history::Trailing,
) -> Result<Resumed, ProxyError> {
    // The first attempt works from the record the request read ahead (a
    // shared store's round trip saved); a lost compare-and-set reads again.
    let mut held = stores.executions.fetched(&stores.tenant, &trailing.exec);
    for _ in 0..RESUME_ATTEMPTS {
        let record = match held.take() {
            Some(record) => record,
            None => state.executions.get(&stores.tenant, &trailing.exec).await?,
        };
        if let Some(resumed) = resume_once(state, stores, &trailing, record).await? {
            return Ok(resumed);
        }
    }
    Err(ProxyError::ResumeConflict)
}

/// Saves `exec` over the revision it was read at; whether it was saved.
async fn save_over(
    state: &State,
    stores: &RequestStores,
    mut exec: Execution,
) -> Result<Option<Arc<Execution>>, ProxyError> {
    let read_at = exec.revision;
    exec.revision += 1;
    let exec = Arc::new(exec);
    if !state.executions.replace(exec.clone(), read_at).await? {
        return Ok(None);
    }
    stores.saved(&exec);
    Ok(Some(exec))
}

/// One attempt of [`resume_with`] on the record as read (`held`); `None`
/// when another request saved the record first.
async fn resume_once(
    state: &State,
    stores: &RequestStores,
    trailing: &history::Trailing,
    held: Option<Arc<Execution>>,
) -> Result<Option<Resumed>, ProxyError> {
    let (tenant, exec_id) = (&stores.tenant, &trailing.exec);
    let limits = &state.config.limits;
    let Some(held) = held else {
        if minted_for(exec_id, tenant).is_some() {
            return Ok(Some(Resumed::AskModel));
        }
        let ids: Vec<String> = trailing
            .results
            .iter()
            .map(|(n, _)| runtime::call_id(exec_id, *n))
            .collect();
        return Err(not_handed_out(&ids));
    };
    stores.saved(&held);
    // The turn the client sends back must name each call as it was handed
    // out: an agent that rewrote an id onto another call is not guessed at.
    for (n, name) in &trailing.calls {
        match held.calls.get(*n) {
            Some(call) if call.name == *name || name.is_empty() => {}
            Some(call) => {
                return Err(ProxyError::InvalidRequest(format!(
                    "the assistant turn names call `{}` `{name}`, but the proxy handed that call \
                     out as `{}`; send the conversation's tool calls back as they came",
                    held.call_id(*n),
                    call.name
                )))
            }
            None => return Err(never_made(&held, *n)),
        }
    }
    if held.outcome.is_some() {
        // A resend of a finished conversation: what it says must be what was recorded.
        for (n, content) in &trailing.results {
            match held.calls.get(*n).map(|c| &c.result) {
                None => return Err(never_made(&held, *n)),
                Some(Some(previous)) if previous != content => return Err(differs(&held, *n)),
                Some(_) => {}
            }
        }
        return Ok(Some(Resumed::AskModel));
    }
    let mut exec = Arc::unwrap_or_clone(held);
    if exec.is_expired(limits.lifetime) {
        exec.outcome = Some(format!(
            "Error: TimeoutError: the program outlived its {} s lifetime (CODEMODE_RUN_LIFETIME_SECS) \
             while waiting for tool results; run it again if it is still needed",
            limits.lifetime.as_secs()
        ));
        return Ok(save_over(state, stores, exec).await?.map(|e| {
            crate::observe::ledger::program_ended(&e);
            Resumed::AskModel
        }));
    }
    let mut fresh = false;
    for (n, content) in &trailing.results {
        let Some(call) = exec.calls.get_mut(*n) else {
            return Err(never_made(&exec, *n));
        };
        match &call.result {
            None => {
                call.result = Some(content.clone());
                fresh = true;
            }
            // A retried request resends answers the proxy already has.
            Some(previous) if previous == content => {}
            Some(_) => return Err(differs(&exec, *n)),
        }
    }
    let waiting: Vec<usize> = (0..exec.calls.len())
        .filter(|&n| exec.calls[n].result.is_none())
        .collect();
    if !fresh && !waiting.is_empty() {
        // A retry: hand out the same waiting calls again.
        let range = waiting[0]..exec.calls.len();
        return Ok(Some(Resumed::Hand(Arc::new(exec), range)));
    }
    if !waiting.is_empty() {
        let missing: Vec<String> = waiting.iter().map(|&n| exec.call_id(n)).collect();
        return Err(ProxyError::InvalidRequest(format!(
            "results are missing for calls {}; send one result for each call of the turn",
            missing.join(", ")
        )));
    }
    // Busy: the results are not recorded, so the client's retry resumes.
    let span = telemetry::program_span(&exec.run_call_id);
    let (exec, step) = runtime::step(exec, limits.clone(), &state.runs)
        .instrument(span.clone())
        .await
        .map_err(|(_, busy)| ProxyError::RuntimeBusy(busy.to_string()))?;
    trace_step(&span, &exec, &step);
    let Some(exec) = save_over(state, stores, exec).await? else {
        return Ok(None);
    };
    if fresh {
        // The client answered a batch and the program ran on: no model round trip.
        crate::observe::ledger::round_trip_saved();
    }
    log_step(&exec, &step);
    Ok(Some(match step {
        Step::Waiting(range) => Resumed::Hand(exec, range),
        Step::Ended => Resumed::AskModel,
    }))
}

/// What a run of a program came to, at `info`: counts only, never the
/// code, arguments or results (they may hold secrets).
pub(crate) fn log_step(exec: &Execution, step: &Step) {
    let run_call = exec.run_call_id.as_str();
    match step {
        Step::Waiting(range) => {
            tracing::info!(target: "codemode::program", run_call, waiting = range.len(), calls = exec.calls.len(), "program waits on tool calls the client runs");
        }
        Step::Ended => {
            let outcome = match exec.outcome.as_deref() {
                Some(o) if o.starts_with("Error:") => "failed",
                _ => "finished",
            };
            tracing::info!(target: "codemode::program", run_call, calls = exec.calls.len(), outcome, "program ended");
            crate::observe::ledger::program_ended(exec);
        }
    }
}

/// What a run came to, on its `execute_tool run_code` span: a child span
/// per call handed to the client (names and ids only), an error status
/// for a program that failed.
fn trace_step(span: &tracing::Span, exec: &Execution, step: &Step) {
    match step {
        Step::Waiting(range) => telemetry::handed_out(
            span,
            range
                .clone()
                .map(|n| (exec.calls[n].name.as_str(), exec.call_id(n))),
        ),
        Step::Ended => {
            let failed = exec
                .outcome
                .as_deref()
                .is_some_and(|o| o.starts_with("Error:"));
            telemetry::program_ended(span, failed);
        }
    }
}

/// Results naming calls this tenant was never handed (another tenant's,
/// made up, or changed): all read alike, so nothing tells them apart.
pub(crate) fn not_handed_out(ids: &[String]) -> ProxyError {
    ProxyError::InvalidRequest(format!(
        "tool results name calls `{}` that this proxy did not hand out to this client: send \
         results only for the calls the proxy handed out, with their ids as they came, in the \
         conversation they came in",
        ids.join("`, `")
    ))
}

fn never_made(exec: &Execution, n: usize) -> ProxyError {
    ProxyError::InvalidRequest(format!(
        "tool result `{}` names a call the program never made",
        exec.call_id(n)
    ))
}

fn differs(exec: &Execution, n: usize) -> ProxyError {
    ProxyError::InvalidRequest(format!(
        "tool result `{}` differs from the one already given for that call; send the \
         conversation's tool results unchanged",
        exec.call_id(n)
    ))
}

fn model_of(chat: &ChatRequest) -> Value {
    chat.field("model")
        .and_then(|m| serde_json::from_str(m.get()).ok())
        .unwrap_or(Value::Null)
}

fn ok_parts() -> http::response::Parts {
    Response::new(()).into_parts().0
}

/// The model's `run_code` call in a judged completion.
pub(crate) struct ProgramCall {
    pub(crate) id: String,
    pub(crate) arguments: String,
    pub(crate) content: Option<String>,
    /// The model's whole turn, as it arrived.
    pub(crate) turn: Option<Value>,
    /// The provider's id of the response holding the call (Responses).
    pub(crate) response_id: Option<String>,
}

/// The model's turn as its history replays it, when it can be: it must hold
/// the program's call under `run_call_id`, and every other call of it must
/// be one the proxy answers (`answered`), as a replay puts one result after
/// it per call.
fn replayable(turn: Option<Value>, run_call_id: &str, answered: &[Value]) -> Option<String> {
    let turn = turn?;
    if turn.get("function_call").is_some_and(|f| !f.is_null()) {
        return None;
    }
    let ids: Vec<&str> = turn
        .get("tool_calls")?
        .as_array()?
        .iter()
        .map(|c| c.get("id").and_then(Value::as_str).unwrap_or(""))
        .collect();
    let answered: Vec<&str> = answered
        .iter()
        .filter_map(|c| c.get("id").and_then(Value::as_str))
        .collect();
    let complete = ids.contains(&run_call_id)
        && ids.len() == answered.len() + 1
        && ids
            .iter()
            .all(|id| *id == run_call_id || answered.contains(id));
    complete.then(|| turn.to_string())
}

/// What the model's program came to in this request.
pub(crate) enum Ran {
    /// It ended: these messages (the model's turn, its result) join the conversation.
    Ended(Vec<Value>),
    /// It waits on the client: this is the client's next turn.
    Waiting(Value),
}

/// Starts the model's program, owned by `tenant`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn start(
    state: &State,
    tenant: &Tenant,
    plan: &ToolPlan,
    program: ProgramCall,
    denied_calls: Vec<Value>,
    denials: Vec<Value>,
    completion: &Value,
    usage: Option<Value>,
) -> Result<Ran, ProxyError> {
    let turn = replayable(program.turn.clone(), &program.id, &denied_calls);
    let (exec, step) = run_new(state, tenant, plan, program, turn, denied_calls, denials).await?;
    Ok(match step {
        Step::Ended => Ran::Ended(history::pair(&exec)),
        Step::Waiting(range) => Ran::Waiting(client_turn(&exec, range, completion, usage)),
    })
}

/// Starts the model's program, owned by `tenant`, in any dialect: records
/// it (with the model's turn as its dialect replays it, `model_turn`) and
/// runs it until it ends or waits on calls.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_new(
    state: &State,
    tenant: &Tenant,
    plan: &ToolPlan,
    program: ProgramCall,
    model_turn: Option<String>,
    denied_calls: Vec<Value>,
    denials: Vec<Value>,
) -> Result<(Arc<Execution>, Step), ProxyError> {
    let code = serde_json::from_str::<Value>(&program.arguments)
        .ok()
        .and_then(|a| a.get("code").and_then(Value::as_str).map(str::to_owned));
    let mut exec = Execution::new(
        *tenant,
        program.id,
        code.clone().unwrap_or_default(),
        program.content,
        plan.visible_names.clone(),
    );
    exec.model_turn = model_turn;
    exec.upstream_response = program.response_id;
    exec.freeform = plan.freeform.iter().cloned().collect();
    exec.freeform.sort();
    exec.denied_calls = denied_calls;
    exec.denials = denials;
    let span = telemetry::program_span(&exec.run_call_id);
    let (exec, step) = match code {
        Some(_) => match runtime::step(exec, state.config.limits.clone(), &state.runs)
            .instrument(span.clone())
            .await
        {
            Ok(stepped) => stepped,
            // A program that never started: the model may run it again.
            Err((mut exec, busy)) => {
                exec.outcome = Some(format!("Error: {busy}"));
                (exec, Step::Ended)
            }
        },
        None => {
            exec.outcome = Some(
                "Error: INVALID_ARGS: run_code takes a JSON object {\"code\": \"...\"} whose code is \
                 the body of an async function"
                    .to_owned(),
            );
            (exec, Step::Ended)
        }
    };
    trace_step(&span, &exec, &step);
    drop(span);
    let exec = Arc::new(exec);
    state.executions.put(exec.clone()).await?;
    tracing::info!(target: "codemode::program", run_call = %exec.run_call_id, tools = exec.tools.len(), "program started");
    log_step(&exec, &step);
    Ok((exec, step))
}
