//! Property: a shape a judge cannot read where a call could stand is
//! refused, never forwarded (issue 47; docs/security.md, "Fail closed").
//!
//! Generated answers of every dialect (`answers`) are mutated at every
//! call-bearing path (`choices`, a message or delta, `tool_calls` and each
//! entry, a call's body and name; `output` and items; `content` and
//! blocks; `candidates`, `content`, `parts`, `functionCall`; `steps` and a
//! step's `name`; in a stream also an event's `item`, `response`,
//! `message`, `content_block`, `step`, `delta`, `interaction`): a list
//! written as an object keyed `"0"`, `"1"`, ... (`@google/genai` reads
//! `candidates` so), an object or a name written as a list holding it (a
//! JavaScript client looks a tool up by the string a list joins to),
//! `null`, and the key written twice, the second time `null` (serde keeps
//! the last, many clients the first).
//!
//! Each mutated answer goes through what the proxy does with it: whole,
//! the JSON driver's own steps (the quiet probe, the parse, the judge, the
//! edits, the provider's bytes or the answer written anew); as an event of
//! a stream, the stream body and the dialect's judge. A lenient client
//! reads what comes out: repeated keys first one first, an object keyed
//! `"0"` as a list, a list where an object goes as its first entry, a name
//! that is no string as the string JavaScript makes of it. The property:
//! the proxy refused it, or every call that client reads is one the
//! judge lets through (and, whole, the turn holds exactly as many calls
//! as the judge passed).

use std::fmt;

use proptest::prelude::*;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{json, Map, Value};

use super::answers::{
    chat_answer, gemini_answer, interactions_answer, messages_answer, modes, responses_answer,
};
use crate::chat::Chat;
use crate::gemini::stream::GeminiJudge;
use crate::gemini::Gemini;
use crate::interactions::stream::InteractionsJudge;
use crate::interactions::Interactions;
use crate::layer::drivers::json::{judge_answer, parse_answer};
use crate::messages::Messages;
use crate::mode::{Mode, Runtime};
use crate::plan::ToolPlan;
use crate::responses::Responses;
use crate::test_support::{
    agent_plan, client_events, gemini_plan, judge_pieces, messages_plan, responses_plan, Judge,
    MessagesJudge, ResponsesJudge, StreamJudge,
};
use crate::turn::Dialect;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Api {
    Chat,
    Responses,
    Messages,
    Gemini,
    Interactions,
}

impl Api {
    /// The keys on the path to a call, in a whole answer or in an event.
    fn keys(self, stream: bool) -> &'static [&'static str] {
        match (self, stream) {
            (Api::Chat, false) => &[
                "choices",
                "message",
                "tool_calls",
                "function",
                "custom",
                "name",
                "function_call",
            ],
            (Api::Chat, true) => &[
                "choices",
                "delta",
                "message",
                "tool_calls",
                "function",
                "custom",
                "name",
                "function_call",
            ],
            (Api::Responses, false) => &["output", "name", "namespace"],
            (Api::Responses, true) => &["item", "response", "output", "name", "namespace"],
            (Api::Messages, false) => &["content", "name"],
            (Api::Messages, true) => &["message", "content", "content_block", "name"],
            (Api::Interactions, false) => &["steps", "name"],
            (Api::Interactions, true) => &["step", "delta", "interaction", "steps", "name"],
            (Api::Gemini, _) => &[
                "candidates",
                "content",
                "parts",
                "functionCall",
                "function_call",
                "name",
            ],
        }
    }
}

// ---- mutations ----

/// One step of a path, owning its key.
#[derive(Clone, Debug)]
enum Seg {
    Key(String),
    Index(usize),
}

/// Every call-bearing path in `value`: each of `keys` wherever it stands
/// under another, and every entry of a list found there.
fn paths(value: &Value, keys: &[&str]) -> Vec<Vec<Seg>> {
    fn walk(value: &Value, keys: &[&str], at: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
        match value {
            Value::Object(fields) => {
                for (key, child) in fields.iter().filter(|(k, _)| keys.contains(&k.as_str())) {
                    at.push(Seg::Key(key.clone()));
                    out.push(at.clone());
                    walk(child, keys, at, out);
                    at.pop();
                }
            }
            Value::Array(entries) => {
                for (i, child) in entries.iter().enumerate() {
                    at.push(Seg::Index(i));
                    out.push(at.clone());
                    walk(child, keys, at, out);
                    at.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, keys, &mut Vec::new(), &mut out);
    out
}

#[derive(Clone, Copy, Debug)]
enum Mutation {
    /// A list as an object keyed "0", "1", ...
    Keyed,
    /// An object or a name as a list holding it.
    Wrapped,
    Null,
    /// The key twice: as it was, then `null`.
    Repeated,
}

const MUTATIONS: [Mutation; 4] = [
    Mutation::Keyed,
    Mutation::Wrapped,
    Mutation::Null,
    Mutation::Repeated,
];

fn place<'a>(value: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    path.iter().try_fold(value, |v, seg| match seg {
        Seg::Key(k) => v.get_mut(k.as_str()),
        Seg::Index(i) => v.get_mut(*i),
    })
}

/// `value` with `mutation` at `path`, as JSON text; `None` where it does
/// not apply (a list keyed, a number wrapped, an entry repeated).
fn mutated(value: &Value, path: &[Seg], mutation: Mutation) -> Option<String> {
    if let Mutation::Repeated = mutation {
        if !matches!(path.last(), Some(Seg::Key(_))) {
            return None;
        }
        let mut out = String::new();
        write_repeating(value, path, &mut out);
        return Some(out);
    }
    let mut copy = value.clone();
    let at = place(&mut copy, path)?;
    *at = match (mutation, &*at) {
        (Mutation::Keyed, Value::Array(entries)) => Value::Object(
            entries
                .iter()
                .enumerate()
                .map(|(i, e)| (i.to_string(), e.clone()))
                .collect(),
        ),
        (Mutation::Wrapped, v @ (Value::Object(_) | Value::String(_))) => json!([v]),
        (Mutation::Null, _) => Value::Null,
        _ => return None,
    };
    Some(copy.to_string())
}

/// `value` as JSON text, the key `path` ends in written twice: as it was,
/// then `null`.
fn write_repeating(value: &Value, path: &[Seg], out: &mut String) {
    let text = |s: &str| Value::String(s.to_owned()).to_string();
    match (value, path) {
        (Value::Object(fields), [Seg::Key(target), rest @ ..]) => {
            out.push('{');
            for (i, (key, child)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&text(key));
                out.push(':');
                if key != target {
                    out.push_str(&child.to_string());
                } else if rest.is_empty() {
                    out.push_str(&child.to_string());
                    out.push(',');
                    out.push_str(&text(key));
                    out.push_str(":null");
                } else {
                    write_repeating(child, rest, out);
                }
            }
            out.push('}');
        }
        (Value::Array(entries), [Seg::Index(n), rest @ ..]) => {
            out.push('[');
            for (i, child) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if i == *n {
                    write_repeating(child, rest, out);
                } else {
                    out.push_str(&child.to_string());
                }
            }
            out.push(']');
        }
        _ => out.push_str(&value.to_string()),
    }
}

// ---- the lenient client ----

/// JSON as a lenient client reads it: of a repeated key, the first.
fn first_wins(text: &str) -> Option<Value> {
    struct First;
    impl<'de> DeserializeSeed<'de> for First {
        type Value = Value;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for First {
        type Value = Value;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(json!(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(json!(v))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
            Ok(json!(v))
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            Ok(Value::String(v.to_owned()))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut out = Vec::new();
            while let Some(v) = seq.next_element_seed(First)? {
                out.push(v);
            }
            Ok(Value::Array(out))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut out = Map::new();
            while let Some(key) = map.next_key::<String>()? {
                let value = map.next_value_seed(First)?;
                out.entry(key).or_insert(value);
            }
            Ok(Value::Object(out))
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let value = First.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(value)
}

/// A list as a lenient client reads one: a list, or an object keyed "0",
/// "1", ...
fn list(value: Option<&Value>) -> Vec<&Value> {
    match value {
        Some(Value::Array(entries)) => entries.iter().collect(),
        Some(Value::Object(keyed)) => (0..)
            .map_while(|i: usize| keyed.get(&i.to_string()))
            .collect(),
        _ => Vec::new(),
    }
}

/// An object as a lenient client reads one: an object, or a list's first
/// entry.
fn obj(value: Option<&Value>) -> Option<&Map<String, Value>> {
    match value? {
        Value::Object(fields) => Some(fields),
        Value::Array(entries) => entries.first()?.as_object(),
        _ => None,
    }
}

/// A name as JavaScript looks a tool up by it.
fn name(value: &Value) -> Value {
    match value {
        Value::Array(parts) => {
            let parts: Vec<String> = parts
                .iter()
                .map(|p| match name(p) {
                    Value::String(s) => s,
                    _ => String::new(),
                })
                .collect();
            Value::String(parts.join(","))
        }
        Value::Number(n) => Value::String(n.to_string()),
        Value::Bool(b) => Value::String(b.to_string()),
        Value::Object(_) => Value::String("[object Object]".into()),
        other => other.clone(),
    }
}

/// `fields` with each of `keys` read as a name.
fn named(fields: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    let mut out = fields.clone();
    for key in keys {
        if let Some(v) = out.get_mut(*key) {
            *v = name(v);
        }
    }
    out
}

/// The calls a lenient client reads off an answer or event, each as a
/// one-call answer of its dialect: those of the turn (choice or candidate
/// 0; every item or block) and those of the rest.
fn calls(api: Api, answer: &Value) -> (Vec<Value>, Vec<Value>) {
    let (mut turn, mut rest) = (Vec::new(), Vec::new());
    match api {
        Api::Chat => {
            for (n, choice) in list(answer.get("choices")).into_iter().enumerate() {
                let out = if n == 0 { &mut turn } else { &mut rest };
                let Some(choice) = obj(Some(choice)) else {
                    continue;
                };
                for part in ["message", "delta"] {
                    let Some(message) = obj(choice.get(part)) else {
                        continue;
                    };
                    for call in list(message.get("tool_calls")) {
                        let Some(call) = obj(Some(call)) else {
                            continue;
                        };
                        let mut call = call.clone();
                        for body in ["function", "custom"] {
                            match obj(call.get(body)).map(|b| named(b, &["name"])) {
                                Some(b) => call.insert(body.into(), Value::Object(b)),
                                None => call.remove(body),
                            };
                        }
                        out.push(
                            json!({"choices": [{"index": 0, "message": {"tool_calls": [call]}}]}),
                        );
                    }
                    if let Some(fc) = obj(message.get("function_call")) {
                        let fc = named(fc, &["name"]);
                        out.push(
                            json!({"choices": [{"index": 0, "message": {"function_call": fc}}]}),
                        );
                    }
                }
            }
        }
        Api::Responses => {
            let items = list(answer.get("output"))
                .into_iter()
                .chain(answer.get("item"))
                .chain(
                    obj(answer.get("response")).map_or_else(Vec::new, |r| list(r.get("output"))),
                );
            for item in items.filter_map(|i| obj(Some(i))) {
                let item = Value::Object(named(item, &["name", "namespace"]));
                if crate::responses::items::is_judged_item(&item) {
                    turn.push(json!({"output": [item]}));
                }
            }
        }
        Api::Messages => {
            let blocks = list(answer.get("content"))
                .into_iter()
                .chain(answer.get("content_block"))
                .chain(
                    obj(answer.get("message")).map_or_else(Vec::new, |m| list(m.get("content"))),
                );
            for block in blocks.filter_map(|b| obj(Some(b))) {
                let block = Value::Object(named(block, &["name"]));
                if crate::messages::items::is_call_block(&block) {
                    turn.push(json!({"content": [block]}));
                }
            }
        }
        Api::Gemini => {
            for (n, candidate) in list(answer.get("candidates")).into_iter().enumerate() {
                let out = if n == 0 { &mut turn } else { &mut rest };
                let content = obj(Some(candidate)).and_then(|c| obj(c.get("content")));
                let parts = content.map_or_else(Vec::new, |c| list(c.get("parts")));
                for part in parts.into_iter().filter_map(|p| obj(Some(p))) {
                    let mut part = part.clone();
                    for key in ["functionCall", "function_call"] {
                        if let Some(call) = obj(part.get(key)).map(|c| named(c, &["name"])) {
                            part.insert(key.into(), Value::Object(call));
                        }
                    }
                    let part = Value::Object(part);
                    if crate::gemini::parts::is_call_part(&part) {
                        out.push(json!({"candidates": [{"content": {"parts": [part]}}]}));
                    }
                }
            }
        }
        Api::Interactions => {
            let steps = list(answer.get("steps"))
                .into_iter()
                .chain(answer.get("step"))
                .chain(answer.get("delta"))
                .chain(
                    obj(answer.get("interaction")).map_or_else(Vec::new, |i| list(i.get("steps"))),
                );
            for step in steps.filter_map(|s| obj(Some(s))) {
                let step = Value::Object(named(step, &["name"]));
                if crate::interactions::steps::is_judged_step(&step) && !is_safe_delta(&step) {
                    turn.push(json!({"steps": [step]}));
                }
            }
        }
    }
    (turn, rest)
}

/// A delta the Interactions stream judge reads as a piece of its step,
/// not as a step of its own (a client reads it so too).
fn is_safe_delta(step: &Value) -> bool {
    matches!(
        step.get("type").and_then(Value::as_str),
        Some("text" | "arguments_delta" | "thought_signature" | "thought_summary")
    )
}

/// Whether the judge lets a call through that a client read as `one` (a
/// one-call answer): it reads it, and passes its call.
fn lets_through(api: Api, one: &Value, plan: &ToolPlan) -> bool {
    let Some(answer) = one.as_object() else {
        return false;
    };
    let judged = match api {
        Api::Chat => Chat::judge_answer(answer, plan),
        Api::Responses => Responses::judge_answer(answer, plan),
        Api::Messages => Messages::judge_answer(answer, plan),
        Api::Gemini => Gemini::judge_answer(answer, plan),
        Api::Interactions => Interactions::judge_answer(answer, plan),
    };
    judged.is_ok_and(|(turn, _)| turn.calls.iter().all(|c| c.passed()))
}

// ---- through the proxy ----

fn plan(api: Api, mode: Mode, runtime: Runtime) -> std::sync::Arc<ToolPlan> {
    match api {
        Api::Chat => agent_plan(mode),
        Api::Responses => responses_plan(mode, runtime),
        Api::Messages => messages_plan(mode, runtime),
        Api::Gemini => gemini_plan(mode, runtime),
        Api::Interactions => crate::interactions::test_plan::plan(mode, runtime),
    }
}

/// What the JSON driver sends for a first round's `body`: `None` for a
/// refusal; else the client's bytes and how many calls the judge passed.
fn through_json<D: Dialect>(body: &[u8], plan: &ToolPlan) -> Option<(Vec<u8>, usize)> {
    if D::quiet_answer(body).is_some() {
        return Some((body.to_vec(), 0));
    }
    let (mut answer, repeated) = parse_answer::<D>(body).ok()?;
    let (turn, edits) = judge_answer::<D>(&answer, plan).ok()?;
    let unchanged = edits.is_empty() && !repeated;
    edits.apply(&mut answer);
    let client = if unchanged {
        body.to_vec()
    } else {
        serde_json::to_vec(&answer).expect("an answer serialises")
    };
    Some((client, turn.calls.iter().filter(|c| c.passed()).count()))
}

/// The property for one whole answer's text, in every mode; in how many
/// the client got calls.
fn whole_holds(api: Api, body: &str) -> Result<usize, String> {
    let mut with_calls = 0;
    for (mode, runtime) in modes() {
        let plan = plan(api, mode, runtime);
        let sent = match api {
            Api::Chat => through_json::<Chat>(body.as_bytes(), &plan),
            Api::Responses => through_json::<Responses>(body.as_bytes(), &plan),
            Api::Messages => through_json::<Messages>(body.as_bytes(), &plan),
            Api::Gemini => through_json::<Gemini>(body.as_bytes(), &plan),
            Api::Interactions => through_json::<Interactions>(body.as_bytes(), &plan),
        };
        let Some((client, passed)) = sent else {
            continue; // Refused: nothing of it reaches the client.
        };
        let text = String::from_utf8_lossy(&client);
        let read = first_wins(&text).ok_or_else(|| format!("the client got no JSON: {text}"))?;
        let (turn, rest) = calls(api, &read);
        let why =
            |e: &str| format!("{api:?}, {mode:?} on {runtime:?}: {e}\nsent {body}\ngot {text}");
        if turn.len() != passed {
            return Err(why(&format!(
                "the client reads {} calls, the judge passed {passed}",
                turn.len()
            )));
        }
        if let Some(call) = turn
            .iter()
            .chain(&rest)
            .find(|c| !lets_through(api, c, &plan))
        {
            return Err(why(&format!(
                "the client reads a call the judge withholds: {call}"
            )));
        }
        with_calls += usize::from(!turn.is_empty());
    }
    Ok(with_calls)
}

/// An answer as a stream's events: chat's choices as deltas; a Responses
/// stream's start, each item added and done, its end; a Messages stream's
/// start holding the blocks, then each block again; a Gemini answer is a
/// chunk, and a last one ends the turn.
fn events(api: Api, answer: &Value) -> Vec<Value> {
    match api {
        Api::Chat => {
            let mut chunk = answer.clone();
            if let Some(Value::Array(choices)) = chunk.get_mut("choices") {
                for choice in choices.iter_mut().filter_map(Value::as_object_mut) {
                    let mut delta = choice.remove("message").unwrap_or(Value::Null);
                    if let Some(Value::Array(calls)) = delta.get_mut("tool_calls") {
                        for (j, call) in calls.iter_mut().enumerate() {
                            if let Some(call) = call.as_object_mut() {
                                call.insert("index".into(), json!(j));
                            }
                        }
                    }
                    choice.insert("delta".into(), delta);
                    choice.insert("finish_reason".into(), Value::Null);
                }
            }
            chunk["object"] = json!("chat.completion.chunk");
            vec![
                chunk,
                json!({"id": "c", "object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            ]
        }
        Api::Responses => {
            let items = answer["output"].as_array().cloned().unwrap_or_default();
            let mut out = vec![json!({"type": "response.created",
                "response": {"id": "resp_1", "object": "response", "status": "in_progress",
                             "output": answer["output"]}})];
            for (i, item) in items.iter().enumerate() {
                for kind in ["response.output_item.added", "response.output_item.done"] {
                    out.push(json!({"type": kind, "output_index": i, "item": item}));
                }
            }
            out.push(json!({"type": "response.completed",
                "response": {"id": "resp_1", "object": "response", "status": "completed",
                             "output": answer["output"]}}));
            out
        }
        Api::Messages => {
            let blocks = answer["content"].as_array().cloned().unwrap_or_default();
            let mut out = vec![json!({"type": "message_start", "message": {"id": "msg_1",
                "type": "message", "role": "assistant", "content": answer["content"],
                "usage": {"input_tokens": 1, "output_tokens": 1}}})];
            for (i, block) in blocks.iter().enumerate() {
                let index = i + blocks.len();
                out.push(
                    json!({"type": "content_block_start", "index": index, "content_block": block}),
                );
                out.push(json!({"type": "content_block_stop", "index": index}));
            }
            out.push(
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                            "usage": {"output_tokens": 2}}),
            );
            out.push(json!({"type": "message_stop"}));
            out
        }
        Api::Interactions => {
            let steps = answer["steps"].as_array().cloned().unwrap_or_default();
            let mut out = vec![json!({"event_type": "interaction.created",
                "interaction": {"id": "v1_a", "object": "interaction", "status": "in_progress",
                                "steps": answer["steps"]}})];
            for (i, step) in steps.iter().enumerate() {
                out.push(json!({"event_type": "step.start", "index": i, "step": step}));
                out.push(json!({"event_type": "step.delta", "index": i, "delta": step}));
                out.push(json!({"event_type": "step.stop", "index": i}));
            }
            out.push(json!({"event_type": "interaction.completed",
                "interaction": {"id": "v1_a", "status": "requires_action", "steps": answer["steps"]}}));
            out
        }
        Api::Gemini => vec![
            answer.clone(),
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]},
                                   "finishReason": "STOP", "index": 0}]}),
        ],
    }
}

/// The events as the provider streams them, event `n` as `text`.
fn sse(events: &[Value], n: usize, text: &str) -> Vec<u8> {
    let mut out = String::new();
    for (i, e) in events.iter().enumerate() {
        let data = if i == n {
            text.to_owned()
        } else {
            e.to_string()
        };
        if let Some(kind) = e
            .get("type")
            .or_else(|| e.get("event_type"))
            .and_then(Value::as_str)
        {
            out.push_str(&format!("event: {kind}\n"));
        }
        out.push_str(&format!("data: {data}\n\n"));
    }
    out.into_bytes()
}

fn stream_run<J: Judge>(judge: J, bytes: &[u8]) -> Vec<u8> {
    judge_pieces(judge, &[bytes]).client
}

/// The property for one stream whose event `n` is `text`, in a mode that
/// denies and one that passes natives.
fn stream_holds(api: Api, events: &[Value], n: usize, text: &str) -> Result<(), String> {
    let bytes = sse(events, n, text);
    for (mode, runtime) in [
        (Mode::Code, Runtime::Client),
        (Mode::Code, Runtime::Embedded),
        (Mode::Both, Runtime::Client),
    ] {
        let plan = plan(api, mode, runtime);
        let client = match api {
            Api::Chat => stream_run(StreamJudge::new(plan.clone(), 1), &bytes),
            Api::Responses => stream_run(ResponsesJudge::new(plan.clone(), 1), &bytes),
            Api::Messages => stream_run(MessagesJudge::new(plan.clone(), 1), &bytes),
            Api::Gemini => stream_run(GeminiJudge::new(plan.clone(), 1), &bytes),
            Api::Interactions => stream_run(InteractionsJudge::new(plan.clone(), 1), &bytes),
        };
        for ev in client_events(&client) {
            let Some(read) = first_wins(&ev.data) else {
                continue;
            };
            let (turn, rest) = calls(api, &read);
            // A delta that names no tool continues a call it went out with.
            let named = |c: &&Value| api != Api::Chat || c.to_string().contains("\"name\":");
            if let Some(call) = turn
                .iter()
                .chain(&rest)
                .filter(named)
                .find(|c| !lets_through(api, c, &plan))
            {
                return Err(format!(
                    "{api:?}, {mode:?} on {runtime:?}: the client reads a call the judge withholds: {call}\nsent {}\ngot {}",
                    String::from_utf8_lossy(&bytes),
                    String::from_utf8_lossy(&client)
                ));
            }
        }
    }
    Ok(())
}

/// The property for an answer mutated every way at every path, whole and
/// as each event of its stream; how often a mutated whole answer reached
/// the client judged, with calls.
fn holds(api: Api, answer: &Value) -> Result<usize, String> {
    whole_holds(api, &answer.to_string())?;
    let mut judged = 0;
    for path in paths(answer, api.keys(false)) {
        for mutation in MUTATIONS {
            if let Some(text) = mutated(answer, &path, mutation) {
                judged += whole_holds(api, &text)?;
            }
        }
    }
    let events = events(api, answer);
    for (n, event) in events.iter().enumerate() {
        for path in paths(event, api.keys(true)) {
            for mutation in MUTATIONS {
                if let Some(text) = mutated(event, &path, mutation) {
                    stream_holds(api, &events, n, &text)?;
                }
            }
        }
    }
    Ok(judged)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_chat_answer_mutated_where_a_call_stands_is_judged_or_refused(answer in chat_answer()) {
        holds(Api::Chat, &answer).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_responses_answer_mutated_where_a_call_stands_is_judged_or_refused(answer in responses_answer()) {
        holds(Api::Responses, &answer).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_messages_answer_mutated_where_a_call_stands_is_judged_or_refused(answer in messages_answer()) {
        holds(Api::Messages, &answer).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_gemini_answer_mutated_where_a_call_stands_is_judged_or_refused(answer in gemini_answer()) {
        holds(Api::Gemini, &answer).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn an_interactions_answer_mutated_where_a_call_stands_is_judged_or_refused(answer in interactions_answer()) {
        holds(Api::Interactions, &answer).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn mutations_a_judge_reads_reach_the_client_judged_in_every_dialect() {
    // The property is vacuous if every mutation is refused: `null` where
    // a field is optional, and a repeated key, are read, and their calls
    // judged.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    for api in [
        Api::Chat,
        Api::Responses,
        Api::Messages,
        Api::Gemini,
        Api::Interactions,
    ] {
        let strategy = match api {
            Api::Chat => chat_answer().boxed(),
            Api::Responses => responses_answer().boxed(),
            Api::Messages => messages_answer().boxed(),
            Api::Gemini => gemini_answer().boxed(),
            Api::Interactions => interactions_answer().boxed(),
        };
        let judged: usize = (0..40)
            .map(|_| {
                let answer = strategy.new_tree(&mut runner).unwrap().current();
                holds(api, &answer).unwrap()
            })
            .sum();
        assert!(
            judged >= 100,
            "{api:?}: only {judged} mutated answers went out with calls"
        );
    }
}

#[test]
fn the_lenient_client_reads_what_the_issue_saw() {
    // `@google/genai` read the first candidate out of an object keyed "0":
    // the reader does too, so a judge that skipped it is caught.
    let keyed = json!({"candidates": {"0": {"content": {"parts": [
        {"functionCall": {"name": "read_file", "args": {}}}]}}}});
    let (turn, _) = calls(Api::Gemini, &keyed);
    assert_eq!(turn.len(), 1);
    let plan = gemini_plan(Mode::Code, Runtime::Client);
    assert!(!lets_through(Api::Gemini, &turn[0], &plan));
    assert!(whole_holds(Api::Gemini, &keyed.to_string()).is_ok());
    // The first of a repeated key, a list's first entry where an object
    // goes, a name a list joins to.
    let read =
        first_wins(r#"{"content": [{"type": "tool_use", "name": ["Read"]}], "content": null}"#)
            .unwrap();
    let (turn, _) = calls(Api::Messages, &read);
    assert_eq!(
        turn,
        vec![json!({"content": [{"type": "tool_use", "name": "Read"}]})]
    );
    let wrapped =
        json!({"choices": [[{"message": {"tool_calls": [{"function": {"name": "read"}}]}}]]});
    assert_eq!(calls(Api::Chat, &wrapped).0.len(), 1);
    // Every mutation applies where its shape is.
    let answer = json!({"a": [1, {"b": "x"}]});
    let at = |p: &[Seg]| p.to_vec();
    let list = at(&[Seg::Key("a".into())]);
    assert_eq!(
        mutated(&answer, &list, Mutation::Keyed).unwrap(),
        r#"{"a":{"0":1,"1":{"b":"x"}}}"#
    );
    assert_eq!(
        mutated(&answer, &list, Mutation::Repeated).unwrap(),
        r#"{"a":[1,{"b":"x"}],"a":null}"#
    );
    let name = at(&[Seg::Key("a".into()), Seg::Index(1), Seg::Key("b".into())]);
    assert_eq!(
        mutated(&answer, &name, Mutation::Wrapped).unwrap(),
        r#"{"a":[1,{"b":["x"]}]}"#
    );
    assert_eq!(
        mutated(&answer, &name, Mutation::Repeated).unwrap(),
        r#"{"a":[1,{"b":"x","b":null}]}"#
    );
    assert!(mutated(&answer, &list, Mutation::Wrapped).is_none());
}
