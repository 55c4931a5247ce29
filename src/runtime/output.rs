//! What a program's `await tools.x()` resolves to: the tool's output, out
//! of the wrapper the client put it in (docs/embedded-runtime.md, "What a
//! program's call resolves to").
//!
//! Clients do not send a tool's output bare. Each dialect's history gives
//! it a field, and clients wrap it there in their own way; the program
//! should get what the tool returned, as the SDK that declared the tool
//! says, whatever client ran it. This is the one table of those wrappers
//! ([`Wrapper`]), read for every dialect ([`Field`]):
//!
//! | Field | Wrapper | Sent by | The program gets |
//! |---|---|---|---|
//! | any | a string | every client | the string |
//! | Chat `tool` message `content` | a list of `{type:"text", text}` parts | the OpenAI SDKs' content parts, LangChain | the texts joined |
//! | Messages `tool_result` `content` | a list of `text` blocks (and Claude Code's `tool_reference` blocks) | Claude Code, the Anthropic SDKs | the texts joined (a line per tool loaded) |
//! | Responses `function_call_output.output` | a list of `{type:"input_text", text}` parts | the OpenAI SDKs, Codex | the texts joined |
//! | Gemini `functionResponse.response` | `{output: X}` | gemini-cli | X |
//! | Gemini `functionResponse.response` | `{result: X}` | `google-genai` (Python, automatic function calling) | X |
//! | Gemini `functionResponse.response` | `{error: X}` | gemini-cli, `google-genai`, `@google/genai`'s MCP tools | X |
//! | Gemini `functionResponse.response` | `{name, content: X}`, `name` the called tool's | `@ai-sdk/google` | X (a list of text parts: the texts joined) |
//! | Gemini `functionResponse.response` | `{content: [text parts]}` | `@google/genai`'s `mcpToTool` (an MCP `CallToolResult`) | the texts joined |
//!
//! A wrapper is taken off only when the value is exactly that shape: an
//! object with just those keys (`{output, extra}` is no wrapper), a list
//! whose every part is a text part of its field's kind with no key a text
//! part does not have. Anything else is the output itself, passed as it
//! came: the program gets its JSON text. X is the program's text as it is
//! when a string, else its JSON text (tools resolve to text).
//!
//! An error (`{error: X}`, Messages' `is_error`) resolves to its text like
//! any result, as every dialect's results always have: a tool's failure is
//! a value the program reads (`await` never throws for it), and the model
//! sees what the program made of it.

use serde_json::{Map, Value};

/// Messages' block that loads a deferred tool (`messages::items` names it
/// too; the runtime below the dialects does not import them).
const TOOL_REFERENCE: &str = "tool_reference";

/// Where a tool's result stands in a client's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field<'a> {
    /// A Chat Completions `tool` message's `content`.
    ChatContent,
    /// A Messages `tool_result` block's `content`.
    MessagesContent,
    /// A Responses `function_call_output`'s `output` (or another
    /// `*_output` item's).
    ResponsesOutput,
    /// A Gemini `functionResponse`'s `response`, answering a call of the
    /// tool named here.
    GeminiResponse(&'a str),
}

/// The wrappers taken off a tool's output (the table above); `None` for a
/// value passed as it came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wrapper {
    /// A string: the output itself.
    Text,
    /// Nothing at all (`null`, or no field): an empty output.
    Empty,
    /// A list of text parts of the field's kind.
    TextParts,
    /// Gemini `{output: X}` (gemini-cli).
    Output,
    /// Gemini `{result: X}` (`google-genai`'s automatic function calling).
    Result,
    /// Gemini `{error: X}` (gemini-cli, `google-genai`).
    Error,
    /// Gemini `{name, content}`, `name` the called tool's (`@ai-sdk/google`).
    NamedContent,
    /// Gemini `{content: [text parts]}` (`@google/genai`'s MCP tools).
    McpContent,
    /// No wrapper: the value's JSON text.
    None,
}

/// The tool's output in `value` (found at `field`), as the program gets
/// it, and the wrapper taken off.
pub fn unwrap(field: Field<'_>, value: Option<&Value>) -> (Wrapper, String) {
    match value {
        None | Some(Value::Null) => (Wrapper::Empty, String::new()),
        Some(Value::String(s)) => (Wrapper::Text, s.clone()),
        Some(Value::Array(parts)) => match joined(field, parts) {
            Some(text) => (Wrapper::TextParts, text),
            None => (Wrapper::None, Value::Array(parts.clone()).to_string()),
        },
        Some(Value::Object(o)) => match field {
            Field::GeminiResponse(called) => gemini(o, called),
            _ => (Wrapper::None, Value::Object(o.clone()).to_string()),
        },
        Some(other) => (Wrapper::None, other.to_string()),
    }
}

/// The program's text of a tool's result at `field` ([`unwrap`]).
pub fn output_text(field: Field<'_>, value: Option<&Value>) -> String {
    unwrap(field, value).1
}

/// A Gemini `response` object.
fn gemini(o: &Map<String, Value>, called: &str) -> (Wrapper, String) {
    let only = |keys: &[&str]| o.len() == keys.len() && keys.iter().all(|k| o.contains_key(*k));
    let wrapper = if only(&["output"]) {
        Some((Wrapper::Output, &o["output"]))
    } else if only(&["result"]) {
        Some((Wrapper::Result, &o["result"]))
    } else if only(&["error"]) {
        Some((Wrapper::Error, &o["error"]))
    } else if only(&["name", "content"]) && o["name"].as_str() == Some(called) {
        Some((Wrapper::NamedContent, &o["content"]))
    } else {
        None
    };
    if let Some((wrapper, inner)) = wrapper {
        let text = match inner {
            Value::Array(parts) if wrapper == Wrapper::NamedContent => {
                joined(Field::GeminiResponse(called), parts).unwrap_or_else(|| inner.to_string())
            }
            other => plain(other),
        };
        return (wrapper, text);
    }
    if only(&["content"]) {
        if let Some(text) = o["content"]
            .as_array()
            .and_then(|parts| joined(Field::GeminiResponse(called), parts))
        {
            return (Wrapper::McpContent, text);
        }
    }
    (Wrapper::None, Value::Object(o.clone()).to_string())
}

/// A value as text: a string as it is, `null` empty, anything else its
/// JSON.
fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The text part of each field: its `type`, and the keys such a part may
/// carry beside `type` and `text`.
fn text_part(field: Field<'_>) -> (&'static str, &'static [&'static str]) {
    match field {
        // OpenRouter and Anthropic-compatible servers take a cache mark.
        Field::ChatContent => ("text", &["cache_control"]),
        Field::MessagesContent => ("text", &["cache_control", "citations"]),
        Field::ResponsesOutput => ("input_text", &[]),
        // MCP's text content (`@google/genai`), the AI SDK's text part.
        Field::GeminiResponse(_) => ("text", &["annotations", "_meta"]),
    }
}

/// The texts of `parts` joined, when every part is a text part of
/// `field`'s kind (Messages: or a `tool_reference`, read as a line naming
/// the tool it loaded); `None` otherwise.
fn joined(field: Field<'_>, parts: &[Value]) -> Option<String> {
    let (kind, extra) = text_part(field);
    let mut text = String::new();
    for part in parts {
        let p = part.as_object()?;
        let known = |k: &String| k == "type" || k == "text" || extra.contains(&k.as_str());
        match (p.get("type").and_then(Value::as_str), p.get("text")) {
            (Some(t), Some(Value::String(s))) if t == kind && p.keys().all(known) => {
                text.push_str(s);
            }
            (Some(TOOL_REFERENCE), _) if field == Field::MessagesContent => {
                text.push_str(&loaded(p, &text));
            }
            _ => return None,
        }
    }
    Some(text)
}

/// The line a program reads for a Messages `tool_reference` (Claude Code's
/// `ToolSearch` answers with nothing else): the tool it loaded is declared
/// from the client's next request on, so the next program can call it.
fn loaded(block: &Map<String, Value>, before: &str) -> String {
    let name = block.get("tool_name").and_then(Value::as_str).unwrap_or("");
    let newline = if !before.is_empty() && !before.ends_with('\n') {
        "\n"
    } else {
        ""
    };
    format!(
        "{newline}Loaded tool {name:?}: the next program can call it as `await {}(args)`.\n",
        crate::sdk::tool_access(name)
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(field: Field<'_>, value: Value) -> (Wrapper, String) {
        unwrap(field, Some(&value))
    }

    #[test]
    fn every_gemini_wrapper_is_taken_off_when_it_is_exactly_that() {
        let g = Field::GeminiResponse("read_file");
        let cases = [
            // gemini-cli
            (json!({"output": "A"}), Wrapper::Output, "A"),
            // google-genai (Python), automatic function calling
            (json!({"result": "A"}), Wrapper::Result, "A"),
            (json!({"result": {"n": 1}}), Wrapper::Result, r#"{"n":1}"#),
            (json!({"result": null}), Wrapper::Result, ""),
            (
                json!({"error": "no such file"}),
                Wrapper::Error,
                "no such file",
            ),
            // @ai-sdk/google
            (
                json!({"name": "read_file", "content": "A"}),
                Wrapper::NamedContent,
                "A",
            ),
            (
                json!({"name": "read_file", "content": [{"type": "text", "text": "A"},
                                                        {"type": "text", "text": "B"}]}),
                Wrapper::NamedContent,
                "AB",
            ),
            (
                json!({"name": "read_file", "content": {"lines": 3}}),
                Wrapper::NamedContent,
                r#"{"lines":3}"#,
            ),
            (
                json!({"name": "read_file", "content": [{"type": "image", "data": "x"}]}),
                Wrapper::NamedContent,
                r#"[{"type":"image","data":"x"}]"#,
            ),
            // @google/genai's mcpToTool: an MCP CallToolResult
            (
                json!({"content": [{"type": "text", "text": "A", "annotations": {}}]}),
                Wrapper::McpContent,
                "A",
            ),
            // Not exactly a wrapper: the value as it came.
            (
                json!({"output": "A", "exit": 0}),
                Wrapper::None,
                r#"{"output":"A","exit":0}"#,
            ),
            (json!({"count": 3}), Wrapper::None, r#"{"count":3}"#),
            (
                json!({"name": "write_file", "content": "A"}),
                Wrapper::None,
                r#"{"name":"write_file","content":"A"}"#,
            ),
            (
                json!({"content": [{"type": "text", "text": "A"}], "isError": false}),
                Wrapper::None,
                r#"{"content":[{"type":"text","text":"A"}],"isError":false}"#,
            ),
            (json!({"content": "A"}), Wrapper::None, r#"{"content":"A"}"#),
            (json!({}), Wrapper::None, "{}"),
        ];
        for (value, wrapper, text) in cases {
            assert_eq!(
                read(g, value.clone()),
                (wrapper, text.to_owned()),
                "{value}"
            );
        }
        assert_eq!(unwrap(g, None), (Wrapper::Empty, String::new()));
        assert_eq!(read(g, json!("A")), (Wrapper::Text, "A".to_owned()));
    }

    #[test]
    fn lists_of_text_parts_are_joined_only_when_every_part_is_one() {
        let cases = [
            (
                Field::ChatContent,
                json!([{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]),
            ),
            (
                Field::ChatContent,
                json!([{"type": "text", "text": "A", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "B"}]),
            ),
            (
                Field::MessagesContent,
                json!([{"type": "text", "text": "A", "citations": []}, {"type": "text", "text": "B"}]),
            ),
            (
                Field::ResponsesOutput,
                json!([{"type": "input_text", "text": "A"}, {"type": "input_text", "text": "B"}]),
            ),
        ];
        for (field, value) in cases {
            assert_eq!(
                read(field, value.clone()),
                (Wrapper::TextParts, "AB".to_owned()),
                "{value}"
            );
        }
        assert_eq!(
            read(Field::ChatContent, json!([])),
            (Wrapper::TextParts, String::new())
        );
        // Another kind of part, a part of another dialect's kind, or a key
        // a text part does not have: the list as it came.
        let kept = [
            (
                Field::ChatContent,
                json!([{"type": "text", "text": "A"}, {"type": "image_url", "image_url": {"url": "u"}}]),
            ),
            (
                Field::ResponsesOutput,
                json!([{"type": "text", "text": "A"}]),
            ),
            (
                Field::ChatContent,
                json!([{"type": "input_text", "text": "A"}]),
            ),
            (
                Field::MessagesContent,
                json!([{"type": "text", "text": "A", "extra": 1}]),
            ),
            (Field::MessagesContent, json!([{"type": "text", "text": 3}])),
            (Field::ChatContent, json!(["A"])),
        ];
        for (field, value) in kept {
            assert_eq!(
                read(field, value.clone()),
                (Wrapper::None, value.to_string()),
                "{value}"
            );
        }
        // Objects are no wrapper outside Gemini.
        let object = json!({"output": "A"});
        assert_eq!(
            read(Field::ChatContent, object.clone()),
            (Wrapper::None, object.to_string())
        );
        assert_eq!(
            read(Field::ResponsesOutput, json!(3)),
            (Wrapper::None, "3".to_owned())
        );
    }

    #[test]
    fn a_program_reads_what_a_tool_search_loaded() {
        let loaded = json!([{"type": "tool_reference", "tool_name": "WebFetch"},
                            {"type": "tool_reference", "tool_name": "mcp__docs__search"}]);
        assert_eq!(
            output_text(Field::MessagesContent, Some(&loaded)),
            "Loaded tool \"WebFetch\": the next program can call it as `await tools.WebFetch(args)`.\n\
             Loaded tool \"mcp__docs__search\": the next program can call it as `await tools.mcp__docs__search(args)`.\n"
        );
        let mixed = json!([{"type": "text", "text": "Found:"},
                           {"type": "tool_reference", "tool_name": "a-b"}]);
        assert_eq!(
            output_text(Field::MessagesContent, Some(&mixed)),
            "Found:\nLoaded tool \"a-b\": the next program can call it as `await tools[\"a-b\"](args)`.\n"
        );
        assert_eq!(
            output_text(Field::MessagesContent, Some(&json!("plain"))),
            "plain"
        );
        // Only Messages has them.
        let reference = json!([{"type": "tool_reference", "tool_name": "WebFetch"}]);
        assert_eq!(
            read(Field::ChatContent, reference.clone()),
            (Wrapper::None, reference.to_string())
        );
    }
}
