//! The Interactions stream judge: `step.*` events in, the bytes the client
//! sees out.
//!
//! Pure and synchronous, like every dialect's judge, and driven by
//! `crate::layer::drivers::stream_body::InterceptBody`. A step is decided
//! at its `step.start` (a call by [`steps::judge_step`] on its name) and
//! judged again, whole, at its `step.stop`, its arguments joined from the
//! `arguments_delta` pieces. Words, thoughts and passed calls go out as
//! they arrive; a withheld step's events never do. At the round's
//! `interaction.completed` (or the end of the body) [`crate::turn::decide`]
//! says what follows: the client's end, a repair or a program inside the
//! same client stream.
//!
//! Across rounds the client sees one interaction: the first round's
//! `interaction.created`, step indexes contiguous from 0, and one
//! `interaction.completed` whose usage is the sum of every round. Its id
//! is the last round's: that interaction is the one the provider stored
//! with every step the client saw, so a client continuing with
//! `previous_interaction_id` continues from there (docs/agents.md, "The
//! Interactions API").

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::events::{self, frame};
use super::steps::{self, step_type, FUNCTION_CALL};
use super::Interactions;
use crate::plan::ToolPlan;
use crate::sse::SseEvent;
use crate::turn::shape;
use crate::turn::{
    self, refine, settle_end, AtEnd, Decision, JudgedCall, ModelTurn, RoundEnd, RoundJudge, Step,
    StreamTurn, Unreadable,
};

mod ending;

/// Delta types that carry no call: words, thoughts, a call's arguments,
/// media, and the provider's own tools' steps.
const SAFE_DELTAS: &[&str] = &[
    "text",
    "text_annotation_delta",
    "thought_signature",
    "thought_summary",
    "arguments_delta",
    "image",
    "audio",
    "document",
    "video",
];

/// One step of an upstream round.
struct RoundStep {
    /// Its `index` upstream.
    index: u64,
    /// The index the client knows it by; `None` when withheld.
    client: Option<usize>,
    /// The step as it came, its deltas joined in.
    step: Value,
    /// A call's arguments as their pieces came.
    arguments: String,
    /// The call it is, judged; `None` for a step that is no call.
    call: Option<JudgedCall>,
    /// Its `step.stop` came.
    done: bool,
}

impl RoundStep {
    /// The step whole: a call's arguments the object the wire carries.
    fn whole(&self) -> Value {
        let mut step = self.step.clone();
        if step_type(&step) == FUNCTION_CALL && !self.arguments.is_empty() {
            let args = serde_json::from_str::<Value>(&self.arguments)
                .unwrap_or_else(|_| Value::String(self.arguments.clone()));
            step["arguments"] = args;
        }
        step
    }
}

#[derive(Default)]
struct Round {
    steps: Vec<RoundStep>,
    /// The provider's id of this round's interaction: a program's record
    /// keeps it, so a client continuing a minted id continues the
    /// provider's conversation from there.
    upstream_id: Option<String>,
    /// The round's `interaction.completed` interaction, without steps.
    completed: Option<Map<String, Value>>,
}

impl Round {
    fn by_index(&self, index: u64) -> Option<usize> {
        self.steps.iter().position(|s| s.index == index)
    }

    fn calls(&self) -> Vec<JudgedCall> {
        self.steps.iter().filter_map(|s| s.call.clone()).collect()
    }

    /// Whether a call of the round reached the client.
    fn passed_a_call(&self) -> bool {
        self.steps
            .iter()
            .any(|s| s.client.is_some() && s.call.as_ref().is_some_and(JudgedCall::passed))
    }

    fn text(&self) -> String {
        self.steps
            .iter()
            .filter_map(|s| steps::output_text(&s.step))
            .collect()
    }
}

/// Reads an event where a call could stand as a judge may
/// (`crate::turn::shape`), before any of it goes out: its `step` a step
/// ([`steps::check_step`]), its `delta` an object, its `interaction` an
/// object whose `steps` is a list of steps; `null` is absent.
fn check_event(event: &Map<String, Value>) -> Result<(), Unreadable> {
    use Step::{Index, Key};
    if let Some(step) = event.get("step").filter(|s| !s.is_null()) {
        steps::check_step(step).map_err(|e| e.under(&[Key("step")]))?;
    }
    if let Some(delta) = shape::object(event.get("delta"), &[Key("delta")])? {
        if let Some(name) = delta.get("name") {
            shape::name(Some(name), &[Key("delta"), Key("name")])?;
        }
    }
    if let Some(interaction) = shape::object(event.get("interaction"), &[Key("interaction")])? {
        let at = [Key("interaction"), Key("steps")];
        for (i, step) in shape::list(interaction.get("steps"), &at)?
            .iter()
            .enumerate()
        {
            steps::check_step(step)
                .map_err(|e| e.under(&[Key("interaction"), Key("steps"), Index(i)]))?;
        }
    }
    Ok(())
}

/// Judges one client stream of the Interactions API across its rounds.
pub struct InteractionsJudge {
    plan: Arc<ToolPlan>,
    turn: StreamTurn<Round>,
    /// The client got an `interaction.created`.
    created: bool,
    /// The first round's interaction, for the end the proxy writes.
    template: Map<String, Value>,
    /// The index the client's next step gets.
    next_index: usize,
    /// A `data: [DONE]` came: it goes out once, at the very end.
    done_sentinel: bool,
    /// The client saw words in a round that ended: the next round's first
    /// words start a new paragraph (a client joins the steps' texts with
    /// nothing between them).
    text_before: bool,
}

impl InteractionsJudge {
    /// A judge for a stream under `plan`, repairing at most `max_repairs` times.
    pub fn new(plan: Arc<ToolPlan>, max_repairs: u32) -> InteractionsJudge {
        InteractionsJudge {
            plan,
            turn: StreamTurn::new(max_repairs),
            created: false,
            template: Map::new(),
            next_index: 0,
            done_sentinel: false,
            text_before: false,
        }
    }

    /// Whether the upstream reported an error in-band (no repair follows one).
    #[cfg(test)]
    pub fn errored(&self) -> bool {
        self.turn.errored
    }

    fn judge_event(&mut self, ev: SseEvent, out: &mut Vec<Bytes>) -> Result<(), Unreadable> {
        let Some(data) = ev.data.as_deref() else {
            // Comments and keep-alives keep the client's connection alive
            // while the round is open.
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
            // The round has ended: nothing after it is judged, so nothing
            // after it goes out.
            return Ok(());
        }
        let mut event = Unreadable::event_object(serde_json::from_str(data))?;
        check_event(&event)?;
        let kind = event
            .get("event_type")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(ev.event)
            .unwrap_or_default();
        if !event.contains_key("event_type") {
            event.insert("event_type".into(), json!(kind));
        }
        if self.turn.errored {
            // After an error nothing more reaches the client but the end.
            return Ok(());
        }
        match kind.as_str() {
            "interaction.created" => self.on_created(event, out),
            "interaction.status_update" => self.on_status(event, out),
            "step.start" => self.on_start(event, out),
            "step.delta" => self.on_delta(event, out),
            "step.stop" => self.on_stop(event, out),
            "interaction.completed" => self.on_completed(event, out),
            "error" => {
                // The upstream ended the turn with an error: it reaches the
                // client and no repair follows.
                self.turn.errored = true;
                self.emit(event, out);
            }
            _ => self.on_other(event, out),
        }
        Ok(())
    }

    /// The interaction's start: the client gets the first round's only,
    /// without steps (each reaches it as its own events, judged).
    fn on_created(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        if let Some(Value::Object(interaction)) = event.get_mut("interaction") {
            interaction.remove("steps");
            interaction.remove("outputs");
            self.take_id(interaction);
            if self.template.is_empty() {
                self.template = interaction.clone();
            }
        }
        if !self.created {
            self.created = true;
            self.emit(event, out);
        }
    }

    fn take_id(&mut self, interaction: &Map<String, Value>) {
        if let Some(id) = interaction
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
        {
            self.turn.round.upstream_id = Some(id.to_owned());
        }
    }

    /// The first round's progress goes out; a status that ends the turn
    /// (`requires_action`, `completed`) is the proxy's to write at the end,
    /// and later rounds' are theirs, not the client's.
    fn on_status(&mut self, event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let status = event.get("status").and_then(Value::as_str);
        if self.turn.rounds.before() == 0 && matches!(status, Some("in_progress" | "queued")) {
            self.emit(event, out);
        }
    }

    fn on_start(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let Some(step) = event.get("step").filter(|s| s.is_object()).cloned() else {
            return;
        };
        let index = event
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(self.turn.round.steps.len() as u64);
        if self.turn.round.by_index(index).is_some() {
            // A second step at one index: no client could tell them apart.
            tracing::warn!(target: "codemode::denial", "an upstream step started twice at one index was dropped");
            return;
        }
        let call = steps::judge_step(&step, &self.plan);
        let client = call.as_ref().is_none_or(JudgedCall::passed).then(|| {
            self.next_index += 1;
            self.next_index - 1
        });
        let arguments = match step.get("arguments") {
            Some(Value::String(s)) => s.clone(),
            _ => String::new(),
        };
        self.turn.round.steps.push(RoundStep {
            index,
            client,
            step,
            arguments,
            call,
            done: false,
        });
        if let Some(client) = client {
            event.insert("index".into(), json!(client));
            self.emit(event, out);
        }
    }

    fn on_delta(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let Some(pos) = event
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| self.turn.round.by_index(i))
        else {
            // A delta of a step that never started goes nowhere.
            return;
        };
        let delta = event.get("delta").cloned().unwrap_or(Value::Null);
        let kind = step_type(&delta).to_owned();
        let slot = &mut self.turn.round.steps[pos];
        match kind.as_str() {
            "arguments_delta" => {
                if let Some(piece) = delta.get("arguments").and_then(Value::as_str) {
                    slot.arguments.push_str(piece);
                }
            }
            "thought_signature" => {
                if let Some(signature) = delta.get("signature") {
                    slot.step["signature"] = signature.clone();
                }
            }
            "text" => {
                let piece = delta.get("text").and_then(Value::as_str).unwrap_or("");
                append_text(&mut slot.step, piece);
            }
            // A delta that is itself a call (or a kind this proxy does not
            // know) is judged as one: it goes out only if it passes.
            _ if !SAFE_DELTAS.contains(&kind.as_str())
                && steps::judge_step(&delta, &self.plan).is_some_and(|c| !c.passed()) =>
            {
                tracing::warn!(target: "codemode::denial", delta = %kind, "a step delta carrying a call was withheld");
                return;
            }
            _ => {}
        }
        let Some(client) = slot.client else {
            return;
        };
        if kind == "text" {
            self.turn.emitted_text = true;
            if std::mem::take(&mut self.text_before) {
                if let Some(Value::Object(d)) = event.get_mut("delta") {
                    let piece = d.get("text").and_then(Value::as_str).unwrap_or("");
                    let spaced = format!("\n\n{piece}");
                    d.insert("text".into(), json!(spaced));
                }
            }
        }
        event.insert("index".into(), json!(client));
        self.emit(event, out);
    }

    fn on_stop(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let Some(pos) = event
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| self.turn.round.by_index(i))
        else {
            return;
        };
        let whole = self.turn.round.steps[pos].whole();
        // The whole step is what a client acts on: judged again.
        let judged = steps::judge_step(&whole, &self.plan);
        let slot = &mut self.turn.round.steps[pos];
        slot.done = true;
        if let AtEnd::Send(client) = settle_end(&mut slot.client, &mut slot.call, judged, "step") {
            event.insert("index".into(), json!(client));
            self.emit(event, out);
        }
    }

    /// An event of a type this proxy does not know: one naming a withheld
    /// step, or carrying a step, a delta or an interaction's step that is
    /// a call the rule withholds, goes nowhere; others go out, a step's index as the client knows it.
    fn on_other(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        let withheld = |v: &Value| steps::judge_step(v, &self.plan).is_some_and(|c| !c.passed());
        // The retired schema's `outputs` and `content` are read as steps.
        let snapshot = ["steps", "outputs"].iter().any(|k| {
            event
                .get("interaction")
                .and_then(|i| i.get(*k))
                .and_then(Value::as_array)
                .is_some_and(|s| s.iter().any(withheld))
        });
        let rides = snapshot
            || ["step", "delta", "content"]
                .iter()
                .any(|k| event.get(*k).is_some_and(withheld));
        if rides {
            tracing::debug!(target: "codemode::denial", "an event carrying a call step was withheld");
            return;
        }
        if let Some(index) = event.get("index").and_then(Value::as_u64) {
            let client = self
                .turn
                .round
                .by_index(index)
                .and_then(|p| self.turn.round.steps[p].client);
            let Some(client) = client else {
                return;
            };
            event.insert("index".into(), json!(client));
        }
        self.emit(event, out);
    }

    fn emit(&mut self, event: Map<String, Value>, out: &mut Vec<Bytes>) {
        out.push(frame(&Value::Object(event)));
    }
}

/// Joins a text piece into a `model_output` step's last text content.
fn append_text(step: &mut Value, piece: &str) {
    let Some(obj) = step.as_object_mut() else {
        return;
    };
    let content = obj.entry("content").or_insert_with(|| json!([]));
    let Some(parts) = content.as_array_mut() else {
        return;
    };
    match parts.last_mut() {
        Some(Value::Object(last)) if last.get("type").and_then(Value::as_str) == Some("text") => {
            // Appended in place: text arrives in many deltas.
            if let Some(Value::String(text)) = last.get_mut("text") {
                text.push_str(piece);
            }
        }
        _ => parts.push(json!({"type": "text", "text": piece})),
    }
}

#[cfg(test)]
mod tests;
