//! The Messages adapter: a round as a message or as the event stream the
//! API sends (message_start, content blocks started, delta'd and stopped,
//! message_delta, message_stop); a client request; what a client reads.

use serde_json::{json, Value};

use crate::scenarios::model::{
    scripted_id, ClientView, Dialect, ErrorView, ProviderView, ToolResult, Turn, ViewCall,
};
use crate::scenarios::wire::{
    args_value, client_tools, error_view, halves, paragraphs, text_of, usage_pair, Event,
};

fn tool(name: &str, description: &str, properties: Value) -> Value {
    json!({"name": name, "description": description,
           "input_schema": {"type": "object", "properties": properties}})
}

pub fn request(prompt: &str, client_runtime: bool, stream: bool) -> Value {
    json!({"model": "claude-test", "max_tokens": 1024, "system": "You are an agent.",
           "tools": client_tools(client_runtime, tool), "stream": stream,
           "messages": [{"role": "user", "content": prompt}]})
}

/// `prev` grown by the turn the client got and its results for its calls.
pub fn continued(prev: &Value, view: &ClientView, results: &[&str]) -> Value {
    let mut body = prev.clone();
    let messages = body["messages"].as_array_mut().unwrap();
    let mut content = Vec::new();
    if !view.text.is_empty() {
        content.push(json!({"type": "text", "text": view.text}));
    }
    for c in &view.calls {
        content.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.args}));
    }
    messages.push(json!({"role": "assistant", "content": content}));
    let answers: Vec<Value> = view
        .calls
        .iter()
        .zip(results)
        .map(|(c, r)| json!({"type": "tool_result", "tool_use_id": c.id, "content": r}))
        .collect();
    messages.push(json!({"role": "user", "content": answers}));
    body
}

/// The input the model wrote: an object, or (when the model wrote no
/// object) the text as a string.
fn input_of(args: &str) -> Value {
    match args_value(args) {
        v @ Value::Object(_) => v,
        _ => Value::String(args.to_owned()),
    }
}

fn blocks(t: &Turn, round: usize) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(text) = &t.text {
        out.push(json!({"type": "text", "text": text}));
    }
    for (i, c) in t.calls.iter().enumerate() {
        out.push(
            json!({"type": "tool_use", "id": scripted_id("toolu_", round, i),
                        "name": c.name, "input": input_of(&c.args)}),
        );
    }
    out
}

fn stop_reason(t: &Turn) -> &'static str {
    if t.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

pub fn render_json(t: &Turn, round: usize) -> Value {
    json!({"id": scripted_id("msg_", round, 0), "type": "message", "role": "assistant",
           "model": "claude-test", "content": blocks(t, round), "stop_reason": stop_reason(t),
           "stop_sequence": null,
           "usage": {"input_tokens": t.usage.0, "output_tokens": t.usage.1}})
}

fn event(data: Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap()
    )
}

fn start(round: usize, input_tokens: u64) -> String {
    event(
        json!({"type": "message_start", "message": {"id": scripted_id("msg_", round, 0),
        "type": "message", "role": "assistant", "model": "claude-test", "content": [],
        "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}),
    )
}

/// `message_start`, no block yet.
pub fn preamble(round: usize) -> String {
    start(round, 1)
}

pub fn render_sse(t: &Turn, round: usize, _req: &Value) -> String {
    let mut s = start(round, t.usage.0);
    for (i, block) in blocks(t, round).into_iter().enumerate() {
        let mut opened = block.clone();
        let (kind, whole) = if block["type"] == "text" {
            opened["text"] = json!("");
            ("text_delta", block["text"].as_str().unwrap().to_owned())
        } else {
            opened["input"] = json!({});
            let raw = &t.calls[i - usize::from(t.text.is_some())].args;
            ("input_json_delta", raw.clone())
        };
        s += &event(json!({"type": "content_block_start", "index": i, "content_block": opened}));
        let (a, b) = halves(&whole);
        for part in [a, b] {
            let delta = if kind == "text_delta" {
                json!({"type": kind, "text": part})
            } else {
                json!({"type": kind, "partial_json": part})
            };
            s += &event(json!({"type": "content_block_delta", "index": i, "delta": delta}));
        }
        s += &event(json!({"type": "content_block_stop", "index": i}));
        if i == 0 {
            s += &event(json!({"type": "ping"}));
        }
    }
    s += &event(json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason(t), "stop_sequence": null},
        "usage": {"output_tokens": t.usage.1}}));
    s + &event(json!({"type": "message_stop"}))
}

pub fn error_body(status: u16) -> Value {
    let kind = if status == 429 {
        "rate_limit_error"
    } else {
        "api_error"
    };
    json!({"type": "error", "error": {"type": kind, "message": format!("provider says {status}")}})
}

pub fn reduce_json(v: &Value) -> ClientView {
    let content = v["content"].as_array().cloned().unwrap_or_default();
    let text = paragraphs(
        content
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str()),
    );
    let calls = content
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| ViewCall {
            id: b["id"].as_str().unwrap_or("").into(),
            name: b["name"].as_str().unwrap_or("").into(),
            args: b["input"].clone(),
        })
        .collect();
    ClientView {
        text,
        calls,
        usage: usage_pair(&v["usage"], "input_tokens", "output_tokens"),
        ..ClientView::default()
    }
}

/// What an Anthropic SDK accumulates: text deltas (a block's text a
/// paragraph), tool_use blocks with their input JSON, usage from
/// message_start and the final message_delta.
pub fn reduce_sse(events: &[Event]) -> ClientView {
    let mut view = ClientView::default();
    let mut texts: Vec<(Value, String)> = Vec::new();
    let mut calls: Vec<(u64, String, String, String)> = Vec::new();
    let mut input_tokens = None;
    for e in events {
        match e.kind() {
            "message_start" => input_tokens = e.get("/message/usage/input_tokens").as_u64(),
            "content_block_start" if e.get("/content_block/type") == "tool_use" => calls.push((
                e.get("/index").as_u64().unwrap_or(u64::MAX),
                e.get("/content_block/id").as_str().unwrap_or("").into(),
                e.get("/content_block/name").as_str().unwrap_or("").into(),
                String::new(),
            )),
            "content_block_delta" => {
                let d = e.get("/delta");
                if let Some(t) = d["text"].as_str().filter(|_| d["type"] == "text_delta") {
                    let index = e.get("/index");
                    match texts.iter_mut().find(|(i, _)| i == index) {
                        Some((_, text)) => text.push_str(t),
                        None => texts.push((index.clone(), t.to_owned())),
                    }
                }
                if let Some(p) = d["partial_json"].as_str() {
                    let index = e.get("/index").as_u64();
                    if let Some(c) = calls.iter_mut().rev().find(|c| Some(c.0) == index) {
                        c.3.push_str(p);
                    }
                }
            }
            "message_delta" => {
                let u = e.get("/usage");
                let input = u["input_tokens"].as_u64().or(input_tokens);
                view.usage = input.zip(u["output_tokens"].as_u64());
            }
            "error" => view.error = Some(stream_error(e)),
            _ => {}
        }
    }
    view.text = paragraphs(texts.iter().map(|(_, t)| t));
    view.calls = calls
        .into_iter()
        .map(|(_, id, name, json)| ViewCall {
            id,
            name,
            args: if json.is_empty() {
                json!({})
            } else {
                args_value(&json)
            },
        })
        .collect();
    view
}

fn stream_error(e: &Event) -> ErrorView {
    let v = e.json.clone().unwrap_or_default();
    error_view(true, 200, &v, e.data.clone(), true)
}

/// One message_start first; one message_delta and one message_stop last
/// (or an error event last); blocks started at contiguous indices, each
/// stopped, deltas only to an open block.
pub fn check_stream(events: &[Event]) -> Result<(), String> {
    let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
    let count = |k: &str| kinds.iter().filter(|x| **x == k).count();
    if kinds.first() != Some(&"message_start") || count("message_start") != 1 {
        return Err(format!("one message_start, first: {kinds:?}"));
    }
    if kinds.contains(&"error") {
        if kinds.last() != Some(&"error") {
            return Err(format!("the error event is the last: {kinds:?}"));
        }
    } else if kinds.last() != Some(&"message_stop")
        || count("message_stop") != 1
        || count("message_delta") != 1
    {
        return Err(format!(
            "one message_delta, one message_stop last: {kinds:?}"
        ));
    }
    let mut open: Option<u64> = None;
    let mut started = 0u64;
    for e in events {
        let index = e.get("/index").as_u64();
        match e.kind() {
            "content_block_start" => {
                if open.is_some() || index != Some(started) {
                    return Err(format!("blocks start one at a time, contiguous: {kinds:?}"));
                }
                open = index;
                started += 1;
            }
            "content_block_delta" if open != index || index.is_none() => {
                return Err(format!("a delta to a block that is not open: {kinds:?}"));
            }
            "content_block_stop" => {
                if open != index || index.is_none() {
                    return Err(format!("a stop of a block that is not open: {kinds:?}"));
                }
                open = None;
            }
            _ => {}
        }
    }
    if open.is_some() && !kinds.contains(&"error") {
        return Err(format!("every block is stopped: {kinds:?}"));
    }
    Ok(())
}

pub fn reduce_request(body: &Value) -> ProviderView {
    let tools = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["name"].as_str().unwrap_or("?").to_owned())
        .collect();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        for b in m["content"].as_array().into_iter().flatten() {
            match b["type"].as_str().unwrap_or("") {
                "tool_use" => calls.push((
                    b["id"].as_str().unwrap_or("").to_owned(),
                    b["name"].as_str().unwrap_or("").to_owned(),
                )),
                "tool_result" => results.push(ToolResult {
                    id: b["tool_use_id"].as_str().unwrap_or("").into(),
                    text: text_of(&b["content"]),
                    is_error: b["is_error"] == true,
                }),
                _ => {}
            }
        }
    }
    ProviderView {
        dialect: Dialect::Messages,
        tools,
        calls,
        results,
        body: body.clone(),
    }
}
