//! Splicing stored denials into a flat history: a list whose calls and
//! results are entries of their own (Responses' input items, Interactions'
//! steps), where one turn's calls and results stand side by side.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::Value;

use super::{Splice, TenantSplices};
use crate::conversation::Anchor;
use crate::wire::to_raw;

/// What an entry of a flat history is to the splice.
#[derive(Debug, PartialEq)]
pub enum Entry {
    /// A call, by the id its result names.
    Call(String),
    /// The answer to the call of that id.
    Result(String),
    /// Anything else: a message, a thought, a turn's text.
    Other,
}

impl Entry {
    fn id(&self) -> Option<&str> {
        match self {
            Entry::Call(id) | Entry::Result(id) => Some(id),
            Entry::Other => None,
        }
    }
}

/// Splices stored denials back into the turns they belong to.
///
/// A turn is found by its results: the call ids of a run of call and
/// result entries (`[calls..., results...]`, or each call followed by its
/// result), else of each run of consecutive results, must be exactly the
/// ids of a stored turn of this tenant. The denied calls and their answers
/// go right after the turn's last call, so every result follows its call.
/// Where the provider holds the turn (denied calls included) the history
/// carries only the results: the answers then go right before them.
/// Nothing is added twice: a denial the history already answers stays as
/// it is.
pub fn splice_denials(
    entries: &mut Vec<Box<RawValue>>,
    kinds: &[Entry],
    anchor: &Anchor,
    splices: &TenantSplices,
) {
    let mut inserts: Vec<(usize, Vec<Box<RawValue>>)> = Vec::new();
    let mut present: Option<HashSet<&str>> = None;
    for (start, end) in runs(kinds, |k| *k != Entry::Other) {
        let whole = results(&kinds[start..end], start);
        let hits: Vec<(Vec<usize>, Arc<Splice>)> = match lookup(kinds, &whole, anchor, splices) {
            Some(s) => vec![(whole, s)],
            None => runs(&kinds[start..end], |k| matches!(k, Entry::Result(_)))
                .filter_map(|(s, e)| {
                    let part: Vec<usize> = (start + s..start + e).collect();
                    (part.len() < whole.len())
                        .then(|| lookup(kinds, &part, anchor, splices).map(|hit| (part, hit)))
                        .flatten()
                })
                .collect(),
        };
        for (outs, splice) in hits {
            let present =
                present.get_or_insert_with(|| kinds.iter().filter_map(Entry::id).collect());
            let ids: HashSet<&str> = outs.iter().filter_map(|&i| kinds[i].id()).collect();
            let last_call = kinds
                .iter()
                .rposition(|k| matches!(k, Entry::Call(id) if ids.contains(id.as_str())));
            let fresh = |v: &Value| {
                ["call_id", "id"]
                    .iter()
                    .find_map(|k| v.get(*k).and_then(Value::as_str))
                    .is_none_or(|id| !present.contains(id))
            };
            let answers = splice.denials.iter().filter(|v| fresh(v)).map(to_raw);
            let (at, added): (usize, Vec<Box<RawValue>>) = match last_call {
                Some(i) => (
                    i + 1,
                    splice
                        .denied_calls
                        .iter()
                        .filter(|v| fresh(v))
                        .map(to_raw)
                        .chain(answers)
                        .collect(),
                ),
                None => (outs[0], answers.collect()),
            };
            if !added.is_empty() {
                inserts.push((at, added));
            }
        }
    }
    // From the back, so earlier positions stay valid.
    inserts.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    for (at, added) in inserts {
        entries.splice(at..at, added);
    }
}

/// The maximal runs of entries for which `keep` holds, as `(start, end)`.
fn runs<'a>(
    kinds: &'a [Entry],
    keep: impl Fn(&Entry) -> bool + 'a,
) -> impl Iterator<Item = (usize, usize)> + 'a {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < kinds.len() && !keep(&kinds[i]) {
            i += 1;
        }
        if i == kinds.len() {
            return None;
        }
        let start = i;
        while i < kinds.len() && keep(&kinds[i]) {
            i += 1;
        }
        Some((start, i))
    })
}

/// The positions of the results among `kinds` (which start at `offset`).
fn results(kinds: &[Entry], offset: usize) -> Vec<usize> {
    kinds
        .iter()
        .enumerate()
        .filter(|(_, k)| matches!(k, Entry::Result(_)))
        .map(|(i, _)| offset + i)
        .collect()
}

/// The splice stored for the turn whose results are at `outs`.
fn lookup(
    kinds: &[Entry],
    outs: &[usize],
    anchor: &Anchor,
    splices: &TenantSplices,
) -> Option<Arc<Splice>> {
    let ids: Vec<&str> = outs.iter().filter_map(|&i| kinds[i].id()).collect();
    splices.get(anchor, &ids)
}
