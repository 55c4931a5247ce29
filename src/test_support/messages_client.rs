//! What a Messages API client makes of a stream, the way Anthropic's SDKs
//! accumulate it, checking on the way what holds for every stream the
//! proxy writes: each event's `event:` line names its type, one
//! `message_start` (with no content) before any block, block indices
//! contiguous from 0, every delta and stop naming an open block, at most
//! one `message_delta` (after every block closed) and one `message_stop`,
//! and nothing after the `message_stop`.

use serde_json::Value;

use super::client_events;

/// A `tool_use` block the client got.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientCall {
    /// Its `id`.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its input as JSON text: the `partial_json`s joined, or the start's
    /// `input` when none came.
    pub input: String,
}

/// The client's reading of a Messages stream.
#[derive(Debug, Default)]
pub struct ClientView {
    /// Every event's data, in order.
    pub events: Vec<Value>,
    /// The `text_delta`s, joined.
    pub text: String,
    /// The `thinking_delta`s, joined.
    pub thinking: String,
    /// The `signature_delta`s, joined.
    pub signature: String,
    /// The `tool_use` blocks, in order.
    pub calls: Vec<ClientCall>,
    /// Every block's type, by client index.
    pub blocks: Vec<String>,
    /// The `message_delta`'s stop reason, if one came.
    pub stop_reason: Option<String>,
    /// The `message_delta`'s usage, if one came.
    pub usage: Option<Value>,
    /// `message_delta`s.
    pub message_deltas: usize,
    /// `message_stop`s.
    pub message_stops: usize,
    /// `error` events.
    pub errors: Vec<Value>,
}

/// Reads the client's bytes; panics where a stream invariant breaks.
pub fn reassemble(bytes: &[u8]) -> ClientView {
    let mut view = ClientView::default();
    let mut open: Vec<bool> = Vec::new();
    let mut json: Vec<String> = Vec::new();
    let mut starts = 0;
    for ev in client_events(bytes) {
        assert_eq!(view.message_stops, 0, "nothing after message_stop");
        let e: Value = serde_json::from_str(&ev.data)
            .unwrap_or_else(|err| panic!("an event that is no JSON ({err}): {}", ev.data));
        let kind = e["type"]
            .as_str()
            .expect("every event has a type")
            .to_owned();
        assert_eq!(
            ev.event.as_deref(),
            Some(kind.as_str()),
            "the event line names the type"
        );
        let index = e.get("index").and_then(Value::as_u64).map(|i| i as usize);
        match kind.as_str() {
            "ping" => {}
            "error" => view.errors.push(e.clone()),
            "message_start" => {
                starts += 1;
                assert_eq!(starts, 1, "one message_start");
                assert!(
                    e["message"]["content"].as_array().is_none_or(Vec::is_empty),
                    "a message_start carries no content"
                );
            }
            "content_block_start" => {
                assert_eq!(starts, 1, "a block after the message_start");
                assert_eq!(view.message_deltas, 0, "no block after message_delta");
                let index = index.expect("a block start has an index");
                assert_eq!(index, open.len(), "contiguous block indices");
                open.push(true);
                let block = &e["content_block"];
                let kind = block["type"].as_str().unwrap_or("").to_owned();
                json.push(String::new());
                if kind == "tool_use" {
                    view.calls.push(ClientCall {
                        id: block["id"].as_str().unwrap_or("").to_owned(),
                        name: block["name"].as_str().unwrap_or("").to_owned(),
                        input: block
                            .get("input")
                            .map_or_else(|| "{}".to_owned(), Value::to_string),
                    });
                }
                view.blocks.push(kind);
            }
            "content_block_delta" => {
                let index = index.expect("a delta has an index");
                assert!(
                    open.get(index).copied().unwrap_or(false),
                    "a delta of block {index}, which is not open"
                );
                let delta = &e["delta"];
                let text = |field: &str| delta[field].as_str().unwrap_or("").to_owned();
                match delta["type"].as_str().unwrap_or("") {
                    "text_delta" => view.text.push_str(&text("text")),
                    "thinking_delta" => view.thinking.push_str(&text("thinking")),
                    "signature_delta" => view.signature.push_str(&text("signature")),
                    "input_json_delta" => json[index].push_str(&text("partial_json")),
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = index.expect("a block stop has an index");
                assert!(
                    open.get(index).copied().unwrap_or(false),
                    "block {index} stops, but it is not open"
                );
                open[index] = false;
                if view.blocks[index] == "tool_use" && !json[index].is_empty() {
                    let position = view.blocks[..index]
                        .iter()
                        .filter(|b| *b == "tool_use")
                        .count();
                    view.calls[position].input = json[index].clone();
                }
            }
            "message_delta" => {
                view.message_deltas += 1;
                assert_eq!(view.message_deltas, 1, "one message_delta");
                assert!(
                    view.errors.is_empty(),
                    "no message_delta after an error event"
                );
                assert!(
                    open.iter().all(|o| !o),
                    "every block closed before message_delta"
                );
                view.stop_reason = e["delta"]["stop_reason"].as_str().map(str::to_owned);
                view.usage = e.get("usage").cloned();
            }
            "message_stop" => view.message_stops += 1,
            other => panic!("an event type no client knows: {other}"),
        }
        view.events.push(e);
    }
    view
}
