//! What the proxy writes in chat's shapes: calls as `tool_calls` entries,
//! the assistant turn of a stream's model turn, the turn that hands a
//! program's calls to the client, and whole completions as a stream.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::runtime::Execution;
use crate::sse::data_event;
use crate::turn::{JudgedCall, Shape};

/// The call as a `tool_calls` entry (a legacy call becomes a function
/// call): as the model sent it, with the id it is answered under, so a
/// replayed turn keeps what providers require back on it.
pub fn tool_call(call: &JudgedCall) -> Value {
    if let (Some(raw), Shape::Function | Shape::Custom) = (&call.raw, call.shape) {
        let mut entry = raw.clone();
        entry.insert("id".into(), json!(call.id));
        return Value::Object(entry);
    }
    match call.shape {
        Shape::Custom => json!({"id": call.id, "type": "custom",
                                "custom": {"name": call.name, "input": call.arguments}}),
        Shape::Function | Shape::Legacy => json!({"id": call.id, "type": "function",
                                "function": {"name": call.name, "arguments": call.arguments}}),
    }
}

/// The model's turn as the proxy writes it into a history when it has no
/// original message (a stream): the message's own fields as they came
/// (text, reasoning and whatever else the provider wants back), and every
/// call, in its shape.
pub fn assistant_turn(fields: &Map<String, Value>, calls: &[JudgedCall]) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    m.insert("content".into(), Value::Null);
    for (k, v) in fields {
        m.insert(k.clone(), v.clone());
    }
    let tool_calls: Vec<Value> = calls
        .iter()
        .filter(|c| c.shape != Shape::Legacy)
        .map(tool_call)
        .collect();
    if !tool_calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    if let Some(c) = calls.iter().find(|c| c.shape == Shape::Legacy) {
        let call = json!({"name": c.name, "arguments": c.arguments});
        m.insert("function_call".into(), call);
    }
    Value::Object(m)
}

/// The assistant turn that hands a program's waiting calls to the client.
///
/// The first batch carries the model's own words and the other fields of
/// its turn (reasoning, for a client that shows it). A turn no model
/// answered (a later batch) reports zero tokens, so clients that add up
/// usage find it on every turn.
pub fn client_turn(
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
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert("content".into(), Value::Null);
    if first {
        message.insert("content".into(), json!(exec.assistant_content));
        if let Some(Value::Object(fields)) = exec.kept_turn() {
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

/// Puts what the model wrote beside programs that ended earlier in the
/// request (`earlier`, their assistant turns) before the text of the
/// completion's message, a blank line between each.
pub fn open_with(completion: &mut Map<String, Value>, earlier: &[Value]) {
    let mut parts: Vec<&str> = earlier
        .iter()
        .filter_map(|t| t.get("content").and_then(Value::as_str))
        .filter(|t| !t.is_empty())
        .collect();
    if parts.is_empty() {
        return;
    }
    let message = completion
        .get_mut("choices")
        .and_then(|c| c.get_mut(0))
        .and_then(|c| c.get_mut("message"))
        .and_then(Value::as_object_mut);
    let Some(message) = message else {
        return;
    };
    if let Some(content) = message.get("content").and_then(Value::as_str) {
        if !content.is_empty() {
            parts.push(content);
        }
    }
    let text = parts.join("\n\n");
    message.insert("content".into(), Value::String(text));
}

/// The usage of a turn no model answered.
pub fn zero_usage() -> Value {
    json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
}

/// The deltas that stream `calls` as OpenAI streams them, one call at a
/// time: its index, id, type and name with empty arguments, then its
/// arguments (fixtures/streams/openai_parallel_calls_usage_chunk.sse).
/// Clients that read one call per chunk (llama-index) miss the rest of a
/// chunk holding several.
pub fn call_deltas(calls: &[Value]) -> Vec<Value> {
    let mut out = Vec::with_capacity(calls.len() * 2);
    for (i, call) in calls.iter().enumerate() {
        let function = call.get("function");
        let name = function.and_then(|f| f.get("name")).cloned();
        let arguments = function
            .and_then(|f| f.get("arguments"))
            .cloned()
            .unwrap_or_else(|| json!(""));
        let mut head = Map::new();
        head.insert("index".into(), json!(i));
        if let Some(id) = call.get("id") {
            head.insert("id".into(), id.clone());
        }
        head.insert(
            "type".into(),
            call.get("type")
                .cloned()
                .unwrap_or_else(|| json!("function")),
        );
        head.insert(
            "function".into(),
            json!({"name": name.unwrap_or(Value::Null), "arguments": ""}),
        );
        out.push(json!({"tool_calls": [head]}));
        if arguments.as_str() != Some("") {
            out.push(json!({"tool_calls": [{"index": i, "function": {"arguments": arguments}}]}));
        }
    }
    out
}

/// A whole completion as the SSE stream a streaming client expects.
pub fn completion_as_sse(completion: &Value, include_usage: bool) -> Bytes {
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
    out.extend_from_slice(&data_event(&head(
        json!([{"index": 0, "delta": first, "finish_reason": null}]),
    )));
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for delta in call_deltas(calls) {
            out.extend_from_slice(&data_event(&head(
                json!([{"index": 0, "delta": delta, "finish_reason": null}]),
            )));
        }
    }
    let finish = completion["choices"][0]["finish_reason"].clone();
    out.extend_from_slice(&data_event(&head(
        json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
    )));
    if include_usage {
        if let Some(u) = completion.get("usage").filter(|u| u.is_object()) {
            let mut c = head(json!([]));
            c["usage"] = u.clone();
            out.extend_from_slice(&data_event(&c));
        }
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_turn_streams_one_call_per_chunk_as_openai_does() {
        let completion = json!({"id": "c", "created": 1, "model": "m", "choices": [{
            "index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
            "content": null, "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}},
                {"id": "call_b", "type": "function", "function": {"name": "bash", "arguments": ""}}]}}]});
        let bytes = completion_as_sse(&completion, false);
        let text = std::str::from_utf8(&bytes).unwrap();
        let deltas: Vec<Value> = text
            .split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter_map(|c| c.pointer("/choices/0/delta/tool_calls").cloned())
            .collect();
        assert_eq!(
            deltas,
            [
                json!([{"index": 0, "id": "call_a", "type": "function",
                        "function": {"name": "read", "arguments": ""}}]),
                json!([{"index": 0, "function": {"arguments": "{\"path\":\"a\"}"}}]),
                // Empty arguments are not sent twice.
                json!([{"index": 1, "id": "call_b", "type": "function",
                        "function": {"name": "bash", "arguments": ""}}]),
            ]
        );
    }
}
