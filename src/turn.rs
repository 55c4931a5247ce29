//! What one model turn comes to, decided once for both response paths.
//!
//! The JSON path ([`crate::intercept`]) and the stream judge
//! ([`crate::stream`]) each read their calls off the wire and judge every
//! name with [`crate::classify`]. Both then describe the turn the same way,
//! as a list of [`JudgedCall`]s, and this module decides what happens next
//! ([`decide`]) and builds what the model is told ([`repair_messages`],
//! [`splice`], [`give_up_note`]), so the two paths cannot drift apart.
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
//! program is not run but answered [`ONE_PROGRAM_SKIPPED`] in the history
//! the client sends back, as any withheld call of a mixed turn.

use serde_json::{json, Value};

use crate::classify::{classify, Denial, Verdict, ONE_PROGRAM, ONE_PROGRAM_SKIPPED};
use crate::mode::RUN_CODE;
use crate::plan::ToolPlan;
use crate::splice::Splice;

/// How a call was written on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Shape {
    /// A `tool_calls` entry of type `function` (`function.name`, `function.arguments`).
    #[default]
    Function,
    /// A `tool_calls` entry of type `custom` (`custom.name`, `custom.input`).
    Custom,
    /// The legacy `function_call` of a message: no id, answered by a
    /// `role: "function"` message that names it.
    Legacy,
}

/// What the judge made of one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    /// It reaches the client.
    Passed,
    /// It is withheld and answered with this denial.
    Denied(Denial),
    /// A `run_code` call the embedded runtime runs: withheld from the client.
    Program,
}

/// One call of a turn, judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JudgedCall {
    /// The id the client got (passed calls) or the model's (never empty).
    pub id: String,
    /// The name it was judged by.
    pub name: String,
    /// Its arguments (a custom call's input) as the model wrote them.
    pub arguments: String,
    /// How it was written.
    pub shape: Shape,
    /// What happens to it.
    pub fate: Fate,
    /// The `tool_calls` entry as the model sent it (a stream's deltas
    /// merged), with every provider field; `None` for a legacy call.
    pub raw: Option<serde_json::Map<String, Value>>,
}

/// Judges a call by every name a client could read off it (`function.name`,
/// `custom.name`): the first denied one decides, so no reading of the call
/// reaches a tool the rule denies. `None` when no name arrived yet.
pub fn judge_names<'a>(names: &[&'a str], plan: &ToolPlan) -> Option<(&'a str, Verdict)> {
    let mut first = None;
    for &name in names {
        let verdict = classify(name, plan.visibility(name), plan.mode);
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

impl JudgedCall {
    /// Whether the client gets this call.
    pub fn passed(&self) -> bool {
        self.fate == Fate::Passed
    }

    /// The call as a `tool_calls` entry (a legacy call becomes a function
    /// call): as the model sent it, with the id it is answered under, so a
    /// replayed turn keeps what providers require back on it.
    pub fn tool_call(&self) -> Value {
        if let (Some(raw), Shape::Function | Shape::Custom) = (&self.raw, self.shape) {
            let mut call = raw.clone();
            call.insert("id".into(), json!(self.id));
            return Value::Object(call);
        }
        match self.shape {
            Shape::Custom => json!({"id": self.id, "type": "custom",
                                    "custom": {"name": self.name, "input": self.arguments}}),
            Shape::Function | Shape::Legacy => json!({"id": self.id, "type": "function",
                                    "function": {"name": self.name, "arguments": self.arguments}}),
        }
    }

    /// The message answering a withheld call; `None` for a call the client gets.
    /// `as_tool` answers a legacy call with a `role: "tool"` message too (it
    /// is then spliced as a tool call).
    fn answer(&self, decision: Decision, as_tool: bool) -> Option<Value> {
        let content = match &self.fate {
            Fate::Passed => return None,
            Fate::Denied(d) => d.content.as_str(),
            Fate::Program if decision == Decision::Splice => ONE_PROGRAM_SKIPPED,
            Fate::Program => ONE_PROGRAM,
        };
        Some(if self.shape == Shape::Legacy && !as_tool {
            json!({"role": "function", "name": self.name, "content": content})
        } else {
            json!({"role": "tool", "tool_call_id": self.id, "content": content})
        })
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
    /// Counts `calls`. Every path summarises a round's calls once, when it
    /// decides the round, so this is also where each denied call becomes a
    /// `codemode.denial` event of the current (the round's) span.
    pub fn of(calls: &[JudgedCall], errored: bool) -> Summary {
        let mut s = Summary {
            errored,
            ..Summary::default()
        };
        for c in calls {
            match &c.fate {
                Fate::Passed => s.passed += 1,
                Fate::Denied(d) => {
                    s.denied += 1;
                    crate::telemetry::denied(&c.name, d.code);
                }
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

/// What the turn comes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The client gets the turn; nothing was withheld.
    Final,
    /// The client gets the calls that passed; the withheld ones are spliced
    /// into the history that returns their results.
    Splice,
    /// Nothing reached the client: ask again with the turn and its answers.
    Repair,
    /// Run the turn's one program; the turn's denials join its history.
    Program,
    /// A repair or a program past its bound: the client gets the model's
    /// words without calls, and a note.
    GiveUp,
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

/// The model's turn as the proxy writes it into a history when it has no
/// original message (a stream): the message's own fields as they came
/// (text, reasoning and whatever else the provider wants back), and every
/// call, in its shape.
pub fn assistant_turn(fields: &serde_json::Map<String, Value>, calls: &[JudgedCall]) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("role".into(), json!("assistant"));
    m.insert("content".into(), Value::Null);
    for (k, v) in fields {
        m.insert(k.clone(), v.clone());
    }
    let tool_calls: Vec<Value> = calls
        .iter()
        .filter(|c| c.shape != Shape::Legacy)
        .map(JudgedCall::tool_call)
        .collect();
    if !tool_calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    if let Some(c) = calls.iter().find(|c| c.shape == Shape::Legacy) {
        let call = json!({"name": c.name, "arguments": c.arguments});
        m.insert("function_call".into(), call);
    }
    Value::Object(m)
}

/// A repair round's messages: the model's turn, then one answer per call in
/// the order the model made them.
pub fn repair_messages(assistant: Value, calls: &[JudgedCall]) -> Vec<Value> {
    let mut messages = vec![assistant];
    messages.extend(
        calls
            .iter()
            .filter_map(|c| c.answer(Decision::Repair, false)),
    );
    messages
}

/// The denied calls of a program's turn and their answers, for its history.
pub fn program_denials(calls: &[JudgedCall]) -> (Vec<Value>, Vec<Value>) {
    let denied = calls.iter().filter(|c| matches!(c.fate, Fate::Denied(_)));
    (
        denied.clone().map(JudgedCall::tool_call).collect(),
        denied
            .filter_map(|c| c.answer(Decision::Program, true))
            .collect(),
    )
}

/// A mixed turn's withheld calls, keyed by the ids of the calls the client
/// got. `None` when nothing is withheld, or no call the client got has an id
/// its next request could name (a legacy call alone).
pub fn splice(calls: &[JudgedCall]) -> Option<(Vec<String>, Splice)> {
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
    let splice = Splice {
        denied_calls: withheld.iter().map(|c| c.tool_call()).collect(),
        denials: withheld
            .iter()
            .filter_map(|c| c.answer(Decision::Splice, true))
            .collect(),
    };
    Some((keys, splice))
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
    crate::intercept::give_up_text(&names)
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

    fn judged(id: &str, name: &str, shape: Shape, fate: Fate) -> JudgedCall {
        JudgedCall {
            raw: None,
            id: id.into(),
            name: name.into(),
            arguments: "{}".into(),
            shape,
            fate,
        }
    }

    fn denied() -> Fate {
        Fate::Denied(Denial::for_call(Verdict::Unknown, "bash", "{}").unwrap())
    }

    #[test]
    fn a_legacy_call_is_answered_by_name_and_spliced_as_a_tool_call() {
        let calls = [
            judged("a", "read", Shape::Function, Fate::Passed),
            judged("cm1", "bash", Shape::Legacy, denied()),
        ];
        let m = repair_messages(assistant_turn(&serde_json::Map::new(), &calls), &calls);
        assert_eq!(m[0]["function_call"]["name"], "bash");
        assert_eq!(m[0]["tool_calls"][0]["id"], "a");
        assert_eq!(m[1]["role"], "function");
        assert_eq!(m[1]["name"], "bash");
        let (keys, s) = splice(&calls).unwrap();
        assert_eq!(keys, vec!["a"]);
        assert_eq!(s.denied_calls[0]["function"]["name"], "bash");
        assert_eq!(s.denials[0]["tool_call_id"], "cm1");
    }

    #[test]
    fn a_program_beside_a_passed_call_is_skipped_not_refused_as_a_whole() {
        let calls = [
            judged("a", "read", Shape::Function, Fate::Passed),
            judged("b", RUN_CODE, Shape::Function, Fate::Program),
        ];
        let (_, s) = splice(&calls).unwrap();
        assert!(s.denials[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("ONE_PROGRAM:"));
        assert_eq!(s.denials[0]["content"], ONE_PROGRAM_SKIPPED);
    }

    #[test]
    fn custom_calls_keep_their_shape() {
        let c = judged("a", "bash", Shape::Custom, denied());
        assert_eq!(c.tool_call()["custom"]["name"], "bash");
        assert_eq!(c.tool_call()["type"], "custom");
    }
}
