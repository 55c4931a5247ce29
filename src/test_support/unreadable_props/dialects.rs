//! What differs by dialect: where a call can stand, the agent's plan,
//! whether the whole-answer judge lets a call through, and an answer as
//! the events of its stream.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::super::answers::{
    chat_answer, gemini_answer, interactions_answer, messages_answer, responses_answer,
};
pub use crate::api::Api;
use crate::chat::Chat;
use crate::gemini::Gemini;
use crate::interactions::Interactions;
use crate::messages::Messages;
use crate::mode::{Mode, Runtime};
use crate::plan::ToolPlan;
use crate::responses::Responses;
use crate::test_support::{agent_plan, gemini_plan, messages_plan, responses_plan};
use crate::turn::Dialect;

/// The generated answers of `api`.
pub fn answers(api: Api) -> BoxedStrategy<Value> {
    match api {
        Api::Chat => chat_answer().boxed(),
        Api::Responses => responses_answer().boxed(),
        Api::Messages => messages_answer().boxed(),
        Api::Gemini => gemini_answer().boxed(),
        Api::Interactions => interactions_answer().boxed(),
    }
}

/// The keys on the path to a call in `api`'s answers, in a whole answer
/// or in an event.
pub fn keys(api: Api, stream: bool) -> &'static [&'static str] {
    match (api, stream) {
        (Api::Chat, false) => &[
            "choices",
            "message",
            "tool_calls",
            "function",
            "custom",
            "name",
            "function_call",
        ],
        (Api::Chat, true) => &[
            "choices",
            "delta",
            "message",
            "tool_calls",
            "function",
            "custom",
            "name",
            "function_call",
        ],
        (Api::Responses, false) => &["output", "name", "namespace"],
        (Api::Responses, true) => &["item", "response", "output", "name", "namespace"],
        (Api::Messages, false) => &["content", "name"],
        (Api::Messages, true) => &["message", "content", "content_block", "name"],
        (Api::Interactions, false) => &["steps", "name"],
        (Api::Interactions, true) => &["step", "delta", "interaction", "steps", "name"],
        (Api::Gemini, _) => &[
            "candidates",
            "content",
            "parts",
            "functionCall",
            "function_call",
            "name",
        ],
    }
}

/// The agent of the dialect's tests, planned in `mode` on `runtime`.
pub fn plan(api: Api, mode: Mode, runtime: Runtime) -> std::sync::Arc<ToolPlan> {
    match api {
        Api::Chat => agent_plan(mode),
        Api::Responses => responses_plan(mode, runtime),
        Api::Messages => messages_plan(mode, runtime),
        Api::Gemini => gemini_plan(mode, runtime),
        Api::Interactions => crate::interactions::test_plan::plan(mode, runtime),
    }
}

/// Whether the judge lets a call through that a client read as `one` (a
/// one-call answer): it reads it, and passes its call.
pub fn lets_through(api: Api, one: &Value, plan: &ToolPlan) -> bool {
    let Some(answer) = one.as_object() else {
        return false;
    };
    let judged = match api {
        Api::Chat => Chat::judge_answer(answer, plan),
        Api::Responses => Responses::judge_answer(answer, plan),
        Api::Messages => Messages::judge_answer(answer, plan),
        Api::Gemini => Gemini::judge_answer(answer, plan),
        Api::Interactions => Interactions::judge_answer(answer, plan),
    };
    judged.is_ok_and(|(turn, _)| turn.calls.iter().all(|c| c.passed()))
}

/// An answer as a stream's events: chat's choices as deltas; a Responses
/// stream's start, each item added and done, its end; a Messages stream's
/// start holding the blocks, then each block again; a Gemini answer is a
/// chunk, and a last one ends the turn.
pub fn events(api: Api, answer: &Value) -> Vec<Value> {
    match api {
        Api::Chat => {
            let mut chunk = answer.clone();
            if let Some(Value::Array(choices)) = chunk.get_mut("choices") {
                for choice in choices.iter_mut().filter_map(Value::as_object_mut) {
                    let mut delta = choice.remove("message").unwrap_or(Value::Null);
                    if let Some(Value::Array(calls)) = delta.get_mut("tool_calls") {
                        for (j, call) in calls.iter_mut().enumerate() {
                            if let Some(call) = call.as_object_mut() {
                                call.insert("index".into(), json!(j));
                            }
                        }
                    }
                    choice.insert("delta".into(), delta);
                    choice.insert("finish_reason".into(), Value::Null);
                }
            }
            chunk["object"] = json!("chat.completion.chunk");
            vec![
                chunk,
                json!({"id": "c", "object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            ]
        }
        Api::Responses => {
            let items = answer["output"].as_array().cloned().unwrap_or_default();
            let mut out = vec![json!({"type": "response.created",
                "response": {"id": "resp_1", "object": "response", "status": "in_progress",
                             "output": answer["output"]}})];
            for (i, item) in items.iter().enumerate() {
                for kind in ["response.output_item.added", "response.output_item.done"] {
                    out.push(json!({"type": kind, "output_index": i, "item": item}));
                }
            }
            out.push(json!({"type": "response.completed",
                "response": {"id": "resp_1", "object": "response", "status": "completed",
                             "output": answer["output"]}}));
            out
        }
        Api::Messages => {
            let blocks = answer["content"].as_array().cloned().unwrap_or_default();
            let mut out = vec![json!({"type": "message_start", "message": {"id": "msg_1",
                "type": "message", "role": "assistant", "content": answer["content"],
                "usage": {"input_tokens": 1, "output_tokens": 1}}})];
            for (i, block) in blocks.iter().enumerate() {
                let index = i + blocks.len();
                out.push(
                    json!({"type": "content_block_start", "index": index, "content_block": block}),
                );
                out.push(json!({"type": "content_block_stop", "index": index}));
            }
            out.push(
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                            "usage": {"output_tokens": 2}}),
            );
            out.push(json!({"type": "message_stop"}));
            out
        }
        Api::Interactions => {
            let steps = answer["steps"].as_array().cloned().unwrap_or_default();
            let mut out = vec![json!({"event_type": "interaction.created",
                "interaction": {"id": "v1_a", "object": "interaction", "status": "in_progress",
                                "steps": answer["steps"]}})];
            for (i, step) in steps.iter().enumerate() {
                out.push(json!({"event_type": "step.start", "index": i, "step": step}));
                out.push(json!({"event_type": "step.delta", "index": i, "delta": step}));
                out.push(json!({"event_type": "step.stop", "index": i}));
            }
            out.push(json!({"event_type": "interaction.completed",
                "interaction": {"id": "v1_a", "status": "requires_action", "steps": answer["steps"]}}));
            out
        }
        Api::Gemini => vec![
            answer.clone(),
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]},
                                   "finishReason": "STOP", "index": 0}]}),
        ],
    }
}

/// The events as the provider streams them, event `n` as `text`.
pub fn sse(events: &[Value], n: usize, text: &str) -> Vec<u8> {
    let mut out = String::new();
    for (i, e) in events.iter().enumerate() {
        let data = if i == n {
            text.to_owned()
        } else {
            e.to_string()
        };
        if let Some(kind) = e
            .get("type")
            .or_else(|| e.get("event_type"))
            .and_then(Value::as_str)
        {
            out.push_str(&format!("event: {kind}\n"));
        }
        out.push_str(&format!("data: {data}\n\n"));
    }
    out.into_bytes()
}
