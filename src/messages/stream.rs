//! The Messages stream judge: Anthropic's SSE events in, the bytes the
//! client sees out.
//!
//! Pure and synchronous, like the chat and Responses judges, and driven the
//! same way by [`crate::stream::InterceptBody`]. Each content block is
//! decided at its `content_block_start` (a `tool_use` block by
//! [`items::judge_block`] on its name) and a call is judged again, whole, at
//! its `content_block_stop`. Text, thinking, server tool blocks, passed
//! calls and `ping` go out as they arrive; a withheld block's events never
//! do. At the round's `message_delta` (or its `message_stop`, or the end of
//! the body) [`turn::decide`] says what follows: the client's
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

use super::items;
use crate::intercept::add_usage;
use crate::plan::ToolPlan;
use crate::responses::stream::{digits, frame, is_event_name, push_number, refine, span_of};
use crate::runtime::MAX_PROGRAMS_PER_REQUEST;
use crate::sse::SseEvent;
use crate::stream::judge::{HeldProgram, RoundEnd};
use crate::stream::RoundJudge;
use crate::turn::{self, Bounds, Decision, Fate, JudgedCall, Summary};

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
    /// The round's usage: the start's, with its `message_delta`'s on top.
    usage: Option<Value>,
    /// Text of this round reached the client.
    emitted_text: bool,
    decision: Option<Decision>,
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

    /// The model's turn: every block of the round, whole, in order.
    fn assistant(&self) -> Value {
        let content: Vec<Value> = self.blocks.iter().map(Block::whole).collect();
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

/// Judges one client stream of the Messages API across its rounds.
pub struct MessagesJudge {
    plan: Arc<ToolPlan>,
    max_repairs: u32,
    repairs: u32,
    programs: u32,
    rounds: u32,
    /// The first `message_start` went out: the client's only one.
    started: bool,
    /// The next content block `index` the client gets.
    next_index: u64,
    /// Usage of the rounds before this one, summed.
    usage_before: Option<Value>,
    round: Round,
    errored: bool,
}

impl MessagesJudge {
    /// A judge for a stream under `plan`, repairing at most `max_repairs` times.
    pub fn new(plan: Arc<ToolPlan>, max_repairs: u32) -> MessagesJudge {
        MessagesJudge {
            plan,
            max_repairs,
            repairs: 0,
            programs: 0,
            rounds: 0,
            started: false,
            next_index: 0,
            usage_before: None,
            round: Round::default(),
            errored: false,
        }
    }

    /// Whether the upstream reported an error in-band (no repair follows one).
    #[cfg(test)]
    pub fn errored(&self) -> bool {
        self.errored
    }

    /// Judges one event, appending what the client gets to `out`.
    pub fn on_event(&mut self, ev: SseEvent, out: &mut Vec<Bytes>) {
        let Some(data) = ev.data.as_deref() else {
            // Comments and keep-alives carry nothing to judge: they keep the
            // client's connection alive while the round is open.
            if self.round.decision.is_none() {
                out.push(ev.raw);
            }
            return;
        };
        if self.round.decision.is_some() {
            // The round has ended (its message_delta, or an error): only its
            // message_stop is left to send.
            if is_stop(data) {
                self.send_stop(out);
            }
            return;
        }
        if self.fast(&ev, data, out) {
            return;
        }
        match serde_json::from_str::<Value>(data) {
            Ok(Value::Object(event)) => self.on_object(event, out),
            _ => {
                tracing::warn!(target: "codemode::denial", "an upstream Messages event that is not a JSON object was dropped");
            }
        }
    }

    /// The common event continues a block the client already has (a text,
    /// thinking or input delta): read through a borrowed view, it goes out
    /// as it came, or with only its `index` replaced, without building a
    /// JSON tree. Anything else returns false.
    fn fast(&mut self, ev: &SseEvent, data: &str, out: &mut Vec<Bytes>) -> bool {
        let Ok(view) = serde_json::from_str::<EventView<'_>>(data) else {
            return false;
        };
        if view.kind != "content_block_delta" {
            return false;
        }
        let (Some(index), Some(delta)) = (view.index, view.delta) else {
            return false;
        };
        let Ok(upstream) = index.get().parse::<u64>() else {
            return false;
        };
        let Some(pos) = self
            .round
            .by_index(upstream)
            .filter(|&p| !self.round.blocks[p].done)
        else {
            return false;
        };
        let client = self.round.blocks[pos].client;
        let text = match delta_field(&delta.kind) {
            Some("text") => delta.text,
            Some("thinking") => delta.thinking,
            Some("signature") => delta.signature,
            Some("partial_json") => delta.partial_json,
            _ => None,
        };
        let Some(text) = text else {
            return false;
        };
        let Some(client) = client else {
            // A withheld block's delta: kept for its turn, never sent.
            self.round.blocks[pos].add(&delta.kind, &text);
            return true;
        };
        let as_came = ev.event.as_deref() == Some("content_block_delta") && client == upstream;
        // A frame the proxy writes holds the data on one line.
        let span = span_of(data, index);
        if !as_came && (span.is_none() || data.contains('\n') || data.contains('\r')) {
            return false;
        }
        self.round.blocks[pos].add(&delta.kind, &text);
        if delta.kind == "text_delta" && !text.is_empty() {
            self.round.emitted_text = true;
        }
        if as_came {
            out.push(ev.raw.clone());
            return true;
        }
        let Some((a, b)) = span else {
            return false;
        };
        let len =
            "event: content_block_delta\ndata: \n\n".len() + data.len() - (b - a) + digits(client);
        let mut frame = Vec::with_capacity(len);
        frame.extend_from_slice(b"event: content_block_delta\ndata: ");
        frame.extend_from_slice(&data.as_bytes()[..a]);
        push_number(&mut frame, client);
        frame.extend_from_slice(&data.as_bytes()[b..]);
        frame.extend_from_slice(b"\n\n");
        out.push(Bytes::from(frame));
        true
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
                self.errored = true;
                self.round.decision = Some(Decision::Final);
                self.emit(event, out);
            }
            _ => self.on_block_event(event, out),
        }
    }

    /// The message's start: the client gets the first round's only, and
    /// never with content in it (blocks reach it one by one, judged).
    fn on_start(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        if self.round.started {
            return;
        }
        self.round.started = true;
        self.round.start_usage = event
            .get("message")
            .and_then(|m| m.get("usage"))
            .filter(|u| u.is_object())
            .cloned();
        if self.started {
            return;
        }
        self.started = true;
        if let Some(Value::Object(message)) = event.get_mut("message") {
            let empty = message
                .get("content")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty);
            if !empty {
                message.insert("content".into(), json!([]));
            }
        }
        self.emit(event, out);
    }

    fn on_block_start(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let Some(Value::Object(start)) = event.get("content_block").cloned() else {
            return;
        };
        let index = event
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(self.round.blocks.len() as u64);
        if self.round.by_index(index).is_some() {
            // A second block at one index: no client could tell them apart.
            tracing::warn!(target: "codemode::denial", "an upstream content block started twice at one index was dropped");
            return;
        }
        let call = items::judge_block(&Value::Object(start.clone()), &self.plan);
        let client = call.as_ref().is_none_or(JudgedCall::passed).then(|| {
            self.next_index += 1;
            self.next_index - 1
        });
        self.round.blocks.push(Block {
            index,
            client,
            start,
            text: String::new(),
            thinking: String::new(),
            signature: String::new(),
            json: String::new(),
            citations: Vec::new(),
            done: false,
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
            .and_then(|i| self.round.by_index(i))
        else {
            return;
        };
        let judged = self.round.blocks[pos].judge(&self.plan);
        let block = &mut self.round.blocks[pos];
        if block.done {
            return;
        }
        block.done = true;
        match (block.client, judged) {
            (Some(_), Some(call)) if !call.passed() => {
                // Its start went out as a call the rule lets through; the
                // whole call is not: it never ends for the client.
                tracing::warn!(target: "codemode::denial", "a streamed call turned into a withheld one at its end and was cut off");
                block.client = None;
                block.call = Some(call);
            }
            (Some(client), call) => {
                block.call = call;
                event.insert("index".into(), json!(client));
                self.emit(event, out);
            }
            (None, Some(call)) => block.call = Some(refine(block.call.take(), call)),
            (None, None) => {}
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
            .and_then(|i| self.round.by_index(i))
            .filter(|&p| !self.round.blocks[p].done)
        else {
            return;
        };
        let block = &mut self.round.blocks[pos];
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
        self.round.emitted_text |= text_out;
        event.insert("index".into(), json!(client));
        self.emit(event, out);
    }

    /// The round's end (`message_delta`, or a `message_stop` or the end of
    /// the body without one): the turn is decided here, and when the client
    /// sees it end, its `message_delta` goes out with usage summed.
    fn end_message(&mut self, delta: Option<Map<String, Value>>, out: &mut Vec<Bytes>) {
        if self.round.decision.is_some() {
            return;
        }
        let mut usage = self.round.start_usage.clone();
        if let Some(Value::Object(late)) = delta.as_ref().and_then(|d| d.get("usage")) {
            // `message_delta`'s counts are the round's so far: they replace
            // the start's.
            let mut merged = usage
                .and_then(|u| u.as_object().cloned())
                .unwrap_or_default();
            for (k, v) in late {
                if !v.is_null() {
                    merged.insert(k.clone(), v.clone());
                }
            }
            usage = Some(Value::Object(merged));
        }
        self.round.usage = usage;
        let decision = self.decide();
        let mut delta = match (decision, delta) {
            (Decision::Repair | Decision::Program, _) => return,
            (Decision::GiveUp, delta) => {
                if !self.round.emitted_text {
                    self.give_up_note(out);
                }
                let mut delta = delta.unwrap_or_else(|| {
                    let mut d = Map::new();
                    d.insert("type".into(), json!("message_delta"));
                    d
                });
                let mut inner = match delta.remove("delta") {
                    Some(Value::Object(inner)) => inner,
                    _ => Map::new(),
                };
                inner.insert("stop_reason".into(), json!("end_turn"));
                inner.insert("stop_sequence".into(), Value::Null);
                delta.insert("delta".into(), Value::Object(inner));
                delta
            }
            (Decision::Final | Decision::Splice, Some(delta)) => delta,
            // A message_stop with no message_delta before it: the upstream
            // gave none, the proxy writes none.
            (Decision::Final | Decision::Splice, None) => return,
        };
        if self.usage_before.is_some() || !delta.contains_key("usage") {
            let mut total = self.usage_before.clone();
            add_usage(&mut total, self.round.usage.as_ref());
            if let Some(total) = total {
                delta.insert("usage".into(), total);
            }
        }
        self.emit(delta, out);
        self.round.delta_sent = true;
    }

    /// The client's `message_stop`, once, after its `message_delta`.
    fn send_stop(&mut self, out: &mut Vec<Bytes>) {
        let visible = matches!(
            self.round.decision,
            Some(Decision::Final | Decision::Splice | Decision::GiveUp)
        );
        if !visible || self.errored || self.round.stop_sent {
            return;
        }
        self.round.stop_sent = true;
        out.push(Bytes::from_static(
            b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        ));
    }

    /// Decides the round once its calls are as whole as they will be.
    fn decide(&mut self) -> Decision {
        for block in &mut self.round.blocks {
            if block.done || block.client.is_some() {
                continue;
            }
            // A withheld call whose stop never came: judged on what
            // streamed of it.
            if let Some(call) = block.judge(&self.plan) {
                block.call = Some(refine(block.call.take(), call));
            }
        }
        let calls = self.round.calls();
        let summary = Summary::of(&calls, self.errored);
        let decision = turn::decide(
            summary,
            Bounds {
                repairs: self.repairs,
                max_repairs: self.max_repairs,
                programs: self.programs,
                max_programs: MAX_PROGRAMS_PER_REQUEST,
            },
        );
        crate::observe::ledger::judged(&calls, decision);
        self.round.decision = Some(decision);
        decision
    }

    /// The client gets no call of this turn: a text block tells why.
    fn give_up_note(&mut self, out: &mut Vec<Bytes>) {
        let note = turn::give_up_note(&self.round.calls());
        let index = self.next_index;
        self.next_index += 1;
        self.emit_json(
            json!({"type": "content_block_start", "index": index,
                              "content_block": {"type": "text", "text": ""}}),
            out,
        );
        self.emit_json(
            json!({"type": "content_block_delta", "index": index,
                              "delta": {"type": "text_delta", "text": note}}),
            out,
        );
        self.emit_json(json!({"type": "content_block_stop", "index": index}), out);
        self.round.emitted_text = true;
    }

    /// The end of an upstream round's body.
    pub fn end_round(&mut self, out: &mut Vec<Bytes>) -> RoundEnd {
        if self.round.decision.is_none() {
            // No message_delta came: decided as at one. A client that got
            // no call is still told why, and gets its message's end.
            self.end_message(None, out);
        }
        if self.round.delta_sent {
            self.send_stop(out);
        }
        let calls = self.round.calls();
        match self.round.decision {
            Some(Decision::Repair) => {
                add_usage(&mut self.usage_before, self.round.usage.as_ref());
                RoundEnd::Repair {
                    messages: items::repair_messages(&self.round.assistant(), &calls),
                }
            }
            Some(Decision::Program) => {
                add_usage(&mut self.usage_before, self.round.usage.as_ref());
                let text = self.round.text();
                let program = calls.iter().find(|c| c.fate == Fate::Program);
                let (denied_calls, denials) = items::program_denials(&calls);
                RoundEnd::Program(HeldProgram {
                    id: program.map(|c| c.id.clone()).unwrap_or_default(),
                    arguments: program.map(|c| c.arguments.clone()).unwrap_or_default(),
                    content: (!text.is_empty()).then_some(text),
                    turn: Some(self.round.assistant()),
                    response_id: None,
                    denied_calls,
                    denials,
                })
            }
            Some(Decision::Splice) => RoundEnd::Done {
                splice: items::splice(&calls),
            },
            Some(Decision::Final | Decision::GiveUp) | None => RoundEnd::Done { splice: None },
        }
    }

    /// Starts the next round after a repair was sent upstream.
    pub fn start_repair_round(&mut self) {
        self.repairs += 1;
        self.rounds += 1;
        self.round = Round::default();
    }

    /// Starts the next round after a program ended and the model was asked again.
    pub fn start_program_round(&mut self) {
        self.programs += 1;
        self.rounds += 1;
        self.round = Round::default();
    }

    /// A program waits on the client: `turn` (an assistant message whose
    /// `content` holds the program's calls as `tool_use` blocks) ends the
    /// client stream, each call as a block the client opens, fills and
    /// closes, then the message's `message_delta` and `message_stop`.
    pub fn hand_off(&mut self, turn: &Value, out: &mut Vec<Bytes>) {
        let blocks = turn.get("content").and_then(Value::as_array);
        for block in blocks
            .into_iter()
            .flatten()
            .filter(|b| items::is_call_block(b))
        {
            let index = self.next_index;
            self.next_index += 1;
            let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
            let mut opened = block.clone();
            opened["input"] = json!({});
            self.emit_json(
                json!({"type": "content_block_start", "index": index, "content_block": opened}),
                out,
            );
            self.emit_json(json!({"type": "content_block_delta", "index": index,
                                  "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}), out);
            self.emit_json(json!({"type": "content_block_stop", "index": index}), out);
        }
        // The round that held the program was summed when it ended.
        let usage = self
            .usage_before
            .clone()
            .or_else(|| turn.get("usage").cloned())
            .unwrap_or_else(|| json!({"output_tokens": 0}));
        self.emit_json(
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                   "usage": usage}),
            out,
        );
        self.round.decision = Some(Decision::Final);
        self.round.delta_sent = true;
        self.send_stop(out);
    }

    /// The upstream broke off or failed: the client gets a final error event.
    pub fn upstream_failed(&mut self, message: &str, _code: &str, out: &mut Vec<Bytes>) {
        self.errored = true;
        self.round.decision = Some(Decision::Final);
        self.emit_json(
            json!({"type": "error", "error": {"type": "api_error", "message": message}}),
            out,
        );
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

impl RoundJudge for MessagesJudge {
    fn on_event(&mut self, ev: SseEvent, out: &mut Vec<Bytes>) {
        MessagesJudge::on_event(self, ev, out);
    }
    fn end_round(&mut self, out: &mut Vec<Bytes>) -> RoundEnd {
        MessagesJudge::end_round(self, out)
    }
    fn start_repair_round(&mut self) {
        MessagesJudge::start_repair_round(self);
    }
    fn start_program_round(&mut self) {
        MessagesJudge::start_program_round(self);
    }
    fn hand_off(&mut self, turn: &Value, out: &mut Vec<Bytes>) {
        MessagesJudge::hand_off(self, turn, out);
    }
    fn upstream_failed(&mut self, message: &str, code: &str, out: &mut Vec<Bytes>) {
        MessagesJudge::upstream_failed(self, message, code, out);
    }
    fn repairs(&self) -> u32 {
        self.repairs
    }

    fn round_usage(&self) -> Option<&Value> {
        self.round.usage.as_ref()
    }
}

/// Whether an event's data is a `message_stop`.
fn is_stop(data: &str) -> bool {
    serde_json::from_str::<TypeView<'_>>(data).is_ok_and(|v| v.kind == "message_stop")
}

#[derive(serde::Deserialize)]
struct TypeView<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
}

/// The fields of an event the fast path reads, borrowed from its text.
#[derive(serde::Deserialize)]
struct EventView<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    index: Option<&'a RawValue>,
    #[serde(borrow)]
    delta: Option<DeltaView<'a>>,
}

/// A delta's type and the fields that hold its text.
#[derive(serde::Deserialize)]
struct DeltaView<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow)]
    signature: Option<Cow<'a, str>>,
    #[serde(borrow)]
    partial_json: Option<Cow<'a, str>>,
}

#[cfg(test)]
mod tests;
