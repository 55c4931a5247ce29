//! The Gemini stream judge: `:streamGenerateContent?alt=sse` chunks in,
//! the bytes the client sees out.
//!
//! Each `data:` chunk is a whole `GenerateContentResponse` holding the
//! next parts of the turn; the Gemini API sends a `functionCall` whole, in
//! one chunk, so a call is judged at the first chunk that holds it. Text,
//! thoughts and passed calls go out as they arrive (a chunk the proxy did
//! not change goes out as the provider's bytes); a withheld call never
//! does. The stream has no end event: the chunk with a `finishReason`, and
//! any after it (a last chunk of usage alone), are held until the body
//! ends, when [`crate::turn::decide`] says whether the client sees them
//! (with the usage of every round), or a repair or a program follows in
//! the same client stream.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::answer::{candidate_parts, judge_parts, note_candidate, parts_mut, parts_of};
use super::parts::{is_call_part, text_of, CallIds};
use super::Gemini;
use crate::plan::ToolPlan;
use crate::sse::{data_event, SseEvent};
use crate::turn::{
    self, Decision, JudgedCall, ModelTurn, RoundEnd, RoundJudge, StreamTurn, Unreadable,
};
use crate::wire::parse_noting_repeats;

/// What one upstream round holds so far.
#[derive(Default)]
struct Round {
    /// The turn's parts as they came (no id given), withheld calls included.
    parts: Vec<Value>,
    /// Its calls, judged.
    calls: Vec<JudgedCall>,
    /// The chunk with a `finishReason` and those after it, held until the
    /// round's end.
    held: Vec<Map<String, Value>>,
    /// The last chunk's fields beside `candidates` (`modelVersion`,
    /// `responseId`), for chunks the proxy writes.
    base: Map<String, Value>,
}

/// Judges one client stream of the Gemini API across its rounds.
pub struct GeminiJudge {
    plan: Arc<ToolPlan>,
    turn: StreamTurn<Round>,
    /// Ids for the stream's calls that come without one.
    ids: CallIds,
    /// The client saw text before a program that ended: the next round's
    /// first words start a new paragraph, so the two do not run together.
    text_before_program: bool,
}

impl GeminiJudge {
    /// A judge for a stream under `plan`, repairing at most `max_repairs` times.
    pub fn new(plan: Arc<ToolPlan>, max_repairs: u32) -> GeminiJudge {
        GeminiJudge::with_ids(plan, max_repairs, CallIds::new())
    }

    /// A judge giving id-less calls ids from `ids`.
    pub fn with_ids(plan: Arc<ToolPlan>, max_repairs: u32, ids: CallIds) -> GeminiJudge {
        GeminiJudge {
            plan,
            turn: StreamTurn::new(max_repairs),
            ids,
            text_before_program: false,
        }
    }

    /// Whether the upstream reported an error in-band (no repair follows one).
    #[cfg(test)]
    pub fn errored(&self) -> bool {
        self.turn.errored
    }

    fn on_chunk(&mut self, ev: SseEvent, out: &mut Vec<Bytes>) -> Result<(), Unreadable> {
        let Some(data) = ev.data.as_deref() else {
            // Comments carry nothing to judge: they keep the connection
            // alive while the round is open.
            if self.turn.decision.is_none() {
                out.push(ev.raw);
            }
            return Ok(());
        };
        if self.turn.decision.is_some() {
            return Ok(());
        }
        // A chunk repeating a key is read differently by other clients: it
        // goes out written from the reading judged, never as it came.
        let parsed = parse_noting_repeats(data.as_bytes());
        let repeated = parsed.as_ref().is_ok_and(|(_, repeated)| *repeated);
        let chunk = Unreadable::event_object(parsed.map(|(chunk, _)| chunk))?;
        // Where a call could stand, the chunk is read whole before any of
        // it goes out: a shape the judge cannot read ends the stream.
        candidate_parts(&chunk)?;
        // The judge reads the chunk and writes only through `to_mut`, which
        // takes a copy: the provider's bytes go out only while nothing
        // took one.
        let mut judged = Cow::Borrowed(&chunk);
        if chunk.contains_key("error") {
            // The provider ended the turn with an error: it reaches the
            // client and no repair follows; calls beside it are judged
            // all the same.
            self.turn.failed();
            self.judge_chunk(&mut judged);
            out.push(match judged {
                Cow::Borrowed(_) if !repeated => ev.raw,
                judged => data_event(&Value::Object(judged.into_owned())),
            });
            return Ok(());
        }
        if let Some(usage) = chunk.get("usageMetadata").filter(|u| u.is_object()) {
            // Running totals: the last chunk's are the round's.
            self.turn.usage = Some(usage.clone());
        }
        let finished = self.judge_chunk(&mut judged);
        let (chunk, changed) = match judged {
            Cow::Owned(edited) => (edited, true),
            Cow::Borrowed(_) => (chunk, false),
        };
        self.turn.round.base = chunk
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "candidates" | "usageMetadata"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if finished || !self.turn.round.held.is_empty() {
            self.turn.round.held.push(chunk);
            return Ok(());
        }
        if !changed {
            out.push(if repeated {
                data_event(&Value::Object(chunk))
            } else {
                ev.raw
            });
        } else if has_content(&chunk) {
            out.push(data_event(&Value::Object(chunk)));
        }
        Ok(())
    }

    /// Judges the chunk's calls, withholding those that do not pass, and
    /// says whether it ends the turn. Every change goes through
    /// `chunk.to_mut()`.
    fn judge_chunk(&mut self, chunk: &mut Cow<'_, Map<String, Value>>) -> bool {
        let count = match chunk.get("candidates") {
            Some(Value::Array(candidates)) => candidates.len(),
            _ => return false,
        };
        let mut finished = false;
        for n in 0..count {
            let candidate = &chunk["candidates"][n];
            finished |= candidate.get("finishReason").is_some_and(|f| !f.is_null());
            let first = candidate
                .get("index")
                .and_then(Value::as_u64)
                .is_none_or(|i| i == 0);
            if parts_of(candidate).is_none() {
                continue;
            }
            if first && self.text_before_program && !self.turn.emitted_text {
                self.open_paragraph(chunk, n);
            }
            let Some(parts) = parts_of(&chunk["candidates"][n]) else {
                continue;
            };
            if !parts.iter().any(is_call_part) {
                if first {
                    self.turn.emitted_text |= !text_of(parts).is_empty();
                    self.turn.round.parts.extend(parts.iter().cloned());
                }
                continue;
            }
            let judged = judge_parts(parts, &self.plan, &mut self.ids);
            let shown = judged.shown();
            if first {
                self.turn.emitted_text |= !text_of(&shown).is_empty();
            }
            // Each call gets an id, and withheld ones go.
            if !judged.minted.is_empty() || judged.keep.iter().any(|k| !k) {
                if let Some(parts) = parts_mut(&mut chunk.to_mut()["candidates"][n]) {
                    *parts = shown;
                }
            }
            if first {
                self.turn.round.parts.extend(judged.sent);
                self.turn.round.calls.extend(judged.calls);
            } else if judged.calls.iter().any(|c| !c.passed()) {
                tracing::warn!(target: "codemode::denial", "a call of a second candidate was withheld");
            }
        }
        finished
    }

    /// Puts a paragraph break before the first words of candidate `n`,
    /// if it has any.
    fn open_paragraph(&mut self, chunk: &mut Cow<'_, Map<String, Value>>, n: usize) {
        let is_words = |p: &Value| {
            p.get("thought").and_then(Value::as_bool) != Some(true)
                && p.get("text")
                    .and_then(Value::as_str)
                    .is_some_and(|t| !t.is_empty())
        };
        let Some(at) = parts_of(&chunk["candidates"][n]).and_then(|p| p.iter().position(is_words))
        else {
            return;
        };
        let Some(Value::String(text)) = parts_mut(&mut chunk.to_mut()["candidates"][n])
            .and_then(|p| p.get_mut(at))
            .and_then(|p| p.get_mut("text"))
        else {
            return;
        };
        text.insert_str(0, "\n\n");
        self.text_before_program = false;
    }

    /// The held end of a round that the client does not see end: what
    /// the model wrote in it goes out, its finish and usage do not.
    fn release_hidden(&mut self, out: &mut Vec<Bytes>) {
        for mut chunk in std::mem::take(&mut self.turn.round.held) {
            chunk.remove("usageMetadata");
            if let Some(Value::Array(candidates)) = chunk.get_mut("candidates") {
                for c in candidates.iter_mut().filter_map(Value::as_object_mut) {
                    c.remove("finishReason");
                    c.remove("finishMessage");
                }
            }
            if has_content(&chunk) {
                out.push(data_event(&Value::Object(chunk)));
            }
        }
    }

    /// The held end of a round the client sees end: the give-up note in
    /// its first chunk when due, the usage of every round on its last.
    fn release_visible(&mut self, out: &mut Vec<Bytes>) {
        let mut held = std::mem::take(&mut self.turn.round.held);
        let give_up = self.turn.decision == Some(Decision::GiveUp);
        if held.is_empty() {
            if !give_up {
                // The provider gave no end; the proxy writes none.
                return;
            }
            let mut chunk = self.turn.round.base.clone();
            chunk.insert("candidates".into(), json!([]));
            held.push(chunk);
        }
        if give_up {
            let note = self
                .turn
                .wants_note()
                .then(|| turn::give_up_note(&self.turn.round.calls));
            let first = &mut held[0];
            let candidates = first.entry("candidates").or_insert_with(|| json!([]));
            if let Value::Array(candidates) = candidates {
                if candidates.is_empty() {
                    candidates.push(note_candidate(note.as_deref().unwrap_or("")));
                } else {
                    if let Some(note) = &note {
                        if let Some(parts) = parts_mut(&mut candidates[0]) {
                            parts.push(json!({"text": note}));
                        } else if let Some(c) = candidates[0].as_object_mut() {
                            c.insert(
                                "content".into(),
                                json!({"role": "model", "parts": [{"text": note}]}),
                            );
                        }
                    }
                    if let Some(c) = candidates[0].as_object_mut() {
                        c.insert("finishReason".into(), json!("STOP"));
                    }
                }
            }
            self.turn.emitted_text = true;
        }
        let last = held.len() - 1;
        if self.turn.rounds.usage.is_some() || !held[last].contains_key("usageMetadata") {
            if let Some(total) = self.turn.visible_usage() {
                held[last].insert("usageMetadata".into(), total);
            }
        }
        for chunk in held {
            out.push(data_event(&Value::Object(chunk)));
        }
    }
}

/// Whether a chunk still says something: a part, a finish, feedback on the
/// prompt.
fn has_content(chunk: &Map<String, Value>) -> bool {
    let candidates = chunk.get("candidates").and_then(Value::as_array);
    let said = candidates.into_iter().flatten().any(|c| {
        c.get("finishReason").is_some_and(|f| !f.is_null())
            || c.get("content")
                .and_then(|c| c.get("parts"))
                .and_then(Value::as_array)
                .is_some_and(|p| !p.is_empty())
    });
    said || chunk.contains_key("promptFeedback")
}

impl RoundJudge for GeminiJudge {
    fn on_event(&mut self, ev: SseEvent, out: &mut Vec<Bytes>) -> Result<(), Unreadable> {
        self.on_chunk(ev, out)
    }

    fn end_round(&mut self, out: &mut Vec<Bytes>) -> RoundEnd {
        if self.turn.decision.is_none() {
            let calls = self.turn.round.calls.clone();
            self.turn.decide(&calls);
        }
        if self.turn.hides_end() {
            self.release_hidden(out);
        } else if !self.turn.errored {
            self.release_visible(out);
        }
        let round = &self.turn.round;
        let text = text_of(&round.parts);
        let turn = ModelTurn {
            calls: round.calls.clone(),
            replay: json!({"role": "model", "parts": merged(&round.parts)}),
            text: (!text.is_empty()).then_some(text),
            response_id: None,
        };
        self.turn.end::<Gemini>(turn)
    }

    fn start_repair_round(&mut self) {
        self.turn.start_repair_round();
    }

    fn start_program_round(&mut self) {
        self.text_before_program |= self.turn.emitted_text;
        self.turn.start_program_round();
    }

    /// `turn` is a whole answer holding the program's calls: it goes out
    /// as one chunk, with the usage of the rounds that led to it.
    fn hand_off(&mut self, turn: &Value, out: &mut Vec<Bytes>) {
        let mut chunk = turn.clone();
        if let (Some(usage), Some(c)) = (self.turn.rounds.usage.clone(), chunk.as_object_mut()) {
            c.insert("usageMetadata".into(), usage);
        }
        self.turn.decision = Some(Decision::Final);
        out.push(data_event(&chunk));
    }

    /// The client gets a final error chunk in Google's shape.
    fn upstream_failed(&mut self, message: &str, code: &str, out: &mut Vec<Bytes>) {
        self.turn.failed();
        out.push(data_event(&super::provider::stream_error_event(
            message, code,
        )));
    }

    fn repairs(&self) -> u32 {
        self.turn.rounds.repairs
    }

    fn round_usage(&self) -> Option<&Value> {
        self.turn.usage.as_ref()
    }
}

/// A streamed turn's parts as one content: consecutive plain text parts
/// (no signature, no thought) joined, as a whole answer would hold them.
fn merged(parts: &[Value]) -> Vec<Value> {
    let plain = |p: &Value| {
        p.as_object()
            .is_some_and(|o| o.len() == 1 && o.get("text").is_some_and(Value::is_string))
    };
    let mut out: Vec<Value> = Vec::with_capacity(parts.len());
    for part in parts {
        match out.last_mut() {
            Some(last) if plain(last) && plain(part) => {
                let joined = format!(
                    "{}{}",
                    last["text"].as_str().unwrap_or(""),
                    part["text"].as_str().unwrap_or("")
                );
                last["text"] = Value::String(joined);
            }
            _ => out.push(part.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests;
