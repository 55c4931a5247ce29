//! The Gemini adapter: a round as a `GenerateContentResponse` or as the
//! `:streamGenerateContent?alt=sse` chunks the API sends (each a whole
//! response: text split across chunks, each `functionCall` whole in one,
//! running usage, the last content chunk carrying `finishReason`; no
//! `[DONE]`, no event names); a client request; what a client reads.
//!
//! Gemini 2.x sends calls without ids: the model's odd rounds come without
//! them (the proxy gives each one, which the client echoes), its even
//! rounds with ids of the model's own.

use serde_json::{json, Value};

use crate::common::gemini_model::declarations;
use crate::scenarios::harness::google_status;
use crate::scenarios::model::{
    ClientView, Dialect, ErrorView, ProviderView, ToolResult, Turn, ViewCall,
};
use crate::scenarios::wire::{args_value, client_tools, halves, Event};

fn decl(name: &str, description: &str, properties: Value) -> Value {
    json!({"name": name, "description": description,
           "parametersJsonSchema": {"type": "object", "properties": properties}})
}

/// The model and the stream flag are in the path ([`Dialect::path`]), not
/// the body.
pub fn request(prompt: &str, client_runtime: bool, _stream: bool) -> Value {
    json!({"contents": [{"role": "user", "parts": [{"text": prompt}]}],
           "systemInstruction": {"parts": [{"text": "You are an agent."}]},
           "tools": [{"functionDeclarations": client_tools(client_runtime, decl)}]})
}

/// `prev` grown by the model turn the client got and a user content with
/// its `functionResponse`s, each echoing the call's id.
pub fn continued(prev: &Value, view: &ClientView, results: &[&str]) -> Value {
    let mut body = prev.clone();
    let contents = body["contents"].as_array_mut().unwrap();
    let mut parts = Vec::new();
    if !view.text.is_empty() {
        parts.push(json!({"text": view.text}));
    }
    for c in &view.calls {
        let mut call = json!({"name": c.name, "args": c.args});
        if !c.id.is_empty() {
            call["id"] = json!(c.id);
        }
        parts.push(json!({ "functionCall": call }));
    }
    contents.push(json!({"role": "model", "parts": parts}));
    let answers: Vec<Value> = view
        .calls
        .iter()
        .zip(results)
        .map(|(c, r)| {
            let mut response = json!({"name": c.name, "response": {"output": r}});
            if !c.id.is_empty() {
                response["id"] = json!(c.id);
            }
            json!({ "functionResponse": response })
        })
        .collect();
    contents.push(json!({"role": "user", "parts": answers}));
    body
}

/// The args the model wrote: JSON as it parses, or (when the model wrote
/// none) the text as a string, so the proxy's check sees a non-object.
fn args_of(raw: &str) -> Value {
    args_value(raw)
}

/// The parts of a round: its text, then each call (an id on even rounds
/// only; the first call signed, as thinking models sign a turn).
fn parts(t: &Turn, round: usize) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(text) = &t.text {
        out.push(json!({"text": text}));
    }
    for (i, c) in t.calls.iter().enumerate() {
        let mut call = json!({"name": c.name, "args": args_of(&c.args)});
        if round.is_multiple_of(2) {
            call["id"] = json!(format!("fc_{round}_{i}"));
        }
        let mut part = json!({ "functionCall": call });
        if i == 0 {
            part["thoughtSignature"] = json!(format!("sig_{round}"));
        }
        out.push(part);
    }
    out
}

fn usage(u: (u64, u64)) -> Value {
    json!({"promptTokenCount": u.0, "candidatesTokenCount": u.1, "totalTokenCount": u.0 + u.1})
}

fn response(round: usize, parts: Vec<Value>, finish: bool, u: Option<(u64, u64)>) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if finish {
        candidate["finishReason"] = json!("STOP");
    }
    let mut r = json!({"candidates": [candidate], "modelVersion": "gemini-test",
                       "responseId": format!("resp-{round}")});
    if let Some(u) = u {
        r["usageMetadata"] = usage(u);
    }
    r
}

pub fn render_json(t: &Turn, round: usize) -> Value {
    response(round, parts(t, round), true, Some(t.usage))
}

fn chunk(data: Value) -> String {
    format!("data: {data}\r\n\r\n")
}

/// A first chunk with an empty text part: no word yet.
pub fn preamble(round: usize) -> String {
    chunk(response(round, vec![json!({"text": ""})], false, None))
}

/// The preamble, the text in two chunks, each call whole in a chunk of
/// its own; every chunk with the usage so far, the last with the finish.
pub fn render_sse(t: &Turn, round: usize, _req: &Value) -> String {
    let mut s = preamble(round);
    let mut pieces: Vec<Value> = Vec::new();
    for part in parts(t, round) {
        match part["text"].as_str() {
            Some(text) => {
                let (a, b) = halves(text);
                pieces.push(json!({"text": a}));
                pieces.push(json!({"text": b}));
            }
            None => pieces.push(part),
        }
    }
    if pieces.is_empty() {
        pieces.push(json!({"text": ""}));
    }
    let n = pieces.len() as u64;
    for (k, piece) in pieces.into_iter().enumerate() {
        let k = k as u64 + 1;
        let so_far = (t.usage.0, t.usage.1 * k / n);
        s += &chunk(response(round, vec![piece], k == n, Some(so_far)));
    }
    s
}

/// Google's error object, as the Gemini API answers a failed request.
pub fn error_body(status: u16) -> Value {
    json!({"error": {"code": status, "message": format!("provider says {status}"),
                     "status": google_status(status)}})
}

/// The parts of the first candidate of a response (or a chunk).
fn first_parts(v: &Value) -> Vec<Value> {
    let candidates = v["candidates"].as_array().cloned().unwrap_or_default();
    let first = candidates
        .iter()
        .find(|c| c["index"].as_u64().unwrap_or(0) == 0)
        .cloned()
        .unwrap_or(Value::Null);
    first["content"]["parts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// What a Gemini SDK's `response.text` is: the text parts joined, thoughts
/// left out.
fn text_of(parts: &[Value]) -> String {
    parts
        .iter()
        .filter(|p| p["thought"] != true)
        .filter_map(|p| p["text"].as_str())
        .collect()
}

fn calls_of(parts: &[Value]) -> Vec<ViewCall> {
    parts
        .iter()
        .filter_map(|p| p.get("functionCall"))
        .map(|c| ViewCall {
            id: c["id"].as_str().unwrap_or("").into(),
            name: c["name"].as_str().unwrap_or("").into(),
            args: match &c["args"] {
                Value::Null => json!({}),
                a => a.clone(),
            },
        })
        .collect()
}

/// `usageMetadata`'s prompt and candidates counts (a count Google leaves
/// out is zero).
fn usage_of(v: &Value) -> Option<(u64, u64)> {
    let u = v.get("usageMetadata").filter(|u| u.is_object())?;
    Some((
        u["promptTokenCount"].as_u64().unwrap_or(0),
        u["candidatesTokenCount"].as_u64().unwrap_or(0),
    ))
}

pub fn reduce_json(v: &Value) -> ClientView {
    let parts = first_parts(v);
    ClientView {
        text: text_of(&parts),
        calls: calls_of(&parts),
        usage: usage_of(v),
        ..ClientView::default()
    }
}

/// What a Gemini client reads from the chunks: the text parts of every
/// chunk joined, the `functionCall` parts, the usage of the last chunk
/// that has one, an error chunk.
pub fn reduce_sse(events: &[Event]) -> ClientView {
    let mut view = ClientView::default();
    for e in events {
        let Some(j) = &e.json else { continue };
        if j.get("error").is_some_and(|x| !x.is_null()) {
            view.error = Some(error_view(true, 200, j, e.data.clone()));
            continue;
        }
        if let Some(u) = usage_of(j) {
            view.usage = Some(u);
        }
        let parts = first_parts(j);
        view.text.push_str(&text_of(&parts));
        view.calls.extend(calls_of(&parts));
    }
    view
}

fn has_parts(e: &Event) -> bool {
    e.get("/candidates")
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            c["content"]["parts"]
                .as_array()
                .is_some_and(|p| !p.is_empty())
        })
}

fn finishes(e: &Event) -> bool {
    e.get("/candidates")
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["finishReason"].is_string())
}

/// Every chunk a JSON object without an event name; at most one error
/// chunk, last; without one, one chunk with a `finishReason`, and no chunk
/// with parts after it.
pub fn check_stream(events: &[Event]) -> Result<(), String> {
    if let Some(e) = events
        .iter()
        .find(|e| !e.json.as_ref().is_some_and(Value::is_object))
    {
        return Err(format!("a chunk that is no JSON object: {:?}", e.data));
    }
    if let Some(e) = events.iter().find(|e| e.name.is_some()) {
        return Err(format!("a chunk with an event name: {:?}", e.name));
    }
    let errors: Vec<usize> = (0..events.len())
        .filter(|i| {
            events[*i]
                .json
                .as_ref()
                .is_some_and(|j| j.get("error").is_some())
        })
        .collect();
    if errors.len() > 1 || errors.first().is_some_and(|at| *at != events.len() - 1) {
        return Err(format!(
            "one error chunk at most, last: at {errors:?} of {}",
            events.len()
        ));
    }
    let finished: Vec<usize> = (0..events.len())
        .filter(|i| finishes(&events[*i]))
        .collect();
    if errors.is_empty() && finished.len() != 1 {
        return Err(format!(
            "one chunk with a finishReason, got {}",
            finished.len()
        ));
    }
    if finished.len() > 1 {
        return Err(format!("a finishReason on {} chunks", finished.len()));
    }
    if let Some(at) = finished.first() {
        if let Some(e) = events[at + 1..].iter().find(|e| has_parts(e)) {
            return Err(format!("parts after the finishReason: {}", e.data));
        }
    }
    Ok(())
}

/// An error response as a Gemini client reads it.
pub fn http_error(status: u16, body: &[u8]) -> ErrorView {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    error_view(false, status, &v, String::from_utf8_lossy(body).into())
}

/// Google's error object: `code` the HTTP status (a stream's: the status
/// its code would give), `status` that code's name, the proxy's code the
/// `reason` of its one `ErrorInfo` detail.
fn error_view(in_stream: bool, status: u16, v: &Value, body: String) -> ErrorView {
    let e = &v["error"];
    let details = e["details"].as_array().cloned().unwrap_or_default();
    let info = details.first().cloned().unwrap_or(Value::Null);
    let number = e["code"].as_u64().and_then(|c| u16::try_from(c).ok());
    let shaped = e["message"].is_string()
        && number.is_some_and(|n| in_stream || n == status)
        && number.is_some_and(|n| e["status"] == google_status(n))
        && details.len() == 1
        && info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
        && info["reason"].is_string()
        && info["domain"] == "codemode-proxy";
    ErrorView {
        in_stream,
        status,
        code: info["reason"].as_str().map(str::to_owned),
        kind: e["status"].as_str().map(str::to_owned),
        message: e["message"].as_str().unwrap_or("").to_owned(),
        body,
        shaped,
        retry_after: None,
    }
}

/// A `functionResponse`'s text: its `output` or `error` when it holds just
/// that string, else its JSON.
fn response_text(response: &Value) -> String {
    match response.as_object() {
        Some(r) if r.len() == 1 => match r.values().next() {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        },
        _ => response.to_string(),
    }
}

pub fn reduce_request(body: &Value) -> ProviderView {
    let tools = declarations(body)
        .iter()
        .map(|d| d["name"].as_str().unwrap_or("?").to_owned())
        .collect();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for c in body["contents"].as_array().into_iter().flatten() {
        for p in c["parts"].as_array().into_iter().flatten() {
            if let Some(f) = p.get("functionCall") {
                calls.push((
                    f["id"].as_str().unwrap_or("").to_owned(),
                    f["name"].as_str().unwrap_or("").to_owned(),
                ));
            }
            if let Some(r) = p.get("functionResponse") {
                results.push(ToolResult {
                    id: r["id"].as_str().unwrap_or("").into(),
                    text: response_text(&r["response"]),
                    is_error: r["response"].get("error").is_some(),
                });
            }
        }
    }
    ProviderView {
        dialect: Dialect::Gemini,
        tools,
        calls,
        results,
        body: body.clone(),
    }
}
