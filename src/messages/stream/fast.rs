//! The fast path: an event that continues a block the client already has
//! goes out as it came, or with only its `index` replaced, read through a
//! borrowed view instead of a JSON tree.

use super::*;
use crate::turn::Obj;

impl MessagesJudge {
    /// The common event continues a block the client already has (a text,
    /// thinking or input delta): read through a borrowed view, it goes out
    /// as it came, or with only its `index` replaced, without building a
    /// JSON tree. Anything else returns false.
    pub(super) fn fast(&mut self, ev: &SseEvent, data: &str, out: &mut Vec<Bytes>) -> bool {
        // Only objects are read where objects go (serde's derive would
        // also take a list of the fields): nothing the full path refuses
        // goes out here.
        let Ok(Obj(view)) = serde_json::from_str::<Obj<EventView<'_>>>(data) else {
            return false;
        };
        if view.kind != "content_block_delta" || view.content_block.is_some() {
            return false;
        }
        let (Some(index), Some(Obj(delta))) = (view.index, view.delta) else {
            return false;
        };
        let Ok(upstream) = index.get().parse::<u64>() else {
            return false;
        };
        let Some(pos) = self
            .turn
            .round
            .by_index(upstream)
            .filter(|&p| !self.turn.round.blocks[p].done)
        else {
            return false;
        };
        let client = self.turn.round.blocks[pos].client;
        let text = match delta_field(&delta.kind) {
            Some("text") => delta.text,
            Some("thinking") => delta.thinking,
            Some("signature") => delta.signature,
            Some("partial_json") => delta.partial_json,
            _ => None,
        };
        let Some(text) = text else {
            return false;
        };
        let Some(client) = client else {
            // A withheld block's delta: kept for its turn, never sent.
            self.turn.round.blocks[pos].add(&delta.kind, &text);
            return true;
        };
        let as_came = ev.event.as_deref() == Some("content_block_delta") && client == upstream;
        // A frame the proxy writes holds the data on one line.
        let span = span_of(data, index);
        if !as_came && (span.is_none() || data.contains('\n') || data.contains('\r')) {
            return false;
        }
        self.turn.round.blocks[pos].add(&delta.kind, &text);
        if delta.kind == "text_delta" && !text.is_empty() {
            self.turn.emitted_text = true;
        }
        if as_came {
            out.push(ev.raw.clone());
            return true;
        }
        let Some((a, b)) = span else {
            return false;
        };
        let len =
            "event: content_block_delta\ndata: \n\n".len() + data.len() - (b - a) + digits(client);
        let mut frame = Vec::with_capacity(len);
        frame.extend_from_slice(b"event: content_block_delta\ndata: ");
        frame.extend_from_slice(&data.as_bytes()[..a]);
        push_number(&mut frame, client);
        frame.extend_from_slice(&data.as_bytes()[b..]);
        frame.extend_from_slice(b"\n\n");
        out.push(Bytes::from(frame));
        true
    }
}

/// Whether an event's data is a `message_stop`.
pub(super) fn is_stop(data: &str) -> bool {
    serde_json::from_str::<TypeView<'_>>(data).is_ok_and(|v| v.kind == "message_stop")
}

#[derive(serde::Deserialize)]
struct TypeView<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
}

/// The fields of an event the fast path reads, borrowed from its text.
#[derive(serde::Deserialize)]
struct EventView<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    index: Option<&'a RawValue>,
    #[serde(borrow)]
    delta: Option<Obj<DeltaView<'a>>>,
    /// A block riding on a delta: the full path judges it.
    #[serde(borrow)]
    content_block: Option<&'a RawValue>,
}

/// A delta's type and the fields that hold its text.
#[derive(serde::Deserialize)]
struct DeltaView<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow)]
    signature: Option<Cow<'a, str>>,
    #[serde(borrow)]
    partial_json: Option<Cow<'a, str>>,
}
