//! One string set at a key path of a JSON document by editing its text:
//! every other byte stays as the user wrote it, so numbers beyond `f64`,
//! key order, spacing and escapes survive `configure` (a parse and a
//! re-serialise would round `123456789012345678901234567890` and reflow
//! the file).
//!
//! The text is checked to be one JSON object first; the scanner below then
//! only has to find spans in a well-formed document.

use serde::de::IgnoredAny;
use serde_json::Value;

/// `text` (absent or blank: `{}`) with the string `value` at `path`, making
/// objects on the way and replacing a non-object that stands where one must
/// be; the value held before, when there was one.
pub fn set_string(
    text: Option<&str>,
    path: &[&str],
    value: &str,
) -> Result<(String, Option<Value>), String> {
    let text = match text {
        Some(t) if !t.trim().is_empty() => t,
        _ => "{}\n",
    };
    serde_json::from_str::<IgnoredAny>(text)
        .map_err(|e| format!("it is not plain JSON ({e}); edit it by hand"))?;
    let start = skip_ws(text, 0);
    if text.as_bytes().get(start) != Some(&b'{') {
        return Err("it is not a JSON object; edit it by hand".into());
    }
    let mut object = start;
    let mut depth = 0;
    for (i, key) in path.iter().enumerate() {
        let last = i + 1 == path.len();
        let members = members(text, object);
        // Like a parser, the last of duplicate keys is the one that counts.
        match members.iter().rev().find(|m| m.key == *key) {
            Some(m) if !last && text.as_bytes()[m.value.0] == b'{' => {
                object = m.value.0;
                depth += 1;
            }
            Some(m) => {
                let was = serde_json::from_str(&text[m.value.0..m.value.1]).ok();
                let indent = line_indent(text, m.key_start);
                let new = render(&path[i + 1..], value, &indent);
                let edited = format!("{}{new}{}", &text[..m.value.0], &text[m.value.1..]);
                return Ok((edited, if last { was } else { None }));
            }
            None => {
                let edited = insert(text, object, &members, &path[i..], value, depth);
                return Ok((edited, None));
            }
        }
    }
    // An empty path names the document itself, which stays as it is.
    Ok((text.to_owned(), None))
}

/// One `"key": value` of an object: where its key starts, the key as
/// decoded, and its value's byte span.
struct Member {
    key_start: usize,
    key: String,
    value: (usize, usize),
}

/// The members of the object whose `{` is at `open`.
fn members(text: &str, open: usize) -> Vec<Member> {
    let mut out = Vec::new();
    let mut at = skip_ws(text, open + 1);
    while text.as_bytes()[at] == b'"' {
        let key_end = skip_value(text, at);
        let key = serde_json::from_str(&text[at..key_end]).unwrap_or_default();
        let colon = skip_ws(text, key_end);
        let value_start = skip_ws(text, colon + 1);
        let value_end = skip_value(text, value_start);
        out.push(Member {
            key_start: at,
            key,
            value: (value_start, value_end),
        });
        at = skip_ws(text, value_end);
        if text.as_bytes()[at] == b',' {
            at = skip_ws(text, at + 1);
        }
    }
    out
}

/// `path` made into members of the object at `open`, after its last one.
fn insert(
    text: &str,
    open: usize,
    members: &[Member],
    path: &[&str],
    value: &str,
    depth: usize,
) -> String {
    let member = |indent: &str| {
        let key = Value::from(path[0]).to_string();
        format!("{key}: {}", render(&path[1..], value, indent))
    };
    match members.last() {
        Some(last) => {
            // Laid out like the member before it: on its own line, or not.
            let gap = &text[skip_back_ws(text, members[0].key_start)..members[0].key_start];
            let indent = line_indent(text, last.key_start);
            let gap = if gap.contains('\n') {
                format!("\n{indent}")
            } else {
                " ".to_owned()
            };
            let at = last.value.1;
            format!("{},{gap}{}{}", &text[..at], member(&indent), &text[at..])
        }
        None => {
            let outer = line_indent(text, open);
            let indent = if depth == 0 && outer.is_empty() {
                "  ".to_owned()
            } else {
                format!("{outer}  ")
            };
            let close = skip_ws(text, open + 1);
            format!(
                "{}{{\n{indent}{}\n{outer}}}{}",
                &text[..open],
                member(&indent),
                &text[close + 1..]
            )
        }
    }
}

/// `value` under `path` as JSON text whose inner lines start at `indent`.
fn render(path: &[&str], value: &str, indent: &str) -> String {
    let mut v = Value::from(value);
    for key in path.iter().rev() {
        let mut map = serde_json::Map::new();
        map.insert((*key).to_owned(), v);
        v = Value::Object(map);
    }
    // Serialising a Value cannot fail.
    let pretty = serde_json::to_string_pretty(&v).unwrap_or_default();
    pretty.replace('\n', &format!("\n{indent}"))
}

/// The whitespace that starts the line holding byte `at`.
fn line_indent(text: &str, at: usize) -> String {
    let line = text[..at].rfind('\n').map_or(0, |n| n + 1);
    text[line..at]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect()
}

fn skip_ws(text: &str, mut at: usize) -> usize {
    let b = text.as_bytes();
    while at < b.len() && b[at].is_ascii_whitespace() {
        at += 1;
    }
    at
}

fn skip_back_ws(text: &str, mut at: usize) -> usize {
    let b = text.as_bytes();
    while at > 0 && b[at - 1].is_ascii_whitespace() {
        at -= 1;
    }
    at
}

/// The end of the value that starts at `at` in a well-formed document.
fn skip_value(text: &str, at: usize) -> usize {
    let b = text.as_bytes();
    match b[at] {
        b'"' => {
            let mut i = at + 1;
            while b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i + 1
        }
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match b[i] {
                    b'"' => {
                        i = skip_value(text, i);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let mut i = at;
            while i < b.len() && !matches!(b[i], b',' | b'}' | b']') && !b[i].is_ascii_whitespace()
            {
                i += 1;
            }
            i
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str, path: &[&str]) -> String {
        set_string(Some(text), path, "http://p").unwrap().0
    }

    #[test]
    fn an_existing_value_is_replaced_and_every_other_byte_kept() {
        let old = "{\n  \"n\": 123456789012345678901234567890,\n  \"env\": {\"A\": \"x\", \"B\": \"\\u00e9\"}\n}\n";
        let (new, was) = set_string(Some(old), &["env", "A"], "http://p").unwrap();
        assert_eq!(
            new,
            "{\n  \"n\": 123456789012345678901234567890,\n  \"env\": {\"A\": \"http://p\", \"B\": \"\\u00e9\"}\n}\n"
        );
        assert_eq!(was, Some(Value::from("x")));
    }

    #[test]
    fn missing_members_are_added_in_the_layout_of_their_siblings() {
        let old = "{\n    \"model\": \"m\",\n    \"big\": 123456789012345678901234567890\n}\n";
        assert_eq!(
            set(old, &["env", "URL"]),
            "{\n    \"model\": \"m\",\n    \"big\": 123456789012345678901234567890,\n    \"env\": {\n      \"URL\": \"http://p\"\n    }\n}\n"
        );
        assert_eq!(
            set("{\"a\": [1, {\"b\": 2}]}", &["c"]),
            "{\"a\": [1, {\"b\": 2}], \"c\": \"http://p\"}"
        );
        assert_eq!(
            set("{\"env\": {}}", &["env", "URL"]),
            "{\"env\": {\n  \"URL\": \"http://p\"\n}}"
        );
    }

    #[test]
    fn blank_and_absent_files_become_an_object() {
        assert_eq!(set("", &["a", "b"]), set("{}\n", &["a", "b"]));
        assert_eq!(
            set("  \n", &["a"]),
            "{\n  \"a\": \"http://p\"\n}\n",
            "an absent file starts as {{}}"
        );
    }

    #[test]
    fn a_non_object_on_the_path_is_replaced_and_duplicates_resolve_to_the_last() {
        assert_eq!(
            set("{\"env\": \"str\"}", &["env", "U"]),
            "{\"env\": {\n  \"U\": \"http://p\"\n}}"
        );
        let dup = "{\"k\": \"a\", \"k\": \"b\"}";
        let (new, was) = set_string(Some(dup), &["k"], "c").unwrap();
        assert_eq!(new, "{\"k\": \"a\", \"k\": \"c\"}");
        assert_eq!(was, Some(Value::from("b")));
        let parsed: Value = serde_json::from_str(&new).unwrap();
        assert_eq!(parsed["k"], "c");
    }

    #[test]
    fn keys_with_escapes_and_strings_with_braces_are_read_right() {
        let old = r#"{"x\"}": "{[", "env": {"y": "]}\\"}}"#;
        let new = set(old, &["env", "y"]);
        assert_eq!(new, r#"{"x\"}": "{[", "env": {"y": "http://p"}}"#);
    }

    #[test]
    fn what_is_not_one_json_object_is_refused() {
        assert!(set_string(Some("[1]"), &["a"], "v").is_err());
        assert!(set_string(Some("{\"a\": }"), &["a"], "v").is_err());
        assert!(set_string(Some("// c\n{}"), &["a"], "v").is_err());
    }

    #[test]
    fn every_result_parses_and_holds_the_value() {
        let docs = [
            "{}",
            "{\"a\":1}",
            "{ \"env\" : { \"K\" : [ ] } }",
            "{\n\t\"env\": {\n\t\t\"K\": 1\n\t}\n}",
            "{\"provider\":{\"openai\":{\"options\":{\"baseURL\":\"x\",\"k\":2}}}}",
        ];
        for doc in docs {
            for path in [
                &["env", "URL"][..],
                &["provider", "openai", "options", "baseURL"],
            ] {
                let new = set(doc, path);
                let v: Value = serde_json::from_str(&new).unwrap_or_else(|e| panic!("{new}: {e}"));
                let pointer = format!("/{}", path.join("/"));
                assert_eq!(v.pointer(&pointer), Some(&Value::from("http://p")), "{new}");
            }
        }
    }
}
