//! Content blocks of a Messages turn: which are calls, how each is judged,
//! and the blocks and messages the proxy writes (denials, repairs).
//!
//! A `tool_use` block is a call the client executes; `server_tool_use`
//! (and its results) are the provider's own and never judged.

use serde_json::{json, Map, Value};

use crate::classify::Verdict;
use crate::plan::ToolPlan;
use crate::turn::{fate, judge_names, Fate, JudgedCall, Shape};

/// Whether a content block is a call a client executes.
pub fn is_call_block(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("tool_use")
}

/// Judges one content block; `None` for a block that is no call.
pub fn judge_block(block: &Value, plan: &ToolPlan) -> Option<JudgedCall> {
    let obj = block.as_object()?;
    if !is_call_block(block) {
        return None;
    }
    let name = obj.get("name").and_then(Value::as_str).unwrap_or("");
    let arguments = input_text(obj);
    let (name, verdict) = judge_names(&[name], plan)
        .map(|(n, v)| (n.to_owned(), v))
        .unwrap_or_else(|| (String::new(), nameless(plan)));
    Some(JudgedCall {
        id: obj
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        fate: fate(verdict, &name, &arguments, plan),
        name,
        arguments,
        shape: Shape::Function,
        raw: Some(obj.clone()),
    })
}

/// A `tool_use` block's `input` as JSON text (an object; `{}` when absent).
pub fn input_text(block: &Map<String, Value>) -> String {
    match block.get("input") {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(v) => v.to_string(),
    }
}

fn nameless(plan: &ToolPlan) -> Verdict {
    crate::classify::classify("", plan.visibility(""), plan.mode)
}

/// The text a withheld call is answered with, if it is withheld.
pub fn withheld_content(call: &JudgedCall, splice: bool) -> Option<&str> {
    match &call.fate {
        Fate::Passed => None,
        Fate::Denied(d) => Some(d.content.as_str()),
        Fate::Program if splice => Some(crate::classify::ONE_PROGRAM_SKIPPED),
        Fate::Program => Some(crate::classify::ONE_PROGRAM),
    }
}

/// The `tool_result` block answering a withheld call: an error whose text
/// starts with the denial's code.
pub fn answer_block(call: &JudgedCall, content: &str) -> Value {
    json!({"type": "tool_result", "tool_use_id": call.id, "is_error": true,
           "content": [{"type": "text", "text": content}]})
}

/// The answers of a turn's withheld calls, in the order the model made them.
pub fn answers(calls: &[JudgedCall], splice: bool) -> Vec<Value> {
    calls
        .iter()
        .filter_map(|c| withheld_content(c, splice).map(|t| answer_block(c, t)))
        .collect()
}

/// A repair round's messages: the model's turn as it came (its thinking
/// blocks and their signatures untouched), then one user message holding
/// one `tool_result` per withheld call.
pub fn repair_messages(assistant: &Value, calls: &[JudgedCall]) -> Vec<Value> {
    vec![
        assistant.clone(),
        json!({"role": "user", "content": answers(calls, false)}),
    ]
}

/// The denied calls of a program's turn and their answers, for its history.
pub fn program_denials(calls: &[JudgedCall]) -> (Vec<Value>, Vec<Value>) {
    let denied = calls.iter().filter(|c| matches!(c.fate, Fate::Denied(_)));
    (
        denied.clone().map(raw_block).collect(),
        denied
            .filter_map(|c| withheld_content(c, false).map(|t| answer_block(c, t)))
            .collect(),
    )
}

/// A mixed turn's withheld calls and their answers, keyed by the ids of the
/// calls the client got; `None` when nothing is withheld or no passed call
/// has an id.
pub fn splice(calls: &[JudgedCall]) -> Option<(Vec<String>, crate::splice::Splice)> {
    let keys: Vec<String> = calls
        .iter()
        .filter(|c| c.passed() && !c.id.is_empty())
        .map(|c| c.id.clone())
        .collect();
    let withheld: Vec<&JudgedCall> = calls.iter().filter(|c| !c.passed()).collect();
    if keys.is_empty() || withheld.is_empty() {
        return None;
    }
    Some((
        keys,
        crate::splice::Splice {
            denied_calls: withheld.iter().map(|c| raw_block(c)).collect(),
            denials: withheld
                .iter()
                .filter_map(|c| withheld_content(c, true).map(|t| answer_block(c, t)))
                .collect(),
        },
    ))
}

/// The call's block as the model sent it.
pub fn raw_block(call: &JudgedCall) -> Value {
    call.raw.clone().map_or(Value::Null, Value::Object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_use_block_is_a_call_and_its_input_is_json_text() {
        let block = json!({"type": "tool_use", "id": "toolu_1", "name": "Read",
                           "input": {"file_path": "a.txt"}});
        assert!(is_call_block(&block));
        assert!(!is_call_block(
            &json!({"type": "server_tool_use", "name": "web_search"})
        ));
        assert_eq!(
            input_text(block.as_object().unwrap()),
            r#"{"file_path":"a.txt"}"#
        );
    }
}
