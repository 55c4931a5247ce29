//! Steps of an Interactions turn: which are calls, how each is judged, and
//! the steps the proxy writes (answers, a program's calls).
//!
//! The model's turn is a list of steps (`thought`, `model_output`,
//! `function_call`, the provider's own tools' `<tool>_call` and
//! `<tool>_result`). A `function_call` is judged by its `name`. The judge
//! fails closed: only the step types in [`SAFE_STEPS`] pass unjudged; any
//! other type, one this proxy has never heard of included, is judged as a
//! call a client would execute, by its type (docs/security.md, "What
//! passes").

use serde_json::{json, Map, Value};

use crate::classify::Verdict;
use crate::plan::ToolPlan;
use crate::turn::shape;
use crate::turn::{fate, judge_names, JudgedCall, Shape, Step, Unreadable};

/// The step a client's function runs for: judged by its `name`.
pub const FUNCTION_CALL: &str = "function_call";

/// The step answering a call: `call_id` names it.
pub const FUNCTION_RESULT: &str = "function_result";

/// The step types that are no call a client executes: the model's words
/// and thoughts, the client's own turn, and the tools the provider runs
/// itself (their calls and results). Everything else is judged as a call.
pub const SAFE_STEPS: &[&str] = &[
    "thought",
    "model_output",
    "user_input",
    "google_search_call",
    "google_search_result",
    "code_execution_call",
    "code_execution_result",
    "url_context_call",
    "url_context_result",
    "mcp_server_tool_call",
    "mcp_server_tool_result",
    "file_search_call",
    "file_search_result",
    "google_maps_call",
    "google_maps_result",
    "retrieval_call",
    "retrieval_result",
];

/// The type of a step, `""` when it has none.
pub fn step_type(step: &Value) -> &str {
    step.get("type").and_then(Value::as_str).unwrap_or("")
}

/// Whether a step is judged as a call: any type not known to be safe.
pub fn is_judged_step(step: &Value) -> bool {
    !SAFE_STEPS.contains(&step_type(step))
}

/// The tool a step calls, as the plan knows it: a function call's `name`;
/// a step of any other judged type goes by its type, so its denial says
/// what it was.
pub fn tool_name(step: &Map<String, Value>) -> String {
    let kind = step.get("type").and_then(Value::as_str).unwrap_or("");
    let name = step.get("name").and_then(Value::as_str).unwrap_or("");
    if name.is_empty() && kind != FUNCTION_CALL {
        kind.to_owned()
    } else {
        name.to_owned()
    }
}

/// What the call passes to its tool, as JSON text: its `arguments` (an
/// object on the wire; a string as it came, as a lenient reader takes it).
pub fn call_input(step: &Map<String, Value>) -> String {
    match step.get("arguments") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "{}".to_owned(),
        Some(other) => other.to_string(),
    }
}

/// The id its answer names the call by.
pub fn call_id(step: &Map<String, Value>) -> String {
    step.get("id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// A step as a judge may read it (`crate::turn::shape`): an object whose
/// `name`, when it is judged as a call, is a string. The path is from the
/// step down.
pub fn check_step(step: &Value) -> Result<(), Unreadable> {
    let fields = shape::entry(step, &[])?;
    if is_judged_step(step) {
        shape::name(fields.get("name"), &[Step::Key("name")])?;
    }
    Ok(())
}

/// Judges one step; `None` for a step known to be no call a client
/// executes ([`SAFE_STEPS`]).
pub fn judge_step(step: &Value, plan: &ToolPlan) -> Option<JudgedCall> {
    let obj = step.as_object()?;
    if !is_judged_step(step) {
        return None;
    }
    let name = tool_name(obj);
    let arguments = call_input(obj);
    let (name, verdict) = judge_names(&[name.as_str()], plan)
        .map(|(n, v)| (n.to_owned(), v))
        .unwrap_or_else(|| (String::new(), nameless(plan)));
    Some(JudgedCall {
        id: call_id(obj),
        fate: fate(verdict, &name, &arguments, plan),
        name,
        arguments,
        shape: Shape::Function,
        raw: Some(obj.clone()),
    })
}

/// The verdict for a call whose name is empty.
fn nameless(plan: &ToolPlan) -> Verdict {
    crate::classify::classify("", plan.visibility(""), plan.mode)
}

/// The step answering a withheld call with `content` (a denial, or a
/// program refused).
pub fn answer_step(call: &JudgedCall, content: &str) -> Value {
    json!({"type": FUNCTION_RESULT, "call_id": call.id, "name": call.name, "result": content})
}

/// The call's step as the model sent it.
pub fn raw_step(call: &JudgedCall) -> Value {
    call.raw.clone().map_or(Value::Null, Value::Object)
}

/// A function call step with `arguments` (JSON text) as the object the
/// wire carries; text that is no JSON object stays a string, as it came.
pub fn function_call(id: &str, name: &str, arguments: &str) -> Value {
    let args = serde_json::from_str::<Value>(arguments)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| Value::String(arguments.to_owned()));
    json!({"type": FUNCTION_CALL, "id": id, "name": name, "arguments": args})
}

/// The text of a `model_output` step's `text` contents.
pub fn output_text(step: &Value) -> Option<String> {
    if step_type(step) != "model_output" {
        return None;
    }
    let parts = step.get("content")?.as_array()?;
    Some(
        parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
    )
}

/// A `model_output` step holding `text`, as the proxy writes one.
pub fn text_step(text: &str) -> Value {
    json!({"type": "model_output", "content": [{"type": "text", "text": text}]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_calls_go_by_name_and_unknown_steps_by_type() {
        let step = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(
            tool_name(&step(
                json!({"type": "function_call", "id": "c", "name": "read", "arguments": {}})
            )),
            "read"
        );
        assert_eq!(
            tool_name(&step(json!({"type": "computer_use_call", "id": "c"}))),
            "computer_use_call"
        );
        assert_eq!(
            call_input(&step(
                json!({"type": "function_call", "arguments": {"path": "a"}})
            )),
            r#"{"path":"a"}"#
        );
        assert!(!is_judged_step(
            &json!({"type": "thought", "signature": "s"})
        ));
        assert!(is_judged_step(&json!({"type": "hologram_call"})));
        assert!(is_judged_step(&json!({"name": "read"})));
        assert_eq!(
            function_call("c", "read", "{\"p\":1}")["arguments"],
            json!({"p": 1})
        );
    }

    #[test]
    fn a_judged_step_whose_name_is_no_string_is_unreadable() {
        assert!(check_step(&json!({"type": "function_call", "name": ["read"]})).is_err());
        assert!(check_step(&json!({"type": "function_call", "name": "read"})).is_ok());
        assert!(check_step(&json!("function_call")).is_err());
        assert!(check_step(&json!({"type": "thought", "name": 1})).is_ok());
    }
}
