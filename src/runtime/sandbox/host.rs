//! The host side of a run: what the program's calls reach, checked in
//! Rust (the execution's tools, JSON objects as arguments, the call
//! budget), the replay that answers recorded calls, and the console.

use std::sync::Arc;

use super::CallRecord;
use crate::runtime::Limits;
use crate::sdk::ToolDocs;

/// What `call` tells the prelude.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::runtime) enum CallKind {
    /// Answered from the replay: `take` holds the result.
    Answered = 0,
    /// Recorded as pending: the program waits on the client.
    Pending = 1,
    /// Refused: `take` holds the message, thrown as an `Error`.
    Refused = 2,
    /// Refused as a misuse (an unknown tool, arguments that are not an
    /// object): `take` holds the message, thrown as a `TypeError`.
    Invalid = 3,
}

/// Whether a call may go to the client: it names one of the execution's
/// `tools`, with a JSON object as arguments (one JSON string for a tool in
/// `freeform`). Made in the host on every call, and again in the proxy on
/// every call a sandbox worker hands back.
pub(in crate::runtime) fn admitted(
    name: &str,
    args: &str,
    tools: &[String],
    freeform: &[String],
) -> Result<(), String> {
    if !tools.iter().any(|t| t == name) {
        return Err(format!(
            "there is no tool named \"{name}\"; the tools are: {}",
            tools.join(", ")
        ));
    }
    if freeform.iter().any(|t| t == name) {
        if serde_json::from_str::<String>(args).is_err() {
            return Err(format!("tools.{name}: takes one string (its whole input)"));
        }
    } else if serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(args).is_err() {
        return Err(format!("tools.{name}: arguments must be a JSON object"));
    }
    Ok(())
}

/// The host side of one run: everything the program's calls reach.
#[derive(Default)]
pub(in crate::runtime) struct State {
    /// The tools the execution may call; the program cannot change this list.
    tools: Vec<String>,
    /// Those of them that take one string, not a JSON object.
    freeform: Vec<String>,
    /// Their full declarations, for `tools.describe`.
    pub(super) docs: Arc<ToolDocs>,
    replay: Vec<CallRecord>,
    next: usize,
    pub(super) pending: Vec<CallRecord>,
    max_calls: usize,
    pub(super) take: String,
    pub(super) output: String,
    output_cap: usize,
    pub(super) output_truncated: bool,
    pub(super) finished: Option<End>,
}

/// How the program's own code ended (its promise settled).
#[derive(Debug, PartialEq, Eq)]
pub(in crate::runtime) struct End {
    /// It threw.
    pub failed: bool,
    /// The result (JSON, or text), or `Name: message`.
    pub text: String,
    /// The error's stack trace, where it threw one.
    pub stack: String,
}

impl State {
    /// The host state of a run of an execution calling `tools`.
    pub(in crate::runtime) fn new(
        tools: &[String],
        freeform: &[String],
        replay: &[CallRecord],
        limits: &Limits,
    ) -> State {
        State {
            tools: tools.to_vec(),
            freeform: freeform.to_vec(),
            docs: Arc::default(),
            replay: replay.to_vec(),
            max_calls: limits.max_calls,
            output_cap: limits.max_output_bytes.saturating_mul(2),
            ..State::default()
        }
    }

    /// Answers a call. Only a call that names one of the execution's tools
    /// with a JSON object as arguments is ever answered or recorded.
    pub(in crate::runtime) fn call(&mut self, name: String, args: String) -> CallKind {
        if let Err(why) = admitted(&name, &args, &self.tools, &self.freeform) {
            self.take = why;
            return CallKind::Invalid;
        }
        if self.finished.as_ref().is_some_and(|end| end.failed) {
            self.take = format!("tools.{name}: the program has already failed");
            return CallKind::Refused;
        }
        if self.next < self.replay.len() {
            let rec = &self.replay[self.next];
            self.next += 1;
            if rec.name != name || rec.args != args {
                self.take = format!(
                    "call {} was tools.{}({}) when the program first ran, but now is tools.{name}({args}): programs must make the same calls when re-run (no hidden state)",
                    self.next, rec.name, rec.args
                );
                return CallKind::Refused;
            }
            return match &rec.result {
                Some(r) => {
                    self.take = r.clone();
                    CallKind::Answered
                }
                None => CallKind::Pending,
            };
        }
        if self.next + self.pending.len() >= self.max_calls {
            self.take = format!(
                "too many tool calls: the limit is {} per program (CODEMODE_RUN_MAX_CALLS)",
                self.max_calls
            );
            return CallKind::Refused;
        }
        self.pending.push(CallRecord {
            name,
            args,
            result: None,
        });
        CallKind::Pending
    }

    /// `tools.describe(name)`: the tool's full declaration, answered here
    /// (no call is recorded, nothing goes to the client). Only the
    /// execution's own tools are described.
    pub(in crate::runtime) fn describe(&self, name: &str) -> Result<String, String> {
        if !self.tools.iter().any(|t| t == name) {
            return Err(format!(
                "tools.describe: there is no tool named \"{name}\"; the tools are: {}",
                self.tools.join(", ")
            ));
        }
        Ok(self.docs.get(name).unwrap_or_else(|| {
            format!("tools.{name}: no documentation is at hand for this tool (its declaration did not fit the SDK)")
        }))
    }

    /// The program's end; the first one counts.
    pub(in crate::runtime) fn finish(&mut self, failed: bool, text: String, stack: String) {
        if self.finished.is_none() {
            self.finished = Some(End {
                failed,
                text,
                stack,
            });
        }
    }

    /// The calls recorded as pending.
    #[cfg(test)]
    pub(in crate::runtime) fn pending(&self) -> &[CallRecord] {
        &self.pending
    }

    /// How the program ended, if it did.
    #[cfg(test)]
    pub(in crate::runtime) fn finished(&self) -> Option<&End> {
        self.finished.as_ref()
    }

    /// Console output, kept to its cap: the text lives outside the
    /// engine's heap limit, so one huge line must not be copied whole.
    pub(super) fn log(&mut self, text: String) {
        if self.output.len() >= self.output_cap {
            self.output_truncated = true;
            return;
        }
        if !self.output.is_empty() {
            self.output.push('\n');
        }
        let mut room = self.output_cap.saturating_sub(self.output.len());
        if text.len() > room {
            while !text.is_char_boundary(room) {
                room -= 1;
            }
            self.output.push_str(&text[..room]);
            self.output_truncated = true;
        } else {
            self.output.push_str(&text);
        }
    }
}
