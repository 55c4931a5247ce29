//! The streaming judge: SSE events in, the bytes the client sees out.
//!
//! Pure and synchronous, so it can be driven over fixtures cut at every
//! offset. Each call is classified when its name first arrives
//! ([`super::calls`]); text and allowed calls go out as they come. At the end
//! of a turn (its `finish_reason`, `[DONE]` or the end of the upstream body)
//! the judge decides: a turn whose every call was denied is repaired inside
//! the same client stream, up to the bound.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::accumulate::accumulate_except;
use super::calls::{CallTracker, DeltaView};
use crate::intercept::add_usage;
use crate::plan::ToolPlan;
use crate::runtime::MAX_PROGRAMS_PER_REQUEST;
use crate::splice::Splice;
use crate::sse::SseEvent;
use crate::turn::{self, Bounds, Decision, Fate, JudgedCall, Summary};

/// Text of fast-path events kept for a possible repair's history, at most.
const MAX_DEFERRED_BYTES: usize = 1 << 20;

#[derive(Default)]
struct Round {
    calls: CallTracker,
    text: String,
    deferred: Vec<String>,
    deferred_bytes: usize,
    decision: Option<Decision>,
    emitted_text: bool,
    usage: Option<Value>,
    template: Option<Value>,
    /// The model's message so far, every field but its calls (which
    /// [`CallTracker`] keeps), for a replay of the turn.
    message: Map<String, Value>,
}

impl Round {
    /// Takes in a delta's fields other than its calls.
    fn on_delta_fields(&mut self, delta: &Map<String, Value>) {
        accumulate_except(&mut self.message, delta, &["tool_calls", "function_call"]);
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            if !text.is_empty() {
                self.text.push_str(text);
                self.emitted_text = true;
            }
        }
    }

    /// The model's turn as it came, every provider field kept, with `calls`.
    fn model_turn(&self, calls: &[JudgedCall]) -> Value {
        turn::assistant_turn(&self.message, calls)
    }
}

/// The model's `run_code` call that the proxy runs between rounds.
#[derive(Debug)]
pub struct HeldProgram {
    /// The model's call id.
    pub id: String,
    /// Its arguments (`{"code": "..."}`), as the model wrote them.
    pub arguments: String,
    /// The text the model wrote in the same turn.
    pub content: Option<String>,
    /// The model's whole turn, provider fields included, for its history.
    pub turn: Option<Value>,
    /// The provider's id of the response that held the call (Responses).
    pub response_id: Option<String>,
    /// Calls denied in the same turn, for the model's history.
    pub denied_calls: Vec<Value>,
    /// Their denials.
    pub denials: Vec<Value>,
}

/// What happens when an upstream round's body ends.
#[derive(Debug)]
pub enum RoundEnd {
    /// Run this program, then continue the stream or hand its calls to the client.
    Program(HeldProgram),
    /// Ask upstream again with these messages appended to the conversation.
    Repair {
        /// The model's turn, then one denial per call.
        messages: Vec<Value>,
    },
    /// The client stream is complete.
    Done {
        /// A mixed turn's denials, keyed by the ids of the calls the client got.
        splice: Option<(Vec<String>, Splice)>,
    },
}

/// Judges one client stream across its rounds.
pub struct StreamJudge {
    plan: Arc<ToolPlan>,
    max_repairs: u32,
    repairs: u32,
    programs: u32,
    rounds: u32,
    completion_id: Option<String>,
    usage_before: Option<Value>,
    round: Round,
    errored: bool,
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
            max_repairs,
            repairs: 0,
            programs: 0,
            rounds: 0,
            completion_id: None,
            usage_before: None,
            round: Round::default(),
            errored: false,
            text_before_program: false,
        }
    }

    /// Whether the upstream reported an error in-band (no repair follows one).
    #[cfg(test)]
    pub fn errored(&self) -> bool {
        self.errored
    }

    /// Judges one event, appending what the client gets to `out`.
    pub fn on_event(&mut self, ev: SseEvent, out: &mut Vec<Bytes>) {
        let hidden = self.hides_end();
        let Some(data) = ev.data.as_deref() else {
            // Comments and keep-alives carry no call; the client keeps its
            // connection alive with them, so they go out unless this round
            // is being hidden.
            if !hidden {
                out.push(ev.raw);
            }
            return;
        };
        if self.errored {
            // After an error nothing is judged any more: only what cannot
            // carry a call goes out as it came.
            forward_inert(data, ev.raw, out);
            return;
        }
        if ev.is_done() {
            if self.round.decision.is_none() {
                self.decide(true, out);
            }
            if !self.hides_end() {
                out.push(ev.raw);
            }
            return;
        }
        if ev.event.as_deref() == Some("error") {
            self.errored = true;
            forward_inert(data, ev.raw, out);
            return;
        }
        // The cheap byte check: a first-round event that cannot hold a call
        // or an error goes out as it came, without a JSON parse.
        let fast = self.rounds == 0
            && self.round.calls.is_empty()
            && self.round.decision.is_none()
            && !may_hold_call(data)
            && !data.contains("\"error\"");
        if fast {
            if self.round.deferred_bytes + data.len() <= MAX_DEFERRED_BYTES {
                self.round.deferred_bytes += data.len();
                self.round.deferred.push(data.to_owned());
            }
            out.push(ev.raw);
            return;
        }
        self.flush_deferred();
        if self.forward_unchanged(data) {
            out.push(ev.raw);
            return;
        }
        match serde_json::from_str::<Value>(data) {
            Ok(chunk @ Value::Object(_)) => self.on_chunk(chunk, ev.raw, out),
            // Not a JSON object: no client reads a chunk out of it, unless it
            // reads JSON more leniently than serde (NaN, lone surrogates,
            // deep nesting): then it goes out only if no call can be in it.
            _ if !hidden && !may_hold_call(data) => out.push(ev.raw),
            _ => {
                tracing::warn!(target: "codemode::denial", "an upstream event that is not a JSON object and may hold a call was dropped");
            }
        }
    }

    /// The common chunk in a tool stream continues a call the client already
    /// has: read it through a borrowed view and let its bytes go out as they
    /// came, without building a JSON tree. Anything else returns false.
    fn forward_unchanged(&mut self, data: &str) -> bool {
        if self.rounds > 0 || self.round.decision.is_some() || self.completion_id.is_none() {
            return false;
        }
        let Ok(view) = serde_json::from_str::<ChunkView<'_>>(data) else {
            return false;
        };
        let present = |v: &Option<&RawValue>| v.is_some_and(|v| v.get() != "null");
        if present(&view.error) || present(&view.usage) {
            return false;
        }
        let [choice] = view.choices.as_slice() else {
            return false;
        };
        if present(&choice.finish_reason)
            || present(&choice.message)
            || choice.index.is_some_and(|i| i.get() != "0")
        {
            return false;
        }
        let Some(delta) = &choice.delta else {
            return false;
        };
        if present(&delta.function_call) {
            return false;
        }
        if delta.tool_calls.is_empty() || !self.round.calls.continue_unchanged(&delta.tool_calls) {
            return false;
        }
        if let Some(text) = delta.content.as_deref().filter(|t| !t.is_empty()) {
            let mut fields = Map::new();
            fields.insert("content".into(), json!(text));
            self.round.on_delta_fields(&fields);
        }
        true
    }

    fn on_chunk(&mut self, mut chunk: Value, raw: Bytes, out: &mut Vec<Bytes>) {
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            // In-band upstream error: it reaches the client and ends the turn,
            // without any choices it might carry (no call is judged after it).
            self.errored = true;
            let choices = chunk.as_object_mut().and_then(|c| c.remove("choices"));
            out.push(if choices.is_some() {
                sse_data(&chunk)
            } else {
                raw
            });
            return;
        }
        if self.completion_id.is_none() {
            self.completion_id = chunk
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned);
        }
        if self.round.template.is_none() {
            self.round.template = Some(template_of(&chunk));
        }
        let mut changed = only_first_choice(&mut chunk);
        if self.rounds > 0 {
            if let Some(id) = &self.completion_id {
                chunk["id"] = json!(id);
                changed = true;
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.round.usage = Some(u.clone());
        }
        let mut emptied = false;
        let mut finishing = false;
        if let Some(choice) = chunk.pointer_mut("/choices/0") {
            if let Some(delta) = choice.get_mut("delta").and_then(Value::as_object_mut) {
                let opens_paragraph = self.text_before_program && !self.round.emitted_text;
                self.round.on_delta_fields(delta);
                if opens_paragraph && self.round.emitted_text {
                    if let Some(Value::String(text)) = delta.get_mut("content") {
                        text.insert_str(0, "\n\n");
                        changed = true;
                        self.text_before_program = false;
                    }
                }
                let mut judged = false;
                let deltas = match delta.remove("tool_calls") {
                    Some(Value::Array(d)) if !d.is_empty() => d,
                    // An empty or null `tool_calls` (Groq sends `[]` on text) stays as it was.
                    Some(other @ (Value::Array(_) | Value::Null)) => {
                        delta.insert("tool_calls".into(), other);
                        Vec::new()
                    }
                    // Anything else is no list of calls a client could read: dropped.
                    Some(_) => {
                        judged = true;
                        changed = true;
                        Vec::new()
                    }
                    None => Vec::new(),
                };
                if !deltas.is_empty() {
                    judged = true;
                    let count = deltas.len();
                    let mut altered = false;
                    let forwarded: Vec<Value> = deltas
                        .into_iter()
                        .filter_map(|d| self.round.calls.on_delta(d, &self.plan))
                        .map(|(d, changed)| {
                            altered |= changed;
                            d
                        })
                        .collect();
                    if forwarded.is_empty() {
                        changed = true;
                    } else {
                        // Every delta kept as it came: the original bytes can go out.
                        changed |= altered || forwarded.len() != count;
                        delta.insert("tool_calls".into(), Value::Array(forwarded));
                    }
                }
                match delta.remove("function_call") {
                    None => {}
                    Some(Value::Null) => {
                        delta.insert("function_call".into(), Value::Null);
                    }
                    Some(fc) => {
                        judged = true;
                        match self.round.calls.on_legacy(fc, &self.plan) {
                            Some((fc, altered)) => {
                                changed |= altered;
                                delta.insert("function_call".into(), fc);
                            }
                            None => changed = true,
                        }
                    }
                }
                emptied = judged && delta.is_empty();
            }
            finishing = choice.get("finish_reason").is_some_and(|f| !f.is_null());
        }
        if finishing && self.round.decision.is_none() {
            self.decide(false, out);
            if self.round.decision == Some(Decision::GiveUp) {
                let note = (!self.round.emitted_text).then(|| self.give_up_note());
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
                changed = true;
            }
        }
        if self.hides_end() {
            return; // This turn's end (finish, usage, trailers) stays hidden.
        }
        if self.rounds > 0
            && self.round.usage.is_some()
            && chunk.get("usage").is_some_and(Value::is_object)
        {
            let mut total = self.usage_before.clone();
            add_usage(&mut total, self.round.usage.as_ref());
            chunk["usage"] = total.unwrap_or(Value::Null);
            changed = true;
        }
        let has_usage = chunk.get("usage").is_some_and(|u| !u.is_null());
        if emptied && !finishing && !has_usage {
            return; // Only withheld calls were in it.
        }
        out.push(if changed { sse_data(&chunk) } else { raw });
    }

    /// The round's calls, judged (arguments as far as they arrived).
    fn judged(&self) -> Vec<JudgedCall> {
        self.round
            .calls
            .calls()
            .iter()
            .map(|c| c.judged(&self.plan))
            .collect()
    }

    /// The end of an upstream round's body.
    pub fn end_round(&mut self, out: &mut Vec<Bytes>) -> RoundEnd {
        if self.round.decision.is_none() {
            self.decide(true, out);
        }
        let calls = self.judged();
        match self.round.decision {
            Some(Decision::Repair) => {
                add_usage(&mut self.usage_before, self.round.usage.as_ref());
                let assistant = self.round.model_turn(&calls);
                RoundEnd::Repair {
                    messages: turn::repair_messages(assistant, &calls),
                }
            }
            Some(Decision::Program) => {
                add_usage(&mut self.usage_before, self.round.usage.as_ref());
                let text = std::mem::take(&mut self.round.text);
                let program = calls.iter().find(|c| c.fate == Fate::Program);
                let (denied_calls, denials) = turn::program_denials(&calls);
                RoundEnd::Program(HeldProgram {
                    turn: Some(self.round.model_turn(&calls)),
                    response_id: None,
                    id: program.map(|c| c.id.clone()).unwrap_or_default(),
                    arguments: program.map(|c| c.arguments.clone()).unwrap_or_default(),
                    content: (!text.is_empty()).then_some(text),
                    denied_calls,
                    denials,
                })
            }
            Some(Decision::Splice) => RoundEnd::Done {
                splice: turn::splice(&calls),
            },
            Some(Decision::Final | Decision::GiveUp) | None => RoundEnd::Done { splice: None },
        }
    }

    /// Whether this round's end (finish, usage, `[DONE]`) is hidden because
    /// another round follows in the same client stream.
    fn hides_end(&self) -> bool {
        matches!(
            self.round.decision,
            Some(Decision::Repair | Decision::Program)
        )
    }

    /// Starts the next round after a program ended and the model was asked again.
    pub fn start_program_round(&mut self) {
        self.text_before_program |= self.round.emitted_text;
        self.programs += 1;
        self.rounds += 1;
        self.round = Round::default();
    }

    /// The program waits on the client: its calls end this client stream as
    /// an ordinary tool-call turn (same completion id).
    pub fn hand_off(&mut self, turn: &Value, out: &mut Vec<Bytes>) {
        let mut chunk = self.chunk_template();
        let deltas: Vec<Value> = turn
            .pointer("/choices/0/message/tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, c)| {
                let mut d = c.clone();
                d["index"] = json!(i);
                d
            })
            .collect();
        chunk["choices"] =
            json!([{"index": 0, "delta": {"tool_calls": deltas}, "finish_reason": null}]);
        out.push(sse_data(&chunk));
        chunk["choices"] = json!([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]);
        out.push(sse_data(&chunk));
        if let Some(total) = &self.usage_before {
            chunk["choices"] = json!([]);
            chunk["usage"] = total.clone();
            out.push(sse_data(&chunk));
        }
        out.push(Bytes::from_static(b"data: [DONE]\n\n"));
    }

    /// Starts the next round after a repair was sent upstream.
    pub fn start_repair_round(&mut self) {
        self.repairs += 1;
        self.rounds += 1;
        self.round = Round::default();
    }

    /// The upstream broke off or failed: the client gets a final error event.
    pub fn upstream_failed(&mut self, message: &str, code: &str, out: &mut Vec<Bytes>) {
        self.errored = true;
        out.push(error_event(message, code));
    }

    fn decide(&mut self, synthesize_finish: bool, out: &mut Vec<Bytes>) {
        self.round.calls.close(&self.plan);
        let calls = self.judged();
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
        if decision == Decision::GiveUp && synthesize_finish {
            // No finish chunk came: the client still gets one, and the note.
            let mut chunk = self.chunk_template();
            let delta = if self.round.emitted_text {
                json!({})
            } else {
                json!({"content": self.give_up_note()})
            };
            chunk["choices"] = json!([{"index": 0, "delta": delta, "finish_reason": "stop"}]);
            out.push(sse_data(&chunk));
        }
    }

    /// A chunk the proxy writes itself, shaped like the round's own chunks.
    fn chunk_template(&self) -> Value {
        let mut chunk = self
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
        for data in std::mem::take(&mut self.round.deferred) {
            if let Ok(v) = serde_json::from_str::<Value>(&data) {
                if let Some(delta) = v.pointer("/choices/0/delta").and_then(Value::as_object) {
                    self.round.on_delta_fields(delta);
                }
            }
        }
        self.round.deferred_bytes = 0;
    }
}

impl super::RoundJudge for StreamJudge {
    fn on_event(&mut self, ev: SseEvent, out: &mut Vec<Bytes>) {
        StreamJudge::on_event(self, ev, out);
    }
    fn end_round(&mut self, out: &mut Vec<Bytes>) -> RoundEnd {
        StreamJudge::end_round(self, out)
    }
    fn start_repair_round(&mut self) {
        StreamJudge::start_repair_round(self);
    }
    fn start_program_round(&mut self) {
        StreamJudge::start_program_round(self);
    }
    fn hand_off(&mut self, turn: &Value, out: &mut Vec<Bytes>) {
        StreamJudge::hand_off(self, turn, out);
    }
    fn upstream_failed(&mut self, message: &str, code: &str, out: &mut Vec<Bytes>) {
        StreamJudge::upstream_failed(self, message, code, out);
    }
    fn repairs(&self) -> u32 {
        self.repairs
    }

    fn round_usage(&self) -> Option<&Value> {
        self.round.usage.as_ref()
    }
}

/// Whether a client could read a tool call out of `data`, however it is
/// spelled: the keys by name, or any key through an escape that decodes to
/// ASCII (`"tool\u005fcalls"`). Escapes of other characters (`\u00e9`) are
/// text and keep ordinary chunks on the fast path.
fn may_hold_call(data: &str) -> bool {
    // `_call` is in both `tool_calls` and `function_call`: one scan for both.
    data.contains("_call") || (data.contains('\\') && has_ascii_escape(data))
}

fn has_ascii_escape(data: &str) -> bool {
    let bytes = data.as_bytes();
    let mut at = 0;
    while let Some(found) = data[at..].find("\\u") {
        let i = at + found;
        // `\u00XX` with XX below 0x80; anything unreadable counts too.
        match bytes.get(i + 2..i + 6) {
            Some([b'0', b'0', b'0'..=b'7', _]) => return true,
            Some([a, b, c, d]) if [a, b, c, d].iter().all(|x| x.is_ascii_hexdigit()) => {}
            _ => return true,
        }
        at = i + 2;
    }
    false
}

/// Forwards an event nobody judges (after an upstream error): as it came
/// when no call can be in it, else without its choices, else not at all.
fn forward_inert(data: &str, raw: Bytes, out: &mut Vec<Bytes>) {
    if !may_hold_call(data) {
        out.push(raw);
        return;
    }
    if let Ok(Value::Object(mut chunk)) = serde_json::from_str::<Value>(data) {
        chunk.remove("choices");
        out.push(sse_data(&Value::Object(chunk)));
    }
}

/// Keeps only the first choice of a chunk, as choice 0, without a whole
/// `message` holding calls. `n = 1` is enforced wherever a call can be
/// denied, so any other choice is nothing a client asked for; forwarded, it
/// would be a call nobody judged. True when the chunk changed.
fn only_first_choice(chunk: &mut Value) -> bool {
    let Some(obj) = chunk.as_object_mut() else {
        return false;
    };
    let choices = match obj.get_mut("choices") {
        None | Some(Value::Null) => return false,
        Some(Value::Array(choices)) => choices,
        Some(_) => {
            obj.remove("choices");
            return true;
        }
    };
    let mut changed = choices.len() > 1;
    choices.truncate(1);
    match choices.first_mut() {
        Some(Value::Object(choice)) => {
            if choice.get("index").is_some_and(|i| i != &json!(0)) {
                choice.insert("index".into(), json!(0));
                changed = true;
            }
            // A whole `message` in a chunk is no delta the judge follows; a
            // client that reads one must not find calls in it.
            let holds_calls = choice
                .get("message")
                .is_some_and(|m| m.get("tool_calls").is_some() || m.get("function_call").is_some());
            if holds_calls {
                choice.remove("message");
                changed = true;
            }
        }
        Some(_) => {
            choices.clear();
            changed = true;
        }
        None => {}
    }
    changed
}

/// The fields of a chunk the fast path reads, borrowed from its text.
#[derive(serde::Deserialize)]
struct ChunkView<'a> {
    #[serde(borrow)]
    error: Option<&'a RawValue>,
    #[serde(borrow)]
    usage: Option<&'a RawValue>,
    #[serde(borrow, default)]
    choices: Vec<ChoiceView<'a>>,
}

#[derive(serde::Deserialize)]
struct ChoiceView<'a> {
    #[serde(borrow)]
    index: Option<&'a RawValue>,
    #[serde(borrow)]
    message: Option<&'a RawValue>,
    #[serde(borrow)]
    finish_reason: Option<&'a RawValue>,
    #[serde(borrow)]
    delta: Option<DeltaHead<'a>>,
}

#[derive(serde::Deserialize)]
struct DeltaHead<'a> {
    #[serde(borrow)]
    content: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Vec<DeltaView<'a>>,
    #[serde(borrow)]
    function_call: Option<&'a RawValue>,
}

fn template_of(chunk: &Value) -> Value {
    let mut t = json!({});
    for key in ["id", "object", "created", "model", "system_fingerprint"] {
        if let Some(v) = chunk.get(key) {
            t[key] = v.clone();
        }
    }
    t
}

/// One `data:` event holding `value`.
pub fn sse_data(value: &Value) -> Bytes {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(b"data: ");
    // Serialising a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, value);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// The final event of a stream that failed after it started.
pub fn error_event(message: &str, code: &str) -> Bytes {
    sse_data(
        &json!({"error": {"message": message, "type": "upstream_error", "param": null, "code": code}}),
    )
}

#[cfg(test)]
mod tests {
    use super::may_hold_call;

    #[test]
    fn only_ascii_escapes_and_call_keys_leave_the_fast_path() {
        assert!(may_hold_call(r#"{"tool_calls":[]}"#));
        assert!(may_hold_call(r#"{"function_call":{}}"#));
        assert!(may_hold_call(r#"{"tool\u005fcalls":[]}"#));
        assert!(may_hold_call(r#"{"\u0074ool_calls":[]}"#));
        assert!(may_hold_call(r#"{"a":"\u00"}"#));
        assert!(!may_hold_call(r#"{"content":"caf\u00e9 \u4e2d \n \""}"#));
        assert!(!may_hold_call(
            r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":null}]}"#
        ));
    }
}
