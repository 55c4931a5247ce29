//! Wire helpers every dialect adapter shares: the client's tools, SSE
//! events as a client reads them, argument text, error bodies.

use serde_json::{json, Value};

use crate::scenarios::model::ErrorView;

/// The client's tools, each as its dialect declares one (`declare`: from
/// a name, a description and the parameters' properties): `read` and
/// `write`, and `run_code` when the client runs programs itself.
pub fn client_tools(client_runtime: bool, declare: fn(&str, &str, Value) -> Value) -> Vec<Value> {
    let mut t = vec![
        declare("read", "Read a file.", json!({"path": {"type": "string"}})),
        declare(
            "write",
            "Write a file.",
            json!({"path": {"type": "string"}, "content": {"type": "string"}}),
        ),
    ];
    if client_runtime {
        t.push(declare(
            "run_code",
            "Run a program.",
            json!({"code": {"type": "string"}}),
        ));
    }
    t
}

/// One SSE event: its `event:` name, if any, and its data.
#[derive(Clone, Debug)]
pub struct Event {
    pub name: Option<String>,
    pub data: String,
    /// The data as JSON, when it is.
    pub json: Option<Value>,
}

impl Event {
    /// The `type` of a JSON event (`event:` line otherwise).
    pub fn kind(&self) -> &str {
        self.json
            .as_ref()
            .and_then(|j| j.get("type"))
            .and_then(Value::as_str)
            .or(self.name.as_deref())
            .unwrap_or("")
    }

    pub fn get(&self, pointer: &str) -> &Value {
        static NULL: Value = Value::Null;
        self.json
            .as_ref()
            .and_then(|j| j.pointer(pointer))
            .unwrap_or(&NULL)
    }
}

/// The events of an SSE body, in order (comments and empty blocks skipped).
pub fn parse_events(bytes: &[u8]) -> Vec<Event> {
    let text = String::from_utf8_lossy(bytes)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut name = None;
        let mut data: Vec<&str> = Vec::new();
        for line in block.lines() {
            if let Some(n) = line.strip_prefix("event:") {
                name = Some(n.trim().to_owned());
            } else if let Some(d) = line.strip_prefix("data:") {
                data.push(d.strip_prefix(' ').unwrap_or(d));
            }
        }
        if data.is_empty() {
            continue;
        }
        let data = data.join("\n");
        let json = serde_json::from_str(&data).ok();
        out.push(Event { name, data, json });
    }
    out
}

/// Splits `s` in two at a character boundary near its middle.
pub fn halves(s: &str) -> (&str, &str) {
    let mut at = s.len() / 2;
    while !s.is_char_boundary(at) {
        at += 1;
    }
    s.split_at(at)
}

/// Argument text as a client compares it: parsed, or the text itself.
pub fn args_value(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// Arguments back as text, for a client that replays a call.
pub fn args_text(args: &Value) -> String {
    match args {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A text field that is a string or a list of text parts.
pub fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// The texts of separate blocks or items, as a client shows them: one
/// paragraph each, a blank line apart.
pub fn paragraphs<S: AsRef<str>>(texts: impl IntoIterator<Item = S>) -> String {
    let texts: Vec<S> = texts.into_iter().collect();
    let texts: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
    texts.join("\n\n")
}

/// An error response as the client reads it, in OpenAI's or Anthropic's shape.
pub fn http_error(status: u16, body: &[u8], anthropic: bool) -> ErrorView {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    error_view(
        false,
        status,
        &v,
        String::from_utf8_lossy(body).into(),
        anthropic,
    )
}

/// An error object (a body or an event's data) in the dialect's shape.
pub fn error_view(
    in_stream: bool,
    status: u16,
    v: &Value,
    body: String,
    anthropic: bool,
) -> ErrorView {
    let e = &v["error"];
    let shaped = if anthropic {
        v["type"] == "error" && e["type"].is_string() && e["message"].is_string()
    } else {
        e["message"].is_string() && e["type"].is_string()
    };
    ErrorView {
        in_stream,
        status,
        code: e["code"].as_str().map(str::to_owned),
        kind: e["type"].as_str().map(str::to_owned),
        message: e["message"].as_str().unwrap_or("").to_owned(),
        body,
        shaped,
        retry_after: None,
    }
}

/// The usage pair of an object with these two fields.
pub fn usage_pair(u: &Value, input: &str, output: &str) -> Option<(u64, u64)> {
    Some((u.get(input)?.as_u64()?, u.get(output)?.as_u64()?))
}
