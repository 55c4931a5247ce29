//! What the proxy makes reads as the provider's: one validator per dialect
//! for ids and for how an answer's calls are laid out (whole, or split
//! across stream events), derived from the providers' recorded answers in
//! `fixtures/streams/` and checked against them here. The scenario table
//! (`scenarios/harness.rs`) runs every answer the proxy hands a client,
//! on every dialect, JSON and SSE, through the same validator.
//!
//! The shapes (docs/embedded-runtime.md, "Ids"):
//! - Chat Completions: call ids `call_` and 24 letters and digits; on a
//!   stream one call per chunk, its first delta carrying `id`, `type` and
//!   `function.name`, later ones only argument pieces.
//! - Responses: `resp_`, `fc_`, `ctc_`, `msg_`, `rs_`... and 50 hex
//!   digits; `call_id` as on chat; a call's events are `output_item.added`,
//!   argument deltas naming its item, `output_item.done`; `response.created`
//!   first, one terminal `response.*` event last.
//! - Messages: `msg_` and `toolu_` and 24 letters and digits;
//!   `message_start` first, each block's start, deltas and stop in order of
//!   its index, `message_stop` last.
//! - Gemini: a `functionCall`'s `id` is optional (Gemini 3 sends 8
//!   letters and digits); when present, letters, digits, `_` or `-`; args
//!   an object, never split across chunks.
//! - Interactions: interaction ids `v1_` and an opaque token (letters,
//!   digits, `_`, `-`); a `function_call` step's `id` not empty, in the
//!   same letters; its `arguments` an object. On a stream,
//!   `interaction.created` first and once; each step's `step.start`
//!   before its deltas and `step.stop`, indexes from 0 rising by one, a
//!   delta naming a started step not yet stopped, an `arguments_delta`
//!   only in a `function_call` step, whose `step.start` names its `id`
//!   and `name`; after `interaction.completed` (or `error`) only `[DONE]`.

use serde_json::Value;

use crate::scenarios::model::Dialect;
use crate::scenarios::wire::{parse_events, Event};

fn alnum_of_len(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

fn hex_of_len(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn shaped(what: &str, id: &Value, ok: impl Fn(&str) -> bool) -> Result<(), String> {
    match id.as_str() {
        Some(s) if ok(s) => Ok(()),
        _ => Err(format!("{what} {id} is not in the provider's shape")),
    }
}

/// OpenAI's call ids, on chat and as Responses' `call_id`.
pub fn openai_call_id(id: &Value) -> Result<(), String> {
    shaped("call id", id, |s| {
        s.strip_prefix("call_").is_some_and(|b| alnum_of_len(b, 24))
    })
}

/// A Responses id: its type's prefix and 50 hex digits.
fn responses_id(what: &str, prefix: &str, id: &Value) -> Result<(), String> {
    shaped(what, id, |s| {
        s.strip_prefix(prefix)
            .and_then(|b| b.strip_prefix('_'))
            .is_some_and(|b| hex_of_len(b, 50))
    })
}

/// An Anthropic id: `prefix_` and 24 letters and digits.
fn anthropic_id(what: &str, prefix: &str, id: &Value) -> Result<(), String> {
    shaped(what, id, |s| {
        s.strip_prefix(prefix)
            .and_then(|b| b.strip_prefix('_'))
            .is_some_and(|b| alnum_of_len(b, 24))
    })
}

/// A whole JSON answer of dialect `d`.
pub fn check_json(d: Dialect, v: &Value) -> Result<(), String> {
    match d {
        Dialect::Chat => {
            for choice in v["choices"].as_array().into_iter().flatten() {
                for call in choice["message"]["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    openai_call_id(&call["id"])?;
                    if call["type"] != "function" || !call["function"]["arguments"].is_string() {
                        return Err(format!("a chat call not in OpenAI's shape: {call}"));
                    }
                }
            }
            Ok(())
        }
        Dialect::Responses => {
            responses_id("response id", "resp", &v["id"])?;
            v["output"]
                .as_array()
                .into_iter()
                .flatten()
                .try_for_each(responses_item)
        }
        Dialect::Messages => {
            anthropic_id("message id", "msg", &v["id"])?;
            v["content"]
                .as_array()
                .into_iter()
                .flatten()
                .try_for_each(messages_block)
        }
        Dialect::Gemini => gemini_chunk(v),
        Dialect::Interactions | Dialect::InteractionsStored => interaction(v),
    }
}

fn responses_item(item: &Value) -> Result<(), String> {
    let prefix = match item["type"].as_str() {
        Some("function_call") => "fc",
        Some("custom_tool_call") => "ctc",
        Some("message") => "msg",
        Some("reasoning") => "rs",
        Some("web_search_call") => "ws",
        _ => return Ok(()),
    };
    responses_id("item id", prefix, &item["id"])?;
    if matches!(
        item["type"].as_str(),
        Some("function_call" | "custom_tool_call")
    ) {
        openai_call_id(&item["call_id"])?;
    }
    Ok(())
}

fn messages_block(block: &Value) -> Result<(), String> {
    match block["type"].as_str() {
        Some("tool_use") => anthropic_id("tool_use id", "toolu", &block["id"]),
        Some("server_tool_use") => anthropic_id("server_tool_use id", "srvtoolu", &block["id"]),
        _ => Ok(()),
    }
}

fn gemini_chunk(v: &Value) -> Result<(), String> {
    for candidate in v["candidates"].as_array().into_iter().flatten() {
        for part in candidate["content"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let Some(call) = part.get("functionCall") else {
                continue;
            };
            if !call["name"].is_string() || !(call["args"].is_object() || call["args"].is_null()) {
                return Err(format!("a functionCall not in Google's shape: {call}"));
            }
            if let Some(id) = call.get("id") {
                shaped("functionCall id", id, |s| {
                    !s.is_empty()
                        && s.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                })?;
            }
        }
    }
    Ok(())
}

/// A stream of dialect `d`, as its events.
pub fn check_events(d: Dialect, events: &[Event]) -> Result<(), String> {
    let data: Vec<&Value> = events.iter().filter_map(|e| e.json.as_ref()).collect();
    match d {
        Dialect::Chat => chat_stream(&data),
        Dialect::Responses => responses_stream(&data),
        Dialect::Messages => messages_stream(&data),
        Dialect::Gemini => data.iter().try_for_each(|v| gemini_chunk(v)),
        Dialect::Interactions | Dialect::InteractionsStored => interactions_stream(events),
    }
}

/// An opaque token of letters, digits, `_` and `-`, not empty.
fn token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// An interaction's id: `v1_` and a token, the form Google's docs show.
fn interaction_id(id: &Value) -> Result<(), String> {
    shaped("interaction id", id, |s| {
        s.strip_prefix("v1_").is_some_and(token)
    })
}

/// An interaction's `status`, one of the values the SDKs know.
const INTERACTION_STATUSES: &[&str] = &[
    "in_progress",
    "requires_action",
    "completed",
    "failed",
    "cancelled",
    "incomplete",
    "budget_exceeded",
    "queued",
    "idle",
    "requires_continuation",
];

fn interaction_status(v: &Value) -> Result<(), String> {
    match v["status"].as_str() {
        Some(s) if INTERACTION_STATUSES.contains(&s) => Ok(()),
        _ => Err(format!("an interaction status the API never sends: {v}")),
    }
}

/// A step: an object with a `type`; a `function_call` with an `id`, a
/// `name` and (whole, or on its `step.start`, when present) object
/// `arguments`.
fn interaction_step(step: &Value) -> Result<(), String> {
    let Some(kind) = step["type"].as_str() else {
        return Err(format!("a step without a type: {step}"));
    };
    if kind == "function_call" {
        shaped("function_call id", &step["id"], token)?;
        if step["name"].as_str().is_none_or(str::is_empty) {
            return Err(format!("a function_call step without a name: {step}"));
        }
        if !(step["arguments"].is_object() || step["arguments"].is_null()) {
            return Err(format!("function_call arguments no object: {step}"));
        }
    }
    Ok(())
}

/// A whole `Interaction`.
fn interaction(v: &Value) -> Result<(), String> {
    interaction_id(&v["id"])?;
    interaction_status(v)?;
    if v.get("object").is_some_and(|o| o != "interaction") {
        return Err(format!("an interaction whose object is {}", v["object"]));
    }
    let steps = v["steps"].as_array().into_iter().flatten();
    for step in steps {
        interaction_step(step)?;
        if step["type"] == "function_call" && !step["arguments"].is_object() {
            return Err(format!("a whole function_call without arguments: {step}"));
        }
    }
    Ok(())
}

/// An Interactions stream, `[DONE]` included.
fn interactions_stream(events: &[Event]) -> Result<(), String> {
    use std::collections::BTreeMap;
    let mut created = false;
    let mut ended: Option<String> = None;
    let mut next = 0u64;
    // Started, not yet stopped: index to the step's type.
    let mut open: BTreeMap<u64, String> = BTreeMap::new();
    for (at, e) in events.iter().enumerate() {
        if e.data.trim() == "[DONE]" {
            if at + 1 != events.len() {
                return Err("an event after [DONE]".into());
            }
            continue;
        }
        let Some(v) = e.json.as_ref().filter(|v| v.is_object()) else {
            return Err(format!("an event that is no JSON object: {:?}", e.data));
        };
        let kind = v["event_type"].as_str().unwrap_or("");
        if let Some(end) = &ended {
            return Err(format!("{kind} after {end}"));
        }
        if at == 0 && kind != "interaction.created" && kind != "error" {
            return Err(format!(
                "the stream starts with {kind:?}, not interaction.created"
            ));
        }
        let index = v["index"].as_u64();
        match kind {
            "interaction.created" => {
                if created {
                    return Err("a second interaction.created".into());
                }
                created = true;
                interaction_id(&v["interaction"]["id"])?;
                interaction_status(&v["interaction"])?;
            }
            "interaction.status_update" => {
                interaction_id(&v["interaction_id"])?;
                interaction_status(v)?;
            }
            "step.start" => {
                if index != Some(next) {
                    return Err(format!("step {index:?} starts, {next} was next: {v}"));
                }
                interaction_step(&v["step"])?;
                let t = v["step"]["type"].as_str().unwrap_or("").to_owned();
                open.insert(next, t);
                next += 1;
            }
            "step.delta" => {
                let Some(t) = index.and_then(|i| open.get(&i)) else {
                    return Err(format!("a delta for step {index:?}, none open: {v}"));
                };
                let d = &v["delta"];
                match d["type"].as_str() {
                    Some("arguments_delta") if t != "function_call" => {
                        return Err(format!("arguments_delta in a {t} step: {v}"));
                    }
                    Some("arguments_delta") if !d["arguments"].is_string() => {
                        return Err(format!("arguments_delta without its text: {v}"));
                    }
                    Some("text") if !d["text"].is_string() => {
                        return Err(format!("a text delta without its text: {v}"));
                    }
                    Some(_) => {}
                    None => return Err(format!("a delta without a type: {v}")),
                }
            }
            "step.stop" if index.and_then(|i| open.remove(&i)).is_none() => {
                return Err(format!("step {index:?} stops, not open: {v}"));
            }
            "interaction.completed" => {
                if !created {
                    return Err("interaction.completed without interaction.created".into());
                }
                if !open.is_empty() {
                    return Err(format!("interaction.completed with steps open: {open:?}"));
                }
                interaction_id(&v["interaction"]["id"])?;
                interaction_status(&v["interaction"])?;
                ended = Some(kind.to_owned());
            }
            "error" => {
                if !v["error"]["message"].is_string()
                    || !(v["error"]["code"].is_string() || v["error"]["code"].is_null())
                {
                    return Err(format!("an error event not in the API's shape: {v}"));
                }
                ended = Some(kind.to_owned());
            }
            _ => {}
        }
    }
    Ok(())
}

/// One call per chunk; a call's first delta names it, later ones only
/// carry argument pieces; indexes start at 0 and rise by one.
fn chat_stream(chunks: &[&Value]) -> Result<(), String> {
    let mut seen = 0u64;
    for chunk in chunks {
        for choice in chunk["choices"].as_array().into_iter().flatten() {
            let calls = choice["delta"]["tool_calls"].as_array();
            let calls = calls.map_or(&[][..], Vec::as_slice);
            if calls.len() > 1 {
                return Err(format!("{} calls in one chunk: {chunk}", calls.len()));
            }
            let Some(call) = calls.first() else { continue };
            let index = call["index"]
                .as_u64()
                .ok_or("a call delta without an index")?;
            if index == seen {
                openai_call_id(&call["id"])?;
                if call["type"] != "function" || !call["function"]["name"].is_string() {
                    return Err(format!(
                        "a call's first delta lacks its type or name: {call}"
                    ));
                }
                seen += 1;
            } else if index + 1 == seen {
                if call.get("id").is_some()
                    || call.get("type").is_some()
                    || call["function"].get("name").is_some()
                {
                    return Err(format!("a later delta of a call names it again: {call}"));
                }
            } else {
                return Err(format!(
                    "call index {index} out of order ({seen} started): {chunk}"
                ));
            }
        }
    }
    Ok(())
}

fn responses_stream(events: &[&Value]) -> Result<(), String> {
    let kind = |v: &Value| v["type"].as_str().unwrap_or("").to_owned();
    let first = events.first().map(|v| kind(v)).unwrap_or_default();
    if first != "response.created" && first != "error" {
        return Err(format!(
            "the stream starts with {first:?}, not response.created"
        ));
    }
    let mut open: std::collections::HashMap<u64, String> = Default::default();
    let mut last_seq = None;
    let mut ended = false;
    for v in events {
        let k = kind(v);
        if ended {
            return Err(format!("{k} after the terminal event"));
        }
        if let Some(seq) = v["sequence_number"].as_u64() {
            if last_seq.is_some_and(|l| seq <= l) {
                return Err(format!("sequence_number {seq} does not rise"));
            }
            last_seq = Some(seq);
        }
        let index = v["output_index"].as_u64();
        match k.as_str() {
            "response.created" | "response.in_progress" => {
                responses_id("response id", "resp", &v["response"]["id"])?;
            }
            "response.output_item.added" => {
                responses_item(&v["item"])?;
                let id = v["item"]["id"].as_str().unwrap_or("").to_owned();
                open.insert(index.ok_or("an item without output_index")?, id);
            }
            "response.output_item.done" => {
                responses_item(&v["item"])?;
                let id = v["item"]["id"].as_str().unwrap_or("");
                match index.and_then(|i| open.remove(&i)) {
                    Some(added) if added == id => {}
                    _ => return Err(format!("output_item.done for an item never added: {v}")),
                }
            }
            "response.function_call_arguments.delta"
            | "response.function_call_arguments.done"
            | "response.custom_tool_call_input.delta"
            | "response.custom_tool_call_input.done" => {
                let item = v["item_id"].as_str().unwrap_or("");
                if index.and_then(|i| open.get(&i)).map(String::as_str) != Some(item) {
                    return Err(format!("{k} names no open item: {v}"));
                }
            }
            "response.completed" | "response.failed" | "response.incomplete" => {
                responses_id("response id", "resp", &v["response"]["id"])?;
                for item in v["response"]["output"].as_array().into_iter().flatten() {
                    responses_item(item)?;
                }
                ended = true;
            }
            // OpenAI sends `error` and then `response.failed`; either may end it.
            _ => {}
        }
    }
    Ok(())
}

fn messages_stream(events: &[&Value]) -> Result<(), String> {
    let kind = |v: &Value| v["type"].as_str().unwrap_or("").to_owned();
    let first = events.first().map(|v| kind(v)).unwrap_or_default();
    if first == "error" {
        return Ok(());
    }
    if first != "message_start" {
        return Err(format!(
            "the stream starts with {first:?}, not message_start"
        ));
    }
    let mut next = 0u64;
    let mut open = None;
    let mut ended = false;
    for v in events {
        let k = kind(v);
        if ended && k != "ping" {
            return Err(format!("{k} after message_stop"));
        }
        let index = v["index"].as_u64();
        match k.as_str() {
            "message_start" => anthropic_id("message id", "msg", &v["message"]["id"])?,
            "content_block_start" => {
                if open.is_some() || index != Some(next) {
                    return Err(format!("block {index:?} starts out of order: {v}"));
                }
                messages_block(&v["content_block"])?;
                open = index;
                next += 1;
            }
            "content_block_delta" if index != open || open.is_none() => {
                return Err(format!(
                    "a delta for block {index:?}, not the open one: {v}"
                ));
            }
            "content_block_stop" => {
                if index != open || open.is_none() {
                    return Err(format!("block {index:?} stops out of order: {v}"));
                }
                open = None;
            }
            "message_stop" => ended = true,
            "error" => ended = true,
            _ => {}
        }
    }
    Ok(())
}

/// The provider answers recorded from the APIs themselves (not the
/// hand-made fault fixtures): the validator accepts them, so it asks no
/// more of the proxy than the provider gives.
#[test]
fn the_providers_recorded_answers_meet_the_validator() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/streams");
    let dirs = [
        ("responses", Dialect::Responses),
        ("messages", Dialect::Messages),
        ("gemini", Dialect::Gemini),
    ];
    let mut checked = 0;
    for (dir, d) in dirs {
        checked += check_dir(root, dir, d);
    }
    assert!(checked >= 20, "only {checked} recorded streams found");
    // The Interactions streams are no recordings: written from the SDKs'
    // types and Google's streaming page, each read without error by both
    // SDKs (fixtures/streams/interactions/README.md).
    let interactions = check_dir(root, "interactions", Dialect::Interactions);
    assert!(
        interactions >= 4,
        "only {interactions} Interactions streams"
    );
}

/// Checks the streams in `dir` that keep the API's own ids (all of
/// Gemini's; all of Interactions', whose ids are made up but whose shape
/// both SDKs read); how many there were.
fn check_dir(root: &str, dir: &str, d: Dialect) -> usize {
    let mut checked = 0;
    for entry in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "sse") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        // Hand-made fixtures carry made-up ids; the recorded ones the
        // API's own (`toolu_01…`, `fc_` and 50 hex digits, `call_…`).
        let recorded = text.contains("toolu_01")
            || text.contains("msg_01")
            || text.contains("\"resp_")
            || dir == "gemini"
            || dir == "interactions";
        if !recorded {
            continue;
        }
        check_events(d, &parse_events(&bytes))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        checked += 1;
    }
    checked
}

/// The validator can fail: each rule refuses what breaks it.
#[test]
fn the_validator_refuses_what_the_provider_never_sends() {
    use serde_json::json;
    let chat = |calls: Value| json!({"choices": [{"message": {"tool_calls": calls}}]});
    let good = json!({"id": "call_0OeHoXJVOvDLtcj4Jc3JRaaP", "type": "function",
                      "function": {"name": "read", "arguments": "{}"}});
    assert!(check_json(Dialect::Chat, &chat(json!([good]))).is_ok());
    let mut long = good.clone();
    long["id"] = json!("cm_abcdefg_18c0x0123456789abcdef0123456789abcdefx0123456789abcdef_0");
    assert!(check_json(Dialect::Chat, &chat(json!([long]))).is_err());

    let delta = |d: Value| json!({"choices": [{"index": 0, "delta": {"tool_calls": d}}]});
    let head = |i: u64, id: &str| json!({"index": i, "id": id, "type": "function", "function": {"name": "a", "arguments": ""}});
    let piece = |i: u64| json!({"index": i, "function": {"arguments": "{}"}});
    let id0 = "call_0OeHoXJVOvDLtcj4Jc3JRaaP";
    let id1 = "call_IeBRukPcuvL7DXxvts2JuwFS";
    let ok = [
        delta(json!([head(0, id0)])),
        delta(json!([piece(0)])),
        delta(json!([head(1, id1)])),
    ];
    assert!(chat_stream(&ok.iter().collect::<Vec<_>>()).is_ok());
    let two = [delta(json!([head(0, id0), head(1, id1)]))];
    assert!(chat_stream(&two.iter().collect::<Vec<_>>()).is_err());
    let renamed = [delta(json!([head(0, id0)])), delta(json!([head(0, id0)]))];
    assert!(chat_stream(&renamed.iter().collect::<Vec<_>>()).is_err());

    let tool_use = |id: &str| {
        json!({"id": "msg_01Gd4UFiFbkkf0rdT0xAETN6",
        "content": [{"type": "tool_use", "id": id, "name": "a", "input": {}}]})
    };
    assert!(check_json(
        Dialect::Messages,
        &tool_use("toolu_01YBiCh6ZizkHfFsKE7ida69")
    )
    .is_ok());
    assert!(check_json(
        Dialect::Messages,
        &tool_use("call_01YBiCh6ZizkHfFsKE7ida69")
    )
    .is_err());

    let response = |id: &str| json!({"id": id, "output": []});
    assert!(check_json(
        Dialect::Responses,
        &response("resp_bb2737f6a6f0fb23c6f5da2cec255404e4fb440034d6608697aa")
    )
    .is_err());
    assert!(check_json(
        Dialect::Responses,
        &response("resp_bb2737f6a6f0fb23c6f5da2cec255404e4fb440034d6608697")
    )
    .is_ok());
}

/// The Interactions validator can fail: each rule refuses what breaks it.
#[test]
fn the_interactions_validator_refuses_what_the_api_never_sends() {
    use serde_json::json;
    let sse = |events: &[Value]| {
        let mut text: String = events
            .iter()
            .map(|v| {
                format!(
                    "event: {}\ndata: {v}\n\n",
                    v["event_type"].as_str().unwrap()
                )
            })
            .collect();
        text += "event: done\ndata: [DONE]\n\n";
        check_events(Dialect::Interactions, &parse_events(text.as_bytes()))
    };
    let id = "v1_ChdGVU5DX0NBTExfMQ";
    let created = json!({"interaction": {"id": id, "status": "in_progress"},
                         "event_type": "interaction.created"});
    let start = |i: u64, step: Value| json!({"index": i, "step": step, "event_type": "step.start"});
    let delta = |i: u64, d: Value| json!({"index": i, "delta": d, "event_type": "step.delta"});
    let stop = |i: u64| json!({"index": i, "event_type": "step.stop"});
    let call = json!({"type": "function_call", "id": "46ww9pp1", "name": "read", "arguments": {}});
    let args = json!({"type": "arguments_delta", "arguments": "{}"});
    let text = json!({"type": "text", "text": "hi"});
    let completed = json!({"interaction": {"id": id, "status": "requires_action",
                                           "usage": {"total_input_tokens": 1}},
                           "event_type": "interaction.completed"});
    let good = [
        created.clone(),
        start(0, json!({"type": "model_output"})),
        delta(0, text.clone()),
        stop(0),
        start(1, call.clone()),
        delta(1, args.clone()),
        stop(1),
        completed.clone(),
    ];
    assert_eq!(sse(&good), Ok(()));

    let broken = |at: usize, with: Option<Value>| {
        let mut events = good.to_vec();
        match with {
            Some(v) => events[at] = v,
            None => {
                events.remove(at);
            }
        }
        sse(&events)
    };
    // No interaction.created, or two.
    assert!(broken(0, None).is_err());
    assert!(broken(3, Some(created.clone())).is_err());
    // A step's index not the next one.
    assert!(broken(4, Some(start(2, call.clone()))).is_err());
    // A delta for a step never started, or one stopped.
    assert!(broken(2, Some(delta(1, text.clone()))).is_err());
    assert!(broken(5, Some(delta(0, text.clone()))).is_err());
    // Argument pieces outside a function_call step.
    assert!(broken(2, Some(delta(0, args.clone()))).is_err());
    // A function_call step.start without its id, with an empty one, or
    // without its name.
    for key in ["id", "name"] {
        let mut nameless = call.clone();
        nameless.as_object_mut().unwrap().remove(key);
        assert!(broken(4, Some(start(1, nameless))).is_err(), "{key}");
    }
    let mut empty = call.clone();
    empty["id"] = json!("");
    assert!(broken(4, Some(start(1, empty))).is_err());
    // interaction.completed with a step open, or followed by an event.
    assert!(broken(6, None).is_err());
    let mut late = good.to_vec();
    late.push(stop(1));
    assert!(sse(&late).is_err());
    // An interaction id not in Google's form.
    let mut other = completed.clone();
    other["interaction"]["id"] = json!("int_123");
    assert!(broken(7, Some(other)).is_err());

    let whole = |step: Value| {
        json!({"id": id, "object": "interaction", "status": "requires_action",
               "steps": [{"type": "thought", "signature": "U0lH"}, step]})
    };
    let call_step = json!({"type": "function_call", "id": "46ww9pp1", "name": "read",
                           "arguments": {"path": "a"}});
    assert_eq!(
        check_json(Dialect::Interactions, &whole(call_step.clone())),
        Ok(())
    );
    let mut no_id = call_step.clone();
    no_id["id"] = json!("");
    assert!(check_json(Dialect::Interactions, &whole(no_id)).is_err());
    let mut text_args = call_step.clone();
    text_args["arguments"] = json!("{\"path\":\"a\"}");
    assert!(check_json(Dialect::Interactions, &whole(text_args)).is_err());
    let mut status = whole(call_step);
    status["status"] = json!("done");
    assert!(check_json(Dialect::Interactions, &status).is_err());
}
