//! What the turn core decided, as data: each call of a turn judged
//! ([`JudgedCall`], its [`Fate`]) and what the turn comes to
//! ([`Decision`]). Below the core and below `observe`, so the core emits
//! its decisions in these words and `observe` derives from them what it
//! counts and lists, deciding nothing of its own.

use serde_json::Value;

use crate::classify::Denial;

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

impl JudgedCall {
    /// Whether the client gets this call.
    pub fn passed(&self) -> bool {
        self.fate == Fate::Passed
    }
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
