//! The one rule: what happens to a tool call the model emitted.
//!
//! Both response paths (whole JSON and SSE) call [`classify`] once per call,
//! as soon as the call's name is known, and [`Denial::for_call`] once its
//! arguments are complete. There is no second copy of this table.
//!
//! | call | `native` | `both` | `code` |
//! |---|---|---|---|
//! | `run_code` | passes | passes | passes |
//! | visible native name | passes | passes | collapsed |
//! | name the preset hides | unknown | unknown | unknown |
//! | undeclared name | passes | passes | unknown |

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::mode::{Mode, RUN_CODE};
use crate::sdk::program_call;

/// How a tool name relates to the request's tool set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visibility {
    /// Declared by the client and visible under the preset.
    Visible,
    /// Declared by the client but removed by the preset's allow/deny lists.
    Hidden,
    /// Declared nowhere.
    Undeclared,
}

/// The decision for one model-direct tool call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The call goes to the client.
    Pass,
    /// A declared native name in `code` mode: denied, with the route through `run_code`.
    Collapsed,
    /// A name that exists nowhere for this model: denied without a route.
    Unknown,
}

impl Verdict {
    /// Whether the call is withheld from the client.
    pub fn is_denied(self) -> bool {
        match self {
            Verdict::Pass => false,
            Verdict::Collapsed | Verdict::Unknown => true,
        }
    }
}

/// Classifies a model-direct call by name. `visibility` comes from the
/// request's tool plan; the name alone decides, so streams decide at the
/// first delta.
pub fn classify(name: &str, visibility: Visibility, mode: Mode) -> Verdict {
    if name == RUN_CODE {
        return Verdict::Pass;
    }
    match (visibility, mode) {
        (Visibility::Hidden, _) => Verdict::Unknown,
        (Visibility::Visible, Mode::Native | Mode::Both) => Verdict::Pass,
        (Visibility::Visible, Mode::Code) => Verdict::Collapsed,
        (Visibility::Undeclared, Mode::Native | Mode::Both) => Verdict::Pass,
        (Visibility::Undeclared, Mode::Code) => Verdict::Unknown,
    }
}

/// The code the answers below start with, as the inspector lists them.
pub const ONE_PROGRAM_CODE: &str = "ONE_PROGRAM";

/// The answer to a `run_code` call that shares its turn with other calls.
pub const ONE_PROGRAM: &str =
    "ONE_PROGRAM: run_code must be the only tool call of its turn. Nothing \
     was run; put all the work, including calls to other tools, in one run_code program.";

/// The answer to a `run_code` call whose turn also held calls that went to
/// the client: those ran, the program did not.
pub const ONE_PROGRAM_SKIPPED: &str =
    "ONE_PROGRAM: run_code must be the only tool call of its turn, so this program was not \
     run (the turn's other calls went to the client as usual). Put all the work, including \
     calls to other tools, in one run_code program.";

/// The code a denial starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum DenialCode {
    /// The tool cannot be called directly (or does not exist).
    #[serde(rename = "UNKNOWN_TOOL")]
    UnknownTool,
    /// A collapsed call whose arguments are not a JSON object.
    #[serde(rename = "INVALID_ARGS")]
    InvalidArgs,
}

impl DenialCode {
    /// The code as the model reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            DenialCode::UnknownTool => "UNKNOWN_TOOL",
            DenialCode::InvalidArgs => "INVALID_ARGS",
        }
    }
}

impl fmt::Display for DenialCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The tool message the proxy answers a denied call with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// The code the content starts with.
    pub code: DenialCode,
    /// The whole tool-message content, starting with `CODE:`.
    pub content: String,
}

impl Denial {
    /// Builds the denial for a call `classify` denied; `None` for a call that passes.
    pub fn for_call(verdict: Verdict, name: &str, arguments: &str) -> Option<Denial> {
        match verdict {
            Verdict::Pass => None,
            Verdict::Unknown => Some(Denial {
                code: DenialCode::UnknownTool,
                content: format!(
                    "UNKNOWN_TOOL: there is no tool named {name:?}. Do not call it again; \
                     use only the tools this conversation declares."
                ),
            }),
            Verdict::Collapsed => Some(collapsed(name, arguments)),
        }
    }
}

impl Denial {
    /// The denial of a call to a freeform tool (one string input, as the
    /// Responses API's `custom` tools take): its route passes the string.
    pub fn for_freeform_call(verdict: Verdict, name: &str, input: &str) -> Option<Denial> {
        match verdict {
            Verdict::Collapsed => Some(Denial {
                code: DenialCode::UnknownTool,
                content: format!(
                    "UNKNOWN_TOOL: {name:?} cannot be called directly here; the only directly \
                     callable tool is {RUN_CODE}. {name:?} is reached from inside a {RUN_CODE} \
                     program. Call {RUN_CODE} with this code instead:\n\n{}",
                    program_call(name, &Value::String(input.to_owned()))
                ),
            }),
            other => Denial::for_call(other, name, input),
        }
    }
}

fn collapsed(name: &str, arguments: &str) -> Denial {
    let args = match parse_arguments(arguments) {
        Ok(args) => args,
        Err(why) => {
            return Denial {
                code: DenialCode::InvalidArgs,
                content: format!(
                    "INVALID_ARGS: the arguments of {name:?} are not a JSON object ({why}). \
                     Only {RUN_CODE} can be called directly: write a {RUN_CODE} program that \
                     calls {} with a JSON object.",
                    program_call(name, &Value::Object(Default::default()))
                        .trim_start_matches("await ")
                ),
            };
        }
    };
    Denial {
        code: DenialCode::UnknownTool,
        content: format!(
            "UNKNOWN_TOOL: {name:?} cannot be called directly here; the only directly callable \
             tool is {RUN_CODE}. {name:?} is reached from inside a {RUN_CODE} program. Call \
             {RUN_CODE} with this code instead:\n\n{}",
            program_call(name, &args)
        ),
    }
}

/// Arguments as the model sent them; an empty string counts as `{}`, as providers send it.
fn parse_arguments(arguments: &str) -> Result<Value, String> {
    if arguments.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err("expected an object".to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Mode::*;
    use Visibility::*;

    #[test]
    fn the_table_holds_for_every_cell() {
        let cases = [
            (RUN_CODE, Undeclared, [Pass, Pass, Pass]),
            (RUN_CODE, Visible, [Pass, Pass, Pass]),
            ("read", Visible, [Pass, Pass, Verdict::Collapsed]),
            ("read", Hidden, [Verdict::Unknown; 3]),
            ("nope", Undeclared, [Pass, Pass, Verdict::Unknown]),
        ];
        for (name, vis, expected) in cases {
            for (mode, want) in [Native, Both, Code].into_iter().zip(expected) {
                assert_eq!(classify(name, vis, mode), want, "{name} {vis:?} {mode}");
            }
        }
    }

    use Verdict::Pass;

    #[test]
    fn collapsed_call_names_run_code_and_shows_the_program() {
        let d = Denial::for_call(Verdict::Collapsed, "read", r#"{"path":"a.txt"}"#).unwrap();
        assert_eq!(d.code, DenialCode::UnknownTool);
        assert!(d.content.starts_with("UNKNOWN_TOOL:"));
        assert!(d.content.contains("run_code"));
        assert!(d.content.contains(r#"await tools.read({"path": "a.txt"})"#));
    }

    #[test]
    fn collapsed_call_with_broken_arguments_is_invalid_args() {
        let d = Denial::for_call(Verdict::Collapsed, "read", r#"{"path": "a.t"#).unwrap();
        assert_eq!(d.code, DenialCode::InvalidArgs);
        assert!(d.content.starts_with("INVALID_ARGS:"));
        let d = Denial::for_call(Verdict::Collapsed, "read", "[1]").unwrap();
        assert_eq!(d.code, DenialCode::InvalidArgs);
    }

    #[test]
    fn undeclared_name_has_no_route() {
        let d = Denial::for_call(Verdict::Unknown, "nope", "{}").unwrap();
        assert!(d.content.starts_with("UNKNOWN_TOOL:"));
        assert!(!d.content.contains("await tools"));
    }

    #[test]
    fn unknown_with_broken_arguments_stays_unknown() {
        let d = Denial::for_call(Verdict::Unknown, "nope", "{{{").unwrap();
        assert_eq!(d.code, DenialCode::UnknownTool);
    }

    #[test]
    fn empty_arguments_count_as_an_empty_object() {
        let d = Denial::for_call(Verdict::Collapsed, "list", "").unwrap();
        assert!(d.content.contains("await tools.list({})"));
    }
}
