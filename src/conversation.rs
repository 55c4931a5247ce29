//! Which conversation a request continues, as far as a mixed turn's stored
//! denials need to know.
//!
//! Call ids are not unique across conversations: providers and agents that
//! number them (`call_0`, Kimi's `functions.read:0`) reuse them in every
//! conversation. A stored splice is therefore keyed by its conversation's
//! anchor as well as its tenant and ids: a digest of the text of the
//! conversation's first user message. That text is what the client sends
//! unchanged in every request of a conversation, whatever it does to the
//! rest (moving `cache_control` marks, re-serialising arguments, dropping
//! reasoning), and two conversations rarely open with the same words.
//! Conversations that do (one prompt fanned out to many agents) are told
//! apart only by their ids: with numbered ids they still share keys, which
//! a digest of the whole history would not fix either while the histories
//! are the same.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::tenant::hash_parts;

/// The conversation a turn belongs to (see the module's note).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Anchor([u8; 32]);

/// The fields of a message (or an input item) the anchor reads.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    role: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
}

impl Anchor {
    /// No anchor: a request that carries none of its conversation (a
    /// Responses request continuing a `previous_response_id`).
    pub const NONE: Anchor = Anchor([0; 32]);

    /// The anchor of a history (messages, or input items): its first
    /// message of role `user`; `NONE` when it has none.
    pub fn of_history(items: &[Box<RawValue>]) -> Anchor {
        items
            .iter()
            .filter_map(|raw| serde_json::from_str::<Head<'_>>(raw.get()).ok())
            .find(|h| h.role.as_deref() == Some("user"))
            .and_then(|h| h.content)
            .and_then(|content| serde_json::from_str::<Value>(content.get()).ok())
            .map_or(Anchor::NONE, |content| Anchor::of_content(&content))
    }

    /// The anchor of a conversation whose first user message holds `content`
    /// (a string, or parts or blocks with text).
    pub fn of_content(content: &Value) -> Anchor {
        let mut texts = Vec::new();
        collect_texts(content, &mut texts);
        if texts.is_empty() {
            return Anchor::NONE;
        }
        let parts: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes()).collect();
        Anchor(hash_parts("codemode-proxy conversation v1", &parts))
    }

    /// The anchor's 32 bytes, for keys.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// The text of a message's content, in order: strings, and the `text` and
/// `content` of parts and blocks (never marks such as `cache_control`,
/// which clients move from request to request).
fn collect_texts<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|i| collect_texts(i, out)),
        Value::Object(fields) => {
            for key in ["text", "content"] {
                if let Some(inner) = fields.get(key) {
                    collect_texts(inner, out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn raw(v: Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&v).unwrap()
    }

    #[test]
    fn the_first_user_message_anchors_whatever_marks_move_around_it() {
        let first = vec![
            raw(json!({"role": "system", "content": "be brief"})),
            raw(json!({"role": "user", "content": [
                {"type": "text", "text": "fix the bug", "cache_control": {"type": "ephemeral"}}
            ]})),
        ];
        let later = vec![
            raw(json!({"role": "system", "content": "be brief, now longer"})),
            raw(json!({"role": "user", "content": [{"type": "text", "text": "fix the bug"}]})),
            raw(json!({"role": "assistant", "content": "on it"})),
            raw(json!({"role": "user", "content": "and the tests"})),
        ];
        assert_eq!(Anchor::of_history(&first), Anchor::of_history(&later));
        assert_ne!(Anchor::of_history(&first), Anchor::NONE);
        let other = vec![raw(json!({"role": "user", "content": "fix the other bug"}))];
        assert_ne!(Anchor::of_history(&first), Anchor::of_history(&other));
    }

    #[test]
    fn a_string_and_its_single_text_part_anchor_alike_and_no_user_message_is_none() {
        let s = Anchor::of_content(&json!("hello"));
        let parts = Anchor::of_content(&json!([{"type": "input_text", "text": "hello"}]));
        assert_eq!(s, parts);
        let none = vec![raw(
            json!({"type": "function_call_output", "call_id": "c", "output": "x"}),
        )];
        assert_eq!(Anchor::of_history(&none), Anchor::NONE);
        assert_eq!(
            Anchor::of_content(&json!([{"type": "image"}])),
            Anchor::NONE
        );
    }
}
