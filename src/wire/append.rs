//! Appending the proxy's prompt to text the client wrote, by splicing raw
//! JSON: the prompt (the SDK, often tens of kilobytes) is escaped once per
//! plan rather than once per request, and the client's own text is never
//! decoded or re-printed.

use serde_json::value::RawValue;

use super::RawObject;

/// `text`, a blank line and `suffix`, both raw JSON strings, as one raw
/// JSON string; `suffix` alone when `text` is empty. `None` when either is
/// not a string.
pub fn join_text(text: &RawValue, suffix: &RawValue) -> Option<Box<RawValue>> {
    let (text, suffix) = (text.get().trim(), suffix.get().trim());
    if !is_string(text) || !is_string(suffix) {
        return None;
    }
    if text == "\"\"" {
        return Some(raw(suffix.to_owned()));
    }
    // Both are whole string literals: the first's closing quote and the
    // second's opening one go, `\n\n` joins them.
    let mut out = String::with_capacity(text.len() + suffix.len() + 2);
    out.push_str(&text[..text.len() - 1]);
    out.push_str("\\n\\n");
    out.push_str(&suffix[1..]);
    Some(raw(out))
}

/// `array`, a raw JSON array, with `item` (raw JSON) appended; `None` when
/// `array` is not an array.
pub fn push_item(array: &RawValue, item: &str) -> Option<Box<RawValue>> {
    let array = array.get().trim();
    if !(array.starts_with('[') && array.ends_with(']')) {
        return None;
    }
    let open = &array[..array.len() - 1];
    let mut out = String::with_capacity(array.len() + item.len() + 1);
    out.push_str(open);
    if !open[1..].trim().is_empty() {
        out.push(',');
    }
    out.push_str(item);
    out.push(']');
    RawValue::from_string(out).ok()
}

/// A message object with `prompt` (a raw JSON string) added to its
/// `content`: a non-empty string gets it after a blank line, a list of parts
/// gets a `{"type": part_type, "text": prompt}` part, anything else becomes
/// the prompt. `None` when the message is not an object with distinct keys
/// (the caller then takes its general path).
pub fn append_to_message(
    message: &RawValue,
    prompt: &RawValue,
    part_type: &str,
) -> Option<Box<RawValue>> {
    let mut object = RawObject::parse(message.get().as_bytes()).ok()?;
    let content = match object.get("content") {
        Some(c) if is_string(c.get()) => join_text(c, prompt)?,
        Some(c) if c.get().starts_with('[') => push_item(
            c,
            &format!(r#"{{"type":"{part_type}","text":{}}}"#, prompt.get()),
        )?,
        _ => prompt.to_owned(),
    };
    object.set("content", content);
    String::from_utf8(object.to_vec()).ok().map(raw)
}

fn is_string(raw: &str) -> bool {
    raw.len() >= 2 && raw.starts_with('"') && raw.ends_with('"')
}

/// Text built from whole raw JSON values, which is JSON by construction.
fn raw(text: String) -> Box<RawValue> {
    RawValue::from_string(text).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::wire::to_raw;

    fn value(raw: &RawValue) -> Value {
        serde_json::from_str(raw.get()).unwrap()
    }

    #[test]
    fn join_text_decodes_to_the_texts_with_a_blank_line() {
        let prompt = to_raw("SDK \"quoted\"\n\u{1F600} \\ end");
        for text in ["", "You are helpful.", "tab\there \u{e9} \"q\" \\"] {
            let joined = join_text(&to_raw(text), &prompt).unwrap();
            let want = if text.is_empty() {
                "SDK \"quoted\"\n\u{1F600} \\ end".to_owned()
            } else {
                format!("{text}\n\nSDK \"quoted\"\n\u{1F600} \\ end")
            };
            assert_eq!(value(&joined), json!(want));
        }
        // The client's escapes stay as the client wrote them.
        let text = RawValue::from_string(r#""caf\u00e9""#.into()).unwrap();
        assert_eq!(
            join_text(&text, &to_raw("x")).unwrap().get(),
            r#""caf\u00e9\n\nx""#
        );
        assert!(join_text(&to_raw(&json!([1])), &prompt).is_none());
    }

    #[test]
    fn push_item_appends_to_empty_and_full_arrays() {
        let item = r#"{"type":"text","text":"p"}"#;
        for (array, want) in [
            ("[]", json!([{"type": "text", "text": "p"}])),
            ("[ ]", json!([{"type": "text", "text": "p"}])),
            (
                r#"[{"a":1}]"#,
                json!([{"a": 1}, {"type": "text", "text": "p"}]),
            ),
        ] {
            let array = RawValue::from_string(array.into()).unwrap();
            assert_eq!(value(&push_item(&array, item).unwrap()), want);
        }
        assert!(push_item(&to_raw("s"), item).is_none());
    }

    #[test]
    fn append_to_message_follows_the_content_shape() {
        let prompt = to_raw("P");
        let cases = [
            (
                json!({"role": "system", "content": "S", "name": "x"}),
                json!({"role": "system", "content": "S\n\nP", "name": "x"}),
            ),
            (
                json!({"role": "system", "content": ""}),
                json!({"role": "system", "content": "P"}),
            ),
            (
                json!({"role": "system", "content": [{"type": "text", "text": "S"}]}),
                json!({"role": "system", "content": [{"type": "text", "text": "S"}, {"type": "input_text", "text": "P"}]}),
            ),
            (
                json!({"role": "system", "content": null}),
                json!({"role": "system", "content": "P"}),
            ),
            (
                json!({"role": "system"}),
                json!({"role": "system", "content": "P"}),
            ),
        ];
        for (message, want) in cases {
            let got = append_to_message(&to_raw(&message), &prompt, "input_text").unwrap();
            assert_eq!(value(&got), want, "{message}");
        }
        let twice = RawValue::from_string(r#"{"content":"a","content":"b"}"#.into()).unwrap();
        assert!(append_to_message(&twice, &prompt, "text").is_none());
    }
}
