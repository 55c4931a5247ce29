//! The embedded runtime on the Messages API: a program's calls reach the
//! client as `tool_use` blocks of an assistant message the proxy mints;
//! its `tool_result` blocks resume the program.

use serde_json::{json, Value};

use crate::runtime::{call_id_as, Execution};

/// The message that hands a program's waiting calls to the client. With
/// `model_blocks`, the first batch carries the model's own blocks other
/// than calls (its thinking and text; a stream has sent them already); a
/// batch no model answered reports zero tokens.
pub fn client_message(
    exec: &Execution,
    range: std::ops::Range<usize>,
    model: &Value,
    usage: Option<Value>,
    model_blocks: bool,
) -> Value {
    let mut content = Vec::new();
    if range.start == 0 && model_blocks {
        if let Some(turn) = exec.kept_turn() {
            content.extend(
                turn["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|b| !super::items::is_call_block(b))
                    .cloned(),
            );
        }
    }
    let start = range.start;
    content.extend(range.map(|n| {
        let call = &exec.calls[n];
        let input: Value = serde_json::from_str(&call.args).unwrap_or_else(|_| json!({}));
        json!({"type": "tool_use", "id": exec.call_id(n), "name": call.name, "input": input})
    }));
    json!({
        "id": call_id_as("msg_", &exec.id, start),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use",
        "stop_sequence": null,
        "usage": usage.unwrap_or_else(|| json!({"input_tokens": 0, "output_tokens": 0})),
    })
}

/// The model's view of one execution: its turn, then a user message with
/// the program's output and the answers of calls denied beside it, then
/// `carried` (blocks the client sent beside the nested results).
pub fn pair(e: &Execution, carried: &[Value]) -> Vec<Value> {
    let turn = e.kept_turn().unwrap_or_else(|| {
        let mut content = vec![json!({"type": "tool_use", "id": e.run_call_id,
                "name": crate::mode::RUN_CODE, "input": {"code": e.code}})];
        content.extend(e.denied_calls.iter().cloned());
        json!({"role": "assistant", "content": content})
    });
    let mut v = vec![turn];
    if let Some(outcome) = &e.outcome {
        let error = outcome.starts_with("Error:");
        let mut blocks = vec![json!({"type": "tool_result", "tool_use_id": e.run_call_id,
                                     "is_error": error,
                                     "content": [{"type": "text", "text": outcome}]})];
        blocks.extend(e.denials.iter().cloned());
        blocks.extend(carried.iter().cloned());
        v.push(json!({"role": "user", "content": blocks}));
    }
    v
}
