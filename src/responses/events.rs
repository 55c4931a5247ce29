//! The events of an output item the proxy writes itself (the give-up note,
//! a program's calls, a minted response), in the order providers stream
//! one: the item opened empty, its text or arguments as a delta and a
//! done, the item completed. A client that renders deltas shows them like
//! the model's own.

use serde_json::{json, Map, Value};

/// The events that stream `item` at the client's `output_index`, without
/// `sequence_number`s (the writer numbers them).
pub fn item_events(output_index: usize, item: &Value) -> Vec<Map<String, Value>> {
    let mut events = Vec::new();
    let id = item.get("id").cloned().unwrap_or(Value::Null);
    let at = |kind: &str, fields: Value| -> Map<String, Value> {
        let mut event = Map::new();
        event.insert("type".into(), json!(kind));
        event.insert("sequence_number".into(), Value::Null);
        event.insert("output_index".into(), json!(output_index));
        if let Value::Object(fields) = fields {
            event.extend(fields);
        }
        event
    };
    let mut opened = item.clone();
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "message" => {
            opened["status"] = json!("in_progress");
            opened["content"] = json!([]);
        }
        "function_call" => {
            opened["status"] = json!("in_progress");
            opened["arguments"] = json!("");
        }
        "custom_tool_call" => opened["input"] = json!(""),
        _ => {}
    }
    events.push(at("response.output_item.added", json!({ "item": opened })));
    match kind {
        "message" => {
            let parts = item.get("content").and_then(Value::as_array);
            for (n, part) in parts.into_iter().flatten().enumerate() {
                let text = part.get("text").cloned().unwrap_or(json!(""));
                let mut empty = part.clone();
                empty["text"] = json!("");
                let head = json!({"item_id": id, "content_index": n});
                let with = |extra: Value| {
                    let mut v = head.clone();
                    if let (Some(v), Value::Object(extra)) = (v.as_object_mut(), extra) {
                        v.extend(extra);
                    }
                    v
                };
                events.push(at(
                    "response.content_part.added",
                    with(json!({"part": empty})),
                ));
                if part.get("type").and_then(Value::as_str) == Some("output_text") {
                    events.push(at(
                        "response.output_text.delta",
                        with(json!({"delta": text})),
                    ));
                    events.push(at("response.output_text.done", with(json!({"text": text}))));
                }
                events.push(at(
                    "response.content_part.done",
                    with(json!({"part": part})),
                ));
            }
        }
        "function_call" => {
            let args = item.get("arguments").cloned().unwrap_or(json!(""));
            events.push(at(
                "response.function_call_arguments.delta",
                json!({"item_id": id, "delta": args}),
            ));
            events.push(at(
                "response.function_call_arguments.done",
                json!({"item_id": id, "arguments": args}),
            ));
        }
        "custom_tool_call" => {
            let input = item.get("input").cloned().unwrap_or(json!(""));
            events.push(at(
                "response.custom_tool_call_input.delta",
                json!({"item_id": id, "delta": input}),
            ));
            events.push(at(
                "response.custom_tool_call_input.done",
                json!({"item_id": id, "input": input}),
            ));
        }
        _ => {}
    }
    events.push(at("response.output_item.done", json!({ "item": item })));
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(events: &[Map<String, Value>]) -> Vec<&str> {
        events.iter().map(|e| e["type"].as_str().unwrap()).collect()
    }

    #[test]
    fn a_message_streams_its_text_as_providers_do() {
        let item = json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": "hi", "annotations": []}]});
        let events = item_events(3, &item);
        assert_eq!(
            kinds(&events),
            [
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done"
            ]
        );
        assert_eq!(events[0]["item"]["content"], json!([]));
        assert_eq!(events[2]["delta"], "hi");
        assert_eq!(events[2]["item_id"], "msg_1");
        assert!(events.iter().all(|e| e["output_index"] == 3));
        assert_eq!(events[5]["item"], item);
    }

    #[test]
    fn a_function_call_streams_its_arguments() {
        let item = json!({"type": "function_call", "id": "fc_1", "call_id": "cm_1", "name": "read",
                          "arguments": "{\"path\":\"a\"}", "status": "completed"});
        let events = item_events(0, &item);
        assert_eq!(
            kinds(&events),
            [
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done"
            ]
        );
        assert_eq!(events[0]["item"]["arguments"], "");
        assert_eq!(events[1]["delta"], "{\"path\":\"a\"}");
    }
}
