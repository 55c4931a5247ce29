//! JSON wire helpers: an ordered top-level object whose values stay raw.
//!
//! The proxy touches a handful of fields of a request body; the rest
//! (and every message it does not change) is carried as the bytes the client
//! sent, so unknown fields pass through and nothing is re-printed needlessly.

use std::collections::HashSet;
use std::fmt;

use serde::de::{Deserializer, Error as _, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

mod append;
mod repeated;
mod single_reading;
pub use append::{append_to_message, join_text};
pub use repeated::{camel, first_repeat, Keys, Repeat};
pub use single_reading::{parse_noting_repeats, repeats_no_key};

/// A JSON object with its keys in the client's order and its values unparsed.
#[derive(Clone, Debug, Default)]
pub struct RawObject {
    fields: Vec<(String, Box<RawValue>)>,
}

/// Why a body is not a usable top-level object.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Not JSON, or not a JSON object.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A key occurs twice at the top level. Readers disagree on which one
    /// counts (serde's first, most providers' last), so such a body has no
    /// single reading.
    #[error("the key `{0}` occurs more than once")]
    DuplicateKey(String),
}

impl RawObject {
    /// Parses the top level of `bytes`, which must be a JSON object whose
    /// keys (compared after unescaping) are all distinct.
    pub fn parse(bytes: &[u8]) -> Result<Self, ParseError> {
        let fields: Fields = serde_json::from_slice(bytes)?;
        match first_duplicate(&fields.0) {
            Some(key) => Err(ParseError::DuplicateKey(key)),
            None => Ok(RawObject { fields: fields.0 }),
        }
    }

    /// The raw value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_ref())
    }

    /// Replaces `key` in place, or appends it when absent.
    pub fn set(&mut self, key: &str, value: Box<RawValue>) {
        match self.fields.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.fields.push((key.to_owned(), value)),
        }
    }

    /// Removes `key`, if present.
    pub fn remove(&mut self, key: &str) {
        self.fields.retain(|(k, _)| k != key);
    }

    /// The first key repeated below the top level, in every field but
    /// `skip`, with keys told apart as `keys` says; under [`Keys::Proto`],
    /// two spellings of one top-level field as well (a key written twice
    /// alike is refused by [`RawObject::parse`]).
    pub fn first_repeat(&self, keys: Keys, skip: &[&str]) -> Option<Repeat> {
        let names = || self.fields.iter().map(|(k, _)| k.as_str());
        if keys == Keys::Proto {
            if let Some(repeat) = repeated::first_double_spelling(names()) {
                return Some(repeat);
            }
        }
        self.fields
            .iter()
            .filter(|(k, _)| !skip.contains(&k.as_str()))
            .find_map(|(k, v)| first_repeat(v, keys, k))
    }

    /// Serialises the object, with `key` set to `override_value` when
    /// given: in its place, or last when the object lacks it.
    pub fn to_vec_with(&self, key: &str, override_value: Option<&str>) -> Vec<u8> {
        let size: usize = self
            .fields
            .iter()
            .map(|(k, v)| k.len() + v.get().len() + 4)
            .sum();
        let mut out = Vec::with_capacity(size + override_value.map_or(0, str::len) + 2);
        out.push(b'{');
        let mut first = true;
        let mut field = |out: &mut Vec<u8>, k: &str, text: &str| {
            if !first {
                out.push(b',');
            }
            first = false;
            write_json_string(out, k);
            out.push(b':');
            out.extend_from_slice(text.as_bytes());
        };
        for (k, v) in &self.fields {
            let text = match override_value {
                Some(o) if k == key => o,
                _ => v.get(),
            };
            field(&mut out, k, text);
        }
        if let Some(o) = override_value.filter(|_| self.get(key).is_none()) {
            field(&mut out, key, o);
        }
        out.push(b'}');
        out
    }

    /// Serialises the object with `key` set to the array of `list` when
    /// given (a request's history, kept raw entry by entry).
    pub fn to_vec_with_list(&self, key: &str, list: Option<&[Box<RawValue>]>) -> Vec<u8> {
        match list {
            Some(list) => self.to_vec_with(key, Some(&raw_array(list.iter().map(AsRef::as_ref)))),
            None => self.to_vec(),
        }
    }

    /// Serialises the object as it stands.
    pub fn to_vec(&self) -> Vec<u8> {
        self.to_vec_with("", None)
    }

    /// Serialises the object as text. Its keys and raw values are text
    /// already, so the bytes are checked by the fast UTF-8 scan, not read
    /// again character by character (a lossy conversion cost 4% of a
    /// code-mode request's instructions on Claude Code's request).
    pub fn to_text(&self) -> String {
        String::from_utf8(self.to_vec())
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

/// A number as proto JSON reads one, and as lenient readers do: a JSON
/// number (`2`, `2.0`, `2e0`) or a string holding one (`"2"`); `None` for
/// anything else. A count the proxy decides on is read so, lest `"2"`
/// pass where `2` is refused.
pub fn lenient_number(value: &serde_json::Value) -> Option<f64> {
    match value {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Writes `s` as a JSON string literal.
pub fn write_json_string(out: &mut Vec<u8>, s: &str) {
    // Serialising a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Joins raw JSON values into the text of a JSON array.
pub fn raw_array<'a>(items: impl IntoIterator<Item = &'a RawValue>) -> String {
    let mut out = String::from("[");
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(item.get());
    }
    out.push(']');
    out
}

/// Turns a serialisable value into a raw JSON value.
pub fn to_raw<T: serde::Serialize + ?Sized>(value: &T) -> Box<RawValue> {
    // The values serialised here are serde_json values and plain structs,
    // which cannot fail; `null` keeps the function total all the same.
    serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// The top-level entries as they come, duplicates included.
struct Fields(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjVisitor;
        impl<'de> Visitor<'de> for ObjVisitor {
            type Value = Fields;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some((k, v)) = map.next_entry::<String, Box<RawValue>>()? {
                    fields.push((k, v));
                }
                Ok(Fields(fields))
            }
        }
        d.deserialize_map(ObjVisitor)
    }
}

/// The first key that occurs again, shortened for a message.
fn first_duplicate(fields: &[(String, Box<RawValue>)]) -> Option<String> {
    let mut seen = HashSet::with_capacity(fields.len());
    let key = fields
        .iter()
        .map(|(k, _)| k.as_str())
        .find(|k| !seen.insert(*k))?;
    const SHOWN: usize = 64;
    Some(match key.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}...", &key[..end]),
        None => key.to_owned(),
    })
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let fields = Fields::deserialize(d)?;
        match first_duplicate(&fields.0) {
            Some(key) => Err(D::Error::custom(ParseError::DuplicateKey(key))),
            None => Ok(RawObject { fields: fields.0 }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_and_order_survive_a_round_trip() {
        let body = br#"{"model":"m","x_vendor":{"a":[1,2]},"messages":[],"temperature":0.5}"#;
        let obj = RawObject::parse(body).unwrap();
        assert_eq!(obj.to_vec(), body.to_vec());
    }

    #[test]
    fn override_replaces_only_the_named_key() {
        let obj = RawObject::parse(br#"{"a":1,"b":2}"#).unwrap();
        assert_eq!(
            obj.to_vec_with("b", Some("[3]")),
            br#"{"a":1,"b":[3]}"#.to_vec()
        );
    }

    #[test]
    fn an_override_of_an_absent_key_goes_last() {
        let obj = RawObject::parse(br#"{"a":1}"#).unwrap();
        assert_eq!(
            obj.to_vec_with("b", Some("[3]")),
            br#"{"a":1,"b":[3]}"#.to_vec()
        );
        let empty = RawObject::parse(b"{}").unwrap();
        let list = [to_raw(&1), to_raw("x")];
        assert_eq!(
            empty.to_vec_with_list("input", Some(&list)),
            br#"{"input":[1,"x"]}"#.to_vec()
        );
        assert_eq!(empty.to_vec_with_list("input", None), b"{}".to_vec());
        assert_eq!(obj.to_vec_with("a", None), br#"{"a":1}"#.to_vec());
    }

    #[test]
    fn duplicate_keys_are_refused_by_name_even_when_escaped() {
        let err = RawObject::parse(br#"{"tools":[],"model":"m","tools":[1]}"#).unwrap_err();
        assert!(
            matches!(&err, ParseError::DuplicateKey(k) if k == "tools"),
            "{err:?}"
        );
        let err = RawObject::parse(br#"{"n":1,"\u006e":2}"#).unwrap_err();
        assert!(
            matches!(&err, ParseError::DuplicateKey(k) if k == "n"),
            "{err:?}"
        );
        // Nested objects are values, not the top level.
        assert!(RawObject::parse(br#"{"a":{"b":1,"b":2}}"#).is_ok());
        assert!(serde_json::from_str::<RawObject>(r#"{"a":1,"a":2}"#).is_err());
    }

    #[test]
    fn a_lenient_number_is_a_number_or_a_string_holding_one() {
        use serde_json::json;
        for v in [json!(2), json!(2.0), json!("2"), json!("2.0"), json!(" 2 ")] {
            assert_eq!(lenient_number(&v), Some(2.0), "{v}");
        }
        for v in [
            json!(null),
            json!("two"),
            json!([2]),
            json!({"n": 2}),
            json!(true),
        ] {
            assert_eq!(lenient_number(&v), None, "{v}");
        }
    }

    #[test]
    fn non_objects_are_rejected() {
        assert!(RawObject::parse(b"[1,2]").is_err());
        assert!(RawObject::parse(b"{\"a\":").is_err());
    }
}
