//! A JSON value parsed in one pass that also says whether any object in it
//! repeats a key.
//!
//! serde keeps the last of repeated keys; other readers keep the first. A
//! body the proxy judged by one reading may only go out as its own bytes
//! when no other reading exists: an answer with a repeated key anywhere is
//! written anew from the proxy's reading instead.

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Parses `bytes` as serde_json does (repeated keys: the last one counts),
/// and says whether some object repeated a key (compared unescaped).
pub fn parse_noting_repeats(bytes: &[u8]) -> serde_json::Result<(Value, bool)> {
    let repeated = Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Seed(&repeated).deserialize(&mut de)?;
    de.end()?;
    Ok((value, repeated.get()))
}

#[derive(Clone, Copy)]
struct Seed<'a>(&'a Cell<bool>);

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(v) = seq.next_element_seed(self)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(self)?;
            if out.insert(key, value).is_some() {
                self.0.set(true);
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn repeats(text: &str) -> bool {
        parse_noting_repeats(text.as_bytes()).unwrap().1
    }

    #[test]
    fn it_reads_as_serde_does_and_notes_a_repeated_key_at_any_depth() {
        let text = r#"{"a": [1, -2, 3.5, "x\u0041", null, true, {"b": {}}], "c": {"d": 1}}"#;
        let (v, repeated) = parse_noting_repeats(text.as_bytes()).unwrap();
        assert_eq!(v, serde_json::from_str::<Value>(text).unwrap());
        assert!(!repeated);
        assert!(repeats(r#"{"a": 1, "a": 2}"#));
        assert!(repeats(
            r#"{"choices": [{"message": {"tool_calls": [], "tool_calls": []}}]}"#
        ));
        // Compared unescaped: `tool\u005fcalls` is `tool_calls`.
        assert!(repeats(r#"{"m": {"tool_calls": 1, "tool\u005fcalls": 2}}"#));
        // The last one counts, as serde reads it.
        let (v, _) = parse_noting_repeats(br#"{"a": 1, "a": 2}"#).unwrap();
        assert_eq!(v, json!({"a": 2}));
        assert!(parse_noting_repeats(b"{} x").is_err());
    }
}
