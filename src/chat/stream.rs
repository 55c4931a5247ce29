//! The Chat Completions stream judge: SSE events in, the bytes the client
//! sees out.
//!
//! Pure and synchronous, so it can be driven over fixtures cut at every
//! offset. Each call is classified when its name first arrives
//! ([`calls`]); text and allowed calls go out as they come. At the end
//! of a turn (its `finish_reason`, `[DONE]` or the end of the upstream body)
//! the judge decides: a turn whose every call was denied is repaired inside
//! the same client stream, up to the bound.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Map, Value};

mod accumulate;
mod calls;
mod chunk;

use accumulate::accumulate_except;
use calls::CallTracker;
use chunk::{check_chunk, forward_inert, may_hold_call, only_first_choice, template_of};

use super::answer::assistant_turn;
use super::Chat;
use crate::plan::ToolPlan;
use crate::sse::{data_event as sse_data, SseEvent};
use crate::turn::{
    self, Decision, JudgedCall, ModelTurn, RoundEnd, RoundJudge, StreamTurn, Unreadable,
};
use crate::wire::parse_noting_repeats;

/// Text of fast-path events kept for a possible repair's history, at most.
const MAX_DEFERRED_BYTES: usize = 1 << 20;

#[derive(Default)]
struct Round {
    calls: CallTracker,
    text: String,
    deferred: Vec<String>,
    deferred_bytes: usize,
    template: Option<Value>,
    /// The model's message so far, every field but its calls (which
    /// [`CallTracker`] keeps), for a replay of the turn.
    message: Map<String, Value>,
}

impl Round {
    /// Takes in a delta's fields other than its calls; whether it held text.
    fn on_delta_fields(&mut self, delta: &Map<String, Value>) -> bool {
        accumulate_except(&mut self.message, delta, &["tool_calls", "function_call"]);
        match delta.get("content").and_then(Value::as_str) {
            Some(text) if !text.is_empty() => {
                self.text.push_str(text);
                true
            }
            _ => false,
        }
    }

    /// The model's turn as it came, every provider field kept, with `calls`.
    fn model_turn(&self, calls: &[JudgedCall]) -> Value {
        assistant_turn(&self.message, calls)
    }
}

/// Judges one client stream across its rounds.
pub struct StreamJudge {
    plan: Arc<ToolPlan>,
    /// The rounds, and the current one's calls and text.
    turn: StreamTurn<Round>,
    completion_id: Option<String>,
    /// A program's round went out with text: the next round's text starts
    /// a new paragraph, so the opening words and the answer do not run
    /// together.
    text_before_program: bool,
}

impl StreamJudge {
    /// A judge for a stream under `plan`, repairing at most `max_repairs` times.
    pub fn new(plan: Arc<ToolPlan>, max_repairs: u32) -> StreamJudge {
        StreamJudge {
            plan,
            turn: StreamTurn::new(max_repairs),
            completion_id: None,
            text_before_program: false,
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
        let hidden = self.turn.hides_end();
        let Some(data) = ev.data.as_deref() else {
            // Comments and keep-alives carry no call; the client keeps its
            // connection alive with them, so they go out unless this round
            // is being hidden.
            if !hidden {
                out.push(ev.raw);
            }
            return Ok(());
        };
        if self.turn.errored {
            // After an error nothing is judged any more: only what cannot
            // carry a call goes out as it came.
            forward_inert(data, ev.raw, out);
            return Ok(());
        }
        if ev.is_done() {
            if self.turn.decision.is_none() {
                self.decide(true, out);
            }
            if !self.turn.hides_end() {
                out.push(ev.raw);
            }
            return Ok(());
        }
        if ev.event.as_deref() == Some("error") {
            self.turn.errored = true;
            forward_inert(data, ev.raw, out);
            return Ok(());
        }
        // The cheap byte check: a first-round event that cannot hold a call
        // or an error goes out as it came, without a JSON parse.
        let fast = self.turn.rounds.before() == 0
            && self.turn.round.calls.is_empty()
            && self.turn.decision.is_none()
            && !may_hold_call(data)
            && !data.contains("\"error\"");
        if fast {
            if self.turn.round.deferred_bytes + data.len() <= MAX_DEFERRED_BYTES {
                self.turn.round.deferred_bytes += data.len();
                self.turn.round.deferred.push(data.to_owned());
            }
            out.push(ev.raw);
            return Ok(());
        }
        self.flush_deferred();
        if self.forward_unchanged(data) {
            out.push(ev.raw);
            return Ok(());
        }
        match parse_noting_repeats(data.as_bytes()) {
            // A chunk repeating a key is read differently by other clients:
            // it goes out written from the reading judged, never as it came.
            Ok((chunk @ Value::Object(_), repeated)) => {
                self.on_chunk(chunk, (!repeated).then_some(ev.raw), out)
            }
            // Not a JSON object: no client reads a chunk out of it, unless it
            // reads JSON more leniently than serde (NaN, lone surrogates,
            // deep nesting). One that may hold a call is refused; one that
            // cannot goes out as it came.
            parsed if may_hold_call(data) => {
                Err(Unreadable::event(parsed.as_ref().ok().map(|(v, _)| v)))
            }
            _ => {
                if !hidden {
                    out.push(ev.raw);
                }
                Ok(())
            }
        }
    }

    /// Judges a chunk read as `chunk`; `raw` is its bytes when they can
    /// stand for that reading (no repeated key). The judge edits the chunk
    /// freely and reports nothing: the bytes go out only when what it made
    /// equals what it read, so no change can go unreported.
    fn on_chunk(
        &mut self,
        mut chunk: Value,
        raw: Option<Bytes>,
        out: &mut Vec<Bytes>,
    ) -> Result<(), Unreadable> {
        let reading = raw.as_ref().map(|_| chunk.clone());
        let write = |chunk: &Value, out: &mut Vec<Bytes>| {
            out.push(match raw {
                Some(raw) if reading.as_ref() == Some(chunk) => raw,
                _ => sse_data(chunk),
            });
        };
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            // In-band upstream error: it reaches the client and ends the turn,
            // without any choices it might carry (no call is judged after it).
            self.turn.errored = true;
            if let Some(c) = chunk.as_object_mut() {
                c.remove("choices");
            }
            write(&chunk, out);
            return Ok(());
        }
        // Where a call could stand, the chunk is read whole before any of
        // it goes out (`crate::turn::shape`).
        check_chunk(&chunk)?;
        if self.completion_id.is_none() {
            self.completion_id = chunk
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned);
        }
        if self.turn.round.template.is_none() {
            self.turn.round.template = Some(template_of(&chunk));
        }
        only_first_choice(&mut chunk);
        if self.turn.rounds.before() > 0 {
            if let Some(id) = &self.completion_id {
                chunk["id"] = json!(id);
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.turn.usage = Some(u.clone());
        }
        let mut emptied = false;
        let mut finishing = false;
        if let Some(choice) = chunk.pointer_mut("/choices/0") {
            if let Some(delta) = choice.get_mut("delta").and_then(Value::as_object_mut) {
                let opens_paragraph = self.text_before_program && !self.turn.emitted_text;
                self.turn.emitted_text |= self.turn.round.on_delta_fields(delta);
                if opens_paragraph && self.turn.emitted_text {
                    if let Some(Value::String(text)) = delta.get_mut("content") {
                        text.insert_str(0, "\n\n");
                        self.text_before_program = false;
                    }
                }
                let mut judged = false;
                match delta.remove("tool_calls") {
                    Some(Value::Array(deltas)) if !deltas.is_empty() => {
                        judged = true;
                        let forwarded: Vec<Value> = deltas
                            .into_iter()
                            .filter_map(|d| self.turn.round.calls.on_delta(d, &self.plan))
                            .collect();
                        if !forwarded.is_empty() {
                            delta.insert("tool_calls".into(), Value::Array(forwarded));
                        }
                    }
                    // An empty or null `tool_calls` (Groq sends `[]` on text) stays as it was.
                    Some(other @ (Value::Array(_) | Value::Null)) => {
                        delta.insert("tool_calls".into(), other);
                    }
                    // `check_chunk` refused anything else; were one here, no
                    // client would get it.
                    Some(_) => judged = true,
                    None => {}
                }
                match delta.remove("function_call") {
                    None => {}
                    Some(Value::Null) => {
                        delta.insert("function_call".into(), Value::Null);
                    }
                    Some(fc) => {
                        judged = true;
                        if let Some(fc) = self.turn.round.calls.on_legacy(fc, &self.plan) {
                            delta.insert("function_call".into(), fc);
                        }
                    }
                }
                emptied = judged && delta.is_empty();
            }
            finishing = choice.get("finish_reason").is_some_and(|f| !f.is_null());
        }
        if finishing && self.turn.decision.is_none() {
            self.decide(false, out);
            if self.turn.decision == Some(Decision::GiveUp) {
                let note = self.turn.wants_note().then(|| self.give_up_note());
                if let Some(choice) = chunk
                    .pointer_mut("/choices/0")
                    .and_then(Value::as_object_mut)
                {
                    choice.insert("finish_reason".into(), json!("stop"));
                    if let Some(note) = note {
                        choice.insert("delta".into(), json!({"content": note}));
                        emptied = false;
                    }
                }
            }
        }
        if self.turn.hides_end() {
            return Ok(()); // This turn's end (finish, usage, trailers) stays hidden.
        }
        if self.turn.rounds.before() > 0
            && self.turn.usage.is_some()
            && chunk.get("usage").is_some_and(Value::is_object)
        {
            let total = self.turn.visible_usage();
            chunk["usage"] = total.unwrap_or(Value::Null);
        }
        let has_usage = chunk.get("usage").is_some_and(|u| !u.is_null());
        if emptied && !finishing && !has_usage {
            return Ok(()); // Only withheld calls were in it.
        }
        write(&chunk, out);
        Ok(())
    }

    /// The round's calls, judged (arguments as far as they arrived).
    fn judged(&self) -> Vec<JudgedCall> {
        self.turn
            .round
            .calls
            .calls()
            .iter()
            .map(|c| c.judged(&self.plan))
            .collect()
    }

    fn decide(&mut self, synthesize_finish: bool, out: &mut Vec<Bytes>) {
        self.turn.round.calls.close(&self.plan);
        let calls = self.judged();
        let decision = self.turn.decide(&calls);
        if decision == Decision::GiveUp && synthesize_finish {
            // No finish chunk came: the client still gets one, and the note.
            let mut chunk = self.chunk_template();
            let delta = if self.turn.wants_note() {
                json!({"content": self.give_up_note()})
            } else {
                json!({})
            };
            chunk["choices"] = json!([{"index": 0, "delta": delta, "finish_reason": "stop"}]);
            out.push(sse_data(&chunk));
        }
    }

    /// A chunk the proxy writes itself, shaped like the round's own chunks.
    fn chunk_template(&self) -> Value {
        let mut chunk = self
            .turn
            .round
            .template
            .clone()
            .unwrap_or_else(|| json!({"object": "chat.completion.chunk"}));
        if let Some(id) = &self.completion_id {
            chunk["id"] = json!(id);
        }
        chunk
    }

    fn give_up_note(&self) -> String {
        turn::give_up_note(&self.judged())
    }

    /// Text that went out on the fast path, parsed only now that it may be
    /// needed for a repair's history.
    fn flush_deferred(&mut self) {
        for data in std::mem::take(&mut self.turn.round.deferred) {
            if let Ok(v) = serde_json::from_str::<Value>(&data) {
                if let Some(delta) = v.pointer("/choices/0/delta").and_then(Value::as_object) {
                    self.turn.emitted_text |= self.turn.round.on_delta_fields(delta);
                }
            }
        }
        self.turn.round.deferred_bytes = 0;
    }
}

impl RoundJudge for StreamJudge {
    fn on_event(&mut self, ev: SseEvent, out: &mut Vec<Bytes>) -> Result<(), Unreadable> {
        self.judge_event(ev, out)
    }

    fn end_round(&mut self, out: &mut Vec<Bytes>) -> RoundEnd {
        if self.turn.decision.is_none() {
            self.decide(true, out);
        }
        let calls = self.judged();
        let text = std::mem::take(&mut self.turn.round.text);
        let turn = ModelTurn {
            replay: self.turn.round.model_turn(&calls),
            text: (!text.is_empty()).then_some(text),
            calls,
            response_id: None,
        };
        self.turn.end::<Chat>(turn)
    }

    fn start_repair_round(&mut self) {
        self.turn.start_repair_round();
    }

    fn start_program_round(&mut self) {
        self.text_before_program |= self.turn.emitted_text;
        self.turn.start_program_round();
    }

    /// The program's calls end this client stream as an ordinary
    /// tool-call turn (same completion id).
    fn hand_off(&mut self, turn: &Value, out: &mut Vec<Bytes>) {
        let mut chunk = self.chunk_template();
        let calls = turn
            .pointer("/choices/0/message/tool_calls")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        for delta in super::answer::call_deltas(calls) {
            chunk["choices"] = json!([{"index": 0, "delta": delta, "finish_reason": null}]);
            out.push(sse_data(&chunk));
        }
        chunk["choices"] = json!([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]);
        out.push(sse_data(&chunk));
        if let Some(total) = &self.turn.rounds.usage {
            chunk["choices"] = json!([]);
            chunk["usage"] = total.clone();
            out.push(sse_data(&chunk));
        }
        out.push(Bytes::from_static(b"data: [DONE]\n\n"));
    }

    fn upstream_failed(&mut self, message: &str, code: &str, out: &mut Vec<Bytes>) {
        self.turn.failed();
        out.push(error_event(message, code));
    }

    fn repairs(&self) -> u32 {
        self.turn.rounds.repairs
    }

    fn round_usage(&self) -> Option<&Value> {
        self.turn.usage.as_ref()
    }
}

pub use chunk::error_event;
