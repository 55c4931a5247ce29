//! A whole (non-streamed) Responses response, judged: the same rule as a
//! chat completion, on output items.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::items::{check_item, is_safe_type, judge_item};
use crate::plan::ToolPlan;
use crate::turn::shape;
use crate::turn::{probe, Edit, Edits, Field, JudgedCall, Obj, Quiet, Step, Unreadable};

/// The model's turn after judging.
#[derive(Debug, Default)]
pub struct JudgedResponse {
    /// Every output item as the model wrote it, withheld calls included:
    /// the turn a repair or a program's history replays.
    pub items: Vec<Value>,
    /// The call items, judged, in output order.
    pub calls: Vec<JudgedCall>,
}

impl JudgedResponse {
    /// The text of the turn's message items.
    pub fn text(&self) -> Option<String> {
        let text: String = self.items.iter().filter_map(message_text).collect();
        (!text.is_empty()).then_some(text)
    }
}

/// The text of a message item's `output_text` parts.
pub fn message_text(item: &Value) -> Option<String> {
    if item.get("type").and_then(Value::as_str) != Some("message") {
        return None;
    }
    let parts = item.get("content")?.as_array()?;
    Some(
        parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("output_text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
    )
}

/// Judges every call item of `response`: the turn, and the edit that
/// withholds from its `output` every call that does not pass (denied ones,
/// and programs the proxy runs). An `output` that is no list, an item
/// that is no object, or a call item whose names are no strings refuses
/// the response (`crate::turn::shape`; `null` is absent).
pub fn judge_response(
    response: &Map<String, Value>,
    plan: &ToolPlan,
) -> Result<(JudgedResponse, Edits), Unreadable> {
    let mut turn = JudgedResponse::default();
    let mut edits = Edits::default();
    let items = shape::list(response.get("output"), &[Step::Key("output")])?;
    for (i, item) in items.iter().enumerate() {
        check_item(item).map_err(|e| e.under(&[Step::Key("output"), Step::Index(i)]))?;
    }
    turn.items = items.to_vec();
    let mut keep = Vec::with_capacity(items.len());
    for item in items {
        match judge_item(item, plan) {
            Some(call) => {
                keep.push(call.passed());
                turn.calls.push(call);
            }
            None => keep.push(true),
        }
    }
    edits.push(Edit::Retain {
        at: vec![Step::Key("output")],
        keep,
    });
    Ok((turn, edits))
}

/// Ends the turn without calls: the model's text stays, and a note when
/// there is none (the repair bound, or programs past theirs).
pub fn give_up(response: &mut Map<String, Value>, note: &str) {
    let Some(items) = response.get_mut("output").and_then(Value::as_array_mut) else {
        return;
    };
    items.retain(|i| !super::items::is_judged_item(i));
    let has_text = items
        .iter()
        .filter_map(message_text)
        .any(|t| !t.trim().is_empty());
    if !has_text {
        items.push(note_message(note));
    }
    response.insert("status".into(), json!("completed"));
}

/// A message item holding `text`, as the proxy writes one.
pub fn note_message(text: &str) -> Value {
    json!({"type": "message", "id": crate::turn::hex_item_id("msg_"),
           "status": "completed", "role": "assistant",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// The response as [`judge_response`] would pass it untouched with no
/// call, read without a tree (`crate::turn::quiet`): `output` absent or a
/// list of items of the types that are no call, none run by the client.
pub fn quiet(body: &[u8]) -> Option<Quiet> {
    #[derive(Deserialize)]
    struct Response<'a> {
        #[serde(default, borrow)]
        output: Field<Vec<Obj<Item<'a>>>>,
        #[serde(default)]
        usage: Field<Value>,
    }
    #[derive(Deserialize)]
    struct Item<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(default, borrow)]
        execution: Option<Cow<'a, str>>,
    }
    let response: Response = probe(body)?;
    let quiet = match &response.output {
        Field::Absent => true,
        Field::Present(items) => items
            .iter()
            .all(|Obj(i)| is_safe_type(&i.kind) && i.execution.as_deref() != Some("client")),
    };
    quiet.then(|| response.usage.usage())
}
