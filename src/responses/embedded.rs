//! The embedded runtime on the Responses API: a program's calls reach the
//! client as call items in a response the proxy mints; their outputs
//! resume the program.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::plan::ToolPlan;
use crate::runtime::Execution;

/// The id of the response the proxy mints to hand out `exec`'s calls from
/// `start` on: `resp_` and 50 hex digits, as OpenAI's, that read back.
pub fn response_id(exec: &Execution, start: usize) -> String {
    crate::runtime::hex_answer_id("resp_", &exec.id, start)
}

/// The execution a response id minted by [`response_id`] names.
pub fn minted_response(id: &str) -> Option<String> {
    crate::runtime::parse_hex_answer_id("resp_", id).map(|(exec, _)| exec)
}

/// The item through which call `n` of `exec` reaches the client: the item
/// type of its tool (a function call, a freeform `custom_tool_call`, a
/// built-in's call), named as the client declared it.
pub fn nested_item(exec: &Execution, n: usize, plan: &ToolPlan) -> Value {
    let call = &exec.calls[n];
    let call_id = exec.call_id(n);
    let args: Value = serde_json::from_str(&call.args).unwrap_or(Value::Null);
    let kind = plan.call_items.get(&call.name).copied().unwrap_or(
        if plan.is_freeform(&call.name) || exec.freeform.contains(&call.name) {
            "custom_tool_call"
        } else {
            "function_call"
        },
    );
    // Each item type has its own id prefix (`ctc_` for a custom tool's call).
    let prefix = if kind == "custom_tool_call" {
        "ctc_"
    } else {
        "fc_"
    };
    let id = crate::runtime::hex_answer_id(prefix, &exec.id, n);
    let (namespace, name) = match call.name.split_once('.') {
        Some((ns, leaf)) => (Some(ns), leaf),
        None => (None, call.name.as_str()),
    };
    let mut item = match kind {
        "custom_tool_call" => json!({"type": kind, "id": id, "call_id": call_id, "name": name,
                                     "input": args.as_str().unwrap_or(&call.args)}),
        "local_shell_call" | "shell_call" => json!({"type": kind, "id": id, "call_id": call_id,
                                     "action": args, "status": "completed"}),
        "apply_patch_call" => json!({"type": kind, "id": id, "call_id": call_id,
                                     "operation": args, "status": "completed"}),
        "computer_call" => json!({"type": kind, "id": id, "call_id": call_id, "action": args,
                                  "pending_safety_checks": [], "status": "completed"}),
        "tool_search_call" => json!({"type": kind, "id": id, "call_id": call_id,
                                     "execution": "client", "arguments": args,
                                     "status": "completed"}),
        _ => json!({"type": "function_call", "id": id, "call_id": call_id, "name": name,
                    "arguments": call.args, "status": "completed"}),
    };
    if let (Some(ns), Some(obj)) = (namespace, item.as_object_mut()) {
        if matches!(kind, "function_call" | "custom_tool_call") {
            obj.insert("namespace".into(), json!(ns));
        }
    }
    item
}

/// The response that hands a program's waiting calls to the client. With
/// `model_items`, the first batch carries the model's own items other than
/// calls (its reasoning and text; a stream has sent them already); a later
/// batch, no model having been asked, reports zero tokens.
pub fn client_response(
    exec: &Execution,
    range: std::ops::Range<usize>,
    plan: &ToolPlan,
    model: &Value,
    usage: Option<Value>,
    model_items: bool,
) -> Value {
    let first = range.start == 0 && model_items;
    let mut output = Vec::new();
    if first {
        if let Some(Value::Array(items)) = exec.kept_turn() {
            output.extend(
                items
                    .into_iter()
                    .filter(|i| !super::items::is_judged_item(i)),
            );
        }
    }
    let start = range.start;
    output.extend(range.map(|n| nested_item(exec, n, plan)));
    json!({
        "id": response_id(exec, start),
        "object": "response",
        "created_at": crate::runtime::now_ms() / 1000,
        "status": "completed",
        "model": model,
        "output": output,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage.unwrap_or_else(zero_usage),
    })
}

/// The usage of a response no model answered.
pub fn zero_usage() -> Value {
    json!({"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0},
           "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0},
           "total_tokens": 0})
}

/// A whole response as the event stream a streaming client expects, each
/// item streamed as providers stream one.
pub fn response_as_sse(response: &Value) -> Bytes {
    let mut seq = 0u64;
    let mut out = Vec::new();
    let mut push = |mut data: Map<String, Value>| {
        data.insert("sequence_number".into(), json!(seq));
        seq += 1;
        let kind = data["type"].as_str().unwrap_or("message").to_owned();
        out.extend_from_slice(&crate::sse::named_event(&kind, &Value::Object(data)));
    };
    let mut head = response.clone();
    head["status"] = json!("in_progress");
    head["output"] = json!([]);
    let event = |kind: &str, response: &Value| {
        let mut e = Map::new();
        e.insert("type".into(), json!(kind));
        e.insert("response".into(), response.clone());
        e
    };
    push(event("response.created", &head));
    push(event("response.in_progress", &head));
    let items = response["output"].as_array().cloned().unwrap_or_default();
    for (i, item) in items.iter().enumerate() {
        for e in super::events::item_events(i, item) {
            push(e);
        }
    }
    push(event("response.completed", response));
    Bytes::from(out)
}
