//! Interception of a whole (non-streamed) completion (docs/modes.md).
//!
//! Each call is judged by [`crate::classify`]; this module only applies the
//! verdicts to the JSON: withholding denied calls, building the repair
//! round's messages, and summing usage over rounds.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::classify::{classify, Verdict};
use crate::plan::ToolPlan;
use crate::turn::shape;
use crate::turn::{
    fate, judge_names, mint_call_id, probe, Edit, Edits, Field, JudgedCall, Nothing, Obj, Quiet,
    Shape, Step, Unreadable,
};

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

/// Judges every call of `completion`: the turn, and the edits that
/// withhold from it every call that does not pass (denied ones, and
/// programs the proxy runs itself) and give id-less calls their ids.
///
/// Only choice 0 is kept: `n = 1` is enforced wherever a call can be denied,
/// so another choice is not a turn any client asked for, and one it could
/// read would be a call nobody judged. Where a call could stand (`choices`,
/// choice 0, its `message`, `tool_calls` and each entry, `function_call`)
/// a shape the judge cannot read refuses the completion
/// (`crate::turn::shape`).
pub fn judge_completion(
    completion: &Map<String, Value>,
    plan: &ToolPlan,
) -> Result<(JudgedTurn, Edits), Unreadable> {
    let mut turn = JudgedTurn {
        assistant: Value::Null,
        calls: Vec::new(),
    };
    let mut edits = Edits::default();
    let choices = shape::list(completion.get("choices"), &[Step::Key("choices")])?;
    let at_choices = vec![Step::Key("choices")];
    let Some(choice) = choices.first() else {
        return Ok((turn, edits));
    };
    let choice = shape::entry(choice, &[Step::Key("choices"), Step::Index(0)])?;
    if choices.len() > 1 {
        edits.push(Edit::Truncate {
            at: at_choices,
            len: 1,
        });
    }
    let at_choice = vec![Step::Key("choices"), Step::Index(0)];
    if choice.get("index").is_some_and(|i| i != &json!(0)) {
        edits.push(Edit::Put {
            at: at_choice.clone(),
            key: "index",
            value: json!(0),
        });
    }
    let Some(message) = shape::object(choice.get("message"), &[Step::Key("message")])
        .map_err(|e| e.under(&at_choice))?
    else {
        return Ok((turn, edits));
    };
    let mut at_message = at_choice;
    at_message.push(Step::Key("message"));
    check_calls(message).map_err(|e| e.under(&at_message))?;
    let mut at_calls = at_message.clone();
    at_calls.push(Step::Key("tool_calls"));
    // The history keeps what the model wrote, withheld calls included.
    let mut assistant = message.clone();
    // A list, `null` or absent: `check_calls` let nothing else through.
    if let Some(Value::Array(calls)) = assistant.get_mut("tool_calls") {
        for (i, call) in calls.iter_mut().enumerate() {
            if let Some(id) = ensure_id(call) {
                let mut at = at_calls.clone();
                at.push(Step::Index(i));
                edits.push(Edit::Put {
                    at,
                    key: "id",
                    value: Value::String(id),
                });
            }
        }
    }
    if let Some(Value::Array(calls)) = assistant.get("tool_calls") {
        turn.calls.extend(calls.iter().map(|c| judge_call(c, plan)));
    }
    let listed = turn.calls.len();
    if let Some(fc) = assistant.get("function_call").filter(|f| !f.is_null()) {
        turn.calls.push(judge_legacy(fc, plan));
    }
    turn.assistant = Value::Object(assistant);
    let keep: Vec<bool> = turn.calls[..listed]
        .iter()
        .map(JudgedCall::passed)
        .collect();
    if listed > 0 && !keep.contains(&true) {
        edits.push(Edit::Remove {
            at: at_message.clone(),
            key: "tool_calls",
        });
    } else {
        edits.push(Edit::Retain { at: at_calls, keep });
    }
    if turn.calls[listed..].iter().any(|c| !c.passed()) {
        edits.push(Edit::Remove {
            at: at_message,
            key: "function_call",
        });
    }
    Ok((turn, edits))
}

/// Reads a message's (or a delta's) calls as a judge may: `tool_calls` a
/// list of objects, each one's `function` and `custom` an object naming
/// its tool with a string, `function_call` the same; `null` is absent,
/// as the SDKs read it. The path is from the message down.
pub fn check_calls(message: &Map<String, Value>) -> Result<(), Unreadable> {
    use Step::{Index, Key};
    let calls = shape::list(message.get("tool_calls"), &[Key("tool_calls")])?;
    for (j, call) in calls.iter().enumerate() {
        let at = [Key("tool_calls"), Index(j)];
        let call = shape::entry(call, &at)?;
        for body in ["function", "custom"] {
            let Some(body_of) =
                shape::object(call.get(body), &[Key(body)]).map_err(|e| e.under(&at))?
            else {
                continue;
            };
            shape::name(body_of.get("name"), &[Key(body), Key("name")])
                .map_err(|e| e.under(&at))?;
        }
    }
    if let Some(legacy) = shape::object(message.get("function_call"), &[Key("function_call")])? {
        shape::name(legacy.get("name"), &[Key("function_call"), Key("name")])?;
    }
    Ok(())
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

/// Gives a call without an id one, so its result can be matched later;
/// the id it minted, if it did.
fn ensure_id(call: &mut Value) -> Option<String> {
    let missing = call
        .get("id")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    let obj = call.as_object_mut().filter(|_| missing)?;
    let id = mint_call_id();
    obj.insert("id".into(), Value::String(id.clone()));
    Some(id)
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

/// The completion as [`judge_completion`] would pass it untouched with no
/// call, read without a tree (`crate::turn::quiet`): at most one choice,
/// at index 0, whose message has no `tool_calls` entry and no
/// `function_call`.
pub fn quiet(body: &[u8]) -> Option<Quiet> {
    #[derive(Deserialize)]
    struct Completion {
        #[serde(default)]
        choices: Field<Vec<Obj<Choice>>>,
        #[serde(default)]
        usage: Field<Value>,
    }
    #[allow(dead_code)] // `message` is read for its shape
    #[derive(Deserialize)]
    struct Choice {
        #[serde(default)]
        index: Field<u64>,
        #[serde(default)]
        message: Field<Obj<Message>>,
    }
    #[allow(dead_code)] // read for its shape: a message holding a call fails
    #[derive(Deserialize)]
    struct Message {
        #[serde(default)]
        tool_calls: Option<Vec<Nothing>>,
        #[serde(default)]
        function_call: Option<Nothing>,
    }
    let completion: Completion = probe(body)?;
    let quiet = match &completion.choices {
        Field::Absent => true,
        Field::Present(choices) => match choices.as_slice() {
            [] => true,
            [Obj(choice)] => matches!(choice.index, Field::Absent | Field::Present(0)),
            _ => false,
        },
    };
    quiet.then(|| completion.usage.usage())
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

    /// Judges `c` and writes the edits, as the JSON driver does.
    fn judged(c: &mut Value, plan: &ToolPlan) -> JudgedTurn {
        let answer = c.as_object_mut().unwrap();
        let (turn, edits) = judge_completion(answer, plan).unwrap();
        edits.apply(answer);
        turn
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
        let turn = judged(&mut c, &plan(Mode::Code));
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
        let turn = judged(&mut c, &plan(Mode::Code));
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
        let turn = judged(&mut c, &plan(Mode::Both));
        assert_eq!(fates(&turn), vec![("read", true)]);
    }

    #[test]
    fn calls_without_ids_get_one() {
        let mut c = completion(
            json!([{"type": "function", "function": {"name": "run_code", "arguments": "{}"}}]),
        );
        judged(&mut c, &plan(Mode::Code));
        let id = c["choices"][0]["message"]["tool_calls"][0]["id"]
            .as_str()
            .unwrap();
        assert!(
            id.starts_with("call_") && id.len() == 29,
            "{id}: OpenAI's shape"
        );
    }

    #[test]
    fn a_legacy_function_call_is_judged_and_withheld() {
        let mut c = json!({"choices": [{"index": 0, "finish_reason": "function_call",
            "message": {"role": "assistant", "content": null,
                        "function_call": {"name": "read", "arguments": "{}"}}}]});
        let turn = judged(&mut c, &plan(Mode::Code));
        assert_eq!(fates(&turn), vec![("read", false)]);
        assert_eq!(turn.calls[0].shape, Shape::Legacy);
        assert!(c["choices"][0]["message"].get("function_call").is_none());
        assert_eq!(turn.assistant["function_call"]["name"], "read");
    }

    #[test]
    fn a_custom_call_is_judged_by_its_name() {
        let mut c = completion(json!([{"id": "a", "type": "custom",
            "custom": {"name": "read", "input": "a.txt"}}]));
        let turn = judged(&mut c, &plan(Mode::Code));
        assert_eq!(fates(&turn), vec![("read", false)]);
        assert_eq!(turn.calls[0].shape, Shape::Custom);
    }

    #[test]
    fn a_call_with_two_names_is_judged_by_the_denied_one() {
        let mut c = completion(json!([{"id": "a", "type": "function",
            "function": {"name": "run_code", "arguments": "{}"},
            "custom": {"name": "read", "input": ""}}]));
        let turn = judged(&mut c, &plan(Mode::Code));
        assert_eq!(fates(&turn), vec![("read", false)]);
    }

    #[test]
    fn only_choice_zero_survives() {
        let mut c = json!({"choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}},
            {"index": 1, "message": {"role": "assistant", "tool_calls": [call("b", "read", "{}")]}}]});
        let turn = judged(&mut c, &plan(Mode::Code));
        assert!(turn.calls.is_empty());
        assert_eq!(c["choices"].as_array().unwrap().len(), 1);
        assert_eq!(c["choices"][0]["message"]["content"], "hi");
    }

    #[test]
    fn a_call_in_a_shape_no_judge_reads_refuses_the_completion() {
        let read = call("a", "read", "{}");
        let message = |m: Value| json!({"choices": [{"index": 0, "message": m}]});
        let cases = [
            (
                json!({"choices": {"0": {"message": {"tool_calls": [read]}}}}),
                "`choices` is an object, not a list",
            ),
            (
                json!({"choices": [[{"message": {"tool_calls": [read]}}]]}),
                "`choices[0]` is a list, not an object",
            ),
            (
                json!({"choices": [{"message": [{"tool_calls": [read]}]}]}),
                "`choices[0].message` is a list, not an object",
            ),
            (
                message(json!({"tool_calls": {"0": read}})),
                "`choices[0].message.tool_calls` is an object, not a list",
            ),
            (
                message(json!({"tool_calls": [null, read]})),
                "`choices[0].message.tool_calls[0]` is null, not an object",
            ),
            (
                message(json!({"tool_calls": [{"id": "a", "function": [{"name": "read"}]}]})),
                "`choices[0].message.tool_calls[0].function` is a list, not an object",
            ),
            (
                message(json!({"tool_calls": [{"id": "a", "custom": {"name": ["read"]}}]})),
                "`choices[0].message.tool_calls[0].custom.name` is a list, not a string",
            ),
            (
                message(json!({"function_call": "read"})),
                "`choices[0].message.function_call` is a string, not an object",
            ),
            (
                message(json!({"function_call": {"name": 7}})),
                "`choices[0].message.function_call.name` is a number, not a string",
            ),
        ];
        for (completion, why) in cases {
            let answer = completion.as_object().unwrap();
            let refused = judge_completion(answer, &plan(Mode::Both)).unwrap_err();
            assert_eq!(refused.to_string(), why);
        }
        // `null` where the API makes a field optional is absent.
        for completion in [
            json!({"choices": null}),
            message(Value::Null),
            message(json!({"content": "hi", "tool_calls": null, "function_call": null})),
            message(
                json!({"tool_calls": [{"id": "a", "type": "custom", "function": null,
                                           "custom": {"name": "run_code", "input": ""}}]}),
            ),
        ] {
            let answer = completion.as_object().unwrap();
            assert!(
                judge_completion(answer, &plan(Mode::Code)).is_ok(),
                "{completion}"
            );
        }
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
