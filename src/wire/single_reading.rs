//! A JSON value parsed in one pass that also says whether any object in it
//! repeats a key.
//!
//! serde keeps the last of repeated keys; other readers keep the first. A
//! body the proxy judged by one reading may only go out as its own bytes
//! when no other reading exists: an answer with a repeated key anywhere is
//! written anew from the proxy's reading instead.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
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

/// The most keys an object may have for [`repeats_no_key`] to vouch for
/// it: keys are compared pairwise, which stays cheap only for objects of
/// the size answers have.
const MOST_KEYS_CHECKED: usize = 64;

/// Whether `bytes` is JSON in which no object repeats a key (compared
/// unescaped), found without building the value: keys are borrowed from
/// the input where they hold no escape. `false` as well for what does not
/// parse and for an object of more than [`MOST_KEYS_CHECKED`] keys; the
/// caller then reads the body the full way, which answers those.
pub fn repeats_no_key(bytes: &[u8]) -> bool {
    let keys = RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_slice(bytes);
    Scan(&keys).deserialize(&mut de).is_ok() && de.end().is_ok()
}

/// The keys of the objects being read, innermost last.
type OpenKeys<'de> = RefCell<Vec<Cow<'de, str>>>;

#[derive(Clone, Copy)]
struct Scan<'k, 'de>(&'k OpenKeys<'de>);

impl<'de> DeserializeSeed<'de> for Scan<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scan<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let start = self.0.borrow().len();
        while let Some(key) = map.next_key_seed(Key)? {
            {
                let mut keys = self.0.borrow_mut();
                let own = &keys[start..];
                if own.len() == MOST_KEYS_CHECKED || own.contains(&key) {
                    return Err(serde::de::Error::custom("a repeated key, or too many"));
                }
                keys.push(key);
            }
            map.next_value_seed(self)?;
        }
        self.0.borrow_mut().truncate(start);
        Ok(())
    }
}

/// A key, borrowed from the input unless it holds an escape.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_owned()))
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

    #[test]
    fn the_scan_finds_what_the_full_reading_finds() {
        for text in [
            r#"{"a": [1, -2, 3.5, "x\u0041", null, true, {"b": {}}], "c": {"d": 1}}"#,
            r#"{"a": 1, "a": 2}"#,
            r#"{"choices": [{"message": {"tool_calls": [], "tool_calls": []}}]}"#,
            r#"{"m": {"tool_calls": 1, "tool\u005fcalls": 2}}"#,
            r#"{"a": {"x": 1}, "b": {"x": 1}, "x": [{"x": 1}, {"x": 2}]}"#,
            r#"[{"a": 1}, {"a": 1, "b": {"a": 1, "a": 1}}]"#,
            r#"{}"#,
            r#"1"#,
        ] {
            let (_, repeated) = parse_noting_repeats(text.as_bytes()).unwrap();
            assert_eq!(repeats_no_key(text.as_bytes()), !repeated, "{text}");
        }
        // What it cannot vouch for, it does not.
        assert!(!repeats_no_key(b"{} x"));
        assert!(!repeats_no_key(br#"{"a": "#));
        let wide: Vec<String> = (0..=MOST_KEYS_CHECKED)
            .map(|i| format!("\"k{i}\": {i}"))
            .collect();
        assert!(!repeats_no_key(
            format!("{{{}}}", wide.join(",")).as_bytes()
        ));
        let fits = &wide[..MOST_KEYS_CHECKED];
        assert!(repeats_no_key(format!("{{{}}}", fits.join(",")).as_bytes()));
    }
}
