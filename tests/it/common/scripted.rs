//! The wire side of a scripted model: OpenAI's rules on the tool messages
//! of a conversation and the 400 it answers when one is broken, a message
//! served as a completion or as the stream a provider sends, and a
//! transcript of the requests for assertion messages.

use serde_json::{json, Value};
use wiremock::{MockServer, Respond, ResponseTemplate};

use super::usage;

/// A provider whose chat completions `model` answers.
pub async fn model_server(model: impl Respond + 'static) -> MockServer {
    super::mounted("/v1/chat/completions", model).await
}

/// A provider whose chat completions stream `rounds` in order.
pub async fn streams(rounds: impl IntoIterator<Item = impl Into<Vec<u8>>>) -> MockServer {
    model_server(super::Script::new(rounds.into_iter().map(|round| {
        ResponseTemplate::new(200).set_body_raw(round.into(), "text/event-stream")
    })))
    .await
}

/// OpenAI's rules on tool messages; the first one broken, as OpenAI says it.
pub fn openai_rules(messages: &[Value]) -> Option<String> {
    for (i, m) in messages.iter().enumerate() {
        let calls = m["tool_calls"].as_array().cloned().unwrap_or_default();
        if m["role"] == "assistant" && !calls.is_empty() {
            let answered: Vec<&str> = messages[i + 1..]
                .iter()
                .take_while(|m| m["role"] == "tool")
                .filter_map(|m| m["tool_call_id"].as_str())
                .collect();
            let missing: Vec<&str> = calls
                .iter()
                .filter_map(|c| c["id"].as_str())
                .filter(|id| !answered.contains(id))
                .collect();
            if !missing.is_empty() {
                return Some(format!("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}", missing.join(", ")));
            }
        }
        if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or("");
            let placed = messages[..i].iter().rev().any(|p| {
                p["role"] == "assistant"
                    && p["tool_calls"]
                        .as_array()
                        .is_some_and(|c| c.iter().any(|c| c["id"] == id))
            });
            if !placed {
                return Some("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.".into());
            }
        }
    }
    None
}

/// The provider's 400 for a conversation that breaks its rules.
pub fn provider_error(message: &str) -> ResponseTemplate {
    ResponseTemplate::new(400).set_body_json(json!({"error": {
        "message": message, "type": "invalid_request_error", "param": "messages", "code": null}}))
}

fn finish_of(message: &Value) -> &'static str {
    if message["tool_calls"].is_array() {
        "tool_calls"
    } else {
        "stop"
    }
}

/// `message` as the model's answer to the request `req`: a completion, or
/// its stream (with a usage chunk when the request asks for one).
pub fn serve(req: &Value, message: Value) -> ResponseTemplate {
    if req["stream"] != true {
        return ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-model", "object": "chat.completion", "created": 1, "model": "test-model",
            "choices": [{"index": 0, "finish_reason": finish_of(&message), "message": message}],
            "usage": usage(100, 10),
        }));
    }
    let include_usage = req["stream_options"]["include_usage"] == true;
    ResponseTemplate::new(200).set_body_raw(
        sse_of(&message, include_usage).into_bytes(),
        "text/event-stream",
    )
}

/// One `data:` chunk of the model's stream.
pub fn chunk(delta: Value, finish: Option<&str>) -> String {
    let c = json!({"id": "chatcmpl-model", "object": "chat.completion.chunk", "created": 1,
        "model": "test-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

/// The stream a provider sends for `message`: the role first, reasoning,
/// text, each call's head (with its extra fields) then its arguments.
fn sse_of(message: &Value, include_usage: bool) -> String {
    let mut s = chunk(json!({"role": "assistant", "content": ""}), None);
    if let Some(r) = message.get("reasoning_content") {
        s += &chunk(json!({"reasoning_content": r}), None);
    }
    if let Some(t) = message["content"].as_str() {
        s += &chunk(json!({"content": t}), None);
    }
    let calls = message["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (i, c) in calls.into_iter().enumerate() {
        let mut head = json!({"index": i, "id": c["id"], "type": "function",
            "function": {"name": c["function"]["name"], "arguments": ""}});
        if let Some(e) = c.get("extra_content") {
            head["extra_content"] = e.clone();
        }
        s += &chunk(json!({"tool_calls": [head]}), None);
        s += &chunk(
            json!({"tool_calls": [{"index": i, "function": {"arguments": c["function"]["arguments"]}}]}),
            None,
        );
    }
    s += &chunk(json!({}), Some(finish_of(message)));
    if include_usage {
        let c = json!({"id": "chatcmpl-model", "object": "chat.completion.chunk", "created": 1,
            "model": "test-model", "choices": [], "usage": usage(100, 10)});
        s += &format!("data: {c}\n\n");
    }
    s + "data: [DONE]\n\n"
}

/// Each request in short: its status (and refusal), then its messages'
/// roles with the tool calls' names and ids; for assertion messages.
pub fn transcript<'a>(requests: impl IntoIterator<Item = (&'a Value, u16, &'a str)>) -> String {
    let mut out = String::new();
    for (i, (body, status, refusal)) in requests.into_iter().enumerate() {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let roles: Vec<String> = messages.iter().map(in_short).collect();
        let refusal = if refusal.is_empty() {
            String::new()
        } else {
            format!(" {refusal}")
        };
        out += &format!(
            "\n  request {} -> {status}{refusal}: {}",
            i + 1,
            roles.join(" ")
        );
    }
    out
}

/// A message as its role, with its calls' `name#id` or its `#tool_call_id`.
fn in_short(m: &Value) -> String {
    let role = m["role"].as_str().unwrap_or("?");
    match (m["tool_calls"].as_array(), m["tool_call_id"].as_str()) {
        (Some(calls), _) => {
            let c: Vec<String> = calls
                .iter()
                .map(|c| {
                    let name = c["function"]["name"].as_str().unwrap_or("");
                    format!("{name}#{}", c["id"].as_str().unwrap_or(""))
                })
                .collect();
            format!("{role}[{}]", c.join(","))
        }
        (_, Some(id)) => format!("{role}#{id}"),
        _ => role.to_owned(),
    }
}

/// A scripted chat-completions model: it answers each request with the
/// next assistant message (as a completion or its stream, as the request
/// asks) and enforces OpenAI's rules on tool messages. A message
/// `{"echo": true}` becomes the text "ANSWER: " and the content of the
/// last tool message it was sent.
#[derive(Clone, Default)]
pub struct ChatModel(std::sync::Arc<std::sync::Mutex<ChatState>>);

#[derive(Default)]
pub struct ChatState {
    script: std::collections::VecDeque<Value>,
    /// Every request: its body, the status answered, the rule broken.
    seen: Vec<(Value, u16, String)>,
}

impl ChatModel {
    pub fn new(script: impl IntoIterator<Item = Value>) -> ChatModel {
        ChatModel(std::sync::Arc::new(std::sync::Mutex::new(ChatState {
            script: script.into_iter().collect(),
            seen: Vec::new(),
        })))
    }

    /// Every request it got: body, status, rule broken.
    pub fn seen(&self) -> Vec<(Value, u16, String)> {
        self.0.lock().unwrap().seen.clone()
    }
}

impl Respond for ChatModel {
    fn respond(&self, req: &wiremock::Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let mut st = self.0.lock().unwrap();
        if let Some(rule) = openai_rules(&messages) {
            st.seen.push((body, 400, rule.clone()));
            return provider_error(&rule);
        }
        let Some(mut message) = st.script.pop_front() else {
            st.seen.push((body, 500, "script exhausted".into()));
            return ResponseTemplate::new(500).set_body_string("script exhausted");
        };
        if message["echo"] == true {
            let last = messages
                .iter()
                .rev()
                .find(|m| m["role"] == "tool")
                .map(|m| match &m["content"] {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => {
                        parts.iter().filter_map(|p| p["text"].as_str()).collect()
                    }
                    other => other.to_string(),
                })
                .unwrap_or_default();
            message = json!({"role": "assistant", "content": format!("ANSWER: {last}")});
        }
        let template = serve(&body, message);
        st.seen.push((body, 200, String::new()));
        template
    }
}
