//! The Chat Completions adapter: a round as a completion or as delta
//! chunks and `[DONE]`; a client request; what a client reads back.

use serde_json::{json, Value};

use crate::scenarios::model::{scripted_id, ClientView, ProviderView, ToolResult, Turn, ViewCall};
use crate::scenarios::wire::{
    args_text, args_value, client_tools, error_view, halves, text_of, usage_pair, Event,
};

fn tool(name: &str, description: &str, properties: Value) -> Value {
    json!({"type": "function", "function": {"name": name, "description": description,
           "parameters": {"type": "object", "properties": properties}}})
}

pub fn request(prompt: &str, client_runtime: bool, stream: bool) -> Value {
    let mut body = json!({"model": "test-model", "tools": client_tools(client_runtime, tool), "stream": stream,
        "messages": [{"role": "system", "content": "You are an agent."},
                     {"role": "user", "content": prompt}]});
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

/// `prev` grown by the turn the client got and its results for its calls.
pub fn continued(prev: &Value, view: &ClientView, results: &[&str]) -> Value {
    let mut body = prev.clone();
    let messages = body["messages"].as_array_mut().unwrap();
    let calls: Vec<Value> = view
        .calls
        .iter()
        .map(|c| {
            json!({"id": c.id, "type": "function",
                        "function": {"name": c.name, "arguments": args_text(&c.args)}})
        })
        .collect();
    let text = (!view.text.is_empty()).then_some(&view.text);
    messages.push(json!({"role": "assistant", "content": text, "tool_calls": calls}));
    for (c, r) in view.calls.iter().zip(results) {
        messages.push(json!({"role": "tool", "tool_call_id": c.id, "content": r}));
    }
    body
}

fn call_id(round: usize, i: usize) -> String {
    scripted_id("call_", round, i)
}

fn finish(t: &Turn) -> &'static str {
    if t.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

fn usage(u: (u64, u64)) -> Value {
    json!({"prompt_tokens": u.0, "completion_tokens": u.1, "total_tokens": u.0 + u.1})
}

pub fn render_json(t: &Turn, round: usize) -> Value {
    let mut message = json!({"role": "assistant", "content": t.text});
    if !t.calls.is_empty() {
        let calls: Vec<Value> = t
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                json!({"id": call_id(round, i), "type": "function",
                                 "function": {"name": c.name, "arguments": c.args}})
            })
            .collect();
        message["tool_calls"] = json!(calls);
    }
    json!({"id": format!("chatcmpl-{round}"), "object": "chat.completion", "created": 1,
           "model": "test-model", "usage": usage(t.usage),
           "choices": [{"index": 0, "finish_reason": finish(t), "message": message}]})
}

fn chunk(round: usize, delta: Value, finish: Option<&str>) -> String {
    let c = json!({"id": format!("chatcmpl-{round}"), "object": "chat.completion.chunk",
        "created": 1, "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

/// The first chunk: the role, no words yet.
pub fn preamble(round: usize) -> String {
    chunk(round, json!({"role": "assistant", "content": ""}), None)
}

pub fn render_sse(t: &Turn, round: usize, req: &Value) -> String {
    let mut s = preamble(round);
    if let Some(text) = &t.text {
        let (a, b) = halves(text);
        for part in [a, b] {
            s += &chunk(round, json!({"content": part}), None);
        }
    }
    for (i, c) in t.calls.iter().enumerate() {
        let head = json!({"index": i, "id": call_id(round, i), "type": "function",
                          "function": {"name": c.name, "arguments": ""}});
        s += &chunk(round, json!({"tool_calls": [head]}), None);
        let (a, b) = halves(&c.args);
        for part in [a, b] {
            let d = json!({"index": i, "function": {"arguments": part}});
            s += &chunk(round, json!({"tool_calls": [d]}), None);
        }
    }
    s += &chunk(round, json!({}), Some(finish(t)));
    if req["stream_options"]["include_usage"] == true {
        let c = json!({"id": format!("chatcmpl-{round}"), "object": "chat.completion.chunk",
            "created": 1, "model": "test-model", "choices": [], "usage": usage(t.usage)});
        s += &format!("data: {c}\n\n");
    }
    s + "data: [DONE]\n\n"
}

pub fn error_body(status: u16) -> Value {
    json!({"error": {"message": format!("provider says {status}"), "type": "server_error",
                     "param": null, "code": format!("provider_{status}")}})
}

pub fn reduce_json(v: &Value) -> ClientView {
    let m = &v["choices"][0]["message"];
    let calls = m["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| ViewCall {
            id: c["id"].as_str().unwrap_or("").into(),
            name: c["function"]["name"].as_str().unwrap_or("").into(),
            args: args_value(c["function"]["arguments"].as_str().unwrap_or("")),
        })
        .collect();
    ClientView {
        text: m["content"].as_str().unwrap_or("").into(),
        calls,
        usage: usage_pair(&v["usage"], "prompt_tokens", "completion_tokens"),
        ..ClientView::default()
    }
}

/// What an OpenAI SDK accumulates from the chunks.
pub fn reduce_sse(events: &[Event]) -> ClientView {
    let mut view = ClientView::default();
    let mut calls: Vec<(i64, String, String, String)> = Vec::new();
    for e in events {
        let Some(j) = &e.json else { continue };
        if j.get("error").is_some_and(|x| !x.is_null()) {
            view.error = Some(error_view(true, 200, j, e.data.clone(), false));
        }
        if let Some(u) = usage_pair(&j["usage"], "prompt_tokens", "completion_tokens") {
            view.usage = Some(u);
        }
        let d = &j["choices"][0]["delta"];
        if let Some(t) = d["content"].as_str() {
            view.text.push_str(t);
        }
        for tc in d["tool_calls"].as_array().into_iter().flatten() {
            let index = tc["index"].as_i64().unwrap_or(-1);
            let pos = match calls.iter().position(|c| c.0 == index) {
                Some(p) => p,
                None => {
                    calls.push((index, String::new(), String::new(), String::new()));
                    calls.len() - 1
                }
            };
            if let Some(id) = tc["id"].as_str().filter(|s| !s.is_empty()) {
                calls[pos].1 = id.into();
            }
            if let Some(n) = tc["function"]["name"].as_str() {
                calls[pos].2.push_str(n);
            }
            if let Some(a) = tc["function"]["arguments"].as_str() {
                calls[pos].3.push_str(a);
            }
        }
    }
    view.calls = calls
        .into_iter()
        .map(|(_, id, name, args)| ViewCall {
            id,
            name,
            args: args_value(&args),
        })
        .collect();
    view
}

/// One completion id, one finish, one `[DONE]` last; an error event ends it.
pub fn check_stream(events: &[Event]) -> Result<(), String> {
    let errored = events.iter().position(|e| e.get("/error").is_object());
    if let Some(at) = errored {
        let after: Vec<&str> = events[at + 1..].iter().map(|e| e.data.as_str()).collect();
        if !after.is_empty() {
            return Err(format!("events after the error event: {after:?}"));
        }
        return Ok(());
    }
    let done = events.iter().filter(|e| e.data.trim() == "[DONE]").count();
    if done != 1 || events.last().is_none_or(|e| e.data.trim() != "[DONE]") {
        return Err(format!("one [DONE], last ({done} seen)"));
    }
    let mut ids: Vec<&str> = events
        .iter()
        .filter_map(|e| e.get("/id").as_str())
        .collect();
    ids.dedup();
    if ids.len() > 1 {
        return Err(format!("one completion id, got {ids:?}"));
    }
    let finishes = events
        .iter()
        .filter(|e| e.get("/choices/0/finish_reason").is_string())
        .count();
    if finishes != 1 {
        return Err(format!("one finish_reason, got {finishes}"));
    }
    Ok(())
}

pub fn reduce_request(body: &Value) -> ProviderView {
    let tools = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["function"]["name"].as_str().unwrap_or("?").to_owned())
        .collect();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            let id = c["id"].as_str().unwrap_or("").to_owned();
            calls.push((id, c["function"]["name"].as_str().unwrap_or("").to_owned()));
        }
        if m["role"] == "tool" {
            results.push(ToolResult {
                id: m["tool_call_id"].as_str().unwrap_or("").into(),
                text: text_of(&m["content"]),
                is_error: false,
            });
        }
    }
    ProviderView {
        dialect: crate::scenarios::model::Dialect::Chat,
        tools,
        calls,
        results,
        body: body.clone(),
    }
}
