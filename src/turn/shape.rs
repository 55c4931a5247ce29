//! The shapes a judge reads where a call could stand, and what it says of
//! one it cannot read.
//!
//! Clients read calls more leniently than the API documents them:
//! `@google/genai` takes an object keyed `"0"` for the first candidate,
//! and a JavaScript client looks a tool up by a name that is a list
//! (`tools[["read"]]` is `tools.read`). A judge that skipped such a shape
//! would let its call through unjudged; one that edited it away would
//! guess at what the provider meant. So where a call could stand a judge
//! reads only the shape the API documents (a list, an object, a name that
//! is a string), and `null` as absent where the field is optional (the
//! SDKs read it so: `@google/genai` 2.32, `openai` 6.49 and
//! `@anthropic-ai/sdk` 1.17 find no call under a `null` `candidates`,
//! `content`, `parts`, `tool_calls` or `content`); anything else is
//! [`Unreadable`], and the answer is refused, never forwarded. The JSON
//! driver answers 502 `upstream_invalid_response`; the stream body ends
//! the stream with the dialect's error event, and nothing of the event
//! that held the shape goes out. A repeated key is no such shape: the
//! answer or event goes out written anew from the one reading judged
//! (`crate::wire::parse_noting_repeats`), so no other reading reaches the
//! client.

use std::fmt;

use serde_json::{Map, Value};

use super::Step;
use crate::error::ProxyError;

/// A shape a judge cannot read, where a call could stand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable {
    /// Where, from the top of the answer or event.
    pub at: Vec<Step>,
    /// What was there (`"an object"`).
    pub found: &'static str,
    /// What a judge reads there (`"a list"`).
    pub wanted: &'static str,
}

impl Unreadable {
    /// `value`, at `at`, where a judge reads `wanted`.
    pub fn new(at: &[Step], value: &Value, wanted: &'static str) -> Unreadable {
        Unreadable {
            at: at.to_vec(),
            found: kind(value),
            wanted,
        }
    }

    /// A stream event whose data is no JSON object: `parsed` is what it
    /// read as, `None` for data serde reads no JSON out of (which a
    /// lenient reader may: Python's `json` takes `NaN`).
    pub fn event(parsed: Option<&Value>) -> Unreadable {
        Unreadable {
            at: Vec::new(),
            found: parsed.map_or("no JSON", kind),
            wanted: "an object",
        }
    }

    /// A stream event's data, read as the object it must be.
    pub fn event_object(
        parsed: serde_json::Result<Value>,
    ) -> Result<serde_json::Map<String, Value>, Unreadable> {
        match parsed {
            Ok(Value::Object(event)) => Ok(event),
            Ok(other) => Err(Unreadable::event(Some(&other))),
            Err(_) => Err(Unreadable::event(None)),
        }
    }

    /// The same shape, read from further up: `at` goes before its path
    /// (a part checked on its own, then named in its answer).
    pub fn under(mut self, at: &[Step]) -> Unreadable {
        self.at.splice(0..0, at.iter().cloned());
        self
    }

    /// The refusal a client gets: `what` (the dialect's answer, or "an
    /// event of the stream") cannot be judged, and why.
    pub fn refusal(&self, what: &str) -> ProxyError {
        ProxyError::UpstreamInvalid(format!("{what} cannot be judged: {self}"))
    }
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.at.is_empty() {
            f.write_str("it")?;
        } else {
            f.write_str("`")?;
            for (i, step) in self.at.iter().enumerate() {
                match step {
                    Step::Key(key) if i == 0 => f.write_str(key)?,
                    Step::Key(key) => write!(f, ".{key}")?,
                    Step::Index(n) => write!(f, "[{n}]")?,
                }
            }
            f.write_str("`")?;
        }
        write!(f, " is {}, not {}", self.found, self.wanted)
    }
}

impl std::error::Error for Unreadable {}

/// A JSON value's kind, as a message names it.
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// An optional field that holds a list (of choices, candidates, parts,
/// calls): its entries; none when it is absent or `null`.
pub fn list<'a>(field: Option<&'a Value>, at: &[Step]) -> Result<&'a [Value], Unreadable> {
    match field {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(entries)) => Ok(entries),
        Some(other) => Err(Unreadable::new(at, other, "a list")),
    }
}

/// An optional field that holds an object (a message, a delta, a call's
/// body): `None` when it is absent or `null`.
pub fn object<'a>(
    field: Option<&'a Value>,
    at: &[Step],
) -> Result<Option<&'a Map<String, Value>>, Unreadable> {
    match field {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(object)) => Ok(Some(object)),
        Some(other) => Err(Unreadable::new(at, other, "an object")),
    }
}

/// An entry of a list where calls stand: an object (a `null` entry is no
/// optional field, and no API sends one).
pub fn entry<'a>(value: &'a Value, at: &[Step]) -> Result<&'a Map<String, Value>, Unreadable> {
    value
        .as_object()
        .ok_or_else(|| Unreadable::new(at, value, "an object"))
}

/// A field that names a tool: `None` when it is absent or `null`.
pub fn name<'a>(field: Option<&'a Value>, at: &[Step]) -> Result<Option<&'a str>, Unreadable> {
    match field {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) => Ok(Some(name)),
        Some(other) => Err(Unreadable::new(at, other, "a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_reader_takes_its_shape_and_null_as_absent_and_names_anything_else() {
        let at = [Step::Key("candidates")];
        assert_eq!(list(None, &at), Ok(&[][..]));
        assert_eq!(list(Some(&json!(null)), &at), Ok(&[][..]));
        assert_eq!(list(Some(&json!([1])), &at), Ok(&[json!(1)][..]));
        let keyed = json!({"0": {"content": {}}});
        let e = list(Some(&keyed), &at).unwrap_err();
        assert_eq!(e.to_string(), "`candidates` is an object, not a list");
        assert_eq!(object(Some(&json!(null)), &at), Ok(None));
        assert!(object(Some(&json!([{}])), &at).is_err());
        assert!(entry(&json!(null), &at).is_err());
        assert_eq!(name(Some(&json!("read")), &at), Ok(Some("read")));
        assert_eq!(name(Some(&json!(null)), &at), Ok(None));
        assert!(name(Some(&json!(["read"])), &at).is_err());
    }

    #[test]
    fn the_message_names_the_path_and_both_shapes() {
        let at = [
            Step::Key("choices"),
            Step::Index(0),
            Step::Key("delta"),
            Step::Key("tool_calls"),
            Step::Index(2),
        ];
        let e = Unreadable::new(&at, &json!("x"), "an object");
        assert_eq!(
            e.to_string(),
            "`choices[0].delta.tool_calls[2]` is a string, not an object"
        );
        let inner = Unreadable::new(&[Step::Key("name")], &json!(1), "a string");
        assert_eq!(
            inner.under(&at[..2]).to_string(),
            "`choices[0].name` is a number, not a string"
        );
        let top = Unreadable::new(&[], &json!([]), "an object");
        assert_eq!(top.to_string(), "it is a list, not an object");
        let refused = top.refusal("an event of the stream");
        assert_eq!(refused.code(), "upstream_invalid_response");
        assert!(refused
            .to_string()
            .contains("an event of the stream cannot be judged: it is a list"));
    }
}
