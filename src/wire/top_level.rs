//! How a request's top level is read and written through serde: its
//! fields borrowed from the client's bytes, the history's field split into
//! its entries in the same pass ([`RawObject::parse_lending`]), keys
//! checked for duplicates; and a [`RawObject`] written back as it stands.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{
    DeserializeSeed, Deserializer, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::{ParseError, RawObject};

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

/// The top-level entries borrowed from the text they were read from (a
/// key copied only when escaped), duplicates included; the list's field
/// (`None`) split into its entries.
pub(super) struct BorrowedFields<'a> {
    pub(super) fields: Vec<(Cow<'a, str>, Option<&'a RawValue>)>,
    pub(super) entries: Option<Vec<&'a RawValue>>,
    /// The list's field held something other than an array.
    pub(super) other: bool,
}

/// Reads a top level, splitting the field `list` into its entries.
pub(super) struct FieldsSeed<'k> {
    pub(super) list: Option<&'k str>,
}

impl<'de> DeserializeSeed<'de> for FieldsSeed<'_> {
    type Value = BorrowedFields<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FieldsSeed<'_> {
    type Value = BorrowedFields<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut read = BorrowedFields {
            fields: Vec::with_capacity(map.size_hint().unwrap_or(8)),
            entries: None,
            other: false,
        };
        while let Some(key) = map.next_key::<BorrowedKey<'de>>()? {
            if self.list == Some(key.0.as_ref()) {
                // A second one is refused with the duplicates.
                match map.next_value_seed(ListSeed)? {
                    Some(entries) => read.entries = read.entries.or(Some(entries)),
                    None => read.other = true,
                }
                read.fields.push((key.0, None));
            } else {
                read.fields.push((key.0, Some(map.next_value()?)));
            }
        }
        Ok(read)
    }
}

/// An array's entries, borrowed; `None` for any other value.
struct ListSeed;

impl<'de> DeserializeSeed<'de> for ListSeed {
    type Value = Option<Vec<&'de RawValue>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ListSeed {
    type Value = Option<Vec<&'de RawValue>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::with_capacity(seq.size_hint().unwrap_or(16));
        while let Some(entry) = seq.next_element()? {
            entries.push(entry);
        }
        Ok(Some(entries))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// A key as written, borrowed unless it holds an escape.
struct BorrowedKey<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for BorrowedKey<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = BorrowedKey<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Self::Value, E> {
                Ok(BorrowedKey(Cow::Borrowed(key)))
            }
            fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
                Ok(BorrowedKey(Cow::Owned(key.to_owned())))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// The first key that occurs again, shortened for a message.
pub(super) fn first_duplicate<'a>(keys: impl ExactSizeIterator<Item = &'a str>) -> Option<String> {
    let mut seen = HashSet::with_capacity(keys.len());
    let key = keys.into_iter().find(|k| !seen.insert(*k))?;
    const SHOWN: usize = 64;
    Some(match key.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}...", &key[..end]),
        None => key.to_owned(),
    })
}

/// Written as [`RawObject::to_vec`] writes it, each raw value as it is:
/// `serde_json::value::to_raw_value` of an object makes a raw value
/// without reading its text again.
impl serde::Serialize for RawObject {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.fields.len()))?;
        for (at, (k, v)) in self.fields.iter().enumerate() {
            match self.lent == Some(at) {
                true => map.serialize_entry(k, &[(); 0])?,
                false => map.serialize_entry(k, v)?,
            }
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let fields = Fields::deserialize(d)?;
        match first_duplicate(fields.0.iter().map(|(k, _)| k.as_str())) {
            Some(key) => Err(D::Error::custom(ParseError::DuplicateKey(key))),
            None => Ok(RawObject {
                fields: fields.0,
                lent: None,
            }),
        }
    }
}
