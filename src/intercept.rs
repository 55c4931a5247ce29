//! Interception of a whole (non-streamed) completion (design.md section 6).
//!
//! Each call is judged by [`crate::classify`]; this module only applies the
//! verdicts to the JSON: withholding denied calls, building the repair
//! round's messages, and summing usage over rounds.

use serde_json::{json, Value};

use crate::classify::{classify, Denial};
use crate::plan::ToolPlan;

/// A call the proxy withheld from the client.
#[derive(Clone, Debug)]
pub struct DeniedCall {
    /// The tool-call object as the model emitted it (with an id).
    pub call: Value,
    /// Its name.
    pub name: String,
    /// The answer the model gets.
    pub denial: Denial,
}

impl DeniedCall {
    /// The `role: tool` message answering this call.
    pub fn tool_message(&self) -> Value {
        json!({
            "role": "tool",
            "tool_call_id": self.call.get("id").cloned().unwrap_or(Value::Null),
            "content": self.denial.content,
        })
    }
}

/// What the model's turn (choice 0) amounts to after judging.
#[derive(Debug)]
pub enum Turn {
    /// No call was denied: the completion goes to the client as it is.
    Clean,
    /// Some calls pass, some were denied and withheld from the client.
    Mixed {
        /// Ids of the calls the client gets.
        allowed_ids: Vec<String>,
        /// The withheld calls.
        denied: Vec<DeniedCall>,
    },
    /// Every call was denied; `assistant` is the model's message with all of them.
    AllDenied {
        /// The model's turn, for the repair round's history.
        assistant: Value,
        /// The withheld calls.
        denied: Vec<DeniedCall>,
    },
}

/// Judges every tool call of `completion` and withholds the denied ones.
/// Choices beyond the first (which `n = 1` should not produce) only lose
/// their denied calls.
pub fn judge_completion(completion: &mut Value, plan: &ToolPlan) -> Turn {
    let Some(choices) = completion.get_mut("choices").and_then(Value::as_array_mut) else {
        return Turn::Clean;
    };
    let mut first = Turn::Clean;
    for (i, choice) in choices.iter_mut().enumerate() {
        let turn = judge_choice(choice, plan);
        if i == 0 {
            first = turn;
        }
    }
    first
}

fn judge_choice(choice: &mut Value, plan: &ToolPlan) -> Turn {
    let Some(message) = choice.get_mut("message") else {
        return Turn::Clean;
    };
    let Some(calls) = message.get_mut("tool_calls").and_then(Value::as_array_mut) else {
        return Turn::Clean;
    };
    for call in calls.iter_mut() {
        ensure_id(call);
    }
    let original = message.clone();
    let Some(calls) = message.get_mut("tool_calls").and_then(Value::as_array_mut) else {
        return Turn::Clean;
    };
    let mut denied = Vec::new();
    let mut allowed_ids = Vec::new();
    calls.retain(|call| {
        let name = call.pointer("/function/name").and_then(Value::as_str).unwrap_or("");
        let arguments = call
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .unwrap_or("");
        let verdict = classify(name, plan.visibility(name), plan.mode);
        match Denial::for_call(verdict, name, arguments) {
            None => {
                allowed_ids.push(call_id(call));
                true
            }
            Some(denial) => {
                tracing::info!(target: "codemode::denial", tool = name, code = %denial.code, "tool call denied");
                denied.push(DeniedCall {
                    call: call.clone(),
                    name: name.to_owned(),
                    denial,
                });
                false
            }
        }
    });
    if denied.is_empty() {
        return Turn::Clean;
    }
    if allowed_ids.is_empty() {
        return Turn::AllDenied {
            assistant: original,
            denied,
        };
    }
    Turn::Mixed {
        allowed_ids,
        denied,
    }
}

fn call_id(call: &Value) -> String {
    call.get("id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
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

/// A fresh tool-call id: 128 bits from the OS random source
/// ([`crate::tenant::unguessable`], the one source of minted ids).
pub fn mint_call_id() -> String {
    format!("call_cm{}", crate::tenant::unguessable())
}

/// When repairs ran out: the client gets the model's text without the denied calls.
pub fn give_up(completion: &mut Value, denied: &[DeniedCall]) {
    let Some(choice) = completion.pointer_mut("/choices/0") else {
        return;
    };
    if let Some(message) = choice.get_mut("message").and_then(Value::as_object_mut) {
        message.remove("tool_calls");
        let has_text = message
            .get("content")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.trim().is_empty());
        if !has_text {
            let names: Vec<&str> = denied.iter().map(|d| d.name.as_str()).collect();
            message.insert("content".into(), Value::String(give_up_text(&names)));
        }
    }
    choice["finish_reason"] = Value::String("stop".into());
}

/// The text a client sees when the model kept calling tools it cannot call.
pub fn give_up_text(names: &[&str]) -> String {
    format!(
        "[codemode-proxy] The model kept calling tools that cannot be called directly in this \
         mode ({}) and the repair limit (CODEMODE_MAX_REPAIRS) was reached, so no tool was run. \
         Ask again, or rephrase the task.",
        names.join(", ")
    )
}

/// Adds `round` (a `usage` object) into `total`, field by field.
pub fn add_usage(total: &mut Option<Value>, round: Option<&Value>) {
    let Some(round) = round.filter(|r| r.is_object()) else {
        return;
    };
    match total {
        None => *total = Some(round.clone()),
        Some(t) => add_numbers(t, round),
    }
}

fn add_numbers(total: &mut Value, add: &Value) {
    match (total, add) {
        (Value::Object(t), Value::Object(a)) => {
            for (k, v) in a {
                match t.get_mut(k) {
                    Some(slot) => add_numbers(slot, v),
                    None => {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (t @ Value::Number(_), Value::Number(a)) => {
            if let (Some(x), Some(y)) = (t.as_u64(), a.as_u64()) {
                *t = Value::from(x + y);
            } else if let (Some(x), Some(y)) = (t.as_f64(), a.as_f64()) {
                *t = json!(x + y);
            }
        }
        _ => {}
    }
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

    #[test]
    fn all_denied_keeps_the_original_turn_for_repair() {
        let mut c = completion(json!([call("a", "read", "{}")]));
        match judge_completion(&mut c, &plan(Mode::Code)) {
            Turn::AllDenied { assistant, denied } => {
                assert_eq!(assistant["tool_calls"][0]["function"]["name"], "read");
                assert_eq!(denied[0].tool_message()["tool_call_id"], "a");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn mixed_turn_withholds_only_denied_calls() {
        let mut c = completion(json!([
            call("a", "run_code", "{}"),
            call("b", "read", "{}")
        ]));
        match judge_completion(&mut c, &plan(Mode::Code)) {
            Turn::Mixed {
                allowed_ids,
                denied,
            } => {
                assert_eq!(allowed_ids, vec!["a"]);
                assert_eq!(denied[0].name, "read");
            }
            other => panic!("{other:?}"),
        }
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
        assert!(matches!(
            judge_completion(&mut c, &plan(Mode::Both)),
            Turn::Clean
        ));
    }

    #[test]
    fn calls_without_ids_get_one() {
        let mut c = completion(
            json!([{"type": "function", "function": {"name": "run_code", "arguments": "{}"}}]),
        );
        judge_completion(&mut c, &plan(Mode::Code));
        assert!(c["choices"][0]["message"]["tool_calls"][0]["id"]
            .as_str()
            .unwrap()
            .starts_with("call_cm"));
    }

    #[test]
    fn usage_sums_nested_fields() {
        let mut total = None;
        add_usage(
            &mut total,
            Some(&json!({"prompt_tokens": 10, "total_tokens": 12, "d": {"cached": 1}})),
        );
        add_usage(
            &mut total,
            Some(&json!({"prompt_tokens": 5, "total_tokens": 6, "d": {"cached": 2}})),
        );
        assert_eq!(
            total.unwrap(),
            json!({"prompt_tokens": 15, "total_tokens": 18, "d": {"cached": 3}})
        );
    }

    #[test]
    fn giving_up_strips_calls_and_explains() {
        let mut c = completion(json!([call("a", "read", "{}")]));
        let denied = match judge_completion(&mut c.clone(), &plan(Mode::Code)) {
            Turn::AllDenied { denied, .. } => denied,
            other => panic!("{other:?}"),
        };
        give_up(&mut c, &denied);
        assert!(c["choices"][0]["message"].get("tool_calls").is_none());
        assert_eq!(c["choices"][0]["finish_reason"], "stop");
        assert!(c["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .contains("read"));
    }
}
