//! Quiet answers: a whole answer with nothing to judge, found without
//! building its tree.
//!
//! Most answers are text. For those the full path (parse into a `Value`,
//! judge, no edits, send the provider's bytes) spends its time building a
//! tree only to find no call in it. A dialect's probe reads the answer
//! into a few borrowed fields instead, and says "quiet" only for shapes
//! whose judgement it can tell without a tree: no call-bearing entry of
//! any kind, nothing the judge would edit, no key repeated anywhere, an
//! object at every place the judge expects one. Anything else (a call, a
//! shape it does not know, an unusual spelling) is not quiet and takes
//! the full path, which answers it. The property test in
//! `src/test_support/unchanged_props.rs` holds each probe to the judge:
//! quiet means the judge finds no call and asks no edit.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use crate::wire::repeats_no_key;

/// What the driver needs of a quiet answer: its usage, as the full path
/// reads it (the value at the dialect's usage key, when present).
#[derive(Debug, PartialEq)]
pub struct Quiet {
    pub usage: Option<Value>,
}

/// Reads `body` as `T` when it is a JSON object repeating no key anywhere.
pub(crate) fn probe<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Option<T> {
    let Obj(probe) = serde_json::from_slice::<Obj<T>>(body).ok()?;
    repeats_no_key(body).then_some(probe)
}

/// A field as the judge's `get` sees it: absent, or present with a value
/// of the expected shape (a value of any other shape, `null` included,
/// fails the probe).
#[derive(Debug, Default)]
pub(crate) enum Field<T> {
    #[default]
    Absent,
    Present(T),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Field::Present)
    }
}

impl Field<Value> {
    /// The usage as the full path reads it.
    pub(crate) fn usage(self) -> Quiet {
        Quiet {
            usage: match self {
                Field::Absent => None,
                Field::Present(v) => Some(v),
            },
        }
    }
}

/// A struct read from a JSON object only: serde's derive would also take
/// an array of its fields in order, which no judge reads as an object.
#[derive(Debug)]
pub(crate) struct Obj<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Only<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Only<T> {
            type Value = Obj<T>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(Obj)
            }
        }
        d.deserialize_map(Only(PhantomData))
    }
}

/// A field that must be absent or `null` (or a list of what must not be
/// there, when empty): anything else in it fails the probe.
#[derive(Debug)]
pub(crate) enum Nothing {}

impl<'de> Deserialize<'de> for Nothing {
    fn deserialize<D: Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom(
            "a value where a quiet answer has none",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(dead_code)] // `b` is read for its shape
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        a: Field<Obj<Inner>>,
        #[serde(default)]
        b: Option<Nothing>,
        #[serde(default)]
        usage: Field<Value>,
    }

    #[derive(Deserialize)]
    struct Inner {
        #[serde(default)]
        n: Field<u64>,
    }

    fn quiet(text: &str) -> Option<Quiet> {
        let p: Probe = probe(text.as_bytes())?;
        if let Field::Present(Obj(Inner {
            n: Field::Present(n),
        })) = p.a
        {
            assert_eq!(n, 1);
        }
        Some(p.usage.usage())
    }

    #[test]
    fn a_probe_takes_only_objects_fields_of_their_shape_and_single_readings() {
        assert_eq!(quiet("{}"), Some(Quiet { usage: None }));
        assert_eq!(
            quiet(r#"{"usage": null, "x": [1]}"#),
            Some(Quiet {
                usage: Some(Value::Null)
            })
        );
        assert!(quiet(r#"{"a": {"n": 1}, "b": null}"#).is_some());
        // An array where an object goes, at the top or inside.
        assert!(quiet("[]").is_none());
        assert!(quiet(r#"[{"n": 1}]"#).is_none());
        assert!(quiet(r#"{"a": [1]}"#).is_none());
        // null where a shape is expected, anything where nothing is.
        assert!(quiet(r#"{"a": null}"#).is_none());
        assert!(quiet(r#"{"b": 0}"#).is_none());
        assert!(quiet(r#"{"b": {}}"#).is_none());
        // A repeated key anywhere, a known one or not.
        assert!(quiet(r#"{"x": {"y": 1, "y": 2}}"#).is_none());
        assert!(quiet(r#"{"a": {"n": 1}, "a": {"n": 1}}"#).is_none());
        assert!(quiet(r#"{} trailing"#).is_none());
    }
}
