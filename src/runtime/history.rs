//! The model's view of executions: the client's history holds the nested
//! traffic (calls with minted ids and their results); the model sees one
//! `run_code` call and its result instead, on every request.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::{minted_for, now_ms, parse_call_id, Execution, ExecutionStore, MINTED_PREFIX};
use crate::mode::RUN_CODE;
use crate::tenant::Tenant;
use crate::wire::to_raw;

#[derive(Deserialize)]
struct Msg<'a> {
    #[serde(borrow)]
    role: Option<std::borrow::Cow<'a, str>>,
    tool_call_id: Option<String>,
    content: Option<Value>,
    tool_calls: Option<Vec<CallId>>,
}

#[derive(Deserialize)]
struct CallId {
    id: Option<String>,
}

/// A message's relation to executions.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    /// An assistant turn carrying calls minted for this execution.
    Nested(String),
    /// A tool result for a minted call of this execution: `(execution, call number)`.
    Result(String, usize, String),
    Other,
}

fn kind(raw: &RawValue) -> Kind {
    let text = raw.get();
    if !text.contains(MINTED_PREFIX) {
        return Kind::Other;
    }
    let Ok(m) = serde_json::from_str::<Msg<'_>>(text) else {
        return Kind::Other;
    };
    match m.role.as_deref() {
        Some("assistant") => m
            .tool_calls
            .iter()
            .flatten()
            .filter_map(|c| c.id.as_deref().and_then(parse_call_id))
            .map(|(e, _)| Kind::Nested(e.to_owned()))
            .next()
            .unwrap_or(Kind::Other),
        Some("tool") => match m.tool_call_id.as_deref().and_then(parse_call_id) {
            Some((e, n)) => {
                let content = match m.content {
                    Some(Value::String(s)) => s,
                    Some(Value::Array(parts)) => parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join(""),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                Kind::Result(e.to_owned(), n, content)
            }
            None => Kind::Other,
        },
        _ => Kind::Other,
    }
}

/// The results the client returns now: the tool messages after the last
/// assistant turn, when that turn carries calls minted for an execution.
pub fn trailing_results(messages: &[Box<RawValue>]) -> Option<(String, Vec<(usize, String)>)> {
    let mut results = Vec::new();
    for raw in messages.iter().rev() {
        match kind(raw) {
            Kind::Result(e, n, content) => results.push((e, n, content)),
            Kind::Nested(exec) => {
                results.reverse();
                let mine = results
                    .into_iter()
                    .filter(|(e, _, _)| *e == exec)
                    .map(|(_, n, c)| (n, c))
                    .collect();
                return Some((exec, mine));
            }
            Kind::Other => return None,
        }
    }
    None
}

/// Replaces each execution's nested traffic by one `run_code` call and its
/// result. Executions `tenant` does not hold become a placeholder pair, so
/// the conversation stays well formed: another tenant's execution is never
/// looked at.
pub fn rewrite(
    messages: &mut Vec<Box<RawValue>>,
    store: &dyn ExecutionStore,
    tenant: &Tenant,
    lifetime: std::time::Duration,
) {
    if !messages.iter().any(|m| m.get().contains(MINTED_PREFIX)) {
        return;
    }
    let kinds: Vec<Kind> = messages.iter().map(|m| kind(m)).collect();
    let mut out = Vec::with_capacity(messages.len());
    let mut i = 0;
    while i < messages.len() {
        let Kind::Nested(exec_id) = &kinds[i] else {
            if !matches!(kinds[i], Kind::Result(..)) {
                out.push(messages[i].clone());
            }
            i += 1;
            continue;
        };
        // This execution's blocks: its nested turns and their results.
        let mut j = i + 1;
        while j < messages.len() {
            match &kinds[j] {
                Kind::Nested(e) | Kind::Result(e, _, _) if e == exec_id => j += 1,
                _ => break,
            }
        }
        let exec = store.get(tenant, exec_id);
        let pair = match exec.as_deref() {
            Some(e) => pair(e),
            None => missing_pair(exec_id, tenant, lifetime),
        };
        out.extend(pair.iter().map(to_raw));
        i = j;
    }
    *messages = out;
}

/// The model's view of one execution: its call, and its result once ended.
pub fn pair(e: &Execution) -> Vec<Value> {
    let mut v = vec![run_code_turn(e)];
    if let Some(outcome) = &e.outcome {
        v.push(json!({"role": "tool", "tool_call_id": e.run_call_id, "content": outcome}));
        v.extend(e.denials.iter().cloned());
    }
    v
}

/// What the model is told of a program whose record `tenant` does not
/// have: a `run_code` call and an error it can act on (run it again).
pub fn missing_pair(exec_id: &str, tenant: &Tenant, lifetime: std::time::Duration) -> Vec<Value> {
    let id = format!("{MINTED_PREFIX}{exec_id}");
    let content = match minted_for(exec_id, tenant) {
        Some(created) if now_ms().saturating_sub(created) <= lifetime.as_millis() as u64 => {
            "Error: the proxy lost the record of this program (it restarted, or ran short of \
             memory) before the program finished; its result is unknown. Run the program again \
             if its result is still needed."
        }
        Some(_) => {
            "Error: the record of this program has expired; its result is no longer available. \
             Run the program again if its result is still needed."
        }
        None => "Error: this program's record is not available; its result is unknown.",
    };
    vec![
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
               "function": {"name": RUN_CODE, "arguments": "{\"code\":\"/* no longer available */\"}"}}]}),
        json!({"role": "tool", "tool_call_id": id, "content": content}),
    ]
}

/// The assistant turn with the model's `run_code` call, as the model made it.
pub fn run_code_turn(e: &Execution) -> Value {
    let mut calls = vec![json!({"id": e.run_call_id, "type": "function",
                                "function": {"name": RUN_CODE, "arguments": json!({"code": e.code}).to_string()}})];
    calls.extend(e.denied_calls.iter().cloned());
    json!({"role": "assistant", "content": e.assistant_content, "tool_calls": calls})
}
