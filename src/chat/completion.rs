//! Interception of a whole (non-streamed) completion (docs/modes.md).
//!
//! Each call is judged by [`crate::classify`]; this module only applies the
//! verdicts to the JSON: withholding denied calls, building the repair
//! round's messages, and summing usage over rounds.

use serde_json::{json, Map, Value};

use crate::classify::{classify, Verdict};
use crate::plan::ToolPlan;
use crate::turn::{fate, judge_names, mint_call_id, JudgedCall, Shape};

/// The model's turn (choice 0) after judging.
#[derive(Debug)]
pub struct JudgedTurn {
    /// The model's message as it came (ids filled in), for a repair's history.
    pub assistant: Value,
    /// Every call of the message, judged, in the order the model made them
    /// (`tool_calls` first, then a legacy `function_call`).
    pub calls: Vec<JudgedCall>,
}

impl JudgedTurn {
    /// The text the model wrote in the turn.
    pub fn content(&self) -> Option<String> {
        self.assistant
            .get("content")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    }
}

/// Judges every call of `completion` and withholds from it every call that
/// does not pass (denied ones, and programs the proxy runs itself).
///
/// Only choice 0 is kept: `n = 1` is enforced wherever a call can be denied,
/// so another choice is not a turn any client asked for, and one it could
/// read would be a call nobody judged.
pub fn judge_completion(completion: &mut Map<String, Value>, plan: &ToolPlan) -> JudgedTurn {
    let mut turn = JudgedTurn {
        assistant: Value::Null,
        calls: Vec::new(),
    };
    let Some(choices) = completion.get_mut("choices") else {
        return turn;
    };
    let Some(choices) = choices.as_array_mut() else {
        // Not a list: nothing a client reads as choices.
        *choices = Value::Array(Vec::new());
        return turn;
    };
    choices.truncate(1);
    let Some(choice) = choices.first_mut().and_then(Value::as_object_mut) else {
        choices.clear();
        return turn;
    };
    if choice.get("index").is_some_and(|i| i != &json!(0)) {
        choice.insert("index".into(), json!(0));
    }
    let Some(message) = choice.get_mut("message").and_then(Value::as_object_mut) else {
        return turn;
    };
    match message.get_mut("tool_calls") {
        Some(Value::Array(calls)) => calls.iter_mut().for_each(ensure_id),
        Some(Value::Null) | None => {}
        // A client cannot read a list of calls out of anything else.
        Some(_) => {
            message.remove("tool_calls");
        }
    }
    // The history keeps what the model wrote, withheld calls included.
    turn.assistant = Value::Object(message.clone());
    if let Some(Value::Array(calls)) = message.get("tool_calls") {
        turn.calls.extend(calls.iter().map(|c| judge_call(c, plan)));
    }
    let listed = turn.calls.len();
    if let Some(fc) = message.get("function_call").filter(|f| !f.is_null()) {
        turn.calls.push(judge_legacy(fc, plan));
    }
    if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
        let mut keep = turn.calls.iter().map(JudgedCall::passed);
        calls.retain(|_| keep.next().unwrap_or(false));
        if calls.is_empty() && listed > 0 {
            message.remove("tool_calls");
        }
    }
    if turn.calls[listed..].iter().any(|c| !c.passed()) {
        message.remove("function_call");
    }
    turn
}

/// Judges one `tool_calls` entry by every name a client could read off it.
fn judge_call(call: &Value, plan: &ToolPlan) -> JudgedCall {
    let function = call.get("function");
    let custom = call.get("custom");
    let is_custom = call.get("type").and_then(Value::as_str) == Some("custom")
        || (custom.is_some() && function.is_none());
    let names: Vec<&str> = [function, custom]
        .into_iter()
        .filter_map(|f| f.and_then(|f| f.get("name")).and_then(Value::as_str))
        .collect();
    let (shape, arguments) = if is_custom {
        (Shape::Custom, custom.and_then(|c| c.get("input")))
    } else {
        (Shape::Function, function.and_then(|f| f.get("arguments")))
    };
    let arguments = arguments.and_then(Value::as_str).unwrap_or("");
    // A call without a name is judged by the empty name.
    let (name, verdict) = judge_names(&names, plan).unwrap_or_else(|| ("", nameless(plan)));
    JudgedCall {
        raw: call.as_object().cloned(),
        id: call_id(call),
        name: name.to_owned(),
        arguments: arguments.to_owned(),
        shape,
        fate: fate(verdict, name, arguments, plan),
    }
}

/// Judges a legacy `function_call`; it gets an id only for the proxy's own use.
fn judge_legacy(fc: &Value, plan: &ToolPlan) -> JudgedCall {
    let name = fc.get("name").and_then(Value::as_str).unwrap_or("");
    let arguments = fc.get("arguments").and_then(Value::as_str).unwrap_or("");
    let (name, verdict) = judge_names(&[name], plan).unwrap_or_else(|| ("", nameless(plan)));
    JudgedCall {
        raw: None,
        id: mint_call_id(),
        name: name.to_owned(),
        arguments: arguments.to_owned(),
        shape: Shape::Legacy,
        fate: fate(verdict, name, arguments, plan),
    }
}

/// The verdict for a call whose name never arrived.
fn nameless(plan: &ToolPlan) -> Verdict {
    classify("", plan.visibility(""), plan.mode)
}

fn call_id(call: &Value) -> String {
    call.get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map_or_else(mint_call_id, str::to_owned)
}

/// Gives a call without an id one, so its result can be matched later.
fn ensure_id(call: &mut Value) {
    let missing = call
        .get("id")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    if missing {
        if let Some(obj) = call.as_object_mut() {
            obj.insert("id".into(), Value::String(mint_call_id()));
        }
    }
}

/// When the proxy gave up on the turn: the client gets the model's text
/// without any call, or `note` when it wrote none.
pub fn give_up(completion: &mut Map<String, Value>, note: &str) {
    let choice = completion
        .get_mut("choices")
        .and_then(|c| c.get_mut(0))
        .and_then(Value::as_object_mut);
    let Some(choice) = choice else {
        return;
    };
    if let Some(message) = choice.get_mut("message").and_then(Value::as_object_mut) {
        message.remove("tool_calls");
        message.remove("function_call");
        let has_text = message
            .get("content")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.trim().is_empty());
        if !has_text {
            message.insert("content".into(), Value::String(note.to_owned()));
        }
    }
    choice.insert("finish_reason".into(), Value::String("stop".into()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::Mode;
    use crate::preset::Catalog;
    use serde_json::value::RawValue;

    fn plan(mode: Mode) -> ToolPlan {
        let tools = r#"[{"type":"function","function":{"name":"read"}},{"type":"function","function":{"name":"run_code"}}]"#;
        let raw = RawValue::from_string(tools.into()).unwrap();
        let c = Catalog::builtin(Mode::Code);
        ToolPlan::build(
            Some(&raw),
            c.get("standard").unwrap(),
            mode,
            crate::mode::Runtime::Client,
        )
        .unwrap()
    }

    fn completion(calls: Value) -> Value {
        json!({"id": "c1", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "tool_calls": calls}}]})
    }

    fn call(id: &str, name: &str, args: &str) -> Value {
        json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
    }

    fn fates(turn: &JudgedTurn) -> Vec<(&str, bool)> {
        turn.calls
            .iter()
            .map(|c| (c.name.as_str(), c.passed()))
            .collect()
    }

    #[test]
    fn all_denied_keeps_the_original_turn_for_repair() {
        let mut c = completion(json!([call("a", "read", "{}")]));
        let turn = judge_completion(c.as_object_mut().unwrap(), &plan(Mode::Code));
        assert_eq!(turn.assistant["tool_calls"][0]["function"]["name"], "read");
        assert_eq!(fates(&turn), vec![("read", false)]);
        assert!(c["choices"][0]["message"].get("tool_calls").is_none());
    }

    #[test]
    fn mixed_turn_withholds_only_denied_calls() {
        let mut c = completion(json!([
            call("a", "run_code", "{}"),
            call("b", "read", "{}")
        ]));
        let turn = judge_completion(c.as_object_mut().unwrap(), &plan(Mode::Code));
        assert_eq!(fates(&turn), vec![("run_code", true), ("read", false)]);
        assert_eq!(
            c["choices"][0]["message"]["tool_calls"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn both_mode_passes_native_calls() {
        let mut c = completion(json!([call("a", "read", "{}")]));
        let turn = judge_completion(c.as_object_mut().unwrap(), &plan(Mode::Both));
        assert_eq!(fates(&turn), vec![("read", true)]);
    }

    #[test]
    fn calls_without_ids_get_one() {
        let mut c = completion(
            json!([{"type": "function", "function": {"name": "run_code", "arguments": "{}"}}]),
        );
        judge_completion(c.as_object_mut().unwrap(), &plan(Mode::Code));
        assert!(c["choices"][0]["message"]["tool_calls"][0]["id"]
            .as_str()
            .unwrap()
            .starts_with("call_cm"));
    }

    #[test]
    fn a_legacy_function_call_is_judged_and_withheld() {
        let mut c = json!({"choices": [{"index": 0, "finish_reason": "function_call",
            "message": {"role": "assistant", "content": null,
                        "function_call": {"name": "read", "arguments": "{}"}}}]});
        let turn = judge_completion(c.as_object_mut().unwrap(), &plan(Mode::Code));
        assert_eq!(fates(&turn), vec![("read", false)]);
        assert_eq!(turn.calls[0].shape, Shape::Legacy);
        assert!(c["choices"][0]["message"].get("function_call").is_none());
        assert_eq!(turn.assistant["function_call"]["name"], "read");
    }

    #[test]
    fn a_custom_call_is_judged_by_its_name() {
        let mut c = completion(json!([{"id": "a", "type": "custom",
            "custom": {"name": "read", "input": "a.txt"}}]));
        let turn = judge_completion(c.as_object_mut().unwrap(), &plan(Mode::Code));
        assert_eq!(fates(&turn), vec![("read", false)]);
        assert_eq!(turn.calls[0].shape, Shape::Custom);
    }

    #[test]
    fn a_call_with_two_names_is_judged_by_the_denied_one() {
        let mut c = completion(json!([{"id": "a", "type": "function",
            "function": {"name": "run_code", "arguments": "{}"},
            "custom": {"name": "read", "input": ""}}]));
        let turn = judge_completion(c.as_object_mut().unwrap(), &plan(Mode::Code));
        assert_eq!(fates(&turn), vec![("read", false)]);
    }

    #[test]
    fn only_choice_zero_survives() {
        let mut c = json!({"choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}},
            {"index": 1, "message": {"role": "assistant", "tool_calls": [call("b", "read", "{}")]}}]});
        let turn = judge_completion(c.as_object_mut().unwrap(), &plan(Mode::Code));
        assert!(turn.calls.is_empty());
        assert_eq!(c["choices"].as_array().unwrap().len(), 1);
        assert_eq!(c["choices"][0]["message"]["content"], "hi");
    }

    #[test]
    fn giving_up_strips_calls_and_explains() {
        let mut c = completion(json!([call("a", "read", "{}")]));
        give_up(c.as_object_mut().unwrap(), "note about read");
        assert!(c["choices"][0]["message"].get("tool_calls").is_none());
        assert_eq!(c["choices"][0]["finish_reason"], "stop");
        assert_eq!(c["choices"][0]["message"]["content"], "note about read");
    }
}
