//! Runs of call items and outputs a client sent back with `call_id`s of
//! its own (or none), found to be a batch a program handed out
//! ([`echoed_batch`]) and given the proxy's ids again.

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::ItemReader;
use crate::runtime::{echoed_batch, handed_out, may_echo, CallEntry, EchoedCall, EchoedResult};
use crate::wire::to_raw;

impl ItemReader<'_> {
    /// `items` with each run of call items and outputs whose calls carry
    /// none of the proxy's ids, when the calls echo a batch one of the
    /// tenant's programs handed out, given the `call_id`s the proxy gave
    /// them, and the outputs theirs, paired as the client paired them.
    /// `None` when no run needs it; `Err` when a run's outputs cannot be
    /// told apart.
    pub(super) fn read_echoes<'i>(
        &self,
        items: &'i [Box<RawValue>],
    ) -> Result<Option<Vec<Box<RawValue>>>, String> {
        let read = |raw: &'i RawValue| -> Option<RunItem<'i>> {
            let text = raw.get();
            if !text.contains("call") {
                return None;
            }
            // An item is told by its type alone: an output's output (most
            // of its bytes) is read only when its group may be a batch, a
            // message's never.
            let head = crate::responses::items::peeked_type(text)
                .map(|kind| Some(Cow::Borrowed(kind)))
                .or_else(|| Some(serde_json::from_str::<TypeHead<'_>>(text).ok()?.kind));
            if let Some(kind) = head {
                let kind = kind.as_deref()?;
                if kind.ends_with("_output") {
                    return Some(RunItem::Output(raw));
                }
                if !crate::responses::items::is_call_type(kind) {
                    return None;
                }
            }
            let item: Value = serde_json::from_str(text).ok()?;
            let kind = item["type"].as_str()?;
            if kind.ends_with("_output") {
                return Some(RunItem::Output(raw));
            }
            crate::responses::items::is_call_type(kind).then_some(RunItem::Call(item))
        };
        let mut renamed: Option<Vec<Box<RawValue>>> = None;
        let mut i = 0;
        while i < items.len() {
            let run: Vec<(usize, RunItem<'i>)> = items[i..]
                .iter()
                .map_while(|raw| read(raw))
                .enumerate()
                .map(|(k, item)| (i + k, item))
                .collect();
            if run.is_empty() {
                i += 1;
                continue;
            }
            i += run.len();
            // Batches one after another (calls, outputs, calls, outputs)
            // are told apart where a call follows an output; a client that
            // puts each output after its call splits a batch, so a batch
            // is looked for in one or more pieces in a row.
            let mut pieces: Vec<std::ops::Range<usize>> = Vec::new();
            let mut start = 0;
            for k in 1..run.len() {
                if !run[k].1.is_output() && run[k - 1].1.is_output() {
                    pieces.push(start..k);
                    start = k;
                }
            }
            pieces.push(start..run.len());
            // A group naming one of the proxy's ids is read by its ids.
            let minted: Vec<bool> = run
                .iter()
                .map(|(_, item)| {
                    item.call()
                        .and_then(|c| c["call_id"].as_str())
                        .is_some_and(|id| self.ids.names_proxy_id(id))
                })
                .collect();
            // A group holding a call no program handed out is no batch:
            // one lookup per call, where groups are many (a Codex request
            // with 30 tool turns tried some 400, each a digest and a
            // lookup).
            let handed: Vec<bool> = run
                .iter()
                .map(|(_, item)| {
                    item.call().is_none_or(|c| {
                        let (name, args) = call_parts(c);
                        handed_out(self.ids.store, self.ids.tenant, &name, &args)
                    })
                })
                .collect();
            // Each handed-out call read once for the batch key; a group is
            // read whole (its outputs too) only when the store holds a
            // batch of exactly its calls. Trying every group of up to
            // MAX_PIECES pieces read them all each time: 269 M
            // instructions for a Codex request with 30 tool turns.
            let entries: Vec<Option<CallEntry>> = run
                .iter()
                .zip(&handed)
                .map(|((_, item), handed)| item.call().filter(|_| *handed).map(call_entry))
                .collect();
            let mut p = 0;
            while p < pieces.len() {
                let mut taken = 1;
                for q in p..pieces.len().min(p + MAX_PIECES) {
                    let span = pieces[p].start..pieces[q].end;
                    if minted[span.clone()].iter().any(|m| *m) {
                        break;
                    }
                    if !handed[span.clone()].iter().all(|h| *h) {
                        break;
                    }
                    if !may_echo(
                        self.ids.store,
                        self.ids.tenant,
                        entries[span.clone()].iter().flatten(),
                    ) {
                        continue;
                    }
                    let Some(named) = self.echo(&run[span])? else {
                        continue;
                    };
                    let out = renamed.get_or_insert_with(|| items.to_vec());
                    for (k, item) in named {
                        out[k] = to_raw(&item);
                    }
                    taken = q - p + 1;
                    break;
                }
                p += taken;
            }
        }
        Ok(renamed)
    }

    /// The items of `group` given the ids of the batch its calls echo
    /// ([`echoed_batch`]), when they echo one.
    fn echo(&self, group: &[(usize, RunItem<'_>)]) -> Result<Option<Vec<Placed>>, String> {
        let mut calls: Vec<(usize, &Value)> = Vec::new();
        let mut outputs: Vec<Placed> = Vec::new();
        for (k, item) in group {
            match item {
                RunItem::Call(call) => calls.push((*k, call)),
                RunItem::Output(raw) => match serde_json::from_str(raw.get()) {
                    Ok(output) => outputs.push((*k, output)),
                    Err(_) => return Ok(None),
                },
            }
        }
        // (A group naming one of the proxy's ids never gets here: `echoes`
        // stops at it.)
        if calls.is_empty() {
            return Ok(None);
        }
        let parts: Vec<(String, Cow<'_, str>)> = calls.iter().map(|(_, c)| call_parts(c)).collect();
        let echoed: Vec<EchoedCall<'_>> = calls
            .iter()
            .zip(&parts)
            .map(|((_, c), (name, args))| EchoedCall {
                id: c["call_id"].as_str(),
                name,
                args: args.as_ref().into(),
            })
            .collect();
        let contents: Vec<String> = outputs
            .iter()
            .map(|(_, o)| o["output"].to_string())
            .collect();
        let results: Vec<EchoedResult<'_>> = outputs
            .iter()
            .zip(&contents)
            .map(|((_, o), content)| EchoedResult {
                id: o["call_id"].as_str(),
                content,
            })
            .collect();
        let Some(echo) = echoed_batch(self.ids.store, self.ids.tenant, &echoed, &results)? else {
            return Ok(None);
        };
        let ids = echo.calls.iter().map(Some);
        let named = calls.iter().map(|(k, c)| (*k, (*c).clone())).zip(ids);
        let answered = outputs
            .into_iter()
            .zip(echo.results.iter().map(Option::as_ref));
        Ok(Some(
            named
                .chain(answered)
                .filter_map(|((k, mut item), id)| {
                    item["call_id"] = json!(id?);
                    Some((k, item))
                })
                .collect(),
        ))
    }
}

/// An item and its place in the input.
type Placed = (usize, Value);

/// An item of a run of calls and outputs, as the search first reads it: a
/// call item whole (it is small, and its mark reads all of it), an output
/// by its type alone.
enum RunItem<'a> {
    Call(Value),
    Output(&'a RawValue),
}

impl RunItem<'_> {
    fn is_output(&self) -> bool {
        matches!(self, RunItem::Output(_))
    }

    fn call(&self) -> Option<&Value> {
        match self {
            RunItem::Call(call) => Some(call),
            RunItem::Output(_) => None,
        }
    }
}

#[derive(serde::Deserialize)]
struct TypeHead<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
}

/// Pieces of a run of call items and outputs one batch is looked for in.
const MAX_PIECES: usize = 16;

/// A call item's [`CallEntry`].
fn call_entry(item: &Value) -> CallEntry {
    let (name, args) = call_parts(item);
    CallEntry::of(&name, &args)
}

/// The tool a call item names and its arguments as JSON text (a freeform
/// call's `input` is a string, read as the JSON string it is).
fn call_parts(item: &Value) -> (String, Cow<'_, str>) {
    let name = item
        .as_object()
        .map(crate::responses::items::tool_name)
        .unwrap_or_default();
    let args = match (&item["arguments"], &item["input"]) {
        (Value::String(args), _) => args.as_str().into(),
        (_, input @ Value::String(_)) => input.to_string().into(),
        _ => "".into(),
    };
    (name, args)
}
