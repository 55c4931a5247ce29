//! The Messages stream judge: Anthropic's SSE events in, the bytes the
//! client sees out.
//!
//! Pure and synchronous, like the chat and Responses judges, and driven the
//! same way by `crate::layer::drivers::stream_body::InterceptBody`. Each content block is
//! decided at its `content_block_start` (a `tool_use` block by
//! [`items::judge_block`] on its name, a `tool_reference` by the tool it
//! names: [`items::withheld_reference`]) and a call is judged again, whole,
//! at its `content_block_stop`. Text, thinking, server tool blocks, passed
//! calls and `ping` go out as they arrive; a withheld block's events never
//! do. At the round's `message_delta` (or its `message_stop`, or the end of
//! the body) [`crate::turn::decide`] says what follows: the client's
//! `message_delta` and `message_stop`, a repair or a program inside the
//! same client stream.
//!
//! Across rounds the client sees one message: the first round's
//! `message_start`, content block indices contiguous, and one
//! `message_delta` (its `usage` the sum of every round) and one
//! `message_stop`.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

mod ending;
mod fast;

use fast::is_stop;

use super::{events, items, Messages};
use crate::plan::ToolPlan;
use crate::sse::{digits, is_event_name, named_event as frame, push_number, span_of, SseEvent};
use crate::turn::{
    self, refine, settle_end, AtEnd, Decision, JudgedCall, ModelTurn, RoundEnd, RoundJudge,
    StreamTurn, Unreadable,
};

// ---- one round's content blocks ----

/// One content block of an upstream round, rebuilt from its deltas.
struct Block {
    /// Its `index` upstream.
    index: u64,
    /// The `index` the client knows it by; `None` when withheld.
    client: Option<u64>,
    /// The block as it opened (`content_block_start`).
    start: Map<String, Value>,
    /// `text_delta`s, joined.
    text: String,
    /// `thinking_delta`s, joined.
    thinking: String,
    /// `signature_delta`s, joined.
    signature: String,
    /// `input_json_delta`s' `partial_json`, joined.
    json: String,
    /// `citations_delta`s' citations.
    citations: Vec<Value>,
    /// Whether its `content_block_stop` came.
    done: bool,
    /// A `tool_reference` to a tool the model may not be given: neither
    /// the client nor a replayed turn gets it.
    dropped: bool,
    /// The call it is, judged; `None` for a block that is no call.
    call: Option<JudgedCall>,
}

impl Block {
    /// The whole block: its start with every delta applied, every other
    /// field as it came. An input that is no JSON object is `{}` here (a
    /// replay with another input is refused); its call is judged on the text.
    fn whole(&self) -> Value {
        let mut b = self.start.clone();
        for (field, add) in [
            ("text", &self.text),
            ("thinking", &self.thinking),
            ("signature", &self.signature),
        ] {
            if !add.is_empty() {
                let mut joined = b
                    .get(field)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                joined.push_str(add);
                b.insert(field.into(), Value::String(joined));
            }
        }
        if !self.citations.is_empty() {
            let mut all = match b.remove("citations") {
                Some(Value::Array(c)) => c,
                _ => Vec::new(),
            };
            all.extend(self.citations.iter().cloned());
            b.insert("citations".into(), Value::Array(all));
        }
        if b.contains_key("input") && !self.json.trim().is_empty() {
            let input = match serde_json::from_str::<Value>(&self.json) {
                Ok(v @ Value::Object(_)) => v,
                _ => json!({}),
            };
            b.insert("input".into(), input);
        }
        Value::Object(b)
    }

    /// Judges the block as it stands; `None` for a block that is no call.
    /// Its arguments are the input text the model streamed.
    fn judge(&self, plan: &ToolPlan) -> Option<JudgedCall> {
        let whole = self.whole();
        let streamed = !self.json.trim().is_empty();
        let is_object =
            streamed && serde_json::from_str::<Value>(&self.json).is_ok_and(|v| v.is_object());
        let mut call = if streamed && !is_object {
            // Judged on the text, so a collapsed call is INVALID_ARGS; the
            // block it keeps is the replayable one.
            let mut probe = whole.clone();
            probe["input"] = Value::String(self.json.clone());
            let mut call = items::judge_block(&probe, plan)?;
            call.raw = whole.as_object().cloned();
            call
        } else {
            items::judge_block(&whole, plan)?
        };
        if streamed {
            call.arguments.clone_from(&self.json);
        }
        Some(call)
    }

    /// Takes in one delta's text.
    fn add(&mut self, kind: &str, text: &str) {
        match kind {
            "text_delta" => self.text.push_str(text),
            "thinking_delta" => self.thinking.push_str(text),
            "signature_delta" => self.signature.push_str(text),
            "input_json_delta" => self.json.push_str(text),
            _ => {}
        }
    }
}

/// The field of a delta that holds its text, by the delta's type.
fn delta_field(kind: &str) -> Option<&'static str> {
    match kind {
        "text_delta" => Some("text"),
        "thinking_delta" => Some("thinking"),
        "signature_delta" => Some("signature"),
        "input_json_delta" => Some("partial_json"),
        _ => None,
    }
}

#[derive(Default)]
struct Round {
    blocks: Vec<Block>,
    /// Its `message_start` came.
    started: bool,
    /// `message_start`'s usage.
    start_usage: Option<Value>,
    /// Its `message_delta` (or the proxy's) went out.
    delta_sent: bool,
    /// The `message_stop` went out.
    stop_sent: bool,
}

impl Round {
    fn by_index(&self, index: u64) -> Option<usize> {
        self.blocks.iter().position(|b| b.index == index)
    }

    fn calls(&self) -> Vec<JudgedCall> {
        self.blocks.iter().filter_map(|b| b.call.clone()).collect()
    }

    /// The model's turn: every block of the round, whole, in order (a
    /// dropped reference left out).
    fn assistant(&self) -> Value {
        let content: Vec<Value> = self
            .blocks
            .iter()
            .filter(|b| !b.dropped)
            .map(Block::whole)
            .collect();
        json!({"role": "assistant", "content": content})
    }

    /// The text of the round's text blocks.
    fn text(&self) -> String {
        let mut text = String::new();
        for b in &self.blocks {
            if b.start.get("type").and_then(Value::as_str) == Some("text") {
                text.push_str(b.start.get("text").and_then(Value::as_str).unwrap_or(""));
                text.push_str(&b.text);
            }
        }
        text
    }
}

// ---- the judge ----

/// Reads an event where a call could stand as a judge may
/// (`crate::turn::shape`), before any of it goes out: its
/// `content_block` a block ([`items::check_block`]), its `message` an
/// object whose `content` is a list of blocks; `null` is absent. Whatever
/// the event's type: the SDKs' message snapshot starts from
/// `message_start`'s message, content included.
fn check_event(event: &Map<String, Value>) -> Result<(), Unreadable> {
    use crate::turn::shape;
    use crate::turn::Step::{Index, Key};
    if let Some(block) = event.get("content_block").filter(|b| !b.is_null()) {
        items::check_block(block).map_err(|e| e.under(&[Key("content_block")]))?;
    }
    if let Some(message) = shape::object(event.get("message"), &[Key("message")])? {
        let at = [Key("message"), Key("content")];
        for (i, block) in shape::list(message.get("content"), &at)?.iter().enumerate() {
            items::check_block(block)
                .map_err(|e| e.under(&[Key("message"), Key("content"), Index(i)]))?;
        }
    }
    Ok(())
}

/// Judges one client stream of the Messages API across its rounds.
pub struct MessagesJudge {
    plan: Arc<ToolPlan>,
    /// The rounds, and the current one's blocks.
    turn: StreamTurn<Round>,
    /// The first `message_start` went out: the client's only one.
    started: bool,
    /// The next content block `index` the client gets.
    next_index: u64,
}

impl MessagesJudge {
    /// A judge for a stream under `plan`, repairing at most `max_repairs` times.
    pub fn new(plan: Arc<ToolPlan>, max_repairs: u32) -> MessagesJudge {
        MessagesJudge {
            plan,
            turn: StreamTurn::new(max_repairs),
            started: false,
            next_index: 0,
        }
    }

    /// Whether the upstream reported an error in-band (no repair follows one).
    #[cfg(test)]
    pub fn errored(&self) -> bool {
        self.turn.errored
    }

    /// Judges one event, appending what the client gets to `out`
    /// ([`RoundJudge::on_event`]).
    fn judge_event(&mut self, ev: SseEvent, out: &mut Vec<Bytes>) -> Result<(), Unreadable> {
        let Some(data) = ev.data.as_deref() else {
            // Comments and keep-alives carry nothing to judge: they keep the
            // client's connection alive while the round is open.
            if self.turn.decision.is_none() {
                out.push(ev.raw);
            }
            return Ok(());
        };
        if self.turn.decision.is_some() {
            // The round has ended (its message_delta, or an error): only its
            // message_stop is left to send.
            if is_stop(data) {
                self.send_stop(out);
            }
            return Ok(());
        }
        if self.fast(&ev, data, out) {
            return Ok(());
        }
        let event = Unreadable::event_object(serde_json::from_str(data))?;
        check_event(&event)?;
        self.on_object(event, out);
        Ok(())
    }

    fn on_object(&mut self, event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "message_start" => self.on_start(event, out),
            "content_block_start" => self.on_block_start(event, out),
            "content_block_stop" => self.on_block_stop(event, out),
            "message_delta" => self.end_message(Some(event), out),
            "message_stop" => {
                self.end_message(None, out);
                self.send_stop(out);
            }
            "error" => {
                // The upstream ended the turn with an error: it reaches the
                // client and no repair follows.
                self.turn.errored = true;
                self.turn.decision = Some(Decision::Final);
                self.emit(event, out);
            }
            // A call is announced by `content_block_start`, where it is
            // judged; one riding on any other event never reaches the
            // client, whatever it names.
            _ if items::rides_a_call(&event, &self.plan) => {
                tracing::debug!(target: "codemode::denial", event = kind, "an event carrying a call block was withheld");
            }
            _ => self.on_block_event(event, out),
        }
    }

    /// The message's start: the client gets the first round's only, and
    /// never with content in it. Content a start already holds (a turn
    /// resumed from a container) is judged block by block, as if streamed.
    fn on_start(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        if self.turn.round.started {
            return;
        }
        self.turn.round.started = true;
        self.turn.round.start_usage = event
            .get("message")
            .and_then(|m| m.get("usage"))
            .filter(|u| u.is_object())
            .cloned();
        let held = match event.get_mut("message").and_then(|m| m.get_mut("content")) {
            Some(Value::Array(content)) => std::mem::take(content),
            _ => Vec::new(),
        };
        if !self.started {
            self.started = true;
            self.emit(event, out);
        }
        for (index, block) in held.into_iter().enumerate() {
            let start =
                json!({"type": "content_block_start", "index": index, "content_block": block});
            let stop = json!({"type": "content_block_stop", "index": index});
            if let (Value::Object(start), Value::Object(stop)) = (start, stop) {
                self.on_block_start(start, out);
                self.on_block_stop(stop, out);
            }
        }
    }

    fn on_block_start(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let Some(Value::Object(start)) = event.get("content_block").cloned() else {
            return;
        };
        let index = event
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(self.turn.round.blocks.len() as u64);
        if self.turn.round.by_index(index).is_some() {
            // A second block at one index: no client could tell them apart.
            tracing::warn!(target: "codemode::denial", "an upstream content block started twice at one index was dropped");
            return;
        }
        let opened = Value::Object(start.clone());
        let dropped = items::withheld_reference(&opened, &self.plan);
        let call = items::judge_block(&opened, &self.plan);
        let client = (!dropped && call.as_ref().is_none_or(JudgedCall::passed)).then(|| {
            self.next_index += 1;
            self.next_index - 1
        });
        self.turn.round.blocks.push(Block {
            index,
            client,
            start,
            text: String::new(),
            thinking: String::new(),
            signature: String::new(),
            json: String::new(),
            citations: Vec::new(),
            done: false,
            dropped,
            call,
        });
        if let Some(client) = client {
            event.insert("index".into(), json!(client));
            self.emit(event, out);
        }
    }

    /// A block's end: a call is judged again on its whole input.
    fn on_block_stop(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let Some(pos) = event
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| self.turn.round.by_index(i))
        else {
            return;
        };
        let judged = self.turn.round.blocks[pos].judge(&self.plan);
        let block = &mut self.turn.round.blocks[pos];
        if block.done {
            return;
        }
        block.done = true;
        if let AtEnd::Send(client) = settle_end(&mut block.client, &mut block.call, judged, "block")
        {
            event.insert("index".into(), json!(client));
            self.emit(event, out);
        }
    }

    /// A delta, or an event of a type the proxy does not know: it follows
    /// its block (renumbered, or withheld with it); one that names no block
    /// passes.
    fn on_block_event(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let Some(index) = event.get("index") else {
            self.emit(event, out);
            return;
        };
        // An event of a block that never opened, or that ended, goes
        // nowhere: a client may act on a block at its stop.
        let Some(pos) = index
            .as_u64()
            .and_then(|i| self.turn.round.by_index(i))
            .filter(|&p| !self.turn.round.blocks[p].done)
        else {
            return;
        };
        let block = &mut self.turn.round.blocks[pos];
        let mut text_out = false;
        if event.get("type").and_then(Value::as_str) == Some("content_block_delta") {
            if let Some(Value::Object(delta)) = event.get("delta") {
                let kind = delta.get("type").and_then(Value::as_str).unwrap_or("");
                if let Some(text) = delta_field(kind)
                    .and_then(|f| delta.get(f))
                    .and_then(Value::as_str)
                {
                    block.add(kind, text);
                    text_out = kind == "text_delta" && !text.is_empty();
                } else if kind == "citations_delta" {
                    if let Some(citation) = delta.get("citation") {
                        block.citations.push(citation.clone());
                    }
                }
            }
        }
        let Some(client) = block.client else {
            return;
        };
        self.turn.emitted_text |= text_out;
        event.insert("index".into(), json!(client));
        self.emit(event, out);
    }

    /// A block the proxy writes (the note, a program's calls), streamed as
    /// providers stream one, at the client's next index.
    fn emit_block(&mut self, block: &Value, out: &mut Vec<Bytes>) {
        let index = self.next_index;
        self.next_index += 1;
        for event in events::block_events(index, block) {
            self.emit_json(event, out);
        }
    }

    fn emit_json(&mut self, event: Value, out: &mut Vec<Bytes>) {
        if let Value::Object(event) = event {
            self.emit(event, out);
        }
    }

    /// Writes one event, its type on the `event:` line. An event whose type
    /// could not be one line is no event a client could read: dropped.
    fn emit(&mut self, event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let Some(kind) = event
            .get("type")
            .and_then(Value::as_str)
            .filter(|k| is_event_name(k))
            .map(str::to_owned)
        else {
            tracing::warn!(target: "codemode::denial", "an upstream Messages event without a usable type was dropped");
            return;
        };
        out.push(frame(&kind, &Value::Object(event)));
    }
}

#[cfg(test)]
mod tests;
