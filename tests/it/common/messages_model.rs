//! A scripted model behind Anthropic's `POST /v1/messages`: it answers each
//! request with the next list of content blocks, as a message or as the
//! event stream the API sends, and enforces the API's rules on what it gets
//! (a 400 like Anthropic's when one is broken):
//! - every `tool_use` is answered by a `tool_result` in the next user
//!   message, and every `tool_result` answers a `tool_use` just before it;
//! - a turn the model made with thinking comes back with its thinking
//!   blocks, signatures byte for byte.
//!
//! `/v1/messages/count_tokens` answers `{"input_tokens": <body bytes / 4>}`.
//!
//! Message threads (beta) as the API keeps them: a request with `thread`
//! `{"type": "continue", "previous_message_id": ID}` continues the
//! conversation whose answer was ID, its messages after the ones held.

use std::collections::HashMap;

use serde_json::{json, Value};
use wiremock::{Request, ResponseTemplate};

use super::scripted_api::{path_and_query, ScriptedApi, ScriptedModel, State};

/// What the model got, and what it answered.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The request body.
    pub body: Value,
    /// The request headers.
    pub headers: HashMap<String, String>,
    /// The path and query it was sent to.
    pub path: String,
    /// 200, or 400 with the rule broken.
    pub status: u16,
    /// The rule broken, if any.
    pub refusal: String,
}

/// What the model keeps besides its script.
#[derive(Default)]
pub struct Messages {
    /// The thinking blocks each tool_use the model made came with.
    thinking_of: HashMap<String, Vec<Value>>,
    /// Each answer's conversation (its messages and the answer), by the
    /// answer's id, for requests that continue a thread.
    threads: HashMap<String, Vec<Value>>,
}

pub type MessagesModel = ScriptedModel<Messages>;

/// The API's rules on a conversation; the first one broken.
pub fn messages_rules(
    messages: &[Value],
    thinking_of: &HashMap<String, Vec<Value>>,
) -> Option<String> {
    let blocks = |m: &Value| m["content"].as_array().cloned().unwrap_or_default();
    for (i, m) in messages.iter().enumerate() {
        let content = blocks(m);
        if m["role"] == "assistant" {
            let uses: Vec<&Value> = content.iter().filter(|b| b["type"] == "tool_use").collect();
            if uses.is_empty() {
                continue;
            }
            let next = messages.get(i + 1).map(blocks).unwrap_or_default();
            for u in &uses {
                let id = u["id"].as_str().unwrap_or("");
                if !next
                    .iter()
                    .any(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
                {
                    return Some(format!("messages.{}: `tool_use` ids were found without `tool_result` blocks immediately after: {id}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i + 1));
                }
                if let Some(thinking) = thinking_of.get(id) {
                    let replayed: Vec<&Value> = content
                        .iter()
                        .filter(|b| b["type"] == "thinking" || b["type"] == "redacted_thinking")
                        .collect();
                    if replayed.len() != thinking.len()
                        || replayed.iter().zip(thinking).any(|(a, b)| *a != b)
                    {
                        return Some(format!("messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks).", content.first().and_then(|b| b["type"].as_str()).unwrap_or("?")));
                    }
                }
            }
        } else {
            let results: Vec<&Value> = content
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .collect();
            if results.is_empty() {
                continue;
            }
            let before = i
                .checked_sub(1)
                .map(|p| blocks(&messages[p]))
                .unwrap_or_default();
            for r in &results {
                let id = r["tool_use_id"].as_str().unwrap_or("");
                if !before
                    .iter()
                    .any(|b| b["type"] == "tool_use" && b["id"] == id)
                {
                    return Some(format!("messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."));
                }
            }
            let first_other = content.iter().position(|b| b["type"] != "tool_result");
            let last_result = content.iter().rposition(|b| b["type"] == "tool_result");
            if let (Some(o), Some(r)) = (first_other, last_result) {
                if o < r {
                    return Some(format!(
                        "messages.{i}: `tool_result` blocks must come first in the user message"
                    ));
                }
            }
        }
    }
    None
}

/// The API's rule on `tool_reference` blocks: each names a tool the
/// request declares (inside a `tool_result`, as a block of its own, or in
/// a `tool_search_tool_result`'s list); the first that does not.
pub fn reference_rule(body: &Value) -> Option<String> {
    let declared: Vec<&str> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    let mut references = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        for b in m["content"].as_array().into_iter().flatten() {
            references.push(b);
            references.extend(b["content"].as_array().into_iter().flatten());
            references.extend(
                b["content"]["tool_references"]
                    .as_array()
                    .into_iter()
                    .flatten(),
            );
        }
    }
    references
        .into_iter()
        .filter(|r| r["type"] == "tool_reference")
        .map(|r| r["tool_name"].as_str().unwrap_or(""))
        .find(|name| !declared.contains(name))
        .map(|name| format!("Tool reference '{name}' not found in available tools"))
}

/// Anthropic's usage.
pub fn anthropic_usage(input: u64, output: u64) -> Value {
    json!({"input_tokens": input, "output_tokens": output,
           "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})
}

/// The event stream of `message`, as the API sends it.
pub fn message_events(message: &Value) -> String {
    let mut out = String::new();
    let mut push = |data: Value| {
        out += &format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap()
        );
    };
    let mut head = message.clone();
    head["content"] = json!([]);
    head["stop_reason"] = Value::Null;
    head["usage"] = json!({"input_tokens": message["usage"]["input_tokens"], "output_tokens": 1});
    push(json!({"type": "message_start", "message": head}));
    for (i, block) in message["content"].as_array().unwrap().iter().enumerate() {
        let mut start = block.clone();
        match block["type"].as_str().unwrap_or("") {
            "tool_use" => {
                start["input"] = json!({});
                push(json!({"type": "content_block_start", "index": i, "content_block": start}));
                let text = block["input"].to_string();
                let (a, b) = text.split_at(text.len() / 2);
                for part in [a, b] {
                    push(json!({"type": "content_block_delta", "index": i,
                                "delta": {"type": "input_json_delta", "partial_json": part}}));
                }
            }
            "text" => {
                start["text"] = json!("");
                push(json!({"type": "content_block_start", "index": i, "content_block": start}));
                push(json!({"type": "content_block_delta", "index": i,
                            "delta": {"type": "text_delta", "text": block["text"]}}));
            }
            "thinking" => {
                start["thinking"] = json!("");
                start["signature"] = json!("");
                push(json!({"type": "content_block_start", "index": i, "content_block": start}));
                push(json!({"type": "content_block_delta", "index": i,
                            "delta": {"type": "thinking_delta", "thinking": block["thinking"]}}));
                push(json!({"type": "content_block_delta", "index": i,
                            "delta": {"type": "signature_delta", "signature": block["signature"]}}));
            }
            _ => push(json!({"type": "content_block_start", "index": i, "content_block": start})),
        }
        push(json!({"type": "content_block_stop", "index": i}));
        push(json!({"type": "ping"}));
    }
    push(
        json!({"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
                "usage": {"output_tokens": message["usage"]["output_tokens"]}}),
    );
    push(json!({"type": "message_stop"}));
    out
}

impl ScriptedApi for Messages {
    type Seen = Seen;
    const PATHS: &'static str = "^/v1/messages(/count_tokens)?$";

    fn answer(st: &mut State<Messages>, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let headers: HashMap<String, String> = req
            .headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
            .collect();
        let path = path_and_query(req);
        let mut seen = Seen {
            body: body.clone(),
            headers,
            path: path.clone(),
            status: 200,
            refusal: String::new(),
        };
        if path.starts_with("/v1/messages/count_tokens") {
            st.seen.push(seen);
            return ResponseTemplate::new(200)
                .set_body_json(json!({"input_tokens": req.body.len() / 4}));
        }
        let mut messages = body["messages"].as_array().cloned().unwrap_or_default();
        if body["thread"]["type"] == "continue" {
            let previous = body["thread"]["previous_message_id"].as_str().unwrap_or("");
            let Some(held) = st.kept.threads.get(previous).cloned() else {
                seen.status = 404;
                seen.refusal = format!("thread not found: {previous}");
                st.seen.push(seen);
                return ResponseTemplate::new(404).set_body_json(json!({"type": "error",
                    "error": {"type": "not_found_error", "message": "thread not found"}}));
            };
            messages = held.into_iter().chain(messages).collect();
        }
        if let Some(rule) =
            messages_rules(&messages, &st.kept.thinking_of).or_else(|| reference_rule(&body))
        {
            seen.status = 400;
            seen.refusal = rule.clone();
            st.seen.push(seen);
            return ResponseTemplate::new(400).set_body_json(json!({"type": "error",
                "error": {"type": "invalid_request_error", "message": rule}}));
        }
        let Some(mut content) = st.script.pop_front() else {
            seen.status = 500;
            seen.refusal = "script exhausted".into();
            st.seen.push(seen);
            return ResponseTemplate::new(500).set_body_string("script exhausted");
        };
        st.n += 1;
        for block in content.iter_mut().filter(|b| b["type"] == "echo") {
            let last = messages
                .iter()
                .rev()
                .flat_map(|m| {
                    let mut blocks = m["content"].as_array().cloned().unwrap_or_default();
                    blocks.reverse();
                    blocks
                })
                .find(|b| b["type"] == "tool_result")
                .map(|b| match &b["content"] {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => {
                        parts.iter().filter_map(|p| p["text"].as_str()).collect()
                    }
                    other => other.to_string(),
                })
                .unwrap_or_default();
            *block = json!({"type": "text", "text": format!("ANSWER: {last}")});
        }
        let thinking: Vec<Value> = content
            .iter()
            .filter(|b| b["type"] == "thinking")
            .cloned()
            .collect();
        for b in content.iter().filter(|b| b["type"] == "tool_use") {
            if !thinking.is_empty() {
                st.kept
                    .thinking_of
                    .insert(b["id"].as_str().unwrap_or("").to_owned(), thinking.clone());
            }
        }
        let stop = if content.iter().any(|b| b["type"] == "tool_use") {
            "tool_use"
        } else {
            "end_turn"
        };
        let message = json!({"id": format!("msg_model_{}", st.n), "type": "message", "role": "assistant",
            "model": "claude-test", "content": content, "stop_reason": stop, "stop_sequence": null,
            "usage": anthropic_usage(100, 10)});
        let stream = body["stream"] == true;
        if !body["thread"].is_null() {
            let mut held = messages;
            held.push(json!({"role": "assistant", "content": message["content"]}));
            st.kept
                .threads
                .insert(message["id"].as_str().unwrap_or("").to_owned(), held);
        }
        st.seen.push(seen);
        if stream {
            ResponseTemplate::new(200)
                .set_body_raw(message_events(&message).into_bytes(), "text/event-stream")
        } else {
            ResponseTemplate::new(200).set_body_json(message)
        }
    }
}

/// A `tool_use` block the model writes.
pub fn tool_use(id: &str, name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

/// A thinking block the model writes, with its signature.
pub fn thinking(text: &str, signature: &str) -> Value {
    json!({"type": "thinking", "thinking": text, "signature": signature})
}

/// A text block.
pub fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

/// The model's `run_code` call with this program.
pub fn run_code_use(id: &str, code: &str) -> Value {
    tool_use(id, "run_code", json!({ "code": code }))
}

/// Client tools as a Messages request declares them.
pub fn fs_input_schema_tools() -> Vec<Value> {
    vec![
        json!({"name": "Read", "description": "Read a file.",
               "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}}),
        json!({"name": "Write", "description": "Write a file.",
               "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}}, "required": ["file_path", "content"]}}),
    ]
}

/// A provider answering `POST /v1/messages` with `contents` (each a
/// message's blocks and its stop reason) in order, as JSON or as events.
pub async fn messages_provider(
    contents: Vec<(Vec<Value>, &str)>,
    stream: bool,
) -> wiremock::MockServer {
    let answers = contents
        .into_iter()
        .enumerate()
        .map(|(i, (content, stop))| {
            let m = json!({"id": format!("msg_{i}"), "type": "message", "role": "assistant",
                       "model": "claude-test", "content": content, "stop_reason": stop,
                       "stop_sequence": null, "usage": anthropic_usage(10, 2)});
            if stream {
                ResponseTemplate::new(200)
                    .set_body_raw(message_events(&m).into_bytes(), "text/event-stream")
            } else {
                ResponseTemplate::new(200).set_body_json(m)
            }
        });
    super::mounted(
        "/v1/messages",
        super::Script::new(answers.collect::<Vec<_>>()),
    )
    .await
}

/// The proxy with `vars`, its Anthropic upstream `server`'s `/v1`.
pub async fn anthropic_proxy(server: &wiremock::MockServer, vars: &[(&str, &str)]) -> super::Proxy {
    let upstream = format!("{}/v1", server.uri());
    let mut all = vars.to_vec();
    all.push(("CODEMODE_ANTHROPIC_UPSTREAM", upstream.as_str()));
    super::start(server, &all).await
}

/// Every content block a Messages client was handed for `body` (a 200),
/// streamed or whole.
pub async fn handed(proxy: &super::Proxy, body: &Value) -> Vec<Value> {
    let res = proxy
        .post(
            "/v1/messages",
            body,
            &[("anthropic-version", "2023-06-01"), ("x-api-key", "k")],
        )
        .await;
    let status = res.status();
    let bytes = res.bytes().await.unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    if body["stream"] == true {
        return super::sse_client::payloads(&bytes)
            .into_iter()
            .filter_map(|p| serde_json::from_str::<Value>(&p).ok())
            .filter(|e| e["type"] == "content_block_start")
            .map(|e| e["content_block"].clone())
            .collect();
    }
    let m: Value = serde_json::from_slice(&bytes).unwrap();
    m["content"].as_array().cloned().unwrap_or_default()
}
