//! Parts of a Gemini turn: which are calls, how each is judged, and the
//! parts the proxy writes (a withheld call's answer).
//!
//! A `functionCall` part is a call the client executes. The judge fails
//! closed: a part holding a field not known to be the model's words, its
//! thinking or the provider's own work ([`SAFE_FIELDS`]) is judged as a
//! call, by that field's name (docs/security.md, "What passes").
//!
//! Calls may come without an `id` (Gemini 2.x): the proxy gives each one
//! ([`ensure_id`]), which the client sees and echoes in its
//! `functionResponse.id`; a client that echoes none is matched by name and
//! position ([`answered_ids`]).

use serde_json::{json, Map, Value};

use crate::classify::Verdict;
use crate::plan::ToolPlan;
use crate::runtime::output::{output_text, Field};
use crate::turn::shape;
use crate::turn::{fate, judge_names, mint_call_id, JudgedCall, Shape, Step, Unreadable};
use crate::wire::camel;

/// The fields of a part that are no call a client executes (camelCase;
/// snake_case spellings are read as their twins).
const SAFE_FIELDS: &[&str] = &[
    "text",
    "thought",
    "thoughtSignature",
    "inlineData",
    "fileData",
    "executableCode",
    "codeExecutionResult",
    "videoMetadata",
    "partMetadata",
    "mediaResolution",
];

/// The provider's own tools, as a `toolCall` or `toolResponse` part names
/// them in its `toolType` (Google Search, URL context, ... run by Google
/// inside the turn): their parts are no call a client executes.
const PROVIDER_TOOL_TYPES: &[&str] = &[
    "GOOGLE_SEARCH",
    "URL_CONTEXT",
    "GOOGLE_MAPS",
    "FILE_SEARCH",
    "CODE_EXECUTION",
];

/// Whether `value` is a `toolCall` or `toolResponse` of a tool the
/// provider runs.
fn is_provider_tool(value: &Value) -> bool {
    value
        .get("toolType")
        .or_else(|| value.get("tool_type"))
        .and_then(Value::as_str)
        .is_some_and(|t| PROVIDER_TOOL_TYPES.iter().any(|p| t.starts_with(p)))
}

/// Whether a field of a part is no call a client executes.
fn is_safe_field(key: &str, value: &Value) -> bool {
    is_safe_key(key)
        || (matches!(camel(key).as_ref(), "toolCall" | "toolResponse") && is_provider_tool(value))
}

/// Whether a field of a part is no call whatever its value.
pub fn is_safe_key(key: &str) -> bool {
    SAFE_FIELDS.contains(&camel(key).as_ref())
}

/// The names a client could read a call by off a part: each
/// `functionCall`'s (either spelling) and each field the proxy does not
/// know (a `toolCall` of a tool type it does not know among them); none for
/// a part that is no call.
pub fn call_names(part: &Map<String, Value>) -> Vec<&str> {
    part.iter()
        .filter_map(|(key, value)| {
            if camel(key) == "functionCall" {
                Some(value.get("name").and_then(Value::as_str).unwrap_or(""))
            } else {
                (!is_safe_field(key, value)).then_some(key.as_str())
            }
        })
        .collect()
}

/// The field of a part that makes it a call: `functionCall`, or the first
/// field the proxy does not know; `None` for a part that is no call.
pub fn call_field(part: &Map<String, Value>) -> Option<&str> {
    part.iter()
        .find(|(k, _)| camel(k) == "functionCall")
        .or_else(|| part.iter().find(|(k, v)| !is_safe_field(k, v)))
        .map(|(k, _)| k.as_str())
}

/// A part as a judge may read it (`crate::turn::shape`): an object,
/// whose `functionCall` (either spelling) is an object naming its tool
/// with a string, or `null` (then judged as a call without a name). `at`
/// is where the part stands, for the refusal.
pub fn check_part(part: &Value, at: &[Step]) -> Result<(), Unreadable> {
    let part = shape::entry(part, at)?;
    for (key, value) in part {
        if camel(key) != "functionCall" {
            continue;
        }
        // The spellings the SDKs read; another one is named as the first.
        let field = if key == "function_call" {
            "function_call"
        } else {
            "functionCall"
        };
        let call = shape::object(Some(value), &[Step::Key(field)]).map_err(|e| e.under(at))?;
        if let Some(call) = call {
            shape::name(call.get("name"), &[Step::Key(field), Step::Key("name")])
                .map_err(|e| e.under(at))?;
        }
    }
    Ok(())
}

/// Whether a part is judged as a call.
pub fn is_call_part(part: &Value) -> bool {
    part.as_object().is_some_and(|p| call_field(p).is_some())
}

/// The `functionCall` of a part, if it is one.
pub fn function_call(part: &Value) -> Option<&Map<String, Value>> {
    let p = part.as_object()?;
    p.get("functionCall")
        .or_else(|| p.get("function_call"))?
        .as_object()
}

/// Ids for calls that came without one: one unguessable base per answer
/// or client stream ([`mint_call_id`]), numbered, so a stream judged cut
/// anywhere gives its calls the same ids.
#[derive(Debug)]
pub struct CallIds {
    base: String,
    next: u32,
}

impl CallIds {
    /// Ids under a fresh base.
    pub fn new() -> CallIds {
        CallIds::under(mint_call_id())
    }

    /// Ids under `base`.
    pub fn under(base: String) -> CallIds {
        CallIds { base, next: 0 }
    }

    fn mint(&mut self) -> String {
        self.next += 1;
        format!("{}_{}", self.base, self.next)
    }
}

impl Default for CallIds {
    fn default() -> Self {
        CallIds::new()
    }
}

/// Gives a `functionCall` part without an id a minted one (the client
/// echoes it in its answer); an unknown call part is left as it came.
pub fn ensure_id(part: &mut Value, ids: &mut CallIds) -> Option<(&'static str, String)> {
    let p = part.as_object_mut()?;
    let key = if p.contains_key("functionCall") {
        "functionCall"
    } else {
        "function_call"
    };
    let Some(Value::Object(call)) = p.get_mut(key) else {
        return None;
    };
    if !call
        .get("id")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return None;
    }
    let id = ids.mint();
    call.insert("id".into(), Value::String(id.clone()));
    Some((key, id))
}

/// Judges one part; `None` for a part that is no call.
pub fn judge_part(part: &Value, plan: &ToolPlan) -> Option<JudgedCall> {
    let obj = part.as_object()?;
    let field = call_field(obj)?;
    let (arguments, id) = match function_call(part) {
        Some(call) => (
            match call.get("args") {
                None | Some(Value::Null) => "{}".to_owned(),
                Some(v) => v.to_string(),
            },
            call.get("id").and_then(Value::as_str).unwrap_or(""),
        ),
        // A part of a kind the proxy does not know: its field's value.
        None => (
            obj.get(field).map_or_else(String::new, Value::to_string),
            "",
        ),
    };
    // Every name a client could read the part by is judged: a call beside
    // another call, or beside a field no one here knows, is denied by the
    // first name the rule denies.
    let (name, verdict) = judge_names(&call_names(obj), plan)
        .map(|(n, v)| (n.to_owned(), v))
        .unwrap_or_else(|| (String::new(), nameless(plan)));
    Some(JudgedCall {
        id: id.to_owned(),
        fate: fate(verdict, &name, &arguments, plan),
        name,
        arguments,
        shape: Shape::Function,
        raw: Some(obj.clone()),
    })
}

fn nameless(plan: &ToolPlan) -> Verdict {
    crate::classify::classify("", plan.visibility(""), plan.mode)
}

/// The `functionResponse` part answering a withheld call with `content`
/// (an error whose text starts with the denial's code). It names the call
/// by the id the model gave it; a call the model sent without one is
/// answered without one (by name and place), as the model's turn is
/// replayed without the id the proxy gave it for the client.
pub fn answer_part(call: &JudgedCall, content: &str) -> Value {
    let mut response = Map::new();
    let sent_id = |raw: &Map<String, Value>| {
        raw.get("functionCall")
            .or_else(|| raw.get("function_call"))
            .and_then(|c| c.get("id"))
            .and_then(Value::as_str)
            .is_some_and(|id| !id.is_empty())
    };
    if !call.id.is_empty() && call.raw.as_ref().is_none_or(sent_id) {
        response.insert("id".into(), json!(call.id));
    }
    response.insert("name".into(), json!(call.name));
    response.insert("response".into(), json!({"error": content}));
    json!({ "functionResponse": response })
}

/// A `functionResponse` part answering a program's call `id` with its
/// result; `None` for a call the model sent without an id (answered by
/// name and place).
pub fn result_part(id: Option<&str>, name: &str, result: &str, error: bool) -> Value {
    let key = if error { "error" } else { "output" };
    match id {
        Some(id) => {
            json!({"functionResponse": {"id": id, "name": name, "response": { key: result }}})
        }
        None => json!({"functionResponse": {"name": name, "response": { key: result }}}),
    }
}

/// The call's part as the model sent it.
pub fn raw_part(call: &JudgedCall) -> Value {
    call.raw.clone().map_or(Value::Null, Value::Object)
}

/// The text of a content's text parts (thoughts left out).
pub fn text_of(parts: &[Value]) -> String {
    parts
        .iter()
        .filter(|p| p.get("thought").and_then(Value::as_bool) != Some(true))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect()
}

/// The ids of a model content's `functionCall` parts and their names, in
/// order (an id-less call: `""`).
pub fn called(parts: &[Value]) -> Vec<(String, String)> {
    parts
        .iter()
        .filter_map(function_call)
        .map(|c| {
            (
                c.get("id").and_then(Value::as_str).unwrap_or("").to_owned(),
                c.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            )
        })
        .collect()
}

/// The `functionResponse` of a part, if it is one.
pub fn function_response(part: &Value) -> Option<&Map<String, Value>> {
    let p = part.as_object()?;
    p.get("functionResponse")
        .or_else(|| p.get("function_response"))?
        .as_object()
}

/// The id each `functionResponse` of `answers` answers, `calls` being the
/// model turn before it ([`called`]): its own `id` when that names a call
/// of the turn, else the call of the same name at the same place among
/// that name's answers (a client that echoes no id, or mints its own);
/// `None` for one that answers no call of the turn.
pub fn answered_ids(calls: &[(String, String)], answers: &[Value]) -> Vec<Option<String>> {
    let mut seen: std::collections::HashMap<&str, usize> = Default::default();
    answers
        .iter()
        .filter_map(function_response)
        .map(|r| {
            let name = r.get("name").and_then(Value::as_str).unwrap_or("");
            let nth = seen.entry(name).or_insert(0);
            let at = *nth;
            *nth += 1;
            if let Some(id) = r.get("id").and_then(Value::as_str) {
                if calls.iter().any(|(c, _)| c == id) {
                    return Some(id.to_owned());
                }
            }
            calls
                .iter()
                .filter(|(_, n)| n == name)
                .nth(at)
                .map(|(id, _)| id.clone())
                .filter(|id| !id.is_empty())
        })
        .collect()
}

/// A `functionResponse`'s `response` as a program reads it, answering a
/// call of `called`: the output out of the wrapper its client put it in
/// (`{output}`, `{result}`, `{error}`, `{name, content}`, ...: the table
/// in [`crate::runtime::output`]), else its JSON.
pub fn response_text(response: &Map<String, Value>, called: &str) -> String {
    output_text(Field::GeminiResponse(called), response.get("response"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_call_part_is_a_call_and_unknown_fields_are_judged() {
        let call = json!({"functionCall": {"name": "read_file", "args": {"path": "a"}},
                          "thoughtSignature": "sig"});
        assert!(is_call_part(&call));
        assert!(!is_call_part(
            &json!({"text": "hi", "thought_signature": "s"})
        ));
        assert!(!is_call_part(&json!({"thought": true, "text": "..."})));
        assert!(is_call_part(&json!({"toolCall": {"name": "x"}})));
        assert!(is_call_part(
            &json!({"toolCall": {"toolType": "LOCAL_SHELL"}})
        ));
        assert!(!is_call_part(
            &json!({"toolCall": {"toolType": "GOOGLE_SEARCH_WEB",
            "args": {"queries": ["q"]}}, "thoughtSignature": "s"})
        ));
        assert!(!is_call_part(
            &json!({"toolResponse": {"toolType": "URL_CONTEXT"}})
        ));
        let mut ids = CallIds::new();
        let mut minted = call.clone();
        ensure_id(&mut minted, &mut ids);
        let id = minted["functionCall"]["id"].as_str().unwrap();
        assert!(id.starts_with("call_") && id.ends_with("_1"), "{id}");
        let mut kept = json!({"functionCall": {"name": "a", "id": "x1"}});
        ensure_id(&mut kept, &mut ids);
        assert_eq!(kept["functionCall"]["id"], "x1");
    }

    #[test]
    fn answers_without_ids_are_matched_by_name_and_place() {
        let calls = vec![
            ("c1".to_owned(), "read".to_owned()),
            ("c2".to_owned(), "read".to_owned()),
            ("c3".to_owned(), "write".to_owned()),
        ];
        let answers = [
            json!({"functionResponse": {"name": "write", "response": {}}}),
            json!({"functionResponse": {"name": "read", "id": "read_17_0", "response": {}}}),
            json!({"functionResponse": {"name": "read", "id": "c2", "response": {}}}),
            json!({"functionResponse": {"name": "bash", "response": {}}}),
        ];
        assert_eq!(
            answered_ids(&calls, &answers),
            [
                Some("c3".to_owned()),
                Some("c1".to_owned()),
                Some("c2".to_owned()),
                None
            ]
        );
    }
}
