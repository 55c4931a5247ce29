//! An interaction as the events a streaming client reads: what the proxy
//! writes itself (a program's hand-off, a give-up note, a whole answer for
//! a streaming client), streamed as Google streams one.
//!
//! Each event is `event: <type>` and a JSON object whose `event_type`
//! repeats it (the field the SDKs read): `interaction.created`,
//! `interaction.status_update`, `step.start` / `step.delta` / `step.stop`
//! per step, `interaction.completed` (the interaction without its steps),
//! then `data: [DONE]`.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::steps::{step_type, FUNCTION_CALL};

/// The stream's end marker.
pub const DONE: &[u8] = b"data: [DONE]\n\n";

/// One event, framed.
pub fn frame(event: &Value) -> Bytes {
    let kind = event
        .get("event_type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    crate::sse::named_event(kind, event)
}

/// An event of `kind` with `fields`.
pub fn event(kind: &str, fields: Value) -> Value {
    let mut e = match fields {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    e.insert("event_type".into(), json!(kind));
    Value::Object(e)
}

/// The events of one step at `index`: its start (a call with its id and
/// name, empty arguments), its content as deltas (text, a thought's
/// signature, a call's arguments as one JSON string), its stop.
pub fn step_events(index: usize, step: &Value) -> Vec<Value> {
    let kind = step_type(step);
    let mut deltas = Vec::new();
    let head = match kind {
        "model_output" => {
            for content in step["content"].as_array().into_iter().flatten() {
                deltas.push(content.clone());
            }
            json!({"type": kind})
        }
        "thought" => {
            if let Some(signature) = step.get("signature").filter(|s| s.is_string()) {
                deltas.push(json!({"type": "thought_signature", "signature": signature}));
            }
            for content in step["summary"].as_array().into_iter().flatten() {
                deltas.push(json!({"type": "thought_summary", "content": content}));
            }
            json!({"type": kind})
        }
        FUNCTION_CALL => {
            let arguments = match step.get("arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(v) if !v.is_null() => v.to_string(),
                _ => "{}".to_owned(),
            };
            deltas.push(json!({"type": "arguments_delta", "arguments": arguments}));
            let mut head = step.clone();
            head["arguments"] = json!({});
            head
        }
        _ => step.clone(),
    };
    let mut events = vec![event("step.start", json!({"index": index, "step": head}))];
    events.extend(
        deltas
            .into_iter()
            .map(|delta| event("step.delta", json!({"index": index, "delta": delta}))),
    );
    events.push(event("step.stop", json!({"index": index})));
    events
}

/// A whole interaction as the event stream a streaming client expects.
pub fn interaction_as_sse(interaction: &Value) -> Bytes {
    let mut out = Vec::new();
    let id = interaction.get("id").cloned().unwrap_or(Value::Null);
    let mut head = Map::new();
    for key in ["id", "object", "model", "created"] {
        if let Some(v) = interaction.get(key) {
            head.insert(key.into(), v.clone());
        }
    }
    head.insert("status".into(), json!("in_progress"));
    out.extend_from_slice(&frame(&event(
        "interaction.created",
        json!({"interaction": head}),
    )));
    out.extend_from_slice(&frame(&event(
        "interaction.status_update",
        json!({"interaction_id": id, "status": "in_progress"}),
    )));
    let steps = interaction["steps"].as_array().cloned().unwrap_or_default();
    for (i, step) in steps.iter().enumerate() {
        for e in step_events(i, step) {
            out.extend_from_slice(&frame(&e));
        }
    }
    out.extend_from_slice(&completed(interaction));
    Bytes::from(out)
}

/// The events that end a client stream on `interaction`: its final status,
/// the interaction without its steps, the end marker.
pub fn completed(interaction: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let status = interaction
        .get("status")
        .cloned()
        .unwrap_or(json!("completed"));
    let id = interaction.get("id").cloned().unwrap_or(Value::Null);
    out.extend_from_slice(&frame(&event(
        "interaction.status_update",
        json!({"interaction_id": id, "status": status}),
    )));
    let mut whole = interaction.clone();
    if let Some(o) = whole.as_object_mut() {
        o.remove("steps");
    }
    out.extend_from_slice(&frame(&event(
        "interaction.completed",
        json!({"interaction": whole}),
    )));
    out.extend_from_slice(DONE);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_streams_as_its_start_its_arguments_and_its_stop() {
        let step = json!({"type": "function_call", "id": "c1", "name": "read",
                          "arguments": {"path": "a"}});
        let events = step_events(2, &step);
        assert_eq!(events.len(), 3);
        assert_eq!(
            events[0]["step"],
            json!({"type": "function_call", "id": "c1", "name": "read", "arguments": {}})
        );
        assert_eq!(events[1]["delta"]["arguments"], r#"{"path":"a"}"#);
        assert_eq!(events[2], json!({"event_type": "step.stop", "index": 2}));
        let sse = interaction_as_sse(&json!({"id": "v1_x", "status": "requires_action",
                                             "steps": [step], "usage": {"total_tokens": 0}}));
        let text = String::from_utf8(sse.to_vec()).unwrap();
        assert!(text.starts_with("event: interaction.created\n"), "{text}");
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
        assert!(text.contains("\"status\":\"requires_action\""), "{text}");
    }
}
