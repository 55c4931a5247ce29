//! What a Responses API client makes of a stream, the way the OpenAI SDKs
//! accumulate it, checking on the way what holds for every stream the
//! proxy writes: each event's `event:` line names its type, one
//! `sequence_number` rising from 0, one response id, `output_index`
//! contiguous and every item event naming an item the client has, nothing
//! after the terminal event but one `[DONE]` (after an `error`, also the
//! `response.failed` that carries it), and the terminal's `output`
//! equal to the items the client completed.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::client_events;

/// A call item the client completed.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientCall {
    /// Its item type (`function_call`, `custom_tool_call`, ...).
    pub kind: String,
    /// Its `call_id`.
    pub call_id: String,
    /// Its name.
    pub name: String,
    /// Its `arguments` (or a custom call's `input`).
    pub arguments: String,
}

/// The client's reading of a Responses stream.
#[derive(Debug, Default)]
pub struct ClientView {
    /// Every event's data, in order.
    pub events: Vec<Value>,
    /// The `response.output_text.delta`s, joined.
    pub text: String,
    /// The items completed (`response.output_item.done`), in order.
    pub items: Vec<Value>,
    /// The call items among them.
    pub calls: Vec<ClientCall>,
    /// The terminal event (`response.completed`, `.incomplete`, `.failed`).
    pub terminal: Option<Value>,
    /// `error` events.
    pub errors: Vec<Value>,
    /// `[DONE]` sentinels.
    pub done: usize,
}

const TERMINALS: [&str; 3] = [
    "response.completed",
    "response.incomplete",
    "response.failed",
];

/// Reads the client's bytes; panics where a stream invariant breaks.
pub fn reassemble(bytes: &[u8]) -> ClientView {
    let mut view = ClientView::default();
    let mut id: Option<String> = None;
    let mut opened: Vec<bool> = Vec::new(); // by output_index: done yet?
    let mut index_of: HashMap<String, u64> = HashMap::new();
    let mut streamed: HashMap<u64, String> = HashMap::new();
    let mut ended = false;
    // After an `error`, only the `response.failed` carrying the same error
    // may follow (OpenAI sends both; Codex reads the code in the second).
    let mut after_error = false;
    for ev in client_events(bytes) {
        assert_eq!(view.done, 0, "nothing after [DONE]: {}", ev.data);
        if ev.data == "[DONE]" {
            view.done += 1;
            continue;
        }
        let e: Value = serde_json::from_str(&ev.data)
            .unwrap_or_else(|err| panic!("an event that is no JSON ({err}): {}", ev.data));
        let kind = e["type"]
            .as_str()
            .expect("every event has a type")
            .to_owned();
        let failed_after_error = after_error && kind == "response.failed";
        assert!(
            !ended || failed_after_error,
            "nothing after the terminal event: {}",
            ev.data
        );
        after_error = false;
        assert_eq!(
            ev.event.as_deref(),
            Some(kind.as_str()),
            "the event line names the type"
        );
        assert_eq!(
            e["sequence_number"],
            json!(view.events.len()),
            "sequence_number rises from 0 by one: {kind}"
        );
        if let Some(rid) = e.pointer("/response/id").and_then(Value::as_str) {
            assert_eq!(
                id.get_or_insert_with(|| rid.to_owned()),
                rid,
                "one response id"
            );
        }
        let index = e.get("output_index").and_then(Value::as_u64);
        match kind.as_str() {
            "response.output_item.added" => {
                let index = index.expect("an added item has an output_index");
                assert_eq!(index, opened.len() as u64, "contiguous output_index");
                opened.push(false);
                if let Some(item_id) = e.pointer("/item/id").and_then(Value::as_str) {
                    index_of.insert(item_id.to_owned(), index);
                }
            }
            "response.output_item.done" => {
                let index = index.expect("a done item has an output_index");
                let slot = opened
                    .get_mut(index as usize)
                    .unwrap_or_else(|| panic!("item {index} completed before it opened"));
                assert!(!*slot, "item {index} completed twice");
                *slot = true;
                let item = e["item"].clone();
                if let Some(call) = call_of(&item) {
                    if let Some(deltas) = streamed.get(&index) {
                        assert_eq!(
                            deltas, &call.arguments,
                            "a call's deltas join to its whole arguments"
                        );
                    }
                    view.calls.push(call);
                }
                view.items.push(item);
            }
            _ => {
                if let Some(index) = index {
                    assert!(
                        (index as usize) < opened.len(),
                        "{kind} names item {index}, which the client lacks"
                    );
                    assert!(
                        !opened[index as usize],
                        "{kind} after item {index} completed"
                    );
                    if let Some(item_id) = e.get("item_id").and_then(Value::as_str) {
                        if let Some(known) = index_of.get(item_id) {
                            assert_eq!(*known, index, "an item's events carry its index");
                        }
                    }
                }
            }
        }
        match kind.as_str() {
            "response.output_text.delta" => {
                view.text
                    .push_str(e["delta"].as_str().expect("a text delta"));
            }
            "response.function_call_arguments.delta" | "response.custom_tool_call_input.delta" => {
                let index = index.expect("a delta names its item");
                streamed
                    .entry(index)
                    .or_default()
                    .push_str(e["delta"].as_str().expect("an arguments delta"));
            }
            "error" => {
                view.errors.push(e.clone());
                ended = true;
                after_error = true;
            }
            k if TERMINALS.contains(&k) => {
                ended = true;
                if k != "response.failed" {
                    assert_eq!(
                        e["response"]["output"],
                        json!(view.items),
                        "the terminal holds the items the client completed"
                    );
                }
                view.terminal = Some(e.clone());
            }
            _ => {}
        }
        view.events.push(e);
    }
    view
}

/// A call item as a client executes it.
fn call_of(item: &Value) -> Option<ClientCall> {
    let kind = item["type"].as_str()?;
    let field = match kind {
        "function_call" => "arguments",
        "custom_tool_call" => "input",
        k if k.ends_with("_call") && item.get("call_id").is_some() => "action",
        _ => return None,
    };
    let arguments = match &item[field] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Some(ClientCall {
        kind: kind.to_owned(),
        call_id: item["call_id"].as_str().unwrap_or("").to_owned(),
        name: item["name"].as_str().unwrap_or(kind).to_owned(),
        arguments,
    })
}
