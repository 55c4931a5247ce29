//! The turn core: what one model turn comes to, and what each decision
//! does, written once for every dialect and for both response paths.
//!
//! A dialect ([`Dialect`]) reads its answers and stream events into a list
//! of [`JudgedCall`]s (each name judged by [`crate::classify`]); [`decide`]
//! says what follows; [`effect`] writes each decision's effect (a repair's
//! history, a program handed to the runtime, a mixed turn's splice) in the
//! dialect's shapes; [`Rounds`] keeps the bounds and the usage across
//! rounds, and [`StreamTurn`] what every stream judge keeps of them and of
//! the current round (its decision, usage, text, whether its end is
//! hidden). The JSON driver and the stream body above run every dialect
//! through these, so no decision has a second copy.
//!
//! | calls of the turn | decision |
//! |---|---|
//! | none, or none withheld, or the upstream reported an error | [`Decision::Final`] |
//! | some reach the client, some are withheld | [`Decision::Splice`] |
//! | exactly one `run_code` the proxy runs, the rest denied | [`Decision::Program`] |
//! | nothing reaches the client otherwise | [`Decision::Repair`] |
//! | a repair or a program past its bound | [`Decision::GiveUp`] |
//!
//! A turn that mixes `run_code` (run by the embedded runtime) with calls
//! that reach the client is a splice: the client's calls go out as they
//! arrive (a stream cannot take back a call it already forwarded), and the
//! program is not run but answered `ONE_PROGRAM_SKIPPED` in the history
//! the client sends back, as any withheld call of a mixed turn.

mod dialect;
mod edit;
pub mod effect;
mod quiet;
mod request;
mod rounds;
pub mod shape;
mod stream;

use bytes::Bytes;
use serde_json::Value;

use crate::classify::{classify, Denial, Verdict, Visibility};
use crate::mode::RUN_CODE;
use crate::plan::ToolPlan;
use crate::sse::SseEvent;

pub use crate::verdict::{Decision, Fate, JudgedCall, Shape};
pub use dialect::{Dialect, ModelTurn};
pub use edit::{Edit, Edits, Step};
pub use effect::{held_program, repair_history, splice, HeldProgram, RoundEnd};
pub use quiet::Quiet;
pub(crate) use quiet::{probe, Field, Nothing, Obj};
pub use request::{lent_history, WireRequest};
pub use rounds::Rounds;
pub use shape::Unreadable;
pub use stream::StreamTurn;

/// Judges a call by every name a client could read off it (`function.name`,
/// `custom.name`): the first denied one decides, so no reading of the call
/// reaches a tool the rule denies. `None` when no name arrived yet.
pub fn judge_names<'a>(names: &[&'a str], plan: &ToolPlan) -> Option<(&'a str, Verdict)> {
    let mut first = None;
    for &name in names {
        let visibility = plan.visibility(name);
        let verdict = match classify(name, visibility, plan.mode) {
            // The client's own code mode: only what it announced is called.
            _ if plan.client_code.is_some() && visibility == Visibility::Undeclared => {
                Verdict::Unknown
            }
            v => v,
        };
        if verdict.is_denied() {
            return Some((name, verdict));
        }
        first.get_or_insert((name, verdict));
    }
    first
}

/// The fate of a call `judge_names` judged, once its arguments are complete.
pub fn fate(verdict: Verdict, name: &str, arguments: &str, plan: &ToolPlan) -> Fate {
    let denial = if plan.is_freeform(name) {
        Denial::for_freeform_call(verdict, name, arguments)
    } else {
        Denial::for_call(verdict, name, arguments)
    };
    match denial {
        Some(denial) => Fate::Denied(denial),
        None if plan.runs_code && name == RUN_CODE => Fate::Program,
        None => Fate::Passed,
    }
}

/// Whether the model may be pointed at tool `name` under this plan (a
/// forced `tool_choice`, an allowed list): only at what the wire announces
/// and the rule lets through.
pub fn callable(plan: &ToolPlan, name: &str) -> bool {
    plan.on_wire(name)
        && (name == RUN_CODE || (plan.mode != crate::mode::Mode::Code && plan.preset_shows(name)))
}

/// A withheld call judged again on more of it: the new judgment, except
/// that a call withheld by its name never comes to pass by a later one.
pub fn refine(old: Option<JudgedCall>, new: JudgedCall) -> JudgedCall {
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

/// What the end of a streamed entry (a block, an item, a step) comes to,
/// the whole entry judged again: a client acts on the whole.
#[derive(Debug, PartialEq)]
pub enum AtEnd<C> {
    /// Its end goes out, under the index the client knows it by.
    Send(C),
    /// Its start went out as something the rule lets through; the whole
    /// is not: it never ends for the client.
    CutOff(C),
    /// The client never had it.
    Hidden,
}

/// Settles a streamed entry at its end: `client` is the index its start
/// went out under (`None`: withheld), `call` its judgment so far, `whole`
/// the judgment of the whole entry, `entry` what the dialect calls one.
pub fn settle_end<C: Copy>(
    client: &mut Option<C>,
    call: &mut Option<JudgedCall>,
    whole: Option<JudgedCall>,
    entry: &str,
) -> AtEnd<C> {
    match (*client, whole) {
        (Some(c), Some(judged)) if !judged.passed() => {
            tracing::warn!(target: "codemode::denial", entry, "a streamed {entry} turned into a withheld call at its end and was cut off");
            *client = None;
            *call = Some(judged);
            AtEnd::CutOff(c)
        }
        (Some(c), judged) => {
            *call = judged;
            AtEnd::Send(c)
        }
        (None, Some(judged)) => {
            *call = Some(refine(call.take(), judged));
            AtEnd::Hidden
        }
        (None, None) => AtEnd::Hidden,
    }
}

/// The turn in numbers: all [`decide`] reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Calls that reach the client.
    pub passed: usize,
    /// Calls denied by the rule.
    pub denied: usize,
    /// `run_code` calls the embedded runtime would run.
    pub programs: usize,
    /// The upstream reported an error in this turn.
    pub errored: bool,
}

impl Summary {
    /// Counts `calls`.
    pub fn of(calls: &[JudgedCall], errored: bool) -> Summary {
        let mut s = Summary {
            errored,
            ..Summary::default()
        };
        for c in calls {
            match &c.fate {
                Fate::Passed => s.passed += 1,
                Fate::Denied(_) => s.denied += 1,
                Fate::Program => s.programs += 1,
            }
        }
        s
    }
}

/// How far one request has gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Repair rounds already run.
    pub repairs: u32,
    /// `CODEMODE_MAX_REPAIRS`.
    pub max_repairs: u32,
    /// Programs already run to their end.
    pub programs: u32,
    /// Programs one request may run.
    pub max_programs: u32,
}

/// The one turn-level decision.
pub fn decide(turn: Summary, bounds: Bounds) -> Decision {
    let total = turn.passed + turn.denied + turn.programs;
    if turn.errored || total == turn.passed {
        return Decision::Final;
    }
    if turn.passed > 0 {
        return Decision::Splice;
    }
    if turn.programs == 1 {
        return if bounds.programs < bounds.max_programs {
            Decision::Program
        } else {
            Decision::GiveUp
        };
    }
    // Every call denied, or several programs (each refused with ONE_PROGRAM).
    if bounds.repairs < bounds.max_repairs {
        Decision::Repair
    } else {
        Decision::GiveUp
    }
}

/// The note a client reads when the proxy gave up on the turn.
pub fn give_up_note(calls: &[JudgedCall]) -> String {
    if calls.iter().any(|c| c.fate == Fate::Program) {
        return "[codemode-proxy] The model ran more programs in one request than the proxy \
                allows, or kept combining run_code with other calls, so it stopped here. Ask \
                again to continue."
            .to_owned();
    }
    let names: Vec<&str> = calls
        .iter()
        .filter(|c| !c.passed())
        .map(|c| c.name.as_str())
        .collect();
    give_up_text(&names)
}

/// The text a client sees when the model kept calling tools it cannot call.
pub fn give_up_text(names: &[&str]) -> String {
    format!(
        "[codemode-proxy] The model kept calling tools that cannot be called directly in this \
         mode ({}) and the repair limit (CODEMODE_MAX_REPAIRS) was reached, so no tool was run. \
         Ask again, or rephrase the task.",
        names.join(", ")
    )
}

/// A fresh tool-call id in OpenAI's shape (`call_` and 24 letters and
/// digits) for a call that came without one: random from the OS, the one
/// source of minted ids.
pub fn mint_call_id() -> String {
    crate::runtime::random_call_id()
}

/// A fresh item id in OpenAI's Responses shape: `prefix` and 50 hex digits
/// from the OS random source.
pub fn hex_item_id(prefix: &str) -> String {
    let mut random = [0u8; 25];
    crate::tenant::os_random(&mut random);
    format!("{prefix}{}", crate::tenant::hex(&random))
}

/// A dialect's judge of one client stream across its upstream rounds:
/// events in, the bytes the client sees out. Pure and synchronous, so it
/// can be driven over fixtures cut at every offset; the stream body
/// (`crate::layer::drivers::stream_body::InterceptBody`) feeds it, with backpressure and
/// cancellation, and starts the rounds it asks for.
pub trait RoundJudge: Send + Unpin + 'static {
    /// Judges one event, appending what the client gets to `out`. An
    /// event holding a shape the judge cannot read where a call could
    /// stand is [`Unreadable`]: the stream body ends the client stream
    /// there with the dialect's error event, and nothing of the event
    /// goes out.
    fn on_event(&mut self, ev: SseEvent, out: &mut Vec<Bytes>) -> Result<(), Unreadable>;
    /// The end of an upstream round's body: what comes next.
    fn end_round(&mut self, out: &mut Vec<Bytes>) -> RoundEnd;
    /// A repair round's upstream stream begins.
    fn start_repair_round(&mut self);
    /// The round after a program that ended begins.
    fn start_program_round(&mut self);
    /// A program waits on the client: `turn` (the dialect's answer
    /// holding the program's calls) ends the client stream.
    fn hand_off(&mut self, turn: &Value, out: &mut Vec<Bytes>);
    /// The upstream broke off or failed: the client gets a final error.
    fn upstream_failed(&mut self, message: &str, code: &str, out: &mut Vec<Bytes>);
    /// Repair rounds started so far.
    fn repairs(&self) -> u32;
    /// The provider's usage for the round so far (for its trace span).
    fn round_usage(&self) -> Option<&Value> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(repairs: u32, programs: u32) -> Bounds {
        Bounds {
            repairs,
            max_repairs: 2,
            programs,
            max_programs: 8,
        }
    }

    fn sum(passed: usize, denied: usize, programs: usize) -> Summary {
        Summary {
            passed,
            denied,
            programs,
            errored: false,
        }
    }

    #[test]
    fn every_row_of_the_table() {
        use Decision::*;
        let b = bounds(0, 0);
        assert_eq!(decide(sum(0, 0, 0), b), Final);
        assert_eq!(decide(sum(2, 0, 0), b), Final);
        assert_eq!(decide(sum(1, 1, 0), b), Splice);
        assert_eq!(decide(sum(1, 0, 1), b), Splice);
        assert_eq!(decide(sum(0, 2, 1), b), Program);
        assert_eq!(decide(sum(0, 0, 1), bounds(0, 8)), GiveUp);
        assert_eq!(decide(sum(0, 1, 0), b), Repair);
        assert_eq!(decide(sum(0, 0, 2), b), Repair);
        assert_eq!(decide(sum(0, 1, 0), bounds(2, 0)), GiveUp);
        let errored = Summary {
            errored: true,
            ..sum(0, 1, 0)
        };
        assert_eq!(decide(errored, b), Final);
    }
}
