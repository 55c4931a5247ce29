//! The fast path: an event that continues an item the client already has
//! goes out as it came, with only its numbers renumbered, read through a
//! borrowed view instead of a JSON tree.

use super::*;
use crate::turn::Obj;

impl ResponsesJudge {
    /// The common event continues an item the client already has (a text
    /// or arguments delta): read it through a borrowed view and write its
    /// bytes with only `sequence_number` and `output_index` replaced,
    /// without building a JSON tree. Anything else returns false.
    pub(super) fn fast(&mut self, data: &str, out: &mut Vec<Bytes>) -> bool {
        // A line break inside the data would need several `data:` lines.
        if data.contains('\n') || data.contains('\r') {
            return false;
        }
        // Only an object is read as an event (serde's derive would also
        // take a list of the fields): nothing the full path refuses goes
        // out here.
        let Ok(Obj(view)) = serde_json::from_str::<Obj<EventView<'_>>>(data) else {
            return false;
        };
        if view.item.is_some() || view.response.is_some() || !is_event_name(&view.kind) {
            return false;
        }
        if STRUCTURAL.contains(&view.kind.as_ref()) {
            return false;
        }
        let (Some(seq), Some(index)) = (view.sequence_number, view.output_index) else {
            return false;
        };
        let Ok(upstream) = index.get().parse::<u64>() else {
            return false;
        };
        let Some(client) = self
            .turn
            .round
            .by_index(upstream)
            .and_then(|p| self.turn.round.items[p].client)
        else {
            return false;
        };
        if view
            .item_id
            .as_deref()
            .is_some_and(|id| self.turn.round.withholds_id(id))
        {
            return false;
        }
        let (Some(a), Some(b)) = (span_of(data, seq), span_of(data, index)) else {
            return false;
        };
        if view.kind == "response.output_text.delta" {
            self.turn.emitted_text = true;
        }
        let seq_value = self.next_seq();
        let (first, second) = if a.0 < b.0 {
            ((a, seq_value), (b, client))
        } else {
            ((b, client), (a, seq_value))
        };
        // Sized exactly, so the bytes go out without another allocation.
        let len =
            "event: \ndata: \n\n".len() + view.kind.len() + data.len() - (a.1 - a.0) - (b.1 - b.0)
                + digits(seq_value)
                + digits(client);
        let mut frame = Vec::with_capacity(len);
        frame.extend_from_slice(b"event: ");
        frame.extend_from_slice(view.kind.as_bytes());
        frame.extend_from_slice(b"\ndata: ");
        let bytes = data.as_bytes();
        frame.extend_from_slice(&bytes[..first.0 .0]);
        push_number(&mut frame, first.1);
        frame.extend_from_slice(&bytes[first.0 .1..second.0 .0]);
        push_number(&mut frame, second.1);
        frame.extend_from_slice(&bytes[second.0 .1..]);
        frame.extend_from_slice(b"\n\n");
        out.push(Bytes::from(frame));
        true
    }
}

/// The fields of an event the fast path reads, borrowed from its text.
#[derive(serde::Deserialize)]
struct EventView<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    sequence_number: Option<&'a RawValue>,
    #[serde(borrow)]
    output_index: Option<&'a RawValue>,
    #[serde(borrow)]
    item_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    item: Option<&'a RawValue>,
    #[serde(borrow)]
    response: Option<&'a RawValue>,
}
