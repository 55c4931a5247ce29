//! Soak: many concurrent streamed conversations across the three dialects
//! (Chat Completions, Responses, Messages) in code mode, with programs and
//! repairs mixed in, for minutes; the proxy's resident memory sampled as it
//! goes. A benchmark, not a test: `bench/soak.sh` runs it.
//!
//! `SOAK_STREAMS=1000 SOAK_SECS=600 SOAK_SAMPLE_SECS=10 cargo bench --features bench-internals --bench soak`
//!
//! Three processes: the release proxy (`CODEMODE_RUNTIME=embedded`, code
//! mode; `PROXY_BIN` for another build), a scripted provider (this binary
//! again, `--provider`) and the clients (this binary). The provider serves
//! all three dialects by path, as SSE streams with `SOAK_EVENT_MS` between
//! events, and decides by the request: a first round answers with text
//! deltas and then (by the tag in the user's prompt) plain text, a
//! `run_code` call whose program makes three nested calls in two batches,
//! or a direct `read` (denied in code mode: the proxy repairs it, and the
//! second answer is text). A request whose last message is a tool result
//! is answered with text: the program's result echoed, or "Repaired".
//!
//! Each of `SOAK_STREAMS` clients runs conversations back to back until
//! `SOAK_SECS` have passed, the dialect round-robin and the kind (text,
//! program, repair) in turn, each request a stream with the native tools
//! `read` and `write` and its own tenant (`authorization`). A stream that
//! ends in a tool-call turn (the program's nested calls, handed to the
//! client as ordinary calls) gets its results and the conversation goes
//! on until the final text. Errors: a non-200, an error event, a stream
//! without its dialect's end, a call the model made directly reaching the
//! client, or a final text that is not the one expected.
//!
//! The proxy keeps ended executions for `SOAK_STORE_TTL_SECS` (60; its own
//! default is an hour, during which the execution store grows toward its
//! budget by design), so a ten-minute run reaches its steady state; what
//! the stores hold (`codemode_memory_store_bytes`) is sampled beside RSS.
//!
//! Prints a markdown table of samples (time, resident memory, bytes in the
//! stores, streams open, conversations and requests done, errors, the
//! proxy's CPU) and a
//! verdict: resident memory after the warm-up flat within 10%, and no
//! error. The warm-up ends at the later of the first minute (a fifth of a
//! shorter run) and the sample by which the proxy has sent 32 requests per
//! stream, when each pooled provider connection has grown its dispatch
//! channel to its steady size (`DISPATCH_BLOCK`); `SOAK_WARMUP_SECS` pins it. The proxy holds two sockets per stream:
//! raise `ulimit -n` (the script does).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{json, Value};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Dialect {
    Chat,
    Responses,
    Messages,
}

impl Dialect {
    const ALL: [Dialect; 3] = [Dialect::Chat, Dialect::Responses, Dialect::Messages];

    fn path(self) -> &'static str {
        match self {
            Dialect::Chat => "/v1/chat/completions",
            Dialect::Responses => "/v1/responses",
            Dialect::Messages => "/v1/messages",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Dialect::Chat => "chat",
            Dialect::Responses => "responses",
            Dialect::Messages => "messages",
        }
    }
}

/// What the model does in a conversation's first round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// Text only.
    Text,
    /// Text, then `run_code` with a program of three nested calls.
    Program,
    /// Text, then a direct `read`: denied, the model asked again.
    Repair,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Text, Kind::Program, Kind::Repair];

    fn tag(self) -> &'static str {
        match self {
            Kind::Text => "soak:text",
            Kind::Program => "soak:program",
            Kind::Repair => "soak:repair",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Program => "program",
            Kind::Repair => "repair",
        }
    }
}

// ---------------------------------------------------------------------------
// The scripted provider.
// ---------------------------------------------------------------------------

const PROGRAM: &str = "const [a, b] = await Promise.all([tools.read({path: 'a.txt'}), tools.read({path: 'b.txt'})]);\nawait tools.write({path: 'out.txt', content: a + b});\nreturn a.length + b.length;";
const PLAIN: &str = "Here is a plain answer from the soak provider, in a few words.";
const REPAIRED: &str = "Repaired: I will reach read through run_code.";
const SAID: &str = "The program said: ";

/// The model's answer to one round.
struct Answer {
    text: String,
    /// A call after the text: its name and arguments.
    call: Option<(&'static str, String)>,
}

/// The text of a content field: a string, or a list of parts with `text`.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// What the request ends with: the user's prompt, or a tool result.
enum Last {
    User(String),
    Result(String),
}

fn last_of(d: Dialect, body: &Value) -> Option<Last> {
    match d {
        Dialect::Chat => {
            let m = body["messages"].as_array()?.last()?;
            match m["role"].as_str()? {
                "tool" => Some(Last::Result(text_of(&m["content"]))),
                "user" => Some(Last::User(text_of(&m["content"]))),
                _ => None,
            }
        }
        Dialect::Responses => {
            let input = &body["input"];
            if let Some(s) = input.as_str() {
                return Some(Last::User(s.to_owned()));
            }
            let item = input.as_array()?.last()?;
            let kind = item["type"].as_str().unwrap_or("message");
            if kind.ends_with("_output") {
                Some(Last::Result(text_of(&item["output"])))
            } else if item["role"] == "user" {
                Some(Last::User(text_of(&item["content"])))
            } else {
                None
            }
        }
        Dialect::Messages => {
            let m = body["messages"].as_array()?.last()?;
            if m["role"] != "user" {
                return None;
            }
            let content = &m["content"];
            let result = content
                .as_array()
                .and_then(|blocks| blocks.iter().rfind(|b| b["type"] == "tool_result"));
            match result {
                Some(r) => Some(Last::Result(text_of(&r["content"]))),
                None => Some(Last::User(text_of(content))),
            }
        }
    }
}

fn decide(d: Dialect, body: &Value) -> Answer {
    let text = |t: &str| Answer {
        text: t.to_owned(),
        call: None,
    };
    match last_of(d, body) {
        Some(Last::User(prompt)) if prompt.contains(Kind::Program.tag()) => Answer {
            text: "Let me run a program over both files.".into(),
            call: Some(("run_code", json!({ "code": PROGRAM }).to_string())),
        },
        Some(Last::User(prompt)) if prompt.contains(Kind::Repair.tag()) => Answer {
            text: "Let me read the file directly.".into(),
            call: Some(("read", r#"{"path":"a.txt"}"#.into())),
        },
        Some(Last::User(_)) => text(PLAIN),
        Some(Last::Result(r)) if r.starts_with("UNKNOWN_TOOL") => text(REPAIRED),
        Some(Last::Result(r)) => {
            let r: String = r.chars().take(200).collect();
            text(&format!("{SAID}{r}"))
        }
        None => text("I do not know what this conversation is."),
    }
}

/// `s` in up to `n` pieces at character boundaries.
fn pieces(s: &str, n: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    for left in (1..=n).rev() {
        if rest.is_empty() {
            break;
        }
        let mut at = rest.len().div_ceil(left);
        while !rest.is_char_boundary(at) {
            at += 1;
        }
        let (a, b) = rest.split_at(at);
        out.push(a);
        rest = b;
    }
    out
}

static IDS: AtomicU64 = AtomicU64::new(1);

fn chat_events(a: &Answer, include_usage: bool) -> Vec<String> {
    let n = IDS.fetch_add(1, Ordering::Relaxed);
    let id = format!("chatcmpl-soak{n}");
    let chunk = |delta: Value, finish: Option<&str>| {
        let c = json!({"id": id, "object": "chat.completion.chunk", "created": 1,
            "model": "soak-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    let mut out = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    for p in pieces(&a.text, 4) {
        out.push(chunk(json!({ "content": p }), None));
    }
    if let Some((name, args)) = &a.call {
        let head = json!({"index": 0, "id": format!("call_soak{n}"), "type": "function",
                          "function": {"name": name, "arguments": ""}});
        out.push(chunk(json!({ "tool_calls": [head] }), None));
        for p in pieces(args, 2) {
            out.push(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
                None,
            ));
        }
    }
    let finish = if a.call.is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    out.push(chunk(json!({}), Some(finish)));
    if include_usage {
        let c = json!({"id": id, "object": "chat.completion.chunk", "created": 1,
            "model": "soak-model", "choices": [],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}});
        out.push(format!("data: {c}\n\n"));
    }
    out.push("data: [DONE]\n\n".into());
    out
}

fn responses_events(a: &Answer) -> Vec<String> {
    let n = IDS.fetch_add(1, Ordering::Relaxed);
    let mut seq = 0u64;
    let mut out = Vec::new();
    let mut push = |mut data: Value| {
        data["sequence_number"] = json!(seq);
        seq += 1;
        out.push(format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap_or("")
        ));
    };
    let head = |status: &str, output: Value, usage: Value| {
        json!({"id": format!("resp_soak{n}"), "object": "response", "created_at": 1,
               "status": status, "model": "soak-model", "output": output, "usage": usage})
    };
    push(
        json!({"type": "response.created", "response": head("in_progress", json!([]), Value::Null)}),
    );
    push(
        json!({"type": "response.in_progress", "response": head("in_progress", json!([]), Value::Null)}),
    );
    let mut items = Vec::new();
    let msg_id = format!("msg_soak{n}");
    let message = json!({"type": "message", "id": msg_id, "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": a.text, "annotations": []}]});
    let mut added = message.clone();
    added["status"] = json!("in_progress");
    added["content"] = json!([]);
    push(json!({"type": "response.output_item.added", "output_index": 0, "item": added}));
    push(
        json!({"type": "response.content_part.added", "output_index": 0, "item_id": msg_id,
                "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
    );
    for p in pieces(&a.text, 4) {
        push(
            json!({"type": "response.output_text.delta", "output_index": 0, "item_id": msg_id,
                    "content_index": 0, "delta": p}),
        );
    }
    push(
        json!({"type": "response.output_text.done", "output_index": 0, "item_id": msg_id,
                "content_index": 0, "text": a.text}),
    );
    push(
        json!({"type": "response.content_part.done", "output_index": 0, "item_id": msg_id,
                "content_index": 0, "part": message["content"][0]}),
    );
    push(json!({"type": "response.output_item.done", "output_index": 0, "item": message}));
    items.push(message);
    if let Some((name, args)) = &a.call {
        let fc_id = format!("fc_soak{n}");
        let item = json!({"type": "function_call", "id": fc_id, "call_id": format!("call_soak{n}"),
                          "name": name, "arguments": args, "status": "completed"});
        let mut added = item.clone();
        added["status"] = json!("in_progress");
        added["arguments"] = json!("");
        push(json!({"type": "response.output_item.added", "output_index": 1, "item": added}));
        for p in pieces(args, 2) {
            push(
                json!({"type": "response.function_call_arguments.delta", "output_index": 1,
                        "item_id": fc_id, "delta": p}),
            );
        }
        push(
            json!({"type": "response.function_call_arguments.done", "output_index": 1,
                    "item_id": fc_id, "arguments": args}),
        );
        push(json!({"type": "response.output_item.done", "output_index": 1, "item": item}));
        items.push(item);
    }
    let usage = json!({"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                       "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                       "total_tokens": 110});
    push(json!({"type": "response.completed", "response": head("completed", json!(items), usage)}));
    out
}

fn messages_events(a: &Answer) -> Vec<String> {
    let n = IDS.fetch_add(1, Ordering::Relaxed);
    let mut out = Vec::new();
    let mut push = |data: Value| {
        out.push(format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap_or("")
        ));
    };
    push(
        json!({"type": "message_start", "message": {"id": format!("msg_soak{n}"),
        "type": "message", "role": "assistant", "model": "soak-model", "content": [],
        "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 100, "output_tokens": 1}}}),
    );
    push(json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}));
    for p in pieces(&a.text, 4) {
        push(json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": p}}));
    }
    push(json!({"type": "content_block_stop", "index": 0}));
    push(json!({"type": "ping"}));
    if let Some((name, args)) = &a.call {
        push(json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "tool_use", "id": format!("toolu_soak{n}"), "name": name, "input": {}}}));
        for p in pieces(args, 2) {
            push(json!({"type": "content_block_delta", "index": 1,
                        "delta": {"type": "input_json_delta", "partial_json": p}}));
        }
        push(json!({"type": "content_block_stop", "index": 1}));
    }
    let stop = if a.call.is_some() {
        "tool_use"
    } else {
        "end_turn"
    };
    push(
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": 10}}),
    );
    push(json!({"type": "message_stop"}));
    out
}

type ProviderBody = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

fn plain(status: u16, text: &str) -> Response<ProviderBody> {
    let mut res = Response::new(Full::new(Bytes::from(text.to_owned())).boxed_unsync());
    *res.status_mut() = http::StatusCode::from_u16(status).unwrap_or_default();
    res
}

async fn provide(
    req: Request<Incoming>,
    delay: Duration,
) -> Result<Response<ProviderBody>, Infallible> {
    let dialect = Dialect::ALL
        .into_iter()
        .find(|d| d.path() == req.uri().path());
    let Some(d) = dialect else {
        return Ok(plain(404, "no such route"));
    };
    let Ok(body) = req.into_body().collect().await else {
        return Ok(plain(400, "unreadable body"));
    };
    let Ok(body) = serde_json::from_slice::<Value>(&body.to_bytes()) else {
        return Ok(plain(400, "not JSON"));
    };
    if body["stream"] != true {
        return Ok(plain(400, "the soak provider only streams"));
    }
    let answer = decide(d, &body);
    let events = match d {
        Dialect::Chat => chat_events(&answer, body["stream_options"]["include_usage"] == true),
        Dialect::Responses => responses_events(&answer),
        Dialect::Messages => messages_events(&answer),
    };
    let frames = futures_util::stream::unfold(
        (events.into_iter(), true),
        move |(mut events, first)| async move {
            let event = events.next()?;
            if !first {
                tokio::time::sleep(delay).await;
            }
            Some((
                Ok::<_, Infallible>(Frame::data(Bytes::from(event))),
                (events, false),
            ))
        },
    );
    let mut res = Response::new(StreamBody::new(frames).boxed_unsync());
    res.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/event-stream"),
    );
    Ok(res)
}

async fn provider(addr: &str, delay: Duration) {
    let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
    println!("{}", listener.local_addr().expect("addr"));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| provide(req, delay));
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

// ---------------------------------------------------------------------------
// The clients.
// ---------------------------------------------------------------------------

fn tools(d: Dialect) -> Value {
    let read =
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
    let write = json!({"type": "object", "properties": {"path": {"type": "string"},
                       "content": {"type": "string"}}, "required": ["path", "content"]});
    let defs = [
        ("read", "Read a file.", read),
        ("write", "Write a file.", write),
    ];
    let list: Vec<Value> = defs
        .into_iter()
        .map(|(name, description, schema)| match d {
            Dialect::Chat => json!({"type": "function", "function":
                {"name": name, "description": description, "parameters": schema}}),
            Dialect::Responses => json!({"type": "function", "name": name,
                "description": description, "parameters": schema}),
            Dialect::Messages => json!({"name": name, "description": description,
                "input_schema": schema}),
        })
        .collect();
    json!(list)
}

fn first_request(d: Dialect, kind: Kind, n: u64) -> Value {
    let prompt = format!(
        "Conversation {n} ({}): look at a.txt and b.txt.",
        kind.tag()
    );
    match d {
        Dialect::Chat => json!({"model": "soak-model", "stream": true,
            "stream_options": {"include_usage": true}, "tools": tools(d),
            "messages": [{"role": "system", "content": "You are an agent."},
                         {"role": "user", "content": prompt}]}),
        Dialect::Responses => json!({"model": "soak-model", "stream": true, "store": false,
            "tools": tools(d), "instructions": "You are an agent.",
            "input": [{"role": "user", "content": prompt}]}),
        Dialect::Messages => json!({"model": "soak-model", "stream": true, "max_tokens": 1024,
            "system": "You are an agent.", "tools": tools(d),
            "messages": [{"role": "user", "content": prompt}]}),
    }
}

/// A call the client got: id, name, arguments as text.
struct Call {
    id: String,
    name: String,
    args: String,
}

/// What a client read out of a whole stream.
#[derive(Default)]
struct View {
    text: String,
    calls: Vec<Call>,
}

struct Event {
    name: Option<String>,
    data: String,
    json: Option<Value>,
}

impl Event {
    fn kind(&self) -> &str {
        self.json
            .as_ref()
            .and_then(|j| j.get("type"))
            .and_then(Value::as_str)
            .or(self.name.as_deref())
            .unwrap_or("")
    }
}

/// The events of an SSE body (comments such as the proxy's keep-alive skipped).
fn parse_events(bytes: &[u8]) -> Result<Vec<Event>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "the stream is not UTF-8".to_owned())?;
    if !text.is_empty() && !text.ends_with("\n\n") {
        return Err("the stream ends inside an event".into());
    }
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
    Ok(out)
}

/// Checks the stream's shape as the dialect's clients rely on it, and
/// reduces it to what the client got.
fn reduce(d: Dialect, events: &[Event]) -> Result<View, String> {
    let mut view = View::default();
    match d {
        Dialect::Chat => {
            let mut calls: Vec<(i64, Call)> = Vec::new();
            let mut finishes = 0;
            for e in events {
                if e.data.trim() == "[DONE]" {
                    continue;
                }
                let Some(j) = &e.json else {
                    return Err(format!("chat: an event that is not JSON: {:.200}", e.data));
                };
                if j.get("error").is_some_and(|x| !x.is_null()) {
                    return Err(format!("chat: error event: {:.300}", e.data));
                }
                let choice = &j["choices"][0];
                if choice["finish_reason"].is_string() {
                    finishes += 1;
                }
                let delta = &choice["delta"];
                if let Some(t) = delta["content"].as_str() {
                    view.text.push_str(t);
                }
                for tc in delta["tool_calls"].as_array().into_iter().flatten() {
                    let index = tc["index"].as_i64().unwrap_or(-1);
                    let at = match calls.iter().position(|c| c.0 == index) {
                        Some(at) => at,
                        None => {
                            calls.push((
                                index,
                                Call {
                                    id: String::new(),
                                    name: String::new(),
                                    args: String::new(),
                                },
                            ));
                            calls.len() - 1
                        }
                    };
                    let c = &mut calls[at].1;
                    if let Some(id) = tc["id"].as_str().filter(|s| !s.is_empty()) {
                        c.id = id.into();
                    }
                    if let Some(n) = tc["function"]["name"].as_str() {
                        c.name.push_str(n);
                    }
                    if let Some(a) = tc["function"]["arguments"].as_str() {
                        c.args.push_str(a);
                    }
                }
            }
            let done = events.iter().filter(|e| e.data.trim() == "[DONE]").count();
            if done != 1 || events.last().is_none_or(|e| e.data.trim() != "[DONE]") {
                return Err(format!("chat: {done} [DONE], not one and last"));
            }
            if finishes != 1 {
                return Err(format!("chat: {finishes} finish_reason, not one"));
            }
            view.calls = calls.into_iter().map(|(_, c)| c).collect();
        }
        Dialect::Responses => {
            let mut last_seq = -1i64;
            for e in events {
                let Some(j) = &e.json else {
                    return Err(format!(
                        "responses: an event that is not JSON: {:.200}",
                        e.data
                    ));
                };
                let seq = j["sequence_number"].as_i64().unwrap_or(-1);
                if seq <= last_seq {
                    return Err(format!("responses: sequence_number {seq} after {last_seq}"));
                }
                last_seq = seq;
                match e.kind() {
                    "error" | "response.failed" => {
                        return Err(format!("responses: error event: {:.300}", e.data))
                    }
                    "response.output_text.delta" => {
                        view.text.push_str(j["delta"].as_str().unwrap_or(""))
                    }
                    "response.output_item.done" if j["item"]["type"] == "function_call" => {
                        let item = &j["item"];
                        view.calls.push(Call {
                            id: item["call_id"].as_str().unwrap_or("").into(),
                            name: item["name"].as_str().unwrap_or("").into(),
                            args: item["arguments"].as_str().unwrap_or("").into(),
                        });
                    }
                    _ => {}
                }
            }
            let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
            if kinds.first() != Some(&"response.created")
                || kinds.last() != Some(&"response.completed")
            {
                return Err(format!(
                    "responses: not response.created first and response.completed last: {:?} .. {:?}",
                    kinds.first(),
                    kinds.last()
                ));
            }
        }
        Dialect::Messages => {
            let mut open: Option<u64> = None;
            for e in events {
                let Some(j) = &e.json else {
                    return Err(format!(
                        "messages: an event that is not JSON: {:.200}",
                        e.data
                    ));
                };
                match e.kind() {
                    "error" => return Err(format!("messages: error event: {:.300}", e.data)),
                    "content_block_start" => {
                        open = j["index"].as_u64();
                        let block = &j["content_block"];
                        if block["type"] == "tool_use" {
                            view.calls.push(Call {
                                id: block["id"].as_str().unwrap_or("").into(),
                                name: block["name"].as_str().unwrap_or("").into(),
                                args: String::new(),
                            });
                        }
                    }
                    "content_block_delta" => {
                        if j["index"].as_u64() != open {
                            return Err("messages: a delta to a block that is not open".into());
                        }
                        let delta = &j["delta"];
                        if let Some(t) = delta["text"].as_str() {
                            view.text.push_str(t);
                        }
                        if let (Some(p), Some(c)) =
                            (delta["partial_json"].as_str(), view.calls.last_mut())
                        {
                            c.args.push_str(p);
                        }
                    }
                    "content_block_stop" => open = None,
                    _ => {}
                }
            }
            let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
            if kinds.first() != Some(&"message_start")
                || kinds.last() != Some(&"message_stop")
                || kinds.iter().filter(|k| **k == "message_start").count() != 1
            {
                return Err(format!(
                    "messages: not one message_start first and message_stop last: {:?} .. {:?}",
                    kinds.first(),
                    kinds.last()
                ));
            }
        }
    }
    Ok(view)
}

/// The tool results of the client's own tools.
fn result_of(c: &Call) -> Result<String, String> {
    let args: Value =
        serde_json::from_str(&c.args).map_err(|_| format!("arguments not JSON: {}", c.args))?;
    match (c.name.as_str(), args["path"].as_str()) {
        ("read", Some("a.txt")) => Ok("hello".into()),
        ("read", Some("b.txt")) => Ok("world!".into()),
        ("read", Some(p)) => Ok(format!("contents of {p}")),
        ("write", Some(_)) => Ok("written".into()),
        _ => Err(format!("an unexpected call {} {}", c.name, c.args)),
    }
}

/// `prev` grown by the turn the client got and its results.
fn continued(d: Dialect, prev: &mut Value, view: &View, results: &[String]) {
    match d {
        Dialect::Chat => {
            let calls: Vec<Value> = view
                .calls
                .iter()
                .map(|c| {
                    json!({"id": c.id, "type": "function",
                                "function": {"name": c.name, "arguments": c.args}})
                })
                .collect();
            let text = (!view.text.is_empty()).then_some(&view.text);
            let messages = prev["messages"].as_array_mut().expect("messages");
            messages.push(json!({"role": "assistant", "content": text, "tool_calls": calls}));
            for (c, r) in view.calls.iter().zip(results) {
                messages.push(json!({"role": "tool", "tool_call_id": c.id, "content": r}));
            }
        }
        Dialect::Responses => {
            let input = prev["input"].as_array_mut().expect("input");
            if !view.text.is_empty() {
                input.push(json!({"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": view.text, "annotations": []}]}));
            }
            for c in &view.calls {
                input.push(
                    json!({"type": "function_call", "call_id": c.id, "name": c.name,
                                  "arguments": c.args}),
                );
            }
            for (c, r) in view.calls.iter().zip(results) {
                input.push(json!({"type": "function_call_output", "call_id": c.id, "output": r}));
            }
        }
        Dialect::Messages => {
            let mut content = Vec::new();
            if !view.text.is_empty() {
                content.push(json!({"type": "text", "text": view.text}));
            }
            for c in &view.calls {
                let input: Value = serde_json::from_str(&c.args).unwrap_or_else(|_| json!({}));
                content
                    .push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}));
            }
            let answers: Vec<Value> = view
                .calls
                .iter()
                .zip(results)
                .map(|(c, r)| json!({"type": "tool_result", "tool_use_id": c.id, "content": r}))
                .collect();
            let messages = prev["messages"].as_array_mut().expect("messages");
            messages.push(json!({"role": "assistant", "content": content}));
            messages.push(json!({"role": "user", "content": answers}));
        }
    }
}

/// What the soak counts, shared by every client and the sampler.
#[derive(Default)]
struct Counters {
    conversations: AtomicU64,
    requests: AtomicU64,
    errors: AtomicU64,
    open: AtomicI64,
    /// Conversations done per dialect and kind.
    done: Mutex<BTreeMap<(Dialect, Kind), u64>>,
    /// Errors by what they were, with the first one's text.
    failures: Mutex<BTreeMap<String, (u64, String)>>,
}

struct Open<'a>(&'a AtomicI64);

impl<'a> Open<'a> {
    fn new(n: &'a AtomicI64) -> Open<'a> {
        n.fetch_add(1, Ordering::Relaxed);
        Open(n)
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One request's stream, read to its end.
async fn round(
    client: &reqwest::Client,
    url: &str,
    who: usize,
    d: Dialect,
    body: &Value,
    counters: &Counters,
) -> Result<View, (String, String)> {
    let _open = Open::new(&counters.open);
    let res = client
        .post(url)
        .header("authorization", format!("Bearer soak-tenant-{who}"))
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .map_err(|e| (format!("{}: send failed", d.name()), format!("{e:?}")))?;
    let status = res.status();
    let bytes = res
        .bytes()
        .await
        .map_err(|e| (format!("{}: body broke off", d.name()), format!("{e:?}")))?;
    counters.requests.fetch_add(1, Ordering::Relaxed);
    if status != 200 {
        return Err((
            format!("{}: status {}", d.name(), status.as_u16()),
            String::from_utf8_lossy(&bytes).chars().take(300).collect(),
        ));
    }
    let events =
        parse_events(&bytes).map_err(|e| (format!("{}: malformed stream", d.name()), e))?;
    reduce(d, &events).map_err(|e| {
        let what = e.split(':').take(2).collect::<Vec<_>>().join(":");
        (what, e)
    })
}

/// One conversation, to its final text.
async fn conversation(
    client: &reqwest::Client,
    base: &str,
    who: usize,
    n: u64,
    d: Dialect,
    kind: Kind,
    counters: &Counters,
) -> Result<(), (String, String)> {
    let url = format!("{base}{}", d.path());
    let mut body = first_request(d, kind, n);
    let fail =
        |what: &str, detail: String| Err((format!("{}/{}: {what}", d.name(), kind.name()), detail));
    for _ in 0..6 {
        let view = tokio::time::timeout(
            Duration::from_secs(120),
            round(client, &url, who, d, &body, counters),
        )
        .await
        .map_err(|_| (format!("{}: no end in 120 s", d.name()), String::new()))??;
        if view.calls.is_empty() {
            let expected = match kind {
                Kind::Text => PLAIN,
                Kind::Repair => REPAIRED,
                // The program's result: a.length + b.length.
                Kind::Program => "Result: 11",
            };
            if !view.text.contains(expected) {
                return fail("unexpected final text", view.text);
            }
            return Ok(());
        }
        let mut results = Vec::new();
        for c in &view.calls {
            // The model's calls are `call_soak<n>`/`toolu_soak<n>`; a
            // program's are minted: the prefix and 24 letters and digits.
            let body = c.id.split_once('_').map_or("", |(_, b)| b);
            if body.starts_with("soak") || body.len() != 24 {
                return fail(
                    "a call the model made directly reached the client",
                    format!("{} {} {}", c.id, c.name, c.args),
                );
            }
            results.push(result_of(c).map_err(|e| (format!("{}: bad call", d.name()), e))?);
        }
        continued(d, &mut body, &view, &results);
    }
    fail("no final text after 6 rounds", String::new())
}

async fn client_loop(
    client: reqwest::Client,
    base: Arc<str>,
    who: usize,
    deadline: Instant,
    counters: Arc<Counters>,
) {
    let mut n = 0u64;
    while Instant::now() < deadline {
        let d = Dialect::ALL[(who + n as usize) % 3];
        let kind = Kind::ALL[(who / 3 + n as usize) % 3];
        match conversation(&client, &base, who, n, d, kind, &counters).await {
            Ok(()) => {
                counters.conversations.fetch_add(1, Ordering::Relaxed);
                *counters
                    .done
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry((d, kind))
                    .or_default() += 1;
            }
            Err((what, detail)) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                {
                    let mut failures = counters.failures.lock().unwrap_or_else(|p| p.into_inner());
                    failures.entry(what).or_insert((0, detail)).0 += 1;
                }
                // A proxy that refuses at once must not turn this into a busy loop.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        n += 1;
    }
}

// ---------------------------------------------------------------------------
// Sampling and the report.
// ---------------------------------------------------------------------------

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// User and system CPU seconds of a process (clock ticks of 1/100 s).
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name, which is in parentheses.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    (ticks(11) + ticks(12)) as f64 / 100.0
}

struct Sample {
    at: f64,
    rss_kib: u64,
    /// What the proxy's in-memory stores hold (`codemode_memory_store_bytes`).
    stores: u64,
    open: i64,
    conversations: u64,
    requests: u64,
    errors: u64,
    cpu: f64,
}

fn start_provider(delay_ms: u64) -> (std::process::Child, String) {
    let mut child = Command::new(std::env::current_exe().expect("this binary"))
        .args(["--provider", "127.0.0.1:0", &delay_ms.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("the provider process starts");
    let mut addr = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut addr)
        .expect("the provider's address");
    (child, addr.trim().to_owned())
}

/// The bytes the proxy's in-memory stores hold, from `GET /metrics`.
async fn store_bytes(client: &reqwest::Client, base: &str) -> u64 {
    let Ok(res) = client.get(format!("{base}/metrics")).send().await else {
        return 0;
    };
    let text = res.text().await.unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("codemode_memory_store_bytes{"))
        .filter_map(|l| l.rsplit(' ').next())
        .filter_map(|v| v.parse::<f64>().ok())
        .sum::<f64>() as u64
}

fn start_proxy(provider: &str, ttl: u64) -> (std::process::Child, String) {
    // PROXY_BIN measures another build (an older commit, another allocator).
    let bin =
        std::env::var("PROXY_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_codemode-proxy").into());
    let upstream = format!("http://{provider}/v1");
    let mut child = Command::new(bin)
        .env("CODEMODE_LISTEN", "127.0.0.1:0")
        .env("CODEMODE_UPSTREAM", &upstream)
        .env("CODEMODE_ANTHROPIC_UPSTREAM", &upstream)
        .env("CODEMODE_RUNTIME", "embedded")
        .env("CODEMODE_MODE", "code")
        .env("CODEMODE_RUN_LIFETIME_SECS", ttl.to_string())
        .env("CODEMODE_SPLICE_TTL_SECS", ttl.to_string())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("the proxy binary starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the proxy's address");
    let addr = line.trim().trim_start_matches("listening on ").to_owned();
    (child, addr)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(pos) = args.iter().position(|a| a == "--provider") {
        let addr = args
            .get(pos + 1)
            .cloned()
            .unwrap_or_else(|| "127.0.0.1:0".into());
        let delay = args
            .get(pos + 2)
            .and_then(|v| v.parse().ok())
            .unwrap_or(500);
        provider(&addr, Duration::from_millis(delay)).await;
        return;
    }
    // `cargo bench` passes `--bench`; anything else this binary ignores.
    let streams = env_u64("SOAK_STREAMS", 1000) as usize;
    let secs = env_u64("SOAK_SECS", 600);
    let sample = env_u64("SOAK_SAMPLE_SECS", 10).max(1);
    // SOAK_WARMUP_SECS pins the warm-up; by default it ends at the later
    // of the first minute (a fifth of a shorter run) and the sample where
    // the proxy has sent `DISPATCH_BLOCK` requests per stream (see
    // `warmup_end`).
    let warmup = std::env::var("SOAK_WARMUP_SECS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok());
    let min_warmup = warmup.unwrap_or(60.min(secs / 5));
    let event_ms = env_u64("SOAK_EVENT_MS", 500);
    // Ended executions are kept for the longer of the two (an hour by
    // default), so the store grows toward its budget for that long, by
    // design; a minute lets a ten-minute soak reach its steady state.
    let ttl = env_u64("SOAK_STORE_TTL_SECS", 60);

    let (mut provider_child, paddr) = start_provider(event_ms);
    let (mut proxy, addr) = start_proxy(&paddr, ttl);
    let pid = proxy.id();
    let base: Arc<str> = format!("http://{addr}").into();
    println!(
        "soak: {streams} streams, {secs} s, a sample every {sample} s (warm-up {}), \
         {event_ms} ms between provider events, executions kept {ttl} s; proxy pid {pid} on {addr}",
        match warmup {
            Some(w) => format!("{w} s"),
            None => format!(
                "{min_warmup} s or {DISPATCH_BLOCK} requests per stream, whichever is later"
            ),
        }
    );

    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(streams)
        .pool_idle_timeout(Duration::from_secs(30))
        .tcp_nodelay(true)
        .build()
        .expect("the client");
    let counters = Arc::new(Counters::default());
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    let mut tasks = Vec::with_capacity(streams);
    for who in 0..streams {
        tasks.push(tokio::spawn(client_loop(
            client.clone(),
            base.clone(),
            who,
            deadline,
            counters.clone(),
        )));
    }
    let all = futures_util::future::join_all(tasks);
    tokio::pin!(all);

    let metrics = reqwest::Client::new();
    let take = |counters: &Counters, stores: u64| Sample {
        at: started.elapsed().as_secs_f64(),
        rss_kib: rss_kib(pid),
        stores,
        open: counters.open.load(Ordering::Relaxed),
        conversations: counters.conversations.load(Ordering::Relaxed),
        requests: counters.requests.load(Ordering::Relaxed),
        errors: counters.errors.load(Ordering::Relaxed),
        cpu: cpu_secs(pid),
    };
    let mut samples = vec![take(&counters, store_bytes(&metrics, &base).await)];
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + Duration::from_secs(sample),
        Duration::from_secs(sample),
    );
    loop {
        tokio::select! {
            _ = &mut all => break,
            _ = ticker.tick() => {
                let stores = store_bytes(&metrics, &base).await;
                let s = take(&counters, stores);
                eprintln!(
                    "{:>6.0} s  {:>7.1} MB ({:.1} MB in stores)  {:>5} open  {:>8} conversations  {:>8} requests  {} errors",
                    s.at, s.rss_kib as f64 / 1024.0, s.stores as f64 / 1e6, s.open, s.conversations, s.requests, s.errors
                );
                samples.push(s);
            }
        }
    }
    let stores = store_bytes(&metrics, &base).await;
    samples.push(take(&counters, stores));
    let others = (cpu_secs(std::process::id()), cpu_secs(provider_child.id()));
    let _ = proxy.kill();
    let _ = proxy.wait();
    let _ = provider_child.kill();
    let _ = provider_child.wait();

    let warmup = match warmup {
        Some(w) => w as f64,
        None => warmup_end(&samples, min_warmup as f64, streams),
    };
    report(&samples, &counters, warmup, streams, secs, others);
}

/// Requests a provider connection carries before hyper's client allocates
/// the second block of that connection's dispatch channel: a tokio mpsc
/// block holds 32 messages (`BLOCK_CAP` on 64-bit targets), each a request
/// envelope, 8.4 KB a block. A tokio channel keeps a used block for reuse, so
/// every pooled connection steps up once, by 8.4 KB, at its 33rd request and
/// stays there. With about one pooled connection per stream, the proxy's
/// heap steps up by 8.4 KB per stream when the run passes that many
/// requests per stream (a 600 s run with 1,000 streams: at about 170 s;
/// docs/benchmarks-history.md, "Soak (issue 22)").
const DISPATCH_BLOCK: u64 = 32;

/// When the warm-up ends: the first sample at or after `min_secs` by which
/// the proxy has sent [`DISPATCH_BLOCK`] requests per stream (the run's
/// length when it never gets there, so the verdict says so).
fn warmup_end(samples: &[Sample], min_secs: f64, streams: usize) -> f64 {
    samples
        .iter()
        .find(|s| s.at >= min_secs && s.requests >= DISPATCH_BLOCK * streams as u64)
        .map(|s| s.at)
        .unwrap_or_else(|| samples.last().map_or(min_secs, |s| s.at))
}

fn report(
    samples: &[Sample],
    counters: &Counters,
    warmup: f64,
    streams: usize,
    secs: u64,
    (clients_cpu, provider_cpu): (f64, f64),
) {
    println!();
    println!("| time | proxy RSS | in stores | streams open | conversations done | requests done | errors | proxy CPU |");
    println!("|---|---|---|---|---|---|---|---|");
    for (i, s) in samples.iter().enumerate() {
        let cpu = match i.checked_sub(1).map(|p| &samples[p]) {
            Some(p) if s.at > p.at => format!("{:.0}%", 100.0 * (s.cpu - p.cpu) / (s.at - p.at)),
            _ => String::new(),
        };
        println!(
            "| {:.0} s | {:.1} MB | {:.1} MB | {} | {} | {} | {} | {cpu} |",
            s.at,
            s.rss_kib as f64 / 1024.0,
            s.stores as f64 / 1e6,
            s.open,
            s.conversations,
            s.requests,
            s.errors
        );
    }
    let done = counters.done.lock().unwrap_or_else(|p| p.into_inner());
    println!();
    println!("| dialect | text | program | repair |");
    println!("|---|---|---|---|");
    for d in Dialect::ALL {
        let n = |k: Kind| done.get(&(d, k)).copied().unwrap_or(0);
        println!(
            "| {} | {} | {} | {} |",
            d.name(),
            n(Kind::Text),
            n(Kind::Program),
            n(Kind::Repair)
        );
    }
    let failures = counters.failures.lock().unwrap_or_else(|p| p.into_inner());
    if !failures.is_empty() {
        println!();
        println!("errors:");
        for (what, (n, first)) in failures.iter() {
            println!("- {n} x {what}: {first}");
        }
    }
    // Flat after the warm-up: the last sample (taken after the clients
    // stopped) is left out, as is the first.
    let steady: Vec<&Sample> = samples[..samples.len().saturating_sub(1)]
        .iter()
        .filter(|s| s.at >= warmup && s.at > 0.0)
        .collect();
    let last = samples.last().expect("a sample");
    let errors = counters.errors.load(Ordering::Relaxed);
    println!();
    let flat = if steady.len() >= 2 {
        let min = steady.iter().map(|s| s.rss_kib).min().unwrap_or(0);
        let max = steady.iter().map(|s| s.rss_kib).max().unwrap_or(0);
        let first = steady[0].rss_kib;
        let end = steady[steady.len() - 1].rss_kib;
        let spread = (max - min) as f64 / min.max(1) as f64;
        println!(
            "RSS from {warmup:.0} s on ({} samples): min {:.1} MB, max {:.1} MB, first {:.1} MB, last {:.1} MB: spread {:.1}% (max over min)",
            steady.len(),
            min as f64 / 1024.0,
            max as f64 / 1024.0,
            first as f64 / 1024.0,
            end as f64 / 1024.0,
            spread * 100.0
        );
        spread <= 0.10
    } else {
        println!("too few samples after the warm-up to judge RSS");
        false
    };
    let cpu = last.cpu / last.at.max(1.0);
    println!(
        "{} conversations and {} requests in {:.0} s with {streams} streams ({:.0} conversations/s); proxy CPU {:.0}% of one core on average; {errors} errors",
        last.conversations,
        last.requests,
        last.at,
        last.conversations as f64 / last.at.max(1.0),
        cpu * 100.0
    );
    println!(
        "CPU of the rest, on average: clients {:.0}%, provider {:.0}% of one core",
        100.0 * clients_cpu / last.at.max(1.0),
        100.0 * provider_cpu / last.at.max(1.0)
    );
    let verdict = if flat && errors == 0 { "PASS" } else { "FAIL" };
    println!(
        "verdict: {verdict} (RSS flat within 10% after warm-up: {}; errors: {errors}; target {secs} s)",
        if flat { "yes" } else { "no" }
    );
    if verdict == "FAIL" {
        std::process::exit(1);
    }
}
