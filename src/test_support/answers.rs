//! Whole answers of every dialect for the property tests: generated ones
//! (calls of every name, shape and id-lessness, lists that are not lists,
//! extra choices and candidates, item and block types no one knows) and
//! the objects of every recorded stream read as whole answers; and every
//! mode a plan is built for.

use proptest::prelude::*;
use serde_json::{json, Value};

use crate::mode::{Mode, Runtime};
use crate::sse::SseParser;

/// Every mode and runtime a plan is built for.
pub fn modes() -> Vec<(Mode, Runtime)> {
    let mut out = Vec::new();
    for mode in [Mode::Code, Mode::Both, Mode::Native] {
        for runtime in [Runtime::Client, Runtime::Embedded] {
            out.push((mode, runtime));
        }
    }
    out
}

// ---- answers read off the recorded streams ----

/// Every event's data in a recorded stream.
fn events(bytes: &[u8]) -> Vec<Value> {
    let mut parser = SseParser::new(1 << 24);
    let mut all = Vec::new();
    parser
        .push(bytes, &mut all)
        .expect("a recorded stream parses");
    parser.finish(&mut all);
    all.iter()
        .filter_map(|ev| serde_json::from_str::<Value>(ev.data.as_deref()?).ok())
        .collect()
}

/// Whole answers made of a recorded stream's objects: Chat's deltas as
/// messages; Responses' response objects and items; Messages' blocks;
/// Gemini's chunks (each is a whole answer).
pub fn recorded(api: &str, bytes: &[u8]) -> Vec<Value> {
    let events = events(bytes);
    match api {
        "chat" => events
            .iter()
            .filter_map(|e| e["choices"].as_array())
            .flatten()
            .map(|c| json!({"choices": [{"index": 0, "message": c["delta"]}]}))
            .collect(),
        "responses" => {
            let mut out: Vec<Value> = events
                .iter()
                .filter_map(|e| e.get("response").filter(|r| r.is_object()).cloned())
                .collect();
            let items: Vec<Value> = events
                .iter()
                .filter_map(|e| e.get("item").cloned())
                .collect();
            out.push(json!({"output": items}));
            out
        }
        "messages" => {
            let blocks: Vec<Value> = events
                .iter()
                .filter_map(|e| e.get("content_block").cloned())
                .collect();
            vec![json!({"role": "assistant", "content": blocks})]
        }
        _ => events,
    }
}
// ---- generated answers ----

fn name() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("run_code"),
        Just("read"),
        Just("Read"),
        Just("read_file"),
        Just("exec_command"),
        Just("bash"),
        Just("nope"),
        Just(""),
        Just("github.x"),
    ]
}

fn arguments() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just(r#"{"code":"return 1"}"#),
        Just("{}"),
        Just("not json"),
        Just(r#"{"path":"a"}"#),
    ]
}

/// An id, an empty one, or none.
fn id() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        Just(Some("call_a")),
        Just(Some("call_b")),
        Just(Some("")),
        Just(None)
    ]
}

fn with_id(mut v: Value, key: &str, id: Option<&str>) -> Value {
    if let Some(id) = id {
        v[key] = json!(id);
    }
    v
}

pub fn chat_answer() -> impl Strategy<Value = Value> {
    let call = (name(), arguments(), id(), 0u8..4, name()).prop_map(|(n, a, id, shape, other)| {
        let call = match shape {
            0 => json!({"type": "function", "function": {"name": n, "arguments": a}}),
            1 => json!({"type": "custom", "custom": {"name": n, "input": a}}),
            // Both readings: a client may take either name.
            2 => json!({"type": "function", "function": {"name": n, "arguments": a},
                        "custom": {"name": other, "input": a}}),
            _ => json!({"function": {"name": n, "arguments": a}}),
        };
        with_id(call, "id", id)
    });
    let calls = prop_oneof![
        4 => proptest::collection::vec(call, 0..4).prop_map(Value::Array),
        1 => Just(Value::Null),
        1 => Just(json!("not a list")),
    ];
    let message = (calls, proptest::option::of((name(), arguments())), any::<bool>()).prop_map(
        |(calls, legacy, text)| {
            let mut m = json!({"role": "assistant", "content": if text { json!("Sure.") } else { Value::Null }});
            if calls != Value::Null {
                m["tool_calls"] = calls;
            }
            if let Some((n, a)) = legacy {
                m["function_call"] = json!({"name": n, "arguments": a});
            }
            m
        },
    );
    (proptest::collection::vec((message, 0u8..3), 0..3), any::<bool>()).prop_map(|(choices, listed)| {
        let choices: Vec<Value> = choices
            .into_iter()
            .map(|(message, index)| json!({"index": index, "message": message, "finish_reason": "tool_calls"}))
            .collect();
        let choices = if listed { Value::Array(choices) } else { json!({"0": choices}) };
        json!({"id": "c", "object": "chat.completion", "choices": choices, "usage": {"prompt_tokens": 1}})
    })
}

pub fn responses_answer() -> impl Strategy<Value = Value> {
    let item = (name(), arguments(), id(), 0u8..8).prop_map(|(n, a, id, kind)| match kind {
        0 => json!({"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "Sure."}]}),
        1 => json!({"type": "reasoning", "summary": []}),
        2 => json!({"type": "web_search_call", "status": "completed"}),
        3 => with_id(
            json!({"type": "function_call", "name": n, "arguments": a}),
            "call_id",
            id,
        ),
        4 => with_id(
            json!({"type": "custom_tool_call", "name": n, "input": a}),
            "call_id",
            id,
        ),
        5 => with_id(
            json!({"type": "computer_call", "action": {"type": "click"}}),
            "call_id",
            id,
        ),
        6 => json!({"type": "brand_new_call", "name": n}),
        _ => json!({"type": 5}),
    });
    (proptest::collection::vec(item, 0..5), any::<bool>()).prop_map(|(items, listed)| {
        let output = if listed {
            Value::Array(items)
        } else {
            json!({"items": items})
        };
        json!({"id": "resp_1", "object": "response", "status": "completed", "output": output})
    })
}

pub fn messages_answer() -> impl Strategy<Value = Value> {
    let block = (name(), id(), 0u8..7).prop_map(|(n, id, kind)| match kind {
        0 => json!({"type": "text", "text": "Sure."}),
        1 => json!({"type": "thinking", "thinking": "Hm.", "signature": "s"}),
        2 => with_id(
            json!({"type": "tool_use", "name": n, "input": {"code": "return 1"}}),
            "id",
            id,
        ),
        3 => json!({"type": "server_tool_use", "id": "srv", "name": "web_search", "input": {}}),
        4 => json!({"type": "web_search_tool_result", "tool_use_id": "srv", "content": []}),
        5 => json!({"type": "brand_new_block", "name": n}),
        _ => json!({"type": "tool_use"}),
    });
    (proptest::collection::vec(block, 0..5), any::<bool>()).prop_map(|(blocks, listed)| {
        let content = if listed {
            Value::Array(blocks)
        } else {
            json!("text")
        };
        json!({"id": "msg_1", "type": "message", "role": "assistant", "content": content,
               "stop_reason": "tool_use"})
    })
}

pub fn gemini_answer() -> impl Strategy<Value = Value> {
    let part = (name(), id(), 0u8..7).prop_map(|(n, id, kind)| match kind {
        0 => json!({"text": "Sure."}),
        1 => json!({"text": "Hm.", "thought": true, "thoughtSignature": "s"}),
        2 => json!({"functionCall": with_id(json!({"name": n, "args": {"code": "return 1"}}), "id", id)}),
        3 => json!({"function_call": with_id(json!({"name": n, "args": {}}), "id", id)}),
        4 => json!({"executableCode": {"language": "PYTHON", "code": "print(1)"}}),
        5 => json!({"brandNewCall": {"name": n}}),
        _ => json!({"text": "x", "functionCall": {"name": n}}),
    });
    let candidate = proptest::collection::vec(part, 0..4).prop_map(|parts| {
        json!({"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0})
    });
    proptest::collection::vec(candidate, 0..3).prop_map(
        |candidates| json!({"candidates": candidates, "usageMetadata": {"promptTokenCount": 1}}),
    )
}

pub fn interactions_answer() -> impl Strategy<Value = Value> {
    let step = (name(), id(), 0u8..7).prop_map(|(n, id, kind)| match kind {
        0 => json!({"type": "model_output", "content": [{"type": "text", "text": "Sure."}]}),
        1 => json!({"type": "thought", "signature": "s"}),
        2 => with_id(
            json!({"type": "function_call", "name": n, "arguments": {"code": "return 1"}}),
            "id",
            id,
        ),
        3 => with_id(
            json!({"type": "function_call", "name": n, "arguments": {}}),
            "id",
            id,
        ),
        4 => json!({"type": "google_search_call", "id": "g", "arguments": {"queries": ["x"]}}),
        5 => json!({"type": "brand_new_call", "name": n}),
        _ => json!({"name": n, "arguments": {}}),
    });
    proptest::collection::vec(step, 0..4).prop_map(|steps| {
        json!({"id": "v1_a", "object": "interaction", "status": "requires_action",
               "steps": steps, "usage": {"total_input_tokens": 1}})
    })
}
