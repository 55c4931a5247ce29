//! How programs name tools and write calls, in JavaScript: one place for
//! the SDK, the denials' routes and the proxy's own notes to the model.

use serde_json::Value;

/// Whether `name` can follow `tools.` in JavaScript.
pub fn is_js_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// How a program reaches tool `name`: `tools.read` or `tools["a.b"]`.
pub fn tool_access(name: &str) -> String {
    if is_js_identifier(name) {
        format!("tools.{name}")
    } else {
        format!("tools[{}]", json_string(name))
    }
}

/// The call as a program would write it: `await tools.read({"path": "a.txt"})`.
pub fn program_call(name: &str, args: &Value) -> String {
    format!("await {}({})", tool_access(name), spaced_json(args))
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

/// One-line JSON with a space after `:` and `,`, as people write it.
pub fn spaced_json(value: &Value) -> String {
    let mut out = String::new();
    write_spaced(&mut out, value);
    out
}

fn write_spaced(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&json_string(k));
                out.push_str(": ");
                write_spaced(out, v);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_spaced(out, v);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_identifier_names_use_bracket_access() {
        let args = serde_json::json!({"title": "x", "labels": ["a", "b"]});
        assert_eq!(
            program_call("github.create_issue", &args),
            r#"await tools["github.create_issue"]({"title": "x", "labels": ["a", "b"]})"#
        );
        assert!(is_js_identifier("$read_2"));
        assert!(!is_js_identifier("a-b"));
        assert!(!is_js_identifier("2a"));
        assert!(!is_js_identifier(""));
    }
}
