//! The lenient client: JSON read as the laxest client reads it, and the
//! calls it finds there.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{json, Map, Value};

use super::dialects::Api;

/// JSON as a lenient client reads it: of a repeated key, the first.
pub fn first_wins(text: &str) -> Option<Value> {
    struct First;
    impl<'de> DeserializeSeed<'de> for First {
        type Value = Value;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for First {
        type Value = Value;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(json!(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(json!(v))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
            Ok(json!(v))
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            Ok(Value::String(v.to_owned()))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut out = Vec::new();
            while let Some(v) = seq.next_element_seed(First)? {
                out.push(v);
            }
            Ok(Value::Array(out))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut out = Map::new();
            while let Some(key) = map.next_key::<String>()? {
                let value = map.next_value_seed(First)?;
                out.entry(key).or_insert(value);
            }
            Ok(Value::Object(out))
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let value = First.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(value)
}

/// A list as a lenient client reads one: a list, or an object keyed "0",
/// "1", ...
fn list(value: Option<&Value>) -> Vec<&Value> {
    match value {
        Some(Value::Array(entries)) => entries.iter().collect(),
        Some(Value::Object(keyed)) => (0..)
            .map_while(|i: usize| keyed.get(&i.to_string()))
            .collect(),
        _ => Vec::new(),
    }
}

/// An object as a lenient client reads one: an object, or a list's first
/// entry.
fn obj(value: Option<&Value>) -> Option<&Map<String, Value>> {
    match value? {
        Value::Object(fields) => Some(fields),
        Value::Array(entries) => entries.first()?.as_object(),
        _ => None,
    }
}

/// A name as JavaScript looks a tool up by it.
fn name(value: &Value) -> Value {
    match value {
        Value::Array(parts) => {
            let parts: Vec<String> = parts
                .iter()
                .map(|p| match name(p) {
                    Value::String(s) => s,
                    _ => String::new(),
                })
                .collect();
            Value::String(parts.join(","))
        }
        Value::Number(n) => Value::String(n.to_string()),
        Value::Bool(b) => Value::String(b.to_string()),
        Value::Object(_) => Value::String("[object Object]".into()),
        other => other.clone(),
    }
}

/// `fields` with each of `keys` read as a name.
fn named(fields: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    let mut out = fields.clone();
    for key in keys {
        if let Some(v) = out.get_mut(*key) {
            *v = name(v);
        }
    }
    out
}

/// The calls a lenient client reads off an answer or event, each as a
/// one-call answer of its dialect: those of the turn (choice or candidate
/// 0; every item or block) and those of the rest.
pub fn calls(api: Api, answer: &Value) -> (Vec<Value>, Vec<Value>) {
    let (mut turn, mut rest) = (Vec::new(), Vec::new());
    match api {
        Api::Chat => {
            for (n, choice) in list(answer.get("choices")).into_iter().enumerate() {
                let out = if n == 0 { &mut turn } else { &mut rest };
                let Some(choice) = obj(Some(choice)) else {
                    continue;
                };
                for part in ["message", "delta"] {
                    let Some(message) = obj(choice.get(part)) else {
                        continue;
                    };
                    for call in list(message.get("tool_calls")) {
                        let Some(call) = obj(Some(call)) else {
                            continue;
                        };
                        let mut call = call.clone();
                        for body in ["function", "custom"] {
                            match obj(call.get(body)).map(|b| named(b, &["name"])) {
                                Some(b) => call.insert(body.into(), Value::Object(b)),
                                None => call.remove(body),
                            };
                        }
                        out.push(
                            json!({"choices": [{"index": 0, "message": {"tool_calls": [call]}}]}),
                        );
                    }
                    if let Some(fc) = obj(message.get("function_call")) {
                        let fc = named(fc, &["name"]);
                        out.push(
                            json!({"choices": [{"index": 0, "message": {"function_call": fc}}]}),
                        );
                    }
                }
            }
        }
        Api::Responses => {
            let items = list(answer.get("output"))
                .into_iter()
                .chain(answer.get("item"))
                .chain(
                    obj(answer.get("response")).map_or_else(Vec::new, |r| list(r.get("output"))),
                );
            for item in items.filter_map(|i| obj(Some(i))) {
                let item = Value::Object(named(item, &["name", "namespace"]));
                if crate::responses::items::is_judged_item(&item) {
                    turn.push(json!({"output": [item]}));
                }
            }
        }
        Api::Messages => {
            let blocks = list(answer.get("content"))
                .into_iter()
                .chain(answer.get("content_block"))
                .chain(
                    obj(answer.get("message")).map_or_else(Vec::new, |m| list(m.get("content"))),
                );
            for block in blocks.filter_map(|b| obj(Some(b))) {
                let block = Value::Object(named(block, &["name"]));
                if crate::messages::items::is_call_block(&block) {
                    turn.push(json!({"content": [block]}));
                }
            }
        }
        Api::Gemini => {
            for (n, candidate) in list(answer.get("candidates")).into_iter().enumerate() {
                let out = if n == 0 { &mut turn } else { &mut rest };
                let content = obj(Some(candidate)).and_then(|c| obj(c.get("content")));
                let parts = content.map_or_else(Vec::new, |c| list(c.get("parts")));
                for part in parts.into_iter().filter_map(|p| obj(Some(p))) {
                    let mut part = part.clone();
                    for key in ["functionCall", "function_call"] {
                        if let Some(call) = obj(part.get(key)).map(|c| named(c, &["name"])) {
                            part.insert(key.into(), Value::Object(call));
                        }
                    }
                    let part = Value::Object(part);
                    if crate::gemini::parts::is_call_part(&part) {
                        out.push(json!({"candidates": [{"content": {"parts": [part]}}]}));
                    }
                }
            }
        }
        Api::Interactions => {
            let steps = list(answer.get("steps"))
                .into_iter()
                .chain(answer.get("step"))
                .chain(answer.get("delta"))
                .chain(
                    obj(answer.get("interaction")).map_or_else(Vec::new, |i| list(i.get("steps"))),
                );
            for step in steps.filter_map(|s| obj(Some(s))) {
                let step = Value::Object(named(step, &["name"]));
                if crate::interactions::steps::is_judged_step(&step) && !is_safe_delta(&step) {
                    turn.push(json!({"steps": [step]}));
                }
            }
        }
    }
    (turn, rest)
}

/// A delta the Interactions stream judge reads as a piece of its step,
/// not as a step of its own (a client reads it so too).
fn is_safe_delta(step: &Value) -> bool {
    matches!(
        step.get("type").and_then(Value::as_str),
        Some("text" | "arguments_delta" | "thought_signature" | "thought_summary")
    )
}
