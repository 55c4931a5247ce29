//! The Responses stream judge: SSE events in, the bytes the client sees out.
//!
//! Pure and synchronous, like the chat judge ([`crate::stream::judge`]), and
//! driven the same way by [`crate::stream::InterceptBody`]. Each output item
//! is decided at its `response.output_item.added` (a call by
//! [`items::judge_item`] on its name) and judged again, whole, at its
//! `response.output_item.done`. Text, reasoning and passed calls go out as
//! they arrive; a withheld item's events never do. At the round's terminal
//! event (`response.completed` / `response.incomplete`, or the end of the
//! body) [`turn::decide`] says what follows: the client's terminal event, a
//! repair or a program inside the same client stream.
//!
//! Across rounds the client sees one response: the first response id on
//! every event that names one, its own `sequence_number` strictly rising
//! from 0, `output_index` contiguous, and one terminal event whose `output`
//! holds every item it saw and whose `usage` is the sum of all rounds.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::items;
use crate::intercept::add_usage;
use crate::plan::ToolPlan;
use crate::runtime::MAX_PROGRAMS_PER_REQUEST;
use crate::sse::SseEvent;
use crate::stream::judge::{HeldProgram, RoundEnd};
use crate::stream::RoundJudge;
use crate::turn::{self, Bounds, Decision, Fate, JudgedCall, Summary};

/// Event types the fast path leaves to the full judge: they open, close or
/// end items or the response.
const STRUCTURAL: [&str; 9] = [
    "response.created",
    "response.in_progress",
    "response.queued",
    "response.output_item.added",
    "response.output_item.done",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
];

/// One output item of an upstream round.
struct RoundItem {
    /// Its `output_index` upstream.
    index: u64,
    /// Its `id`, which its events name as `item_id`.
    id: Option<String>,
    /// The `output_index` the client knows it by; `None` when withheld.
    client: Option<u64>,
    /// The item as last known: whole once its `output_item.done` came.
    item: Value,
    /// Whether its `output_item.done` came.
    done: bool,
    /// The call it is, judged; `None` for an item that is no call.
    call: Option<JudgedCall>,
}

#[derive(Default)]
struct Round {
    items: Vec<RoundItem>,
    /// Text of this round reached the client.
    emitted_text: bool,
    usage: Option<Value>,
    decision: Option<Decision>,
    /// The upstream's id of this round's response: a program's record
    /// keeps it, so a client that continues by `previous_response_id`
    /// continues the provider's conversation from there.
    upstream_id: Option<String>,
}

impl Round {
    fn by_index(&self, index: u64) -> Option<usize> {
        self.items.iter().position(|i| i.index == index)
    }

    fn by_id(&self, id: &str) -> Option<usize> {
        self.items.iter().position(|i| i.id.as_deref() == Some(id))
    }

    /// Whether an item of this id is withheld.
    fn withholds_id(&self, id: &str) -> bool {
        self.items
            .iter()
            .any(|i| i.client.is_none() && i.id.as_deref() == Some(id))
    }

    fn calls(&self) -> Vec<JudgedCall> {
        self.items.iter().filter_map(|i| i.call.clone()).collect()
    }

    /// The model's turn: every item of the round as it came, in order.
    fn model_items(&self) -> Vec<Value> {
        self.items.iter().map(|i| i.item.clone()).collect()
    }

    /// The text of the round's message items.
    fn text(&self) -> String {
        let mut text = String::new();
        for i in &self.items {
            if items::item_type(&i.item) != "message" {
                continue;
            }
            let parts = i.item.get("content").and_then(Value::as_array);
            for part in parts.into_iter().flatten() {
                if part.get("type").and_then(Value::as_str) == Some("output_text") {
                    text.push_str(part.get("text").and_then(Value::as_str).unwrap_or(""));
                }
            }
        }
        text
    }
}

/// Judges one client stream of the Responses API across its rounds.
pub struct ResponsesJudge {
    plan: Arc<ToolPlan>,
    max_repairs: u32,
    repairs: u32,
    programs: u32,
    rounds: u32,
    /// The next `sequence_number` the client gets.
    seq: u64,
    /// The first response id: the one the client knows.
    id: Option<String>,
    /// The first round's response object, for terminals the proxy writes.
    template: Option<Value>,
    /// Every item the client got, by its `output_index`; `None` for one
    /// whose whole item turned out to be withheld.
    seen: Vec<Option<Value>>,
    usage_before: Option<Value>,
    round: Round,
    errored: bool,
    /// A `data: [DONE]` came: it goes out once, at the very end.
    done_sentinel: bool,
}

impl ResponsesJudge {
    /// A judge for a stream under `plan`, repairing at most `max_repairs` times.
    pub fn new(plan: Arc<ToolPlan>, max_repairs: u32) -> ResponsesJudge {
        ResponsesJudge {
            plan,
            max_repairs,
            repairs: 0,
            programs: 0,
            rounds: 0,
            seq: 0,
            id: None,
            template: None,
            seen: Vec::new(),
            usage_before: None,
            round: Round::default(),
            errored: false,
            done_sentinel: false,
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
        if ev.is_done() {
            self.done_sentinel = true;
            return;
        }
        if self.round.decision.is_some() {
            // The round has ended (its terminal, or an error): nothing after
            // it is judged, so nothing after it goes out.
            return;
        }
        if self.fast(data, out) {
            return;
        }
        match serde_json::from_str::<Value>(data) {
            Ok(Value::Object(event)) => self.on_object(event, out),
            _ => {
                tracing::warn!(target: "codemode::denial", "an upstream Responses event that is not a JSON object was dropped");
            }
        }
    }

    /// The common event continues an item the client already has (a text
    /// or arguments delta): read it through a borrowed view and write its
    /// bytes with only `sequence_number` and `output_index` replaced,
    /// without building a JSON tree. Anything else returns false.
    fn fast(&mut self, data: &str, out: &mut Vec<Bytes>) -> bool {
        // A line break inside the data would need several `data:` lines.
        if data.contains('\n') || data.contains('\r') {
            return false;
        }
        let Ok(view) = serde_json::from_str::<EventView<'_>>(data) else {
            return false;
        };
        if view.item.is_some() || view.response.is_some() || !is_event_name(&view.kind) {
            return false;
        }
        if STRUCTURAL.contains(&view.kind.as_ref()) {
            return false;
        }
        let (Some(seq), Some(index)) = (view.sequence_number, view.output_index) else {
            return false;
        };
        let Ok(upstream) = index.get().parse::<u64>() else {
            return false;
        };
        let Some(client) = self
            .round
            .by_index(upstream)
            .and_then(|p| self.round.items[p].client)
        else {
            return false;
        };
        if view
            .item_id
            .as_deref()
            .is_some_and(|id| self.round.withholds_id(id))
        {
            return false;
        }
        let (Some(a), Some(b)) = (span_of(data, seq), span_of(data, index)) else {
            return false;
        };
        if view.kind == "response.output_text.delta" {
            self.round.emitted_text = true;
        }
        let seq_value = self.next_seq();
        let (first, second) = if a.0 < b.0 {
            ((a, seq_value), (b, client))
        } else {
            ((b, client), (a, seq_value))
        };
        // Sized exactly, so the bytes go out without another allocation.
        let len =
            "event: \ndata: \n\n".len() + view.kind.len() + data.len() - (a.1 - a.0) - (b.1 - b.0)
                + digits(seq_value)
                + digits(client);
        let mut frame = Vec::with_capacity(len);
        frame.extend_from_slice(b"event: ");
        frame.extend_from_slice(view.kind.as_bytes());
        frame.extend_from_slice(b"\ndata: ");
        let bytes = data.as_bytes();
        frame.extend_from_slice(&bytes[..first.0 .0]);
        push_number(&mut frame, first.1);
        frame.extend_from_slice(&bytes[first.0 .1..second.0 .0]);
        push_number(&mut frame, second.1);
        frame.extend_from_slice(&bytes[second.0 .1..]);
        frame.extend_from_slice(b"\n\n");
        out.push(Bytes::from(frame));
        true
    }

    fn on_object(&mut self, event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "response.created" | "response.in_progress" | "response.queued" => {
                self.on_start(event, out);
            }
            "response.output_item.added" => self.on_added(event, out),
            "response.output_item.done" => self.on_done(event, out),
            "response.completed" | "response.incomplete" => self.on_terminal(event, out),
            "response.failed" | "error" => {
                // The upstream ended the turn with an error: it reaches the
                // client and no repair follows.
                self.errored = true;
                self.round.decision = Some(Decision::Final);
                let mut event = event;
                self.take_id(&event);
                if let Some(Value::Object(response)) = event.get_mut("response") {
                    self.finish_response(response);
                }
                self.emit(event, out);
            }
            _ => self.on_item_event(event, out),
        }
    }

    /// The response's start: the client gets the first round's only.
    fn on_start(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        self.take_id(&event);
        if self.rounds > 0 {
            return;
        }
        if let Some(Value::Object(response)) = event.get_mut("response") {
            if self.template.is_none() {
                self.template = Some(Value::Object(response.clone()));
            }
            self.name_response(response);
        }
        self.emit(event, out);
    }

    /// Keeps the first response id the upstream names.
    fn take_id(&mut self, event: &Map<String, Value>) {
        let id = event
            .get("response")
            .and_then(|r| r.get("id"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        if self.round.upstream_id.is_none() {
            self.round.upstream_id.clone_from(&id);
        }
        if self.id.is_none() {
            self.id = id;
        }
    }

    /// A response object as the client sees it mid-stream: the stream's id,
    /// and no item the client did not get.
    fn name_response(&self, response: &mut Map<String, Value>) {
        if let Some(id) = &self.id {
            response.insert("id".into(), json!(id));
        }
        let holds_items = response
            .get("output")
            .and_then(Value::as_array)
            .is_some_and(|o| !o.is_empty());
        if holds_items {
            response.insert("output".into(), self.client_output());
        }
    }

    /// A response object that ends the client stream: the stream's id,
    /// every item the client got, usage summed over every round.
    fn finish_response(&self, response: &mut Map<String, Value>) {
        if let Some(id) = &self.id {
            response.insert("id".into(), json!(id));
        }
        response.insert("output".into(), self.client_output());
        let mut total = self.usage_before.clone();
        add_usage(&mut total, self.round.usage.as_ref());
        if let Some(total) = total {
            response.insert("usage".into(), total);
        }
    }

    fn client_output(&self) -> Value {
        Value::Array(self.seen.iter().flatten().cloned().collect())
    }

    /// Takes in an item that opens (or, without an `added`, arrives whole):
    /// judged by its name, given a client index unless withheld.
    fn register(&mut self, index: u64, item: &Value) -> usize {
        let call = items::judge_item(item, &self.plan);
        let passes = call.as_ref().is_none_or(JudgedCall::passed);
        let client = passes.then(|| {
            self.seen.push(Some(item.clone()));
            (self.seen.len() - 1) as u64
        });
        self.round.items.push(RoundItem {
            index,
            id: item.get("id").and_then(Value::as_str).map(str::to_owned),
            client,
            item: item.clone(),
            done: false,
            call,
        });
        self.round.items.len() - 1
    }

    fn on_added(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let Some(item) = event.get("item").filter(|i| i.is_object()).cloned() else {
            return;
        };
        let index = event
            .get("output_index")
            .and_then(Value::as_u64)
            .unwrap_or(self.round.items.len() as u64);
        if self.round.by_index(index).is_some() {
            // A second item at one index: no client could tell them apart.
            tracing::warn!(target: "codemode::denial", "an upstream item added twice at one output_index was dropped");
            return;
        }
        let pos = self.register(index, &item);
        if let Some(client) = self.round.items[pos].client {
            event.insert("output_index".into(), json!(client));
            self.emit(event, out);
        }
    }

    fn on_done(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let Some(item) = event.get("item").filter(|i| i.is_object()).cloned() else {
            return;
        };
        let index = event.get("output_index").and_then(Value::as_u64);
        let id = item.get("id").and_then(Value::as_str);
        let found = index
            .and_then(|i| self.round.by_index(i))
            .or_else(|| id.and_then(|id| self.round.by_id(id)));
        let pos = match found {
            Some(pos) => pos,
            None => {
                // A whole item that never opened: the client gets its
                // opening too, so every item it completes is one it has.
                let index = index.unwrap_or(self.round.items.len() as u64);
                let pos = self.register(index, &item);
                if let Some(client) = self.round.items[pos].client {
                    let opened = item.clone();
                    self.emit_item("response.output_item.added", client as usize, opened, out);
                }
                pos
            }
        };
        // The whole item is what a client acts on: judged again.
        let judged = items::judge_item(&item, &self.plan);
        let slot = &mut self.round.items[pos];
        slot.item = item.clone();
        slot.done = true;
        match (slot.client, judged) {
            (Some(client), Some(call)) if !call.passed() => {
                // Its start went out as something the rule lets through;
                // the whole item is not: it never completes for the client.
                tracing::warn!(target: "codemode::denial", "a streamed item turned into a withheld call at its end and was cut off");
                slot.client = None;
                slot.call = Some(call);
                self.seen[client as usize] = None;
            }
            (Some(client), call) => {
                slot.call = call;
                self.seen[client as usize] = Some(item);
                event.insert("output_index".into(), json!(client));
                self.emit(event, out);
            }
            (None, Some(call)) => slot.call = Some(refine(slot.call.take(), call)),
            (None, None) => {}
        }
    }

    /// An event inside an item (deltas, content parts, ...), or one that
    /// names no item at all.
    fn on_item_event(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let index = event.get("output_index").and_then(Value::as_u64);
        let has_index = event.get("output_index").is_some();
        let item_id = event.get("item_id").and_then(Value::as_str);
        if !has_index && item_id.is_none() {
            if let Some(Value::Object(response)) = event.get_mut("response") {
                self.name_response(response);
            }
            self.emit(event, out);
            return;
        }
        let by_index = index.and_then(|i| self.round.by_index(i));
        let by_id = item_id.and_then(|id| self.round.by_id(id));
        let withheld = [by_index, by_id]
            .into_iter()
            .flatten()
            .any(|p| self.round.items[p].client.is_none());
        if withheld {
            if let Some(pos) = by_index.or(by_id) {
                self.accumulate(pos, &event);
            }
            return;
        }
        // An event of an item that never opened goes nowhere.
        let client = if has_index {
            by_index.and_then(|p| self.round.items[p].client)
        } else {
            by_id.and_then(|p| self.round.items[p].client)
        };
        let Some(client) = client else {
            return;
        };
        if has_index {
            event.insert("output_index".into(), json!(client));
        }
        if event.get("type").and_then(Value::as_str) == Some("response.output_text.delta") {
            self.round.emitted_text = true;
        }
        if let Some(Value::Object(response)) = event.get_mut("response") {
            self.name_response(response);
        }
        self.emit(event, out);
    }

    /// A withheld call's input as it streams, for its denial should its
    /// whole item never come.
    fn accumulate(&mut self, pos: usize, event: &Map<String, Value>) {
        let slot = &mut self.round.items[pos];
        if slot.done || slot.call.is_none() {
            return;
        }
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let (field, source, append) = match kind {
            "response.function_call_arguments.delta" => ("arguments", "delta", true),
            "response.function_call_arguments.done" => ("arguments", "arguments", false),
            "response.custom_tool_call_input.delta" => ("input", "delta", true),
            "response.custom_tool_call_input.done" => ("input", "input", false),
            _ => return,
        };
        let Some(text) = event.get(source).and_then(Value::as_str) else {
            return;
        };
        let Some(item) = slot.item.as_object_mut() else {
            return;
        };
        let mut value = if append {
            item.get(field)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        } else {
            String::new()
        };
        value.push_str(text);
        item.insert(field.into(), Value::String(value));
    }

    /// The round's terminal event: the turn is decided here.
    fn on_terminal(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        self.take_id(&event);
        if let Some(usage) = event
            .get("response")
            .and_then(|r| r.get("usage"))
            .filter(|u| u.is_object())
        {
            self.round.usage = Some(usage.clone());
        }
        let decision = self.decide();
        if matches!(decision, Decision::Repair | Decision::Program) {
            return; // Another round follows in the same client stream.
        }
        if decision == Decision::GiveUp && !self.round.emitted_text {
            self.give_up_note(out);
        }
        let response = event
            .entry("response")
            .or_insert_with(|| json!({"object": "response"}));
        if let Value::Object(response) = response {
            self.finish_response(response);
        }
        self.emit(event, out);
    }

    /// Decides the round once its calls are as whole as they will be.
    fn decide(&mut self) -> Decision {
        for slot in &mut self.round.items {
            if slot.done || slot.client.is_some() {
                continue;
            }
            // A withheld call whose whole item never came: judged on what
            // streamed of it.
            if let Some(call) = items::judge_item(&slot.item, &self.plan) {
                slot.call = Some(refine(slot.call.take(), call));
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

    /// The client gets no call of this turn: a message item tells why.
    fn give_up_note(&mut self, out: &mut Vec<Bytes>) {
        let note = turn::give_up_note(&self.round.calls());
        let id = format!("msg_codemode_note_{}", self.rounds);
        let item = json!({"type": "message", "id": id, "status": "completed", "role": "assistant",
                          "content": [{"type": "output_text", "text": note, "annotations": []}]});
        let client = self.seen.len();
        self.seen.push(Some(item.clone()));
        let mut opened = item.clone();
        opened["status"] = json!("in_progress");
        opened["content"] = json!([]);
        self.emit_item("response.output_item.added", client, opened, out);
        self.emit_item("response.output_item.done", client, item, out);
        self.round.emitted_text = true;
    }

    fn emit_item(&mut self, kind: &str, client: usize, item: Value, out: &mut Vec<Bytes>) {
        let mut event = Map::new();
        event.insert("type".into(), json!(kind));
        event.insert("sequence_number".into(), Value::Null);
        event.insert("output_index".into(), json!(client));
        event.insert("item".into(), item);
        self.emit(event, out);
    }

    /// The end of an upstream round's body.
    pub fn end_round(&mut self, out: &mut Vec<Bytes>) -> RoundEnd {
        if self.round.decision.is_none() {
            // No terminal event came: decided as at one. A client that got
            // no call is still told why, and gets its terminal.
            if self.decide() == Decision::GiveUp {
                if !self.round.emitted_text {
                    self.give_up_note(out);
                }
                let mut response = self
                    .template
                    .clone()
                    .and_then(|t| t.as_object().cloned())
                    .unwrap_or_default();
                response.insert("status".into(), json!("completed"));
                self.finish_response(&mut response);
                let mut event = Map::new();
                event.insert("type".into(), json!("response.completed"));
                event.insert("sequence_number".into(), Value::Null);
                event.insert("response".into(), Value::Object(response));
                self.emit(event, out);
            }
        }
        let calls = self.round.calls();
        let end = match self.round.decision {
            Some(Decision::Repair) => {
                add_usage(&mut self.usage_before, self.round.usage.as_ref());
                RoundEnd::Repair {
                    messages: items::repair_items(&self.round.model_items(), &calls),
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
                    turn: Some(Value::Array(self.round.model_items())),
                    response_id: self.round.upstream_id.clone(),
                    denied_calls,
                    denials,
                })
            }
            Some(Decision::Splice) => RoundEnd::Done {
                splice: items::splice(&calls),
            },
            Some(Decision::Final | Decision::GiveUp) | None => RoundEnd::Done { splice: None },
        };
        if matches!(end, RoundEnd::Done { .. }) {
            self.close(out);
        }
        end
    }

    /// The client stream is complete: a `[DONE]` that came goes out last.
    fn close(&mut self, out: &mut Vec<Bytes>) {
        if std::mem::take(&mut self.done_sentinel) {
            out.push(Bytes::from_static(b"data: [DONE]\n\n"));
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

    /// A program waits on the client: `turn` (a response object whose
    /// `output` holds the program's calls) ends the client stream, each
    /// call as an item the client opens and completes, then the response.
    pub fn hand_off(&mut self, turn: &Value, out: &mut Vec<Bytes>) {
        let calls: Vec<Value> = turn
            .get("output")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for item in calls {
            let client = self.seen.len();
            self.seen.push(Some(item.clone()));
            self.emit_item("response.output_item.added", client, item.clone(), out);
            self.emit_item("response.output_item.done", client, item, out);
        }
        let mut response = turn.as_object().cloned().unwrap_or_default();
        response.insert("status".into(), json!("completed"));
        // The round that held the program was summed when it ended.
        self.round.usage = None;
        self.finish_response(&mut response);
        let mut event = Map::new();
        event.insert("type".into(), json!("response.completed"));
        event.insert("sequence_number".into(), Value::Null);
        event.insert("response".into(), Value::Object(response));
        self.emit(event, out);
        self.close(out);
    }

    /// The upstream broke off or failed: the client gets a final error event.
    pub fn upstream_failed(&mut self, message: &str, code: &str, out: &mut Vec<Bytes>) {
        self.errored = true;
        self.round.decision = Some(Decision::Final);
        let mut event = Map::new();
        event.insert("type".into(), json!("error"));
        event.insert("code".into(), json!(code));
        event.insert("message".into(), json!(message));
        event.insert("sequence_number".into(), Value::Null);
        self.emit(event, out);
    }

    fn next_seq(&mut self) -> u64 {
        let seq = self.seq;
        self.seq += 1;
        seq
    }

    /// Writes one event with the stream's next `sequence_number`, its type
    /// on the `event:` line. An event whose type could not be one line is
    /// no event a client could read: dropped.
    fn emit(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let Some(kind) = event
            .get("type")
            .and_then(Value::as_str)
            .filter(|k| is_event_name(k))
            .map(str::to_owned)
        else {
            tracing::warn!(target: "codemode::denial", "an upstream Responses event without a usable type was dropped");
            return;
        };
        event.insert("sequence_number".into(), json!(self.next_seq()));
        out.push(frame(&kind, &Value::Object(event)));
    }
}

impl RoundJudge for ResponsesJudge {
    fn on_event(&mut self, ev: SseEvent, out: &mut Vec<Bytes>) {
        ResponsesJudge::on_event(self, ev, out);
    }
    fn end_round(&mut self, out: &mut Vec<Bytes>) -> RoundEnd {
        ResponsesJudge::end_round(self, out)
    }
    fn start_repair_round(&mut self) {
        ResponsesJudge::start_repair_round(self);
    }
    fn start_program_round(&mut self) {
        ResponsesJudge::start_program_round(self);
    }
    fn hand_off(&mut self, turn: &Value, out: &mut Vec<Bytes>) {
        ResponsesJudge::hand_off(self, turn, out);
    }
    fn upstream_failed(&mut self, message: &str, code: &str, out: &mut Vec<Bytes>) {
        ResponsesJudge::upstream_failed(self, message, code, out);
    }
    fn repairs(&self) -> u32 {
        self.repairs
    }

    fn round_usage(&self) -> Option<&Value> {
        self.round.usage.as_ref()
    }
}

/// A withheld call judged again on more of it: the new judgment, except
/// that a call withheld by its name never comes to pass by a later one.
pub(crate) fn refine(old: Option<JudgedCall>, new: JudgedCall) -> JudgedCall {
    match old {
        Some(old) if new.passed() && !old.passed() => JudgedCall {
            id: new.id,
            arguments: new.arguments,
            raw: new.raw,
            ..old
        },
        _ => new,
    }
}

/// Whether `kind` can stand on an `event:` line as it is.
pub(crate) fn is_event_name(kind: &str) -> bool {
    !kind.is_empty() && !kind.bytes().any(|b| b == b'\n' || b == b'\r')
}

/// How many decimal digits `n` takes.
pub(crate) fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Writes `n` in decimal.
pub(crate) fn push_number(out: &mut Vec<u8>, n: u64) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    let mut n = n;
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[at..]);
}

/// Where `raw`, borrowed from `data`, lies in it.
pub(crate) fn span_of(data: &str, raw: &RawValue) -> Option<(usize, usize)> {
    let start = (raw.get().as_ptr() as usize).checked_sub(data.as_ptr() as usize)?;
    let end = start + raw.get().len();
    (data.get(start..end) == Some(raw.get())).then_some((start, end))
}

/// One event: its type on the `event:` line, `value` as its data.
pub(crate) fn frame(kind: &str, value: &Value) -> Bytes {
    let mut out = String::with_capacity(160);
    let _ = write!(out, "event: {kind}\ndata: ");
    let mut bytes = out.into_bytes();
    // Serialising a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut bytes, value);
    bytes.extend_from_slice(b"\n\n");
    Bytes::from(bytes)
}

/// The fields of an event the fast path reads, borrowed from its text.
#[derive(serde::Deserialize)]
struct EventView<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    sequence_number: Option<&'a RawValue>,
    #[serde(borrow)]
    output_index: Option<&'a RawValue>,
    #[serde(borrow)]
    item_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    item: Option<&'a RawValue>,
    #[serde(borrow)]
    response: Option<&'a RawValue>,
}

#[cfg(test)]
mod tests;
