//! Content blocks of a Messages turn: which are calls, how each is judged,
//! and the blocks and messages the proxy writes (denials, repairs).
//!
//! A `tool_use` block is a call the client executes; `server_tool_use`
//! (and its results) are the provider's own and never judged. The judge
//! fails closed: a block of a type not known to be safe ([`is_safe_block`]),
//! one this proxy has never heard of included, is judged as a call
//! (docs/security.md, "What passes").
//!
//! A `tool_reference` block is no call but loads the tool it names for the
//! model (the API expands it into the tool's declaration, on this turn and
//! on every later one the client echoes it back on, as Claude Code does):
//! it is judged as a direct call of that tool would be, and passes only
//! where that call would ([`withheld_reference`]). One that would not is
//! withheld from the client and from every turn the proxy replays: it has
//! no id a denial could answer, and nothing of it is left to execute.

use serde_json::{json, Map, Value};

use crate::classify::Verdict;
use crate::plan::ToolPlan;
use crate::turn::shape;
use crate::turn::{fate, judge_names, JudgedCall, Shape, Step, Unreadable};

/// The block types that are no call a client executes: the model's words
/// and thinking, and the provider's own tool blocks (each
/// `*_tool_result` of a server tool among them).
const SAFE_BLOCKS: &[&str] = &[
    "text",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
];

/// The block that loads a deferred tool for the model by its name.
pub const TOOL_REFERENCE: &str = "tool_reference";

/// Whether a block of this type passes unjudged.
pub fn is_safe_block(kind: &str) -> bool {
    SAFE_BLOCKS.contains(&kind) || (kind.ends_with("_tool_result") && kind != "tool_result")
}

/// Whether a content block is judged as a call a client executes: any
/// block not known to be safe, except a `tool_reference` (judged by the
/// tool it names: [`withheld_reference`]).
pub fn is_call_block(block: &Value) -> bool {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
    !is_safe_block(kind) && kind != TOOL_REFERENCE
}

/// Whether the model may be given tool `name` by a `tool_reference`: where
/// a direct call of it passes the rule (in code mode, `run_code` alone).
pub fn reference_passes(name: &str, plan: &ToolPlan) -> bool {
    !name.is_empty() && judge_names(&[name], plan).is_some_and(|(_, v)| !v.is_denied())
}

/// Whether `block` is a `tool_reference` whose tool the model may not be
/// given ([`reference_passes`]; one that names none neither): it never
/// reaches the client nor a replayed turn.
pub fn withheld_reference(block: &Value, plan: &ToolPlan) -> bool {
    block.get("type").and_then(Value::as_str) == Some(TOOL_REFERENCE)
        && !reference_passes(
            block.get("tool_name").and_then(Value::as_str).unwrap_or(""),
            plan,
        )
}

/// Whether an event other than a block's start carries a `content_block`
/// a client could run, or a reference that would load a tool the wire
/// lacks: a stream withholds it (its fast path never takes an event with
/// a `content_block`).
pub fn rides_a_call(event: &Map<String, Value>, plan: &ToolPlan) -> bool {
    event
        .get("content_block")
        .is_some_and(|block| judge_block(block, plan).is_some() || withheld_reference(block, plan))
}

/// A content block as a judge may read it (`crate::turn::shape`): an
/// object, whose `name`, when it is judged as a call, is a string (a
/// JavaScript client looks a tool up by a list as by the string it joins
/// to). The path is from the block down.
pub fn check_block(block: &Value) -> Result<(), Unreadable> {
    let fields = shape::entry(block, &[])?;
    if is_call_block(block) {
        shape::name(fields.get("name"), &[Step::Key("name")])?;
    }
    Ok(())
}

/// Judges one content block; `None` for a block that is no call.
pub fn judge_block(block: &Value, plan: &ToolPlan) -> Option<JudgedCall> {
    let obj = block.as_object()?;
    if !is_call_block(block) {
        return None;
    }
    let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
    let name = match obj.get("name").and_then(Value::as_str) {
        // A block of a type the proxy does not know, without a name: judged
        // by its type, so its denial says what it was.
        None | Some("") if kind != "tool_use" => kind,
        name => name.unwrap_or(""),
    };
    let arguments = input_text(obj);
    let (name, verdict) = judge_names(&[name], plan)
        .map(|(n, v)| (n.to_owned(), v))
        .unwrap_or_else(|| (String::new(), nameless(plan)));
    Some(JudgedCall {
        id: obj
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        fate: fate(verdict, &name, &arguments, plan),
        name,
        arguments,
        shape: Shape::Function,
        raw: Some(obj.clone()),
    })
}

/// A `tool_use` block's `input` as JSON text (an object; `{}` when absent).
pub fn input_text(block: &Map<String, Value>) -> String {
    match block.get("input") {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(v) => v.to_string(),
    }
}

fn nameless(plan: &ToolPlan) -> Verdict {
    crate::classify::classify("", plan.visibility(""), plan.mode)
}

/// The `tool_result` block answering a withheld call: an error whose text
/// starts with the denial's code.
pub fn answer_block(call: &JudgedCall, content: &str) -> Value {
    json!({"type": "tool_result", "tool_use_id": call.id, "is_error": true,
           "content": [{"type": "text", "text": content}]})
}

/// The call's block as the model sent it.
pub fn raw_block(call: &JudgedCall) -> Value {
    call.raw.clone().map_or(Value::Null, Value::Object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::{Mode, Runtime};
    use crate::preset::Catalog;

    fn plan(mode: Mode) -> ToolPlan {
        let tools = json!([{"name": "Read", "input_schema": {"type": "object"}},
                           {"name": "WebFetch", "defer_loading": true, "input_schema": {"type": "object"}}]);
        let raw = serde_json::value::RawValue::from_string(tools.to_string()).unwrap();
        let catalog = Catalog::builtin(Mode::Code);
        ToolPlan::build_for(
            &crate::messages::tools::TOOLS,
            Some(&raw),
            catalog.get("standard").unwrap(),
            mode,
            Runtime::Embedded,
        )
        .unwrap()
    }

    #[test]
    fn a_reference_passes_where_a_direct_call_of_its_tool_would() {
        let reference = |name: &str| json!({"type": "tool_reference", "tool_name": name});
        let code = plan(Mode::Code);
        for name in ["WebFetch", "Read", "Bash", ""] {
            assert!(withheld_reference(&reference(name), &code), "{name}");
        }
        assert!(!withheld_reference(&reference("run_code"), &code));
        assert!(withheld_reference(
            &json!({"type": "tool_reference"}),
            &code
        ));
        let both = plan(Mode::Both);
        assert!(!withheld_reference(&reference("WebFetch"), &both));
        assert!(!withheld_reference(
            &json!({"type": "text", "text": "WebFetch"}),
            &code
        ));
    }

    #[test]
    fn a_tool_use_block_is_a_call_and_its_input_is_json_text() {
        let block = json!({"type": "tool_use", "id": "toolu_1", "name": "Read",
                           "input": {"file_path": "a.txt"}});
        assert!(is_call_block(&block));
        assert!(!is_call_block(
            &json!({"type": "server_tool_use", "name": "web_search"})
        ));
        for safe in [
            "text",
            "thinking",
            "web_search_tool_result",
            "code_execution_tool_result",
        ] {
            assert!(!is_call_block(&json!({"type": safe})), "{safe}");
        }
        for judged in ["tool_result", "hologram_use", "", "computer_use"] {
            assert!(is_call_block(&json!({"type": judged})), "{judged}");
        }
        assert!(!is_call_block(
            &json!({"type": "tool_reference", "tool_name": "Read"})
        ));
        assert_eq!(
            input_text(block.as_object().unwrap()),
            r#"{"file_path":"a.txt"}"#
        );
    }
}
