//! The embedded runtime in the chat flow: running the model's `run_code`,
//! sending the program's tool calls to the client as an ordinary assistant
//! turn, and resuming the program when their results come back.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::Response;
use serde_json::{json, Value};

use super::State;
use crate::body::{full, ProxyBody};
use crate::error::ProxyError;
use crate::plan::ToolPlan;
use crate::rewrite::ChatRequest;
use crate::runtime::{self, history, minted_for, Execution, Step};
use crate::stream::judge::sse_data;
use crate::tenant::Tenant;

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
    // The model's own words go out with the first batch only.
    let content = if exec.calls.len() == calls.len() {
        exec.assistant_content.clone()
    } else {
        None
    };
    json!({
        "id": base.get("id").cloned().unwrap_or_else(|| json!(format!("chatcmpl-{}", exec.id))),
        "object": "chat.completion",
        "created": base.get("created").cloned().unwrap_or_else(|| json!(exec.created_ms / 1000)),
        "model": base.get("model").cloned().unwrap_or(Value::Null),
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": content, "tool_calls": calls}}],
        "usage": usage.unwrap_or(Value::Null),
    })
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
    tenant: &Tenant,
    chat: &ChatRequest,
    render: Render,
) -> Result<Option<Response<ProxyBody>>, ProxyError> {
    let Some((exec_id, results)) = history::trailing_results(&chat.messages) else {
        return Ok(None);
    };
    let limits = &state.config.limits;
    let Some(held) = state.executions.get(tenant, &exec_id) else {
        if minted_for(&exec_id, tenant).is_some() {
            return Ok(None);
        }
        return Err(ProxyError::InvalidRequest(format!(
            "tool results name program execution `{exec_id}`, which this proxy does not hold; \
             send results only for calls the proxy handed out, in the conversation they came in"
        )));
    };
    if held.outcome.is_some() {
        // A resend of a finished conversation: what it says must be what was recorded.
        for (n, content) in &results {
            match held.calls.get(*n).map(|c| &c.result) {
                None => return Err(never_made(&held, *n)),
                Some(Some(previous)) if previous != content => return Err(differs(&held, *n)),
                Some(_) => {}
            }
        }
        return Ok(None);
    }
    let mut exec = Arc::unwrap_or_clone(held);
    if exec.is_expired(limits.lifetime) {
        exec.outcome = Some(format!(
            "Error: TimeoutError: the program outlived its {} s lifetime (CODEMODE_RUN_LIFETIME_SECS) \
             while waiting for tool results; run it again if it is still needed",
            limits.lifetime.as_secs()
        ));
        state.executions.put(Arc::new(exec));
        return Ok(None);
    }
    let mut fresh = false;
    for (n, content) in results {
        let Some(call) = exec.calls.get_mut(n) else {
            return Err(never_made(&exec, n));
        };
        match &call.result {
            None => {
                call.result = Some(content);
                fresh = true;
            }
            // A retried request resends answers the proxy already has.
            Some(previous) if *previous == content => {}
            Some(_) => return Err(differs(&exec, n)),
        }
    }
    let waiting: Vec<usize> = (0..exec.calls.len())
        .filter(|&n| exec.calls[n].result.is_none())
        .collect();
    if !fresh && !waiting.is_empty() {
        // A retry: hand out the same waiting calls again.
        let range = waiting[0]..exec.calls.len();
        let turn = client_turn(&exec, range, &json!({"model": model_of(chat)}), None);
        return Ok(Some(render.respond(ok_parts(), &turn)));
    }
    if !waiting.is_empty() {
        let missing: Vec<String> = waiting.iter().map(|&n| exec.call_id(n)).collect();
        return Err(ProxyError::InvalidRequest(format!(
            "results are missing for calls {}; send one tool message for each call of the turn",
            missing.join(", ")
        )));
    }
    // Busy: the results are not recorded, so the client's retry resumes.
    let (exec, step) = runtime::step(exec, limits.clone(), &state.runs)
        .await
        .map_err(|(_, busy)| ProxyError::RuntimeBusy(busy.to_string()))?;
    let exec = Arc::new(exec);
    state.executions.put(exec.clone());
    match step {
        Step::Waiting(range) => {
            let turn = client_turn(&exec, range, &json!({"model": model_of(chat)}), None);
            Ok(Some(render.respond(ok_parts(), &turn)))
        }
        Step::Ended => Ok(None),
    }
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
) -> Ran {
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
    exec.denied_calls = denied_calls;
    exec.denials = denials;
    let (exec, step) = match code {
        Some(_) => match runtime::step(exec, state.config.limits.clone(), &state.runs).await {
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
    let exec = Arc::new(exec);
    state.executions.put(exec.clone());
    match step {
        Step::Ended => Ran::Ended(history::pair(&exec)),
        Step::Waiting(range) => Ran::Waiting(client_turn(&exec, range, completion, usage)),
    }
}
