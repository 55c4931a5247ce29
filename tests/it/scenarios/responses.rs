//! The Responses adapter: a round as a response object or as the event
//! stream the API sends (created, items added with their content parts and
//! deltas, items done, completed); a client request; what a client reads.

use serde_json::{json, Value};

use crate::scenarios::model::{
    scripted_hex_id, scripted_id, ClientView, Dialect, ProviderView, ToolResult, Turn, ViewCall,
};
use crate::scenarios::wire::{
    args_text, args_value, client_tools, halves, paragraphs, text_of, usage_pair, Event,
};

fn tool(name: &str, description: &str, properties: Value) -> Value {
    json!({"type": "function", "name": name, "description": description,
           "parameters": {"type": "object", "properties": properties}})
}

pub fn request(prompt: &str, client_runtime: bool, stream: bool) -> Value {
    json!({"model": "gpt-test", "tools": client_tools(client_runtime, tool), "stream": stream, "store": false,
           "input": [{"role": "user", "content": prompt}]})
}

/// `prev` grown by the items the client got and its outputs for its calls.
pub fn continued(prev: &Value, view: &ClientView, results: &[&str]) -> Value {
    let mut body = prev.clone();
    let input = body["input"].as_array_mut().unwrap();
    if !view.text.is_empty() {
        input.push(json!({"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": view.text, "annotations": []}]}));
    }
    for c in &view.calls {
        input.push(
            json!({"type": "function_call", "call_id": c.id, "name": c.name,
                          "arguments": args_text(&c.args)}),
        );
    }
    for (c, r) in view.calls.iter().zip(results) {
        input.push(json!({"type": "function_call_output", "call_id": c.id, "output": r}));
    }
    body
}

fn usage(u: (u64, u64)) -> Value {
    json!({"input_tokens": u.0, "input_tokens_details": {"cached_tokens": 0},
           "output_tokens": u.1, "output_tokens_details": {"reasoning_tokens": 0},
           "total_tokens": u.0 + u.1})
}

fn items(t: &Turn, round: usize) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(text) = &t.text {
        out.push(
            json!({"type": "message", "id": scripted_hex_id("msg_", round, 0), "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}),
        );
    }
    for (i, c) in t.calls.iter().enumerate() {
        out.push(
            json!({"type": "function_call", "id": scripted_hex_id("fc_", round, i),
            "call_id": scripted_id("call_", round, i), "name": c.name, "arguments": c.args,
            "status": "completed"}),
        );
    }
    out
}

pub fn render_json(t: &Turn, round: usize) -> Value {
    json!({"id": scripted_hex_id("resp_", round, 0), "object": "response", "created_at": 1,
           "status": "completed", "model": "gpt-test", "output": items(t, round),
           "usage": usage(t.usage)})
}

/// Writes events with rising sequence numbers.
struct Events {
    out: String,
    seq: u64,
}

impl Events {
    fn push(&mut self, mut data: Value) {
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        let kind = data["type"].as_str().unwrap().to_owned();
        self.out += &format!("event: {kind}\ndata: {data}\n\n");
    }
}

fn head(round: usize) -> Value {
    json!({"id": scripted_hex_id("resp_", round, 0), "object": "response", "created_at": 1,
           "status": "in_progress", "model": "gpt-test", "output": []})
}

fn start(round: usize) -> Events {
    let mut ev = Events {
        out: String::new(),
        seq: 0,
    };
    ev.push(json!({"type": "response.created", "response": head(round)}));
    ev.push(json!({"type": "response.in_progress", "response": head(round)}));
    ev
}

/// `response.created` and `response.in_progress`, no item yet.
pub fn preamble(round: usize) -> String {
    start(round).out
}

pub fn render_sse(t: &Turn, round: usize, _req: &Value) -> String {
    let mut ev = start(round);
    for (i, item) in items(t, round).into_iter().enumerate() {
        let id = item["id"].clone();
        let mut added = item.clone();
        added["status"] = json!("in_progress");
        if item["type"] == "message" {
            added["content"] = json!([]);
            ev.push(
                json!({"type": "response.output_item.added", "output_index": i, "item": added}),
            );
            let text = item["content"][0]["text"].as_str().unwrap();
            let part = json!({"type": "output_text", "text": "", "annotations": []});
            ev.push(
                json!({"type": "response.content_part.added", "output_index": i,
                           "item_id": id, "content_index": 0, "part": part}),
            );
            let (a, b) = halves(text);
            for d in [a, b] {
                ev.push(
                    json!({"type": "response.output_text.delta", "output_index": i,
                               "item_id": id, "content_index": 0, "delta": d}),
                );
            }
            ev.push(
                json!({"type": "response.output_text.done", "output_index": i,
                           "item_id": id, "content_index": 0, "text": text}),
            );
            ev.push(
                json!({"type": "response.content_part.done", "output_index": i,
                           "item_id": id, "content_index": 0, "part": item["content"][0]}),
            );
        } else {
            added["arguments"] = json!("");
            ev.push(
                json!({"type": "response.output_item.added", "output_index": i, "item": added}),
            );
            let args = item["arguments"].as_str().unwrap();
            let (a, b) = halves(args);
            for d in [a, b] {
                ev.push(json!({"type": "response.function_call_arguments.delta",
                               "output_index": i, "item_id": id, "delta": d}));
            }
            ev.push(
                json!({"type": "response.function_call_arguments.done", "output_index": i,
                           "item_id": id, "arguments": args}),
            );
        }
        ev.push(json!({"type": "response.output_item.done", "output_index": i, "item": item}));
    }
    ev.push(json!({"type": "response.completed", "response": render_json(t, round)}));
    ev.out
}

pub fn error_body(status: u16) -> Value {
    crate::scenarios::chat::error_body(status)
}

fn call_of(item: &Value) -> Option<ViewCall> {
    (item["type"] == "function_call").then(|| ViewCall {
        id: item["call_id"].as_str().unwrap_or("").into(),
        name: item["name"].as_str().unwrap_or("").into(),
        args: args_value(item["arguments"].as_str().unwrap_or("")),
    })
}

pub fn reduce_json(v: &Value) -> ClientView {
    let output = v["output"].as_array().cloned().unwrap_or_default();
    let text = paragraphs(
        output
            .iter()
            .filter(|i| i["type"] == "message")
            .map(|i| text_of(&i["content"])),
    );
    ClientView {
        text,
        calls: output.iter().filter_map(call_of).collect(),
        usage: usage_pair(&v["usage"], "input_tokens", "output_tokens"),
        ..ClientView::default()
    }
}

/// What a streaming client shows: the text deltas (an item's text a
/// paragraph), the calls of the items done, the usage of
/// `response.completed`.
pub fn reduce_sse(events: &[Event]) -> ClientView {
    let mut view = ClientView::default();
    let mut texts: Vec<(Value, String)> = Vec::new();
    for e in events {
        match e.kind() {
            "response.output_text.delta" => {
                let index = e.get("/output_index");
                let delta = e.get("/delta").as_str().unwrap_or("");
                match texts.iter_mut().find(|(i, _)| i == index) {
                    Some((_, t)) => t.push_str(delta),
                    None => texts.push((index.clone(), delta.to_owned())),
                }
            }
            "response.output_item.done" => view.calls.extend(call_of(e.get("/item"))),
            "response.completed" => {
                view.usage = usage_pair(e.get("/response/usage"), "input_tokens", "output_tokens")
            }
            "error" | "response.failed" => view.error = Some(stream_error(e)),
            _ => {}
        }
    }
    view.text = paragraphs(texts.iter().map(|(_, t)| t));
    view
}

/// The stream's error event: `error` (code, message at the top) or
/// `response.failed` (`response.error`).
fn stream_error(e: &Event) -> crate::scenarios::model::ErrorView {
    let err = if e.kind() == "error" {
        e.json.clone().unwrap_or_default()
    } else {
        e.get("/response/error").clone()
    };
    crate::scenarios::model::ErrorView {
        in_stream: true,
        status: 200,
        code: err["code"].as_str().map(str::to_owned),
        kind: None,
        message: err["message"].as_str().unwrap_or("").into(),
        body: e.data.clone(),
        shaped: err["message"].is_string() && err.get("code").is_some(),
        retry_after: None,
    }
}

/// Rising sequence numbers; one `response.created` first; one terminal last
/// (or an error event last); items added at contiguous indices and done;
/// every message item's text streamed as content part and text deltas.
pub fn check_stream(events: &[Event]) -> Result<(), String> {
    let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
    let seqs: Vec<u64> = events
        .iter()
        .filter_map(|e| e.get("/sequence_number").as_u64())
        .collect();
    if seqs.len() != events.len() || seqs.windows(2).any(|w| w[0] >= w[1]) {
        return Err(format!("sequence numbers rise on every event: {seqs:?}"));
    }
    if kinds.first() != Some(&"response.created") || count(&kinds, "response.created") != 1 {
        return Err(format!("one response.created, first: {kinds:?}"));
    }
    let last = kinds.last().copied().unwrap_or("");
    if kinds
        .iter()
        .any(|k| *k == "error" || *k == "response.failed")
    {
        if last != "error" && last != "response.failed" {
            return Err(format!("the error event is the last: {kinds:?}"));
        }
    } else if last != "response.completed" || count(&kinds, "response.completed") != 1 {
        return Err(format!("one response.completed, last: {kinds:?}"));
    }
    let mut done: Vec<Value> = Vec::new();
    let mut added = 0u64;
    for (at, e) in events.iter().enumerate() {
        match e.kind() {
            "response.output_item.added" => {
                if e.get("/output_index").as_u64() != Some(added) {
                    return Err(format!("output_index contiguous from 0: {kinds:?}"));
                }
                added += 1;
            }
            "response.output_item.done" => {
                let item = e.get("/item");
                if item["type"] == "message" {
                    message_streamed(events, at, e.get("/output_index"), item)?;
                }
                done.push(item.clone());
            }
            _ => {}
        }
    }
    if done.len() as u64 != added {
        return Err(format!("every item added is done: {kinds:?}"));
    }
    if let Some(e) = events.iter().find(|e| e.kind() == "response.completed") {
        if e.get("/response/output") != &json!(done) {
            return Err(format!(
                "response.completed lists the items done: {} vs {done:?}",
                e.get("/response/output")
            ));
        }
    }
    Ok(())
}

fn count(kinds: &[&str], k: &str) -> usize {
    kinds.iter().filter(|x| **x == k).count()
}

/// The events of the message item done at `at` carry its text as a
/// content part with text deltas, in order.
fn message_streamed(
    events: &[Event],
    at: usize,
    index: &Value,
    item: &Value,
) -> Result<(), String> {
    let text = text_of(&item["content"]);
    let mine: Vec<&Event> = events[..at]
        .iter()
        .filter(|e| e.get("/output_index") == index)
        .collect();
    let kinds: Vec<&str> = mine.iter().map(|e| e.kind()).collect();
    let order = [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
    ];
    let mut from = 0;
    for k in order {
        match kinds[from..].iter().position(|x| *x == k) {
            Some(p) => from += p,
            None => {
                return Err(format!(
                    "message item {index} ({text:?}) streams {order:?} before output_item.done; \
                     its events: {kinds:?}"
                ))
            }
        }
    }
    let streamed: String = mine
        .iter()
        .filter(|e| e.kind() == "response.output_text.delta")
        .filter_map(|e| e.get("/delta").as_str())
        .collect();
    if streamed != text {
        return Err(format!(
            "message item {index}: deltas {streamed:?} != text {text:?}"
        ));
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
    for i in body["input"].as_array().into_iter().flatten() {
        let id = i["call_id"].as_str().unwrap_or("").to_owned();
        match i["type"].as_str().unwrap_or("") {
            "function_call" => calls.push((id, i["name"].as_str().unwrap_or("").to_owned())),
            "function_call_output" => results.push(ToolResult {
                id,
                text: text_of(&i["output"]),
                is_error: false,
            }),
            _ => {}
        }
    }
    ProviderView {
        dialect: Dialect::Responses,
        tools,
        calls,
        results,
        body: body.clone(),
    }
}
