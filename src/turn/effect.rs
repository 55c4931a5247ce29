//! What each decision does, written once for every dialect and for both
//! paths (a whole answer and a stream): the repair round's history, a
//! program's hand-off to the runtime, a mixed turn's splice.

use serde_json::Value;

use super::dialect::{Dialect, ModelTurn};
use super::{Decision, Fate, JudgedCall, Shape};
use crate::classify::{ONE_PROGRAM, ONE_PROGRAM_SKIPPED};
use crate::splice::Splice;

/// The model's `run_code` call that the proxy runs between rounds.
#[derive(Debug)]
pub struct HeldProgram {
    /// The model's call id.
    pub id: String,
    /// Its arguments (`{"code": "..."}`), as the model wrote them.
    pub arguments: String,
    /// The text the model wrote in the same turn.
    pub content: Option<String>,
    /// The model's whole turn as its dialect replays it, provider fields
    /// included (a Responses turn is the array of its output items).
    pub turn: Option<Value>,
    /// The provider's id of the response that held the call (Responses).
    pub response_id: Option<String>,
    /// Calls denied in the same turn, for the model's history.
    pub denied_calls: Vec<Value>,
    /// Their denials.
    pub denials: Vec<Value>,
}

impl HeldProgram {
    /// The turn as the program's record keeps it, when a history can
    /// replay it ([`Dialect::replayable`]).
    pub fn model_turn<D: Dialect>(&self) -> Option<String> {
        D::replayable(self.turn.as_ref()?, &self.id, &self.denied_calls)
    }
}

/// What happens when an upstream round ends.
#[derive(Debug)]
pub enum RoundEnd {
    /// Run this program, then continue the stream or hand its calls to the client.
    Program(HeldProgram),
    /// Ask upstream again with these messages (or items) appended to the conversation.
    Repair {
        /// The model's turn, then one denial per call.
        messages: Vec<Value>,
    },
    /// The client's answer is complete.
    Done {
        /// A mixed turn's denials, keyed by the ids of the calls the client got.
        splice: Option<(Vec<String>, Splice)>,
    },
}

/// What a decided turn comes to: the one place each decision's effect is
/// written. A give-up or a final turn is done (the note was written where
/// the dialect writes text).
pub fn round_end<D: Dialect>(decision: Decision, turn: ModelTurn) -> RoundEnd {
    match decision {
        Decision::Repair => RoundEnd::Repair {
            messages: repair_history::<D>(&turn),
        },
        Decision::Program => RoundEnd::Program(held_program::<D>(turn)),
        Decision::Splice => RoundEnd::Done {
            splice: splice::<D>(&turn.calls),
        },
        Decision::Final | Decision::GiveUp => RoundEnd::Done { splice: None },
    }
}

/// The text a withheld call is answered with; `None` for a call the client gets.
pub fn withheld_content(call: &JudgedCall, splice: bool) -> Option<&str> {
    match &call.fate {
        Fate::Passed => None,
        Fate::Denied(d) => Some(d.content.as_str()),
        Fate::Program if splice => Some(ONE_PROGRAM_SKIPPED),
        Fate::Program => Some(ONE_PROGRAM),
    }
}

/// A repair round's history: the model's turn as it came, then one answer
/// per withheld call in the order the model made them.
pub fn repair_history<D: Dialect>(turn: &ModelTurn) -> Vec<Value> {
    let answers = turn
        .calls
        .iter()
        .filter_map(|c| withheld_content(c, false).map(|t| D::answer_call(c, t, true)))
        .collect();
    D::repair_history(&turn.replay, answers)
}

/// The denied calls of a program's turn and their answers, for its history.
pub fn program_denials<D: Dialect>(calls: &[JudgedCall]) -> (Vec<Value>, Vec<Value>) {
    let denied = calls.iter().filter(|c| matches!(c.fate, Fate::Denied(_)));
    (
        denied.clone().map(D::raw_call).collect(),
        denied
            .filter_map(|c| withheld_content(c, false).map(|t| D::answer_call(c, t, false)))
            .collect(),
    )
}

/// The turn's one program, handed to the runtime with what its history
/// needs. `decide` chose a program for a turn with exactly one.
pub fn held_program<D: Dialect>(turn: ModelTurn) -> HeldProgram {
    let program = turn.calls.iter().find(|c| c.fate == Fate::Program);
    let (denied_calls, denials) = program_denials::<D>(&turn.calls);
    HeldProgram {
        id: program.map(|c| c.id.clone()).unwrap_or_default(),
        arguments: program.map(|c| c.arguments.clone()).unwrap_or_default(),
        content: turn.text.filter(|t| !t.is_empty()),
        turn: Some(turn.replay),
        response_id: turn.response_id,
        denied_calls,
        denials,
    }
}

/// A mixed turn's withheld calls and their answers, keyed by the ids of the
/// calls the client got. `None` when nothing is withheld, or no call the
/// client got has an id its next request could name (a legacy call alone).
pub fn splice<D: Dialect>(calls: &[JudgedCall]) -> Option<(Vec<String>, Splice)> {
    let keys: Vec<String> = calls
        .iter()
        .filter(|c| c.passed() && c.shape != Shape::Legacy && !c.id.is_empty())
        .map(|c| c.id.clone())
        .collect();
    let withheld: Vec<&JudgedCall> = calls.iter().filter(|c| !c.passed()).collect();
    if keys.is_empty() || withheld.is_empty() {
        if !withheld.is_empty() {
            tracing::info!(target: "codemode::denial", "a mixed turn's denials cannot be spliced: the client's calls carry no id");
        }
        return None;
    }
    Some((
        keys,
        Splice {
            denied_calls: withheld.iter().map(|c| D::raw_call(c)).collect(),
            denials: withheld
                .iter()
                .filter_map(|c| withheld_content(c, true).map(|t| D::answer_call(c, t, false)))
                .collect(),
        },
    ))
}
