//! The events of a content block or a whole message the proxy writes
//! itself (the give-up note, a program's calls, a minted message), in the
//! order Anthropic streams them: `content_block_start` with the block
//! empty, one `content_block_delta` with its text or input, and
//! `content_block_stop`.

use bytes::Bytes;
use serde_json::{json, Value};

use crate::sse::named_event;

/// The events that stream `block` at content index `index`.
pub fn block_events(index: u64, block: &Value) -> Vec<Value> {
    let mut start = block.clone();
    let delta = match block.get("type").and_then(Value::as_str) {
        Some("tool_use") => {
            let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
            start["input"] = json!({});
            json!({"type": "input_json_delta", "partial_json": input.to_string()})
        }
        Some("text") => {
            start["text"] = json!("");
            json!({"type": "text_delta", "text": block.get("text").cloned().unwrap_or(json!(""))})
        }
        _ => Value::Null,
    };
    let mut events =
        vec![json!({"type": "content_block_start", "index": index, "content_block": start})];
    if !delta.is_null() {
        events.push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
    }
    events.push(json!({"type": "content_block_stop", "index": index}));
    events
}

/// A whole message as the event stream a streaming client expects.
pub fn message_as_sse(message: &Value) -> Bytes {
    let mut out = Vec::new();
    let mut push = |data: Value| {
        let kind = data["type"].as_str().unwrap_or("message").to_owned();
        out.extend_from_slice(&named_event(&kind, &data));
    };
    let mut head = message.clone();
    head["content"] = json!([]);
    head["stop_reason"] = Value::Null;
    push(json!({"type": "message_start", "message": head}));
    let blocks = message["content"].as_array().into_iter().flatten();
    for (i, block) in blocks.enumerate() {
        for event in block_events(i as u64, block) {
            push(event);
        }
    }
    push(json!({"type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
                "usage": {"output_tokens": message["usage"]["output_tokens"]}}));
    push(json!({"type": "message_stop"}));
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_block_opens_empty_then_streams_its_text() {
        let events = block_events(2, &json!({"type": "text", "text": "note"}));
        assert_eq!(events.len(), 3);
        assert_eq!(events[0]["content_block"]["text"], "");
        assert_eq!(
            events[1]["delta"],
            json!({"type": "text_delta", "text": "note"})
        );
        assert_eq!(events[2], json!({"type": "content_block_stop", "index": 2}));
    }

    #[test]
    fn a_tool_use_block_streams_its_input_as_json_text() {
        let block = json!({"type": "tool_use", "id": "t", "name": "read", "input": {"a": 1}});
        let events = block_events(0, &block);
        assert_eq!(events[0]["content_block"]["input"], json!({}));
        assert_eq!(events[1]["delta"]["partial_json"], "{\"a\":1}");
    }
}
