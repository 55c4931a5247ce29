//! A streamed message rebuilt from its deltas, every field kept.
//!
//! Providers put fields on the model's turn that they require back when the
//! turn is replayed (DeepSeek's `reasoning_content`, Gemini's
//! `extra_content.google.thought_signature` on a call, OpenRouter's
//! `reasoning_details`). The proxy replays the model's own turn after a
//! program or a repair, so it keeps every field, merged the way the OpenAI
//! SDKs merge deltas: strings concatenate, objects merge key by key, lists of
//! objects merge entry by entry on their `index`, lists of scalars extend.

use serde_json::{Map, Value};

/// Keys a provider may repeat on every delta whose value is the same each
/// time: the later copies replace, never extend, the first.
fn replaces(key: &str) -> bool {
    matches!(key, "index" | "type" | "role" | "id")
}

/// Merges `delta` into `acc`.
pub fn accumulate(acc: &mut Map<String, Value>, delta: &Map<String, Value>) {
    accumulate_except(acc, delta, &[]);
}

/// Merges `delta` into `acc`, but for the keys in `skip`.
pub fn accumulate_except(acc: &mut Map<String, Value>, delta: &Map<String, Value>, skip: &[&str]) {
    for (key, value) in delta {
        if skip.contains(&key.as_str()) {
            continue;
        }
        match acc.get_mut(key) {
            None => {
                acc.insert(key.clone(), value.clone());
            }
            Some(slot) => merge(slot, key, value),
        }
    }
}

fn merge(slot: &mut Value, key: &str, value: &Value) {
    if slot.is_null() || replaces(key) {
        if !(value.is_null() && replaces(key)) {
            *slot = value.clone();
        }
        return;
    }
    match (slot, value) {
        (Value::String(acc), Value::String(more)) => acc.push_str(more),
        (Value::Object(acc), Value::Object(more)) => accumulate(acc, more),
        (Value::Array(acc), Value::Array(more)) => merge_list(acc, more),
        (Value::Number(acc), Value::Number(more)) => {
            if let (Some(a), Some(b)) = (acc.as_i64(), more.as_i64()) {
                *acc = a.saturating_add(b).into();
            } else if let Some(n) = more
                .as_f64()
                .zip(acc.as_f64())
                .and_then(|(b, a)| serde_json::Number::from_f64(a + b))
            {
                *acc = n;
            }
        }
        // A null continues nothing; any other change of kind replaces.
        (_, Value::Null) => {}
        (slot, value) => *slot = value.clone(),
    }
}

fn merge_list(acc: &mut Vec<Value>, more: &[Value]) {
    if acc.iter().all(|v| !v.is_object()) {
        acc.extend(more.iter().cloned());
        return;
    }
    for entry in more {
        let index = entry
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok());
        match (index, entry) {
            (Some(i), Value::Object(fields)) if i < acc.len() => match &mut acc[i] {
                Value::Object(target) => accumulate(target, fields),
                other => *other = entry.clone(),
            },
            _ => acc.push(entry.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merged(deltas: &[Value]) -> Value {
        let mut acc = Map::new();
        for d in deltas {
            accumulate(&mut acc, d.as_object().unwrap());
        }
        Value::Object(acc)
    }

    #[test]
    fn strings_concatenate_and_repeated_keys_replace() {
        let m = merged(&[
            json!({"role": "assistant", "content": "", "refusal": null}),
            json!({"role": "assistant", "reasoning_content": "I should "}),
            json!({"reasoning_content": "read both."}),
            json!({"content": "Let me "}),
            json!({"content": "run it."}),
        ]);
        assert_eq!(
            m,
            json!({"role": "assistant", "content": "Let me run it.", "refusal": null,
                   "reasoning_content": "I should read both."})
        );
    }

    #[test]
    fn lists_of_objects_merge_on_their_index() {
        let m = merged(&[
            json!({"reasoning_details": [{"index": 0, "type": "reasoning.text", "text": "a"}]}),
            json!({"reasoning_details": [{"index": 0, "text": "b", "signature": "s"}]}),
            json!({"reasoning_details": [{"index": 1, "type": "reasoning.encrypted", "data": "x"}]}),
        ]);
        assert_eq!(
            m["reasoning_details"],
            json!([{"index": 0, "type": "reasoning.text", "text": "ab", "signature": "s"},
                   {"index": 1, "type": "reasoning.encrypted", "data": "x"}])
        );
    }

    #[test]
    fn a_call_keeps_its_provider_fields() {
        let m = merged(&[
            json!({"index": 0, "id": "c1", "type": "function",
                   "function": {"name": "run_code", "arguments": ""},
                   "extra_content": {"google": {"thought_signature": "sig"}}}),
            json!({"index": 0, "id": "c1", "function": {"arguments": "{\"co"}}),
            json!({"index": 0, "function": {"arguments": "de\":1}"}}),
        ]);
        assert_eq!(m["id"], "c1");
        assert_eq!(m["function"]["arguments"], "{\"code\":1}");
        assert_eq!(m["extra_content"]["google"]["thought_signature"], "sig");
    }

    #[test]
    fn scalar_lists_extend_and_nulls_continue_nothing() {
        let m = merged(&[
            json!({"tags": ["a"], "content": "x"}),
            json!({"tags": ["b"], "content": null}),
        ]);
        assert_eq!(m, json!({"tags": ["a", "b"], "content": "x"}));
    }
}
