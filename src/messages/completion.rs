//! A whole (non-streamed) Messages response, judged: the same rule as a
//! chat completion, on content blocks.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::items::{check_block, is_call_block, is_safe_block, judge_block, withheld_reference};
use crate::plan::ToolPlan;
use crate::turn::shape;
use crate::turn::{probe, Edit, Edits, Field, JudgedCall, Obj, Quiet, Step, Unreadable};

/// The model's turn after judging.
#[derive(Debug, Default)]
pub struct JudgedMessage {
    /// The model's message as it came, withheld calls included (its
    /// thinking blocks with their signatures untouched): the turn a repair
    /// or a program's history replays.
    pub assistant: Value,
    /// The `tool_use` blocks, judged, in order.
    pub calls: Vec<JudgedCall>,
}

impl JudgedMessage {
    /// The text of the turn's text blocks.
    pub fn text(&self) -> Option<String> {
        let text: String = self.assistant["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect();
        (!text.is_empty()).then_some(text)
    }
}

/// Judges every `tool_use` block of `message`: the turn, and the edit that
/// withholds from its `content` every call that does not pass and every
/// `tool_reference` to a tool the model may not be given (which the turn
/// replayed upstream leaves out too). A `content` that is no list, a block
/// that is no object, or a call block whose name is no string refuses the
/// message (`crate::turn::shape`; `null` is absent).
pub fn judge_message(
    message: &Map<String, Value>,
    plan: &ToolPlan,
) -> Result<(JudgedMessage, Edits), Unreadable> {
    let mut turn = JudgedMessage::default();
    let content = shape::list(message.get("content"), &[Step::Key("content")])?;
    for (i, block) in content.iter().enumerate() {
        check_block(block).map_err(|e| e.under(&[Step::Key("content"), Step::Index(i)]))?;
    }
    let mut replay = Vec::with_capacity(content.len());
    let mut keep = Vec::with_capacity(content.len());
    for block in content {
        if withheld_reference(block, plan) {
            keep.push(false);
            continue;
        }
        match judge_block(block, plan) {
            Some(call) => {
                keep.push(call.passed());
                turn.calls.push(call);
            }
            None => keep.push(true),
        }
        replay.push(block.clone());
    }
    turn.assistant = json!({"role": "assistant", "content": replay});
    let mut edits = Edits::default();
    edits.push(Edit::Retain {
        at: vec![Step::Key("content")],
        keep,
    });
    Ok((turn, edits))
}

/// Ends the turn without calls: the model's text stays, and a note when
/// there is none; `stop_reason` is `end_turn`.
pub fn give_up(message: &mut Map<String, Value>, note: &str) {
    if let Some(Value::Array(blocks)) = message.get_mut("content") {
        blocks.retain(|b| !is_call_block(b));
        let has_text = blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .any(|b| b["text"].as_str().is_some_and(|t| !t.trim().is_empty()));
        if !has_text {
            blocks.push(json!({"type": "text", "text": note}));
        }
    }
    message.insert("stop_reason".into(), json!("end_turn"));
}

/// The message as [`judge_message`] would pass it untouched with no call,
/// read without a tree (`crate::turn::quiet`): `content` absent or a list
/// of blocks of the types that are no call.
pub fn quiet(body: &[u8]) -> Option<Quiet> {
    #[derive(Deserialize)]
    struct Message<'a> {
        #[serde(default, borrow)]
        content: Field<Vec<Obj<Block<'a>>>>,
        #[serde(default)]
        usage: Field<Value>,
    }
    #[derive(Deserialize)]
    struct Block<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
    }
    let message: Message = probe(body)?;
    let quiet = match &message.content {
        Field::Absent => true,
        Field::Present(blocks) => blocks.iter().all(|Obj(b)| is_safe_block(&b.kind)),
    };
    quiet.then(|| message.usage.usage())
}
