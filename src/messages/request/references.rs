//! `tool_reference` blocks in a request's history, where the wire lacks
//! the tool they name.
//!
//! A reference loads a deferred tool for the model: the API expands it
//! into the tool's declaration wherever it stands in the conversation.
//! Clients echo references back: Claude Code's `ToolSearch` answers with
//! them inside its `tool_result`, and Claude Code sends the model's own
//! turns back as they came (a reference, a `tool_search_tool_result`'s
//! `tool_references`). Where the wire may lack a tool the client declared
//! (code mode, a preset's lists), each reference to a tool the model may
//! not be given ([`items::reference_passes`]) is rewritten, so nothing in
//! the history points the model at a tool the wire does not carry: inside
//! a `tool_result` or as a block of its own it becomes a text block saying
//! where the tool is (a `run_code` program, when the SDK shows it); an
//! entry of a `tool_search_tool_result` is dropped from its list. With an
//! `mcp_toolset` on the wire, a name the client declared nowhere may be one
//! of its tools and is left alone.
//!
//! Messages without a reference keep their bytes; of one with a reference
//! only the blocks that change are written again. One reading: a type
//! spelled with escapes is read as the provider reads it, a block that
//! repeats a key is written anew from the proxy's reading, and a message
//! that repeats one around a reference is refused.

use memchr::memmem;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::classify::Visibility;
use crate::error::ProxyError;
use crate::messages::items::{reference_passes, TOOL_REFERENCE};
use crate::mode::RUN_CODE;
use crate::plan::ToolPlan;
use crate::sdk::tool_access;
use crate::wire::{raw_array, repeats_no_key, to_raw, ParseError, RawObject};

/// What decides whether a reference stays.
struct Rule<'a> {
    plan: &'a ToolPlan,
    /// The wire declares an MCP toolset, whose tools the proxy cannot name.
    mcp: bool,
}

impl Rule<'_> {
    fn keeps(&self, name: &str) -> bool {
        reference_passes(name, self.plan)
            || (self.mcp
                && !name.is_empty()
                && self.plan.visibility(name) == Visibility::Undeclared)
    }
}

/// Whether raw JSON text may hold a reference: its type spelled out, or
/// spelled with an escape, which must then escape one of its letters
/// (`\u0074`, `\u006f`, ...: ASCII letters, which real traffic leaves
/// plain, so a history of escaped accents is not read block by block).
fn may_hold_reference(text: &str) -> bool {
    let bytes = text.as_bytes();
    memmem::find(bytes, TOOL_REFERENCE.as_bytes()).is_some()
        || memmem::find_iter(bytes, b"\\u00").any(|at| {
            let hex = bytes.get(at + 4..at + 6).unwrap_or_default();
            std::str::from_utf8(hex)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .is_some_and(|b| TOOL_REFERENCE.as_bytes().contains(&b))
        })
}

/// The text standing for a reference to `name` the model may not be given.
pub(crate) fn reference_note(name: &str, plan: &ToolPlan) -> String {
    match plan.visibility(name) {
        Visibility::Visible if plan.sdk.is_some() => format!(
            "Tool {name:?} is loaded: call it from inside a {RUN_CODE} program, as \
             `await {}(args)`.",
            tool_access(name)
        ),
        _ => format!("Tool {name:?} is not available in this conversation."),
    }
}

/// Rewrites every message holding a reference the wire cannot load;
/// `wire_tools` is the `tools` the provider gets.
pub(super) fn rewrite(
    messages: &mut [Box<RawValue>],
    plan: &ToolPlan,
    wire_tools: Option<&RawValue>,
) -> Result<(), ProxyError> {
    let mut rule = None;
    for message in messages.iter_mut() {
        if !may_hold_reference(message.get()) {
            continue;
        }
        let rule = rule.get_or_insert_with(|| Rule {
            plan,
            mcp: wire_tools.is_some_and(|t| declares_mcp_toolset(t.get())),
        });
        if let Some(new) = rewritten_message(message, rule)? {
            *message = new;
        }
    }
    Ok(())
}

fn declares_mcp_toolset(tools: &str) -> bool {
    serde_json::from_str::<Vec<Map<String, Value>>>(tools).is_ok_and(|tools| {
        tools
            .iter()
            .any(|t| t.get("type").and_then(Value::as_str) == Some("mcp_toolset"))
    })
}

/// The message with its references rewritten; `None` when none changes.
fn rewritten_message(
    message: &RawValue,
    rule: &Rule<'_>,
) -> Result<Option<Box<RawValue>>, ProxyError> {
    let mut object = match RawObject::parse(message.get().as_bytes()) {
        Ok(object) => object,
        // Providers disagree on which of two `content`s counts: one could
        // hide a reference from the proxy.
        Err(ParseError::DuplicateKey(key)) => {
            return Err(ProxyError::InvalidRequest(format!(
                "a message holding a `tool_reference` has the key `{key}` more than once; \
                 send each key once"
            )))
        }
        // Not an object: the provider refuses it as it is.
        Err(ParseError::Json(_)) => return Ok(None),
    };
    let Some(blocks) = object
        .get("content")
        .and_then(|c| serde_json::from_str::<Vec<&RawValue>>(c.get()).ok())
    else {
        return Ok(None);
    };
    let mut changed: Vec<Option<Box<RawValue>>> = Vec::with_capacity(blocks.len());
    for block in &blocks {
        changed.push(
            may_hold_reference(block.get())
                .then(|| serde_json::from_str::<Value>(block.get()).ok())
                .flatten()
                .and_then(|mut b| {
                    // A block that repeats a key is written from the
                    // proxy's reading (the last of each), as serde reads
                    // it, so no reader finds a reference the proxy missed.
                    let rewritten = rewrite_block(&mut b, rule);
                    (rewritten || !repeats_no_key(block.get().as_bytes())).then(|| to_raw(&b))
                }),
        );
    }
    if changed.iter().all(Option::is_none) {
        return Ok(None);
    }
    let content = raw_array(
        blocks
            .iter()
            .zip(&changed)
            .map(|(old, new)| new.as_deref().unwrap_or(old)),
    );
    let content = RawValue::from_string(content)
        .map_err(|e| ProxyError::InvalidRequest(format!("a message's content: {e}")))?;
    object.set("content", content);
    RawValue::from_string(object.to_text())
        .map(Some)
        .map_err(|e| ProxyError::InvalidRequest(format!("a message: {e}")))
}

/// Rewrites one content block's references; whether it changed.
fn rewrite_block(block: &mut Value, rule: &Rule<'_>) -> bool {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        TOOL_REFERENCE => match as_note(block, rule) {
            Some(note) => {
                *block = note;
                true
            }
            None => false,
        },
        "tool_result" => {
            let Some(Value::Array(parts)) = block.get_mut("content") else {
                return false;
            };
            let mut changed = false;
            for part in parts.iter_mut() {
                if let Some(note) = as_note(part, rule) {
                    *part = note;
                    changed = true;
                }
            }
            changed
        }
        "tool_search_tool_result" => {
            let Some(Value::Array(found)) = block
                .get_mut("content")
                .and_then(|c| c.get_mut("tool_references"))
            else {
                return false;
            };
            let before = found.len();
            found.retain(|r| as_note(r, rule).is_none());
            found.len() != before
        }
        _ => false,
    }
}

/// The text block standing for `block` when it is a reference the rule
/// does not keep (its `cache_control` kept, so a breakpoint on it holds).
fn as_note(block: &Value, rule: &Rule<'_>) -> Option<Value> {
    if block.get("type").and_then(Value::as_str) != Some(TOOL_REFERENCE) {
        return None;
    }
    let name = block.get("tool_name").and_then(Value::as_str).unwrap_or("");
    if rule.keeps(name) {
        return None;
    }
    let mut note = Map::new();
    note.insert("type".into(), Value::from("text"));
    note.insert("text".into(), Value::from(reference_note(name, rule.plan)));
    if let Some(cc) = block.get("cache_control") {
        note.insert("cache_control".into(), cc.clone());
    }
    Some(Value::Object(note))
}

#[cfg(test)]
mod tests {
    use super::may_hold_reference;

    #[test]
    fn only_text_that_could_spell_a_reference_is_read_block_by_block() {
        assert!(may_hold_reference(r#"{"type":"tool_reference"}"#));
        assert!(may_hold_reference(r#"{"type":"\u0074ool_reference"}"#));
        assert!(may_hold_reference(r#"{"type":"tool_r\u0065f\u0065rence"}"#));
        assert!(may_hold_reference(r#"{"type":"tool\u005Freference"}"#));
        assert!(!may_hold_reference(
            r#"{"type":"text","text":"caf\u00e9 \u2014 ok"}"#
        ));
        assert!(!may_hold_reference(
            r#"{"type":"tool_result","content":"x"}"#
        ));
    }
}
