//! The embedded runtime on the Gemini API: a program's calls reach the
//! client as `functionCall` parts of a model turn the proxy mints; its
//! `functionResponse` parts resume the program.

use serde_json::{json, Value};

use super::parts::{function_call, is_call_part, result_part};
use crate::runtime::{call_id_as, Execution};

/// The signature Gemini accepts on a call no model signed (a call the
/// proxy writes): Gemini 3 refuses a turn's first call without one.
pub const UNSIGNED: &str = "skip_thought_signature_validator";

/// The answer that hands a program's waiting calls to the client. With
/// `model_parts`, the first batch carries the model's own parts other than
/// calls; a batch no model answered reports zero tokens.
pub fn client_answer(
    exec: &Execution,
    range: std::ops::Range<usize>,
    base: &Value,
    usage: Option<Value>,
    model_parts: bool,
) -> Value {
    let start = range.start;
    let mut parts = Vec::new();
    if range.start == 0 && model_parts {
        if let Some(turn) = exec.kept_turn() {
            parts.extend(
                turn["parts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|p| !is_call_part(p))
                    .cloned(),
            );
        }
    }
    for (i, n) in range.enumerate() {
        let call = &exec.calls[n];
        let args: Value = serde_json::from_str(&call.args).unwrap_or_else(|_| json!({}));
        let mut part =
            json!({"functionCall": {"id": exec.call_id(n), "name": call.name, "args": args}});
        if i == 0 {
            part["thoughtSignature"] = json!(UNSIGNED);
        }
        parts.push(part);
    }
    let model = base
        .get("modelVersion")
        .or_else(|| base.get("model"))
        .cloned()
        .unwrap_or(Value::Null);
    json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP",
                        "index": 0}],
        "usageMetadata": usage.unwrap_or_else(|| json!({"promptTokenCount": 0,
            "candidatesTokenCount": 0, "totalTokenCount": 0})),
        "modelVersion": model,
        "responseId": call_id_as("", &exec.id, start),
    })
}

/// The id the model gave the program's call in `turn`: `run_call_id` when
/// the turn names it, `None` when the model sent the call without an id.
fn program_id<'a>(turn: &Value, run_call_id: &'a str) -> Option<&'a str> {
    let named = turn["parts"].as_array().into_iter().flatten().any(|p| {
        function_call(p)
            .and_then(|c| c.get("id"))
            .and_then(Value::as_str)
            == Some(run_call_id)
    });
    named.then_some(run_call_id)
}

/// The model's view of one execution: its turn as the model sent it, then
/// a user content with the program's output (naming the call as the model
/// did: by its id, or by name and place when it gave none) and the answers of calls denied beside it, then
/// `carried` (parts the client sent beside the nested results).
pub fn pair(e: &Execution, carried: &[Value]) -> Vec<Value> {
    let turn = e.kept_turn().unwrap_or_else(|| {
        let mut parts = vec![json!({"functionCall": {"id": e.run_call_id,
                "name": crate::mode::RUN_CODE, "args": {"code": e.code}},
                "thoughtSignature": UNSIGNED})];
        parts.extend(e.denied_calls.iter().cloned());
        json!({"role": "model", "parts": parts})
    });
    let id = program_id(&turn, &e.run_call_id);
    let mut v = vec![turn];
    if let Some(outcome) = &e.outcome {
        let error = outcome.starts_with("Error:");
        let mut parts = vec![result_part(id, crate::mode::RUN_CODE, outcome, error)];
        parts.extend(e.denials.iter().cloned());
        parts.extend(carried.iter().cloned());
        v.push(json!({"role": "user", "parts": parts}));
    }
    v
}
