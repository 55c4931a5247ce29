//! JSON wire helpers: an ordered top-level object whose values stay raw.
//!
//! The proxy touches a handful of fields of a request body; the rest
//! (and every message it does not change) is carried as the bytes the client
//! sent, so unknown fields pass through and nothing is re-printed needlessly.

use serde::de::DeserializeSeed;
use serde_json::value::RawValue;

mod append;
mod repeated;
mod single_reading;
mod top_level;
pub use append::{append_to_message, join_text};
pub use repeated::{camel, first_repeat, Keys, Repeat};
pub use single_reading::{parse_noting_repeats, repeats_no_key};
use top_level::{first_duplicate, FieldsSeed};

/// A JSON object with its keys in the client's order and its values unparsed.
#[derive(Clone, Debug, Default)]
pub struct RawObject {
    fields: Vec<(String, Box<RawValue>)>,
    /// The field whose array its reader keeps entry by entry
    /// ([`RawObject::parse_lending`]): its slot holds no value, and the
    /// object is written with the reader's entries in its place.
    lent: Option<usize>,
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

/// Writes one field's value into an object's text.
type WriteValue<'a> = dyn Fn(&mut Vec<u8>) + 'a;

/// A list's entries, each raw.
pub type Entries = Vec<Box<RawValue>>;

impl RawObject {
    /// Parses the top level of `bytes`, which must be a JSON object whose
    /// keys (compared after unescaping) are all distinct.
    pub fn parse(bytes: &[u8]) -> Result<Self, ParseError> {
        Ok(Self::parse_lending(bytes, None)?.0)
    }

    /// Parses the top level of `bytes` as [`RawObject::parse`] does, and,
    /// when the field `list` holds an array, that array into its entries,
    /// which are then the field's only copy: a request's history is most
    /// of its bytes, and a stream holds its request to its end. The object
    /// is written with the entries in the field's place
    /// ([`RawObject::to_vec_with_list`]); until the reader gives them back
    /// ([`RawObject::give_back`]), the field reads as absent. `None` when
    /// the field is absent or holds no array.
    pub fn parse_lending(
        bytes: &[u8],
        list: Option<&str>,
    ) -> Result<(RawObject, Option<Entries>), ParseError> {
        // One reading of the client's bytes: every field borrowed, the
        // list split into its entries as it is read.
        let mut reader = serde_json::Deserializer::from_slice(bytes);
        let borrowed = FieldsSeed { list }.deserialize(&mut reader)?;
        reader.end()?;
        if let Some(key) = first_duplicate(borrowed.fields.iter().map(|(k, _)| k.as_ref())) {
            return Err(ParseError::DuplicateKey(key));
        }
        if borrowed.other {
            // Not an array (a string `input`, `null`): its text is kept as
            // the object's, which the split reading did not keep.
            return Self::parse_lending(bytes, None);
        }
        let mut object = RawObject {
            fields: Vec::with_capacity(borrowed.fields.len()),
            lent: None,
        };
        for (key, value) in borrowed.fields {
            let value = match value {
                Some(value) => value.to_owned(),
                None => {
                    object.lent = Some(object.fields.len());
                    RawValue::NULL.to_owned()
                }
            };
            object.fields.push((key.into_owned(), value));
        }
        let entries = borrowed
            .entries
            .map(|entries| entries.into_iter().map(ToOwned::to_owned).collect());
        Ok((object, entries))
    }

    /// Puts the entries of the lent field back as its value: the reader
    /// keeps them no longer.
    pub fn give_back(&mut self, entries: &[Box<RawValue>]) {
        if let Some(at) = self.lent.take() {
            self.fields[at].1 = to_raw(entries);
        }
    }

    /// Where `key` stands, lent or not.
    fn position(&self, key: &str) -> Option<usize> {
        self.fields.iter().position(|(k, _)| k == key)
    }

    /// The raw value of `key`, if present (a lent field reads as absent).
    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.position(key)
            .filter(|at| self.lent != Some(*at))
            .map(|at| self.fields[at].1.as_ref())
    }

    /// Replaces `key` in place, or appends it when absent (a lent field
    /// is the object's again).
    pub fn set(&mut self, key: &str, value: Box<RawValue>) {
        match self.position(key) {
            Some(at) => {
                if self.lent == Some(at) {
                    self.lent = None;
                }
                self.fields[at].1 = value;
            }
            None => self.fields.push((key.to_owned(), value)),
        }
    }

    /// Removes `key`, if present.
    pub fn remove(&mut self, key: &str) {
        let Some(at) = self.position(key) else {
            return;
        };
        self.fields.remove(at);
        self.lent = match self.lent {
            Some(lent) if lent == at => None,
            Some(lent) if lent > at => Some(lent - 1),
            lent => lent,
        };
    }

    /// The first key repeated below the top level, in every field but
    /// `skip`, with keys told apart as `keys` says; under [`Keys::Proto`],
    /// two spellings of one top-level field as well (a key written twice
    /// alike is refused by [`RawObject::parse`]).
    /// The entries of the lent field, when there is one, are `list`.
    pub fn first_repeat(
        &self,
        keys: Keys,
        skip: &[&str],
        list: Option<&[Box<RawValue>]>,
    ) -> Option<Repeat> {
        let names = || self.fields.iter().map(|(k, _)| k.as_str());
        if keys == Keys::Proto {
            if let Some(repeat) = repeated::first_double_spelling(names()) {
                return Some(repeat);
            }
        }
        self.fields
            .iter()
            .enumerate()
            .filter(|(_, (k, _))| !skip.contains(&k.as_str()))
            .find_map(|(at, (k, v))| match (self.lent == Some(at), list) {
                (true, Some(list)) => repeated::first_repeat_in_entries(list, keys, k),
                (true, None) => None,
                (false, _) => first_repeat(v, keys, k),
            })
    }

    /// Serialises the object, with `key` set to `override_value` when
    /// given: in its place, or last when the object lacks it.
    pub fn to_vec_with(&self, key: &str, override_value: Option<&str>) -> Vec<u8> {
        match override_value {
            Some(text) => self.write(
                key,
                text.len(),
                Some(&|out| out.extend_from_slice(text.as_bytes())),
            ),
            None => self.write(key, 0, None),
        }
    }

    /// Serialises the object with `key` set to the array of `list` when
    /// given (a request's history, kept raw entry by entry), written in
    /// one buffer.
    pub fn to_vec_with_list(&self, key: &str, list: Option<&[Box<RawValue>]>) -> Vec<u8> {
        let Some(list) = list else {
            return self.to_vec();
        };
        let size = list.iter().map(|e| e.get().len() + 1).sum::<usize>() + 2;
        let write_list = |out: &mut Vec<u8>| {
            out.push(b'[');
            for (i, entry) in list.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(entry.get().as_bytes());
            }
            out.push(b']');
        };
        self.write(key, size, Some(&write_list))
    }

    /// The object's text, with `key`'s value written by `value` when given
    /// (in its place, or last when the object lacks it); `size` is about
    /// as long as that value.
    fn write(&self, key: &str, size: usize, value: Option<&WriteValue<'_>>) -> Vec<u8> {
        let fields: usize = self
            .fields
            .iter()
            .map(|(k, v)| k.len() + v.get().len() + 4)
            .sum();
        let mut out = Vec::with_capacity(fields + key.len() + size + 6);
        out.push(b'{');
        let mut first = true;
        let mut field = |out: &mut Vec<u8>, k: &str, write: &dyn Fn(&mut Vec<u8>)| {
            if !first {
                out.push(b',');
            }
            first = false;
            write_json_string(out, k);
            out.push(b':');
            write(out);
        };
        for (at, (k, v)) in self.fields.iter().enumerate() {
            match value {
                Some(write) if k == key => field(&mut out, k, write),
                // A lent field without its entries: `to_vec_with_list` is
                // its writer.
                _ if self.lent == Some(at) => {
                    field(&mut out, k, &|out| out.extend_from_slice(b"[]"))
                }
                _ => field(&mut out, k, &|out| {
                    out.extend_from_slice(v.get().as_bytes())
                }),
            }
        }
        if let Some(write) = value.filter(|_| self.position(key).is_none()) {
            field(&mut out, key, write);
        }
        out.push(b'}');
        out
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
    fn a_lent_list_is_held_once_and_written_back_in_its_place() {
        let body = br#"{"model":"m","messages":[{"role":"user"} , 2],"stream":true}"#;
        let (object, entries) = RawObject::parse_lending(body, Some("messages")).unwrap();
        let entries = entries.unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].get(), r#"{"role":"user"}"#);
        // The object keeps no copy: the field reads as absent.
        assert!(object.get("messages").is_none());
        assert_eq!(object.get("stream").unwrap().get(), "true");
        assert_eq!(
            object.to_vec_with_list("messages", Some(&entries)),
            br#"{"model":"m","messages":[{"role":"user"},2],"stream":true}"#.to_vec()
        );
        let mut more = entries.clone();
        more.push(to_raw("x"));
        assert_eq!(
            object.to_vec_with_list("messages", Some(&more)),
            br#"{"model":"m","messages":[{"role":"user"},2,"x"],"stream":true}"#.to_vec()
        );
    }

    #[test]
    fn an_object_serialised_is_its_text() {
        let body = br#"{"a":{"x" : [1, 2]},"\u0062":"t","list":[1]}"#;
        let (object, _) = RawObject::parse_lending(body, Some("list")).unwrap();
        assert_eq!(
            to_raw(&object).get(),
            String::from_utf8(object.to_vec()).unwrap()
        );
        assert_eq!(
            to_raw(&object).get(),
            r#"{"a":{"x" : [1, 2]},"b":"t","list":[]}"#
        );
    }

    #[test]
    fn only_an_array_is_lent() {
        for body in [
            &br#"{"input":"hello"}"#[..],
            br#"{"input":null}"#,
            br#"{"input":{"a":[1]}}"#,
            br#"{"other":[1]}"#,
        ] {
            let (object, entries) = RawObject::parse_lending(body, Some("input")).unwrap();
            assert!(entries.is_none(), "{}", String::from_utf8_lossy(body));
            assert_eq!(object.to_vec(), body.to_vec());
        }
        // No list asked for: nothing lent.
        let (object, entries) = RawObject::parse_lending(br#"{"input":[1]}"#, None).unwrap();
        assert!(entries.is_none());
        assert_eq!(object.get("input").unwrap().get(), "[1]");
    }

    #[test]
    fn a_lent_list_is_read_in_the_same_pass_as_the_rest_and_refused_with_it() {
        for bad in [
            &br#"{"messages":[1,]}"#[..],
            br#"{"messages":[1] "x":2}"#,
            br#"{"messages":[{"a":}]}"#,
            br#"{"messages":[1]} trailing"#,
            br#"[1]"#,
        ] {
            assert!(
                RawObject::parse_lending(bad, Some("messages")).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let (_, entries) =
            RawObject::parse_lending(br#" {"messages": [ ] } "#, Some("messages")).unwrap();
        assert_eq!(entries.unwrap().len(), 0);
    }

    #[test]
    fn a_lent_field_given_back_set_or_moved_by_a_removal_stays_in_place() {
        let body = br#"{"a":1,"input":[1, 2],"b":2}"#;
        let (mut object, entries) = RawObject::parse_lending(body, Some("input")).unwrap();
        let entries = entries.unwrap();
        object.remove("a");
        assert_eq!(
            object.to_vec_with_list("input", Some(&entries)),
            br#"{"input":[1,2],"b":2}"#.to_vec()
        );
        object.give_back(&entries);
        assert_eq!(object.get("input").unwrap().get(), "[1,2]");
        assert_eq!(object.to_vec(), br#"{"input":[1,2],"b":2}"#.to_vec());

        let (mut object, _) = RawObject::parse_lending(body, Some("input")).unwrap();
        object.set("input", to_raw("text"));
        assert_eq!(object.to_vec(), br#"{"a":1,"input":"text","b":2}"#.to_vec());
    }

    #[test]
    fn a_lent_list_keeps_the_duplicate_key_refusal_and_escaped_keys() {
        let err = RawObject::parse_lending(br#"{"messages":[],"messages":[1]}"#, Some("messages"))
            .unwrap_err();
        assert!(
            matches!(&err, ParseError::DuplicateKey(k) if k == "messages"),
            "{err:?}"
        );
        let (object, entries) =
            RawObject::parse_lending(br#"{"messages":[1],"x":2}"#, Some("messages")).unwrap();
        assert_eq!(entries.unwrap().len(), 1);
        assert!(object.get("messages").is_none());
        assert!(object.get("x").is_some());
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
