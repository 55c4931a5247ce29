//! Content blocks of a Messages turn: which are calls, how each is judged,
//! and the blocks and messages the proxy writes (denials, repairs).
//!
//! A `tool_use` block is a call the client executes; `server_tool_use`
//! (and its results) are the provider's own and never judged. The judge
//! fails closed: a block of a type not known to be safe ([`is_safe_block`]),
//! one this proxy has never heard of included, is judged as a call
//! (docs/security.md, "What passes").

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

/// Whether a block of this type passes unjudged.
pub fn is_safe_block(kind: &str) -> bool {
    SAFE_BLOCKS.contains(&kind) || (kind.ends_with("_tool_result") && kind != "tool_result")
}

/// Whether a content block is judged as a call a client executes: any
/// block not known to be safe.
pub fn is_call_block(block: &Value) -> bool {
    !is_safe_block(block.get("type").and_then(Value::as_str).unwrap_or(""))
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
        assert_eq!(
            input_text(block.as_object().unwrap()),
            r#"{"file_path":"a.txt"}"#
        );
    }
}
