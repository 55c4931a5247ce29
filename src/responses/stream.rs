//! The Responses stream judge: SSE events in, the bytes the client sees out.
//!
//! Pure and synchronous, like the chat judge ([`crate::chat::stream`]), and
//! driven the same way by `crate::layer::drivers::stream_body::InterceptBody`. Each output item
//! is decided at its `response.output_item.added` (a call by
//! [`items::judge_item`] on its name) and judged again, whole, at its
//! `response.output_item.done`. Text, reasoning and passed calls go out as
//! they arrive; a withheld item's events never do. At the round's terminal
//! event (`response.completed` / `response.incomplete`, or the end of the
//! body) [`crate::turn::decide`] says what follows: the client's terminal event, a
//! repair or a program inside the same client stream.
//!
//! Across rounds the client sees one response: the first response id on
//! every event that names one, its own `sequence_number` strictly rising
//! from 0, `output_index` contiguous, and one terminal event whose `output`
//! holds every item it saw and whose `usage` is the sum of all rounds.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

mod ending;
mod fast;

use super::{events, items, Responses};
use crate::plan::ToolPlan;
use crate::sse::{digits, is_event_name, named_event as frame, push_number, span_of, SseEvent};
use crate::turn::{
    self, refine, settle_end, AtEnd, Decision, JudgedCall, ModelTurn, RoundEnd, RoundJudge,
    StreamTurn, Unreadable,
};

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

/// Reads an event where a call could stand as a judge may
/// (`crate::turn::shape`), before any of it goes out: its `item` an output
/// item ([`items::check_item`]), its `response` an object whose `output`
/// is a list; `null` is absent. Whatever the event's type: a client that
/// keeps a snapshot of the response reads these off any event.
fn check_event(event: &Map<String, Value>) -> Result<(), Unreadable> {
    use crate::turn::{shape, Step::Key};
    if let Some(item) = event.get("item").filter(|i| !i.is_null()) {
        items::check_item(item).map_err(|e| e.under(&[Key("item")]))?;
    }
    if let Some(response) = shape::object(event.get("response"), &[Key("response")])? {
        shape::list(response.get("output"), &[Key("response"), Key("output")])?;
    }
    Ok(())
}

/// Judges one client stream of the Responses API across its rounds.
pub struct ResponsesJudge {
    plan: Arc<ToolPlan>,
    /// The rounds, and the current one's items.
    turn: StreamTurn<Round>,
    /// The next `sequence_number` the client gets.
    seq: u64,
    /// The first response id: the one the client knows.
    id: Option<String>,
    /// The first round's response object, for terminals the proxy writes.
    template: Option<Value>,
    /// Every item the client got, by its `output_index`; `None` for one
    /// whose whole item turned out to be withheld.
    seen: Vec<Option<Value>>,
    /// A `data: [DONE]` came: it goes out once, at the very end.
    done_sentinel: bool,
}

impl ResponsesJudge {
    /// A judge for a stream under `plan`, repairing at most `max_repairs` times.
    pub fn new(plan: Arc<ToolPlan>, max_repairs: u32) -> ResponsesJudge {
        ResponsesJudge {
            plan,
            turn: StreamTurn::new(max_repairs),
            seq: 0,
            id: None,
            template: None,
            seen: Vec::new(),
            done_sentinel: false,
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
        if ev.is_done() {
            self.done_sentinel = true;
            return Ok(());
        }
        if self.turn.decision.is_some() {
            // The round has ended (its terminal, or an error): nothing after
            // it is judged, so nothing after it goes out.
            return Ok(());
        }
        if self.turn.errored {
            return self.after_error(data, out);
        }
        if self.fast(data, out) {
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
            "response.created" | "response.in_progress" | "response.queued" => {
                self.on_start(event, out);
            }
            "response.output_item.added" => self.on_added(event, out),
            "response.output_item.done" => self.on_done(event, out),
            "response.completed" | "response.incomplete" => self.on_terminal(event, out),
            "response.failed" => self.on_failed(event, out),
            "error" => {
                // The upstream ended the turn with an error: it reaches the
                // client and no repair follows. The round stays open for
                // the `response.failed` that may follow; nothing else
                // after it goes out (`on_event`).
                self.turn.errored = true;
                self.take_id(&event);
                self.emit(event, out);
            }
            // A call is announced by `response.output_item.added`, where it
            // is judged; one riding on any other event (a type the proxy
            // does not know) never reaches the client, whatever it names.
            _ if items::rides_a_call(&event, &self.plan) => {
                tracing::debug!(target: "codemode::denial", event = kind, "an event carrying a call item was withheld");
            }
            _ => self.on_item_event(event, out),
        }
    }

    /// The response's start: the client gets the first round's only.
    fn on_start(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        self.take_id(&event);
        if self.turn.rounds.before() > 0 {
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
        if self.turn.round.upstream_id.is_none() {
            self.turn.round.upstream_id.clone_from(&id);
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
        if let Some(total) = self.turn.visible_usage() {
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
        self.turn.round.items.push(RoundItem {
            index,
            id: item.get("id").and_then(Value::as_str).map(str::to_owned),
            client,
            item: item.clone(),
            done: false,
            call,
        });
        self.turn.round.items.len() - 1
    }

    fn on_added(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let Some(item) = event.get("item").filter(|i| i.is_object()).cloned() else {
            return;
        };
        let index = event
            .get("output_index")
            .and_then(Value::as_u64)
            .unwrap_or(self.turn.round.items.len() as u64);
        if self.turn.round.by_index(index).is_some() {
            // A second item at one index: no client could tell them apart.
            tracing::warn!(target: "codemode::denial", "an upstream item added twice at one output_index was dropped");
            return;
        }
        let pos = self.register(index, &item);
        if let Some(client) = self.turn.round.items[pos].client {
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
            .and_then(|i| self.turn.round.by_index(i))
            .or_else(|| id.and_then(|id| self.turn.round.by_id(id)));
        let pos = match found {
            Some(pos) => pos,
            None => {
                // A whole item that never opened: the client gets its
                // opening too, so every item it completes is one it has.
                let index = index.unwrap_or(self.turn.round.items.len() as u64);
                let pos = self.register(index, &item);
                if let Some(client) = self.turn.round.items[pos].client {
                    let opened = item.clone();
                    self.emit_item("response.output_item.added", client as usize, opened, out);
                }
                pos
            }
        };
        // The whole item is what a client acts on: judged again.
        let judged = items::judge_item(&item, &self.plan);
        let slot = &mut self.turn.round.items[pos];
        slot.item = item.clone();
        slot.done = true;
        match settle_end(&mut slot.client, &mut slot.call, judged, "item") {
            AtEnd::CutOff(client) => self.seen[client as usize] = None,
            AtEnd::Send(client) => {
                self.seen[client as usize] = Some(item);
                event.insert("output_index".into(), json!(client));
                self.emit(event, out);
            }
            AtEnd::Hidden => {}
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
        let by_index = index.and_then(|i| self.turn.round.by_index(i));
        let by_id = item_id.and_then(|id| self.turn.round.by_id(id));
        let withheld = [by_index, by_id]
            .into_iter()
            .flatten()
            .any(|p| self.turn.round.items[p].client.is_none());
        if withheld {
            if let Some(pos) = by_index.or(by_id) {
                self.accumulate(pos, &event);
            }
            return;
        }
        // An event of an item that never opened goes nowhere.
        let client = if has_index {
            by_index.and_then(|p| self.turn.round.items[p].client)
        } else {
            by_id.and_then(|p| self.turn.round.items[p].client)
        };
        let Some(client) = client else {
            return;
        };
        if has_index {
            event.insert("output_index".into(), json!(client));
        }
        if event.get("type").and_then(Value::as_str) == Some("response.output_text.delta") {
            self.turn.emitted_text = true;
        }
        if let Some(Value::Object(response)) = event.get_mut("response") {
            self.name_response(response);
        }
        self.emit(event, out);
    }

    /// A withheld call's input as it streams, for its denial should its
    /// whole item never come.
    fn accumulate(&mut self, pos: usize, event: &Map<String, Value>) {
        let slot = &mut self.turn.round.items[pos];
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
        // Appended in place: a call's arguments arrive in many deltas, and
        // copying the whole string on each would be quadratic.
        match item.get_mut(field) {
            Some(Value::String(value)) if append => value.push_str(text),
            _ => {
                item.insert(field.into(), Value::String(text.to_owned()));
            }
        }
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

#[cfg(test)]
mod tests;
