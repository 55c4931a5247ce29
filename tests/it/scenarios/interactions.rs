//! The Interactions adapter (Google's `POST /v1/interactions`, steps
//! schema): a round as an `Interaction` or as the event stream the API
//! sends (`interaction.created`, `interaction.status_update`, each step's
//! `step.start`, `step.delta`s and `step.stop`, `interaction.completed`,
//! `[DONE]`); a client request; what a client reads.
//!
//! Every round of the model opens with a signed `thought` step, as a
//! thinking model's turn does; its text is a `model_output` step, each
//! call a `function_call` step whose arguments stream as `arguments_delta`
//! pieces. A stateless client (`store: false`) sends the whole history as
//! steps in `input`, its results as `function_result` steps; a stateful
//! one (`store` left to its default, on) names the interaction it answers
//! (`previous_interaction_id`) and sends only its results, as the SDKs'
//! two ways of going on after a call.

use serde_json::{json, Value};

use crate::scenarios::model::{
    is_scripted, scripted_id, ClientView, Dialect, ErrorView, ProviderView, ToolResult, Turn,
    ViewCall,
};
use crate::scenarios::wire::{args_value, client_tools, halves, Event};

fn tool(name: &str, description: &str, properties: Value) -> Value {
    json!({"type": "function", "name": name, "description": description,
           "parameters": {"type": "object", "properties": properties}})
}

/// The model and the stream flag are in the body; `system_instruction` a
/// string, the prompt a `user_input` step; `store: false` unless the
/// client keeps its history on the server (`stored`).
pub fn request(prompt: &str, client_runtime: bool, stream: bool, stored: bool) -> Value {
    let mut body = json!({"model": "gemini-test", "system_instruction": "You are an agent.",
           "tools": client_tools(client_runtime, tool), "stream": stream, "store": false,
           "input": [{"type": "user_input", "content": [{"type": "text", "text": prompt}]}]});
    if stored {
        body.as_object_mut().unwrap().remove("store");
    }
    body
}

fn result_step(c: &ViewCall, r: &str) -> Value {
    json!({"type": "function_result", "call_id": c.id, "name": c.name, "result": r})
}

/// A stateless client's next request: `prev` grown by the steps it got (its
/// text as a `model_output`, its calls) and a `function_result` for each
/// call, naming it by `call_id`. A stateful one's (`prev` without `store:
/// false`): `prev`'s tools and settings, `previous_interaction_id` the
/// interaction it got, `input` its results alone (CAP 002 in the note on
/// the SDKs' traffic).
pub fn continued(prev: &Value, view: &ClientView, results: &[&str]) -> Value {
    let mut body = prev.clone();
    let answers = view
        .calls
        .iter()
        .zip(results)
        .map(|(c, r)| result_step(c, r));
    if prev["store"] != false {
        body["previous_interaction_id"] = json!(view.answer_id);
        body["input"] = answers.collect();
        return body;
    }
    let mut history: Vec<Value> = Vec::new();
    if !view.text.is_empty() {
        history.push(json!({"type": "model_output",
                            "content": [{"type": "text", "text": view.text}]}));
    }
    for c in &view.calls {
        history.push(json!({"type": "function_call", "id": c.id, "name": c.name,
                            "arguments": c.args}));
    }
    history.extend(answers);
    body["input"].as_array_mut().unwrap().extend(history);
    body
}

/// The interaction id of round `round`: `v1_` and an opaque token.
fn interaction_id(round: usize) -> String {
    scripted_id("v1_", round, 0)
}

/// A signature in base64, as the API's are (`SIG` and the round).
fn signature(round: usize) -> String {
    format!("U0lH{round:04}")
}

/// The steps of a round: a signed thought, the text, each call.
fn steps(t: &Turn, round: usize) -> Vec<Value> {
    let mut out = vec![json!({"type": "thought", "signature": signature(round)})];
    if let Some(text) = &t.text {
        out.push(json!({"type": "model_output", "content": [{"type": "text", "text": text}]}));
    }
    for (i, c) in t.calls.iter().enumerate() {
        out.push(
            json!({"type": "function_call", "id": scripted_id("call_", round, i),
                        "name": c.name, "arguments": args_value(&c.args)}),
        );
    }
    out
}

fn usage(u: (u64, u64)) -> Value {
    json!({"total_input_tokens": u.0, "total_output_tokens": u.1, "total_tokens": u.0 + u.1})
}

fn status(t: &Turn) -> &'static str {
    if t.calls.is_empty() {
        "completed"
    } else {
        "requires_action"
    }
}

pub fn render_json(t: &Turn, round: usize) -> Value {
    json!({"id": interaction_id(round), "object": "interaction", "status": status(t),
           "model": "gemini-test", "created": "2026-06-09T12:00:00Z",
           "updated": "2026-06-09T12:00:01Z", "steps": steps(t, round),
           "usage": usage(t.usage)})
}

/// One frame: `event: <type>` and the data repeating it as `event_type`.
fn frame(data: Value) -> String {
    let kind = data["event_type"].as_str().unwrap().to_owned();
    format!("event: {kind}\ndata: {data}\n\n")
}

fn step_event(kind: &str, index: usize, key: &str, value: Value) -> String {
    let mut data = json!({"index": index, "event_type": kind});
    if !key.is_empty() {
        data[key] = value;
    }
    frame(data)
}

/// `interaction.created` and the `in_progress` status update, no step yet.
pub fn preamble(round: usize) -> String {
    let id = interaction_id(round);
    frame(
        json!({"interaction": {"id": id, "status": "in_progress", "object": "interaction",
                                 "model": "gemini-test"},
                 "event_type": "interaction.created"}),
    ) + &frame(json!({"interaction_id": id, "status": "in_progress",
                        "event_type": "interaction.status_update"}))
}

/// The preamble; each step started, its content in deltas (text and
/// arguments in two pieces each), stopped; the final status; the
/// interaction completed with its usage and no steps; `[DONE]`.
pub fn render_sse(t: &Turn, round: usize, _req: &Value) -> String {
    let mut s = preamble(round);
    for (i, step) in steps(t, round).into_iter().enumerate() {
        match step["type"].as_str().unwrap() {
            "thought" => {
                s += &step_event("step.start", i, "step", json!({"type": "thought"}));
                let sig = json!({"type": "thought_signature", "signature": step["signature"]});
                s += &step_event("step.delta", i, "delta", sig);
            }
            "model_output" => {
                s += &step_event("step.start", i, "step", json!({"type": "model_output"}));
                let text = step["content"][0]["text"].as_str().unwrap();
                let (a, b) = halves(text);
                for piece in [a, b] {
                    let d = json!({"type": "text", "text": piece});
                    s += &step_event("step.delta", i, "delta", d);
                }
            }
            _ => {
                let head = json!({"type": "function_call", "id": step["id"],
                                  "name": step["name"], "arguments": {}});
                s += &step_event("step.start", i, "step", head);
                let raw = &t.calls[i - 1 - usize::from(t.text.is_some())].args;
                let (a, b) = halves(raw);
                for piece in [a, b] {
                    let d = json!({"type": "arguments_delta", "arguments": piece});
                    s += &step_event("step.delta", i, "delta", d);
                }
            }
        }
        s += &step_event("step.stop", i, "", Value::Null);
    }
    let id = interaction_id(round);
    s += &frame(json!({"interaction_id": id, "status": status(t),
                       "event_type": "interaction.status_update"}));
    s += &frame(
        json!({"interaction": {"id": id, "status": status(t), "object": "interaction",
                                       "model": "gemini-test", "usage": usage(t.usage)},
                       "event_type": "interaction.completed"}),
    );
    s + "event: done\ndata: [DONE]\n\n"
}

/// Google's error object, as the API answers a failed request.
pub fn error_body(status: u16) -> Value {
    crate::scenarios::gemini::error_body(status)
}

/// The text of a `model_output` step's text contents.
fn step_text(step: &Value) -> Option<String> {
    (step["type"] == "model_output").then(|| {
        step["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["type"] == "text")
            .filter_map(|c| c["text"].as_str())
            .collect()
    })
}

fn call_of(step: &Value, arguments: Value) -> Option<ViewCall> {
    (step["type"] == "function_call").then(|| ViewCall {
        id: step["id"].as_str().unwrap_or("").into(),
        name: step["name"].as_str().unwrap_or("").into(),
        args: arguments,
    })
}

fn usage_of(u: &Value) -> Option<(u64, u64)> {
    let u = u.as_object()?;
    Some((
        u.get("total_input_tokens")?.as_u64()?,
        u.get("total_output_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    ))
}

/// What a client shows of an interaction: the `model_output` steps' texts
/// joined with nothing between (the SDKs' `output_text`; the proxy puts a
/// paragraph break between rounds' words itself), the `function_call`
/// steps, the usage totals.
pub fn reduce_json(v: &Value) -> ClientView {
    let steps = v["steps"].as_array().cloned().unwrap_or_default();
    ClientView {
        text: steps.iter().filter_map(step_text).collect(),
        calls: steps
            .iter()
            .filter_map(|s| call_of(s, s["arguments"].clone()))
            .collect(),
        usage: usage_of(&v["usage"]),
        answer_id: v["id"].as_str().map(str::to_owned),
        ..ClientView::default()
    }
}

/// The event's type: its data's `event_type`, else its `event:` name.
pub fn kind(e: &Event) -> &str {
    e.get("/event_type")
        .as_str()
        .or(e.name.as_deref())
        .unwrap_or("")
}

/// A step as a streaming client rebuilds it: its `step.start`, its text
/// and argument pieces.
struct Streamed {
    index: Value,
    start: Value,
    text: String,
    arguments: String,
}

/// What a streaming client shows: the `model_output` steps' text deltas
/// joined with nothing between, each `function_call` step with its argument pieces joined
/// and parsed (the `step.start`'s `arguments` when no piece came), the
/// usage of `interaction.completed`, an `error` event.
pub fn reduce_sse(events: &[Event]) -> ClientView {
    let mut view = ClientView::default();
    let mut steps: Vec<Streamed> = Vec::new();
    for e in events {
        match kind(e) {
            "step.start" => steps.push(Streamed {
                index: e.get("/index").clone(),
                start: e.get("/step").clone(),
                text: String::new(),
                arguments: String::new(),
            }),
            "step.delta" => {
                let Some(s) = steps.iter_mut().rev().find(|s| &s.index == e.get("/index")) else {
                    continue;
                };
                let d = e.get("/delta");
                match d["type"].as_str() {
                    Some("text") => s.text.push_str(d["text"].as_str().unwrap_or("")),
                    Some("arguments_delta") => {
                        s.arguments.push_str(d["arguments"].as_str().unwrap_or(""))
                    }
                    _ => {}
                }
            }
            "interaction.completed" => {
                view.usage = usage_of(e.get("/interaction/usage"));
                view.answer_id = e.get("/interaction/id").as_str().map(str::to_owned);
            }
            "error" => view.error = Some(stream_error(e)),
            _ => {}
        }
    }
    view.text = steps
        .iter()
        .filter(|s| s.start["type"] == "model_output")
        .map(|s| s.text.as_str())
        .collect();
    view.calls = steps
        .iter()
        .filter_map(|s| {
            let args = if s.arguments.is_empty() {
                match &s.start["arguments"] {
                    Value::Null => json!({}),
                    a => a.clone(),
                }
            } else {
                args_value(&s.arguments)
            };
            call_of(&s.start, args)
        })
        .collect();
    view
}

/// The stream's `error` event: `error.code` a string (the proxy's code),
/// `error.message`.
fn stream_error(e: &Event) -> ErrorView {
    let err = e.get("/error");
    ErrorView {
        in_stream: true,
        status: 200,
        code: err["code"].as_str().map(str::to_owned),
        kind: None,
        message: err["message"].as_str().unwrap_or("").into(),
        body: e.data.clone(),
        shaped: err["code"].is_string()
            && err["message"].is_string()
            && e.get("/event_type") == "error",
        retry_after: None,
    }
}

/// Every frame named (`event:`) as its data's `event_type` says, but the
/// `[DONE]` sentinel; `interaction.created` first and once; at most one
/// `error`, the last event but `[DONE]`; without one, one
/// `interaction.completed`, the last event but `[DONE]`, with usage and no
/// steps, and `[DONE]` once, last; a text step's deltas are text, a call
/// step's argument pieces.
pub fn check_stream(events: &[Event]) -> Result<(), String> {
    let done = |e: &Event| e.data.trim() == "[DONE]";
    for e in events.iter().filter(|e| !done(e)) {
        let Some(j) = e.json.as_ref().filter(|j| j.is_object()) else {
            return Err(format!("an event that is no JSON object: {:?}", e.data));
        };
        if j["event_type"].as_str() != e.name.as_deref() {
            return Err(format!(
                "event: {:?} names another type than its data: {}",
                e.name, e.data
            ));
        }
    }
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| if done(e) { "[DONE]" } else { kind(e) })
        .collect();
    let count = |k: &str| kinds.iter().filter(|x| **x == k).count();
    if kinds.first() != Some(&"interaction.created") || count("interaction.created") != 1 {
        return Err(format!("one interaction.created, first: {kinds:?}"));
    }
    // The first round's: the provider's own id, even when the stream ends
    // handing a program's calls over under one the proxy minted.
    let first = events[0].get("/interaction/id").as_str().unwrap_or("");
    if !is_scripted(first) {
        return Err(format!(
            "interaction.created names {first:?}, not the provider's id"
        ));
    }
    if count("[DONE]") > 1
        || kinds
            .iter()
            .position(|k| *k == "[DONE]")
            .is_some_and(|p| p + 1 != kinds.len())
    {
        return Err(format!("[DONE] once at most, last: {kinds:?}"));
    }
    let body: Vec<&str> = kinds.iter().copied().filter(|k| *k != "[DONE]").collect();
    let last = body.last().copied().unwrap_or("");
    if count("error") > 0 {
        if count("error") > 1 || last != "error" {
            return Err(format!("one error event, the last: {kinds:?}"));
        }
    } else {
        if count("interaction.completed") != 1 || last != "interaction.completed" {
            return Err(format!("one interaction.completed, the last: {kinds:?}"));
        }
        if kinds.last() != Some(&"[DONE]") {
            return Err(format!("a completed stream ends with [DONE]: {kinds:?}"));
        }
        let e = events
            .iter()
            .find(|e| kind(e) == "interaction.completed")
            .unwrap();
        if usage_of(e.get("/interaction/usage")).is_none() {
            return Err(format!("interaction.completed without usage: {}", e.data));
        }
        if e.get("/interaction/steps")
            .as_array()
            .is_some_and(|s| !s.is_empty())
        {
            return Err(format!("interaction.completed lists steps: {}", e.data));
        }
    }
    let mut types: std::collections::HashMap<u64, String> = Default::default();
    for e in events {
        match kind(e) {
            "step.start" => {
                let index = e.get("/index").as_u64().unwrap_or(u64::MAX);
                let t = e.get("/step/type").as_str().unwrap_or("").to_owned();
                types.insert(index, t);
            }
            "step.delta" => {
                let t = e
                    .get("/index")
                    .as_u64()
                    .and_then(|i| types.get(&i))
                    .map(String::as_str)
                    .unwrap_or("");
                let fits = match e.get("/delta/type").as_str().unwrap_or("") {
                    "text" => t == "model_output",
                    "arguments_delta" => t == "function_call",
                    "thought_signature" | "thought_summary" => t == "thought",
                    _ => true,
                };
                if !fits {
                    return Err(format!("a delta not of its step's type ({t}): {}", e.data));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// An error response as a client of the API reads it: Google's error
/// object (the proxy's code the `reason` of its `ErrorInfo`), as on Gemini.
pub fn http_error(status: u16, body: &[u8]) -> ErrorView {
    crate::scenarios::gemini::http_error(status, body)
}

/// A `function_result`'s text: a string as it is; a list of contents their
/// text; an object holding just one string that string; else its JSON.
fn result_text(result: &Value) -> String {
    match result {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().filter_map(|i| i["text"].as_str()).collect(),
        Value::Object(o) if o.len() == 1 => match o.values().next() {
            Some(Value::String(s)) => s.clone(),
            _ => result.to_string(),
        },
        other => other.to_string(),
    }
}

/// A request the provider got. A `function_result` answering a call the
/// input does not hold, in a request that continues a stored interaction,
/// answers a call of that interaction: its `name` names the call.
pub fn reduce_request(d: Dialect, body: &Value) -> ProviderView {
    let tools = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["name"].as_str().unwrap_or("?").to_owned())
        .collect();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for s in body["input"].as_array().into_iter().flatten() {
        match s["type"].as_str().unwrap_or("") {
            "function_call" => calls.push((
                s["id"].as_str().unwrap_or("").to_owned(),
                s["name"].as_str().unwrap_or("").to_owned(),
            )),
            "function_result" => results.push(ToolResult {
                id: s["call_id"].as_str().unwrap_or("").into(),
                text: result_text(&s["result"]),
                is_error: s["is_error"] == true,
            }),
            _ => {}
        }
    }
    if body["previous_interaction_id"].is_string() {
        for s in body["input"].as_array().into_iter().flatten() {
            let id = s["call_id"].as_str().unwrap_or("");
            if s["type"] == "function_result" && !calls.iter().any(|(c, _)| c == id) {
                calls.push((id.to_owned(), s["name"].as_str().unwrap_or("").to_owned()));
            }
        }
    }
    ProviderView {
        dialect: d,
        tools,
        calls,
        results,
        body: body.clone(),
    }
}

/// The scripted provider speaks the API as the validator reads it: its
/// streams meet [`check_stream`] and the conformance validator (its whole
/// answers too, but for arguments that are no object, a fault the
/// scenarios script), and a
/// client reads the same turn from a stream as from the whole answer.
#[test]
fn the_scripted_provider_meets_the_validator() {
    use crate::scenarios::model::{call, turn};
    use crate::scenarios::wire::parse_events;
    let turns = [
        turn(Some("Reading."), vec![], (10, 5)),
        turn(
            Some("Two calls."),
            vec![
                call("run_code", r#"{"code":"return 1"}"#),
                call("read", r#"{"path":"a"}"#),
            ],
            (10, 5),
        ),
        turn(None, vec![call("read", "not json")], (10, 5)),
    ];
    for (i, t) in turns.iter().enumerate() {
        let whole = render_json(t, 1);
        let events = parse_events(render_sse(t, 1, &Value::Null).as_bytes());
        check_stream(&events).unwrap();
        let faulty = i == 2;
        let shape = crate::conformance::check_json(Dialect::Interactions, &whole);
        assert_eq!(shape.is_err(), faulty, "{shape:?}");
        // A stream's arguments are text until the step stops.
        crate::conformance::check_events(Dialect::Interactions, &events).unwrap();
        let (json, sse) = (reduce_json(&whole), reduce_sse(&events));
        assert_eq!(json.comparable(), sse.comparable());
        assert_eq!(json.answer_id, sse.answer_id);
    }
}
