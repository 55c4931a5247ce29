//! What the inspector keeps of one program and of one denial, what each
//! weighs against the budget, and how each reads as JSON.
//!
//! A record holds names, sizes and times; the program's code always (it is
//! what a user came to see); arguments, results and console text only
//! when payloads are on, each cut to [`PAYLOAD_CAP`].

use serde_json::{json, Value};

/// Most bytes kept of one argument, result or console text.
pub const PAYLOAD_CAP: usize = 16 << 10;

/// Bytes a record costs beyond its strings (the struct, its index entry).
const RECORD_OVERHEAD: usize = 320;
/// Bytes a call costs beyond its strings.
const CALL_OVERHEAD: usize = 96;

/// Where a program stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum State {
    /// In the sandbox now.
    #[default]
    Running,
    /// Its calls are with the agent.
    Waiting,
    /// It returned.
    Finished,
    /// It threw, hit a limit, or could not start.
    Failed,
    /// The agent moved on before it finished.
    Interrupted,
    /// It outlived `CODEMODE_RUN_LIFETIME_SECS`, or its record was lost.
    Expired,
}

impl State {
    /// As the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Waiting => "waiting",
            State::Finished => "finished",
            State::Failed => "failed",
            State::Interrupted => "interrupted",
            State::Expired => "expired",
        }
    }

    /// Whether the program is over.
    pub fn ended(self) -> bool {
        match self {
            State::Running | State::Waiting => false,
            State::Finished | State::Failed | State::Interrupted | State::Expired => true,
        }
    }
}

/// One nested call of a program.
#[derive(Debug, Default)]
pub struct CallSeen {
    /// The tool.
    pub name: String,
    /// Bytes of its arguments (JSON text).
    pub args_bytes: usize,
    /// When it was handed to the agent (ms since the epoch).
    pub handed_ms: Option<u64>,
    /// When its result came back.
    pub result_ms: Option<u64>,
    /// Bytes of its result.
    pub result_bytes: Option<usize>,
    /// Its arguments, with payloads on.
    pub args: Option<String>,
    /// Its result, with payloads on.
    pub result: Option<String>,
}

/// One program, as this replica saw it.
#[derive(Debug, Default)]
pub struct ProgramRecord {
    /// The inspector's id for it: a number, in the order this replica
    /// first saw the programs.
    pub seq: u64,
    /// The execution's id (kept for lookups; never shown: it is the
    /// capability that names the program on the wire).
    pub exec_id: String,
    /// The model's `run_code` call id (the program log lines name it).
    pub run_call_id: String,
    /// The scope that ran it.
    pub scope: String,
    /// Its preset.
    pub preset: String,
    /// The wire API it came through.
    pub dialect: &'static str,
    /// The request's `model`.
    pub model: String,
    /// How the SDK the program was written against rendered (`full`,
    /// `compact`).
    pub sdk: &'static str,
    /// When it was created (ms since the epoch).
    pub started_ms: u64,
    /// When it ended.
    pub ended_ms: Option<u64>,
    /// Where it stands.
    pub state: State,
    /// The program.
    pub code: String,
    /// Bytes of its console output, once it ended.
    pub console_bytes: Option<usize>,
    /// Its console output, with payloads on.
    pub console: Option<String>,
    /// Bytes of the `run_code` result the model got.
    pub result_bytes: Option<usize>,
    /// That result, with payloads on.
    pub result: Option<String>,
    /// Its nested calls, in order.
    pub calls: Vec<CallSeen>,
    /// Batches of its calls answered without asking the model.
    pub round_trips_saved: u64,
    /// Bytes of nested results kept out of the model's context, once it ended.
    pub context_bytes_saved: Option<u64>,
    /// What it weighs against the budget, as last weighed.
    pub weight: usize,
}

/// `text` as kept with payloads on: at most [`PAYLOAD_CAP`] bytes, cut
/// on a character boundary with a note.
pub fn capped(text: &str) -> String {
    if text.len() <= PAYLOAD_CAP {
        return text.to_owned();
    }
    let mut cut = PAYLOAD_CAP;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n[inspector: {} more bytes not kept]",
        &text[..cut],
        text.len() - cut
    )
}

fn len(s: &Option<String>) -> usize {
    s.as_ref().map_or(0, String::len)
}

impl ProgramRecord {
    /// What the record weighs: its strings and a fixed overhead.
    pub fn weigh(&self) -> usize {
        let strings = self.exec_id.len()
            + self.run_call_id.len()
            + self.scope.len()
            + self.preset.len()
            + self.model.len()
            + self.code.len()
            + len(&self.console)
            + len(&self.result);
        let calls: usize = self
            .calls
            .iter()
            .map(|c| CALL_OVERHEAD + c.name.len() + len(&c.args) + len(&c.result))
            .sum();
        RECORD_OVERHEAD + strings + calls
    }

    /// The state as of `now`: a program still waiting past its lifetime
    /// has expired, whether or not its agent ever came back.
    pub fn state_at(&self, now_ms: u64, lifetime_ms: u64) -> State {
        if self.state == State::Waiting && now_ms.saturating_sub(self.started_ms) > lifetime_ms {
            return State::Expired;
        }
        self.state
    }

    /// One line of the list: everything but the code and the calls.
    pub fn summary(&self, now_ms: u64, lifetime_ms: u64) -> Value {
        let waiting = self
            .calls
            .iter()
            .filter(|c| c.result_bytes.is_none())
            .count();
        json!({
            "id": self.seq.to_string(),
            "run_call_id": self.run_call_id,
            "scope": self.scope,
            "preset": self.preset,
            "dialect": self.dialect,
            "model": self.model,
            "sdk": self.sdk,
            "state": self.state_at(now_ms, lifetime_ms).as_str(),
            "started_at_ms": self.started_ms,
            "ended_at_ms": self.ended_ms,
            "code_bytes": self.code.len(),
            "first_line": self.code.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or(""),
            "call_count": self.calls.len(),
            "calls_waiting": if self.state == State::Waiting { waiting } else { 0 },
            "tools": self.tool_counts(),
            "console_bytes": self.console_bytes,
            "result_bytes": self.result_bytes,
            "round_trips_saved": self.round_trips_saved,
            "context_bytes_saved": self.context_bytes_saved,
        })
    }

    /// How many times each tool was called, in the order first called.
    fn tool_counts(&self) -> Value {
        let mut counts: Vec<(&str, u64)> = Vec::new();
        for c in &self.calls {
            match counts.iter_mut().find(|(n, _)| *n == c.name) {
                Some((_, k)) => *k += 1,
                None => counts.push((&c.name, 1)),
            }
        }
        Value::Array(
            counts
                .into_iter()
                .map(|(name, n)| json!({"name": name, "count": n}))
                .collect(),
        )
    }

    /// The whole record: the summary, the code and every call; payloads
    /// when they were kept.
    pub fn whole(&self, now_ms: u64, lifetime_ms: u64, payloads: bool) -> Value {
        let mut v = self.summary(now_ms, lifetime_ms);
        v["code"] = json!(self.code);
        v["calls"] = Value::Array(
            self.calls
                .iter()
                .enumerate()
                .map(|(n, c)| {
                    let mut call = json!({
                        "n": n,
                        "tool": c.name,
                        "args_bytes": c.args_bytes,
                        "handed_at_ms": c.handed_ms,
                        "result_at_ms": c.result_ms,
                        "result_bytes": c.result_bytes,
                    });
                    if payloads {
                        call["args"] = json!(c.args);
                        call["result"] = json!(c.result);
                    }
                    call
                })
                .collect(),
        );
        if payloads {
            v["console"] = json!(self.console);
            v["result"] = json!(self.result);
        }
        v
    }
}

/// What became of a denial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repair {
    /// The model was asked again and its next turn called only what it may.
    Succeeded,
    /// The model was asked again and its next turn was denied too.
    DeniedAgain,
    /// The repair bound (`CODEMODE_MAX_REPAIRS`) was reached: not asked again.
    Limit,
    /// A mixed turn: the allowed calls went to the agent, the denial joins
    /// the history of their results.
    Spliced,
    /// Beside a program: the denial joins the program's history.
    WithProgram,
    /// The request ended before the repair's answer was judged.
    Unfinished,
}

impl Repair {
    /// `succeeded`, `failed`, `not_attempted` or `unknown`, and why.
    pub fn describe(self) -> (&'static str, &'static str) {
        match self {
            Repair::Succeeded => (
                "succeeded",
                "the model was asked again and its next turn called only what it may",
            ),
            Repair::DeniedAgain => (
                "failed",
                "the model was asked again and its next turn was denied too",
            ),
            Repair::Limit => (
                "failed",
                "the repair limit (CODEMODE_MAX_REPAIRS) was reached: the agent got the model's text and a note",
            ),
            Repair::Spliced => (
                "not_attempted",
                "a mixed turn: the allowed calls went to the agent, and the denial reaches the model with their results",
            ),
            Repair::WithProgram => (
                "not_attempted",
                "beside a program: the denial reaches the model with the program's result",
            ),
            Repair::Unfinished => (
                "unknown",
                "the request ended before the repaired turn was judged",
            ),
        }
    }
}

/// One denied call.
#[derive(Debug)]
pub struct DenialRecord {
    /// The inspector's number for it.
    pub seq: u64,
    /// When it was judged (ms since the epoch).
    pub at_ms: u64,
    /// The scope of the request.
    pub scope: String,
    /// Its preset.
    pub preset: String,
    /// Its wire API.
    pub dialect: &'static str,
    /// Its `model`.
    pub model: String,
    /// How the request's SDK rendered (`full`, `compact`; empty without one).
    pub sdk: &'static str,
    /// The name the model called.
    pub tool: String,
    /// `UNKNOWN_TOOL`, `INVALID_ARGS` or `ONE_PROGRAM`.
    pub code: &'static str,
    /// What became of it.
    pub repair: Repair,
}

impl DenialRecord {
    /// What the record weighs.
    pub fn weigh(&self) -> usize {
        RECORD_OVERHEAD / 2
            + self.scope.len()
            + self.preset.len()
            + self.model.len()
            + self.tool.len()
    }

    /// As the API shows it.
    pub fn to_json(&self) -> Value {
        let (repair, detail) = self.repair.describe();
        json!({
            "id": self.seq.to_string(),
            "at_ms": self.at_ms,
            "scope": self.scope,
            "preset": self.preset,
            "dialect": self.dialect,
            "model": self.model,
            "sdk": self.sdk,
            "tool": self.tool,
            "code": self.code,
            "repair": repair,
            "repair_detail": detail,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_cut_on_a_character_boundary_with_a_note() {
        let long = "é".repeat(PAYLOAD_CAP);
        let kept = capped(&long);
        assert!(kept.len() < PAYLOAD_CAP + 64);
        assert!(kept.contains("more bytes not kept"));
        assert_eq!(capped("short"), "short");
    }

    #[test]
    fn a_program_waiting_past_its_lifetime_reads_as_expired() {
        let r = ProgramRecord {
            state: State::Waiting,
            started_ms: 1_000,
            ..ProgramRecord::default()
        };
        assert_eq!(r.state_at(2_000, 5_000), State::Waiting);
        assert_eq!(r.state_at(10_000, 5_000), State::Expired);
    }

    #[test]
    fn the_whole_record_shows_payloads_only_when_asked() {
        let r = ProgramRecord {
            code: "return 1".into(),
            calls: vec![CallSeen {
                name: "read".into(),
                args_bytes: 2,
                args: Some("{}".into()),
                ..CallSeen::default()
            }],
            ..ProgramRecord::default()
        };
        let shown = r.whole(0, 1, false);
        assert!(shown["calls"][0].get("args").is_none());
        assert_eq!(shown["calls"][0]["tool"], "read");
        assert_eq!(shown["code"], "return 1");
        assert_eq!(r.whole(0, 1, true)["calls"][0]["args"], "{}");
        assert!(shown.get("exec_id").is_none());
    }
}
