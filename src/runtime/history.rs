//! The model's view of executions: the client's history holds the nested
//! traffic (calls with minted ids and their results); the model sees one
//! `run_code` call and its result instead, on every request. The walk that
//! finds a program's traffic and puts its pair in its place is written once
//! here ([`Transcript::rewrite`]); each dialect says only how its entries
//! (messages, items, contents) read as calls and results, and how the pair
//! is written (`chat/history.rs`, `responses/history.rs`,
//! `messages/history.rs`, `gemini/history.rs`, `interactions/history.rs`).
//! Dialects whose calls and results are entries of their own, and whose
//! provider may keep the answer (Responses, Interactions), share two more
//! walks here: [`trailing_entries`] and [`continue_entries`].

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::Value;

use super::{
    may_name_minted, resolve_call_id, short_form, Execution, ExecutionLookup, Limits, MINTED_PREFIX,
};
use crate::error::ProxyError;
use crate::tenant::Tenant;
use crate::wire::to_raw;

mod told;

pub(crate) use told::interrupted;
pub use told::missing_text;

/// The results the client returns now, for the program waiting on them.
#[derive(Debug, Default)]
pub struct Trailing {
    /// The execution.
    pub exec: String,
    /// `(call number, result)` in the order they came.
    pub results: Vec<(usize, String)>,
    /// `(call number, name)` of each call of the turn that handed them out,
    /// as the client sends that turn back.
    pub calls: Vec<(usize, String)>,
}

/// Why the results a request returns cannot be read.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Results naming calls with the proxy's prefix that it never minted
    /// (changed, or made up): refused, never guessed at.
    NotHandedOut(Vec<String>),
    /// A turn sent back without the proxy's ids that matches one of its
    /// batches, where which result answers which call cannot be told: what
    /// is missing, in words ([`super::echoed_batch`]).
    Unclear(String),
}

/// A history entry's relation to executions.
#[derive(Debug, PartialEq, Eq)]
pub enum Kind {
    /// Calls minted for this execution: their numbers and the names the
    /// client gives them.
    Calls(String, Vec<(usize, String)>),
    /// Results for this execution's calls, `(call number, text)`, and what
    /// the entry holds beside them (blocks, parts), which the model keeps.
    Results(String, Vec<(usize, String)>, Vec<Value>),
    /// Results whose ids have the proxy's prefix but are no ids it minted.
    Unplaced(Vec<String>),
    /// Nothing of a program's.
    Other,
}

/// One tenant's executions, as a history's call ids name them.
pub struct CallIds<'a> {
    /// Where executions are held.
    pub store: &'a dyn ExecutionLookup,
    /// Whose history it is: only its executions are looked at.
    pub tenant: &'a Tenant,
}

impl CallIds<'_> {
    /// The execution and call number `id` names.
    pub fn resolve(&self, id: &str) -> Option<(String, usize)> {
        let found = resolve_call_id(id, self.tenant, self.store);
        if found.is_none() && short_form(id).is_some() && !id.starts_with(MINTED_PREFIX) {
            tracing::warn!(target: "codemode::program", "a call id shaped like a shortened proxy id names no call this proxy holds (its record is gone, or the id is the provider's own): left as it is, so the model sees an ordinary call");
        }
        found
    }

    /// Whether `id` is one the proxy gave, or has its shape: a turn naming
    /// one is read by its ids (an id of its shape it never minted is
    /// refused), never looked up by what it calls.
    pub fn names_proxy_id(&self, id: &str) -> bool {
        id.starts_with(MINTED_PREFIX) || self.resolve(id).is_some()
    }
}

/// A dialect's history, as the walk that rewrites it needs it: how its
/// entries read, and how the model's view of a program is written.
pub trait Transcript {
    /// Where the executions its ids name are found.
    fn ids(&self) -> &CallIds<'_>;

    /// Whether an entry may concern a program: a byte scan, no parse, as
    /// most requests hold no program at all.
    fn may_hold(text: &str) -> bool {
        may_name_minted(text)
    }

    /// The kind of every entry (one entry may be read against the one
    /// before it).
    fn kinds(&self, entries: &[Box<RawValue>]) -> Vec<Kind>;

    /// `entries` with the turns a client sent back under ids of its own
    /// given the proxy's ids again, when they echo a batch a program
    /// handed out; `None` when no turn needs it, `Err` when which result
    /// answers which call cannot be told. Asked once a request, by the
    /// dialect's `Dialect::rename_echoes`, before [`Transcript::rewrite`].
    fn echoes(&self, _entries: &[Box<RawValue>]) -> Result<Option<Vec<Box<RawValue>>>, String> {
        Ok(None)
    }

    /// Whether results with no call before them begin a program's run (an
    /// input that continues a response sends only the outputs).
    const RESULTS_BEGIN_A_RUN: bool = false;
    /// Whether results with no call before them are dropped (their call is
    /// not in the history, and a result needs one).
    const STRAY_RESULTS_DROPPED: bool = false;

    /// Whether `entry`, after a program's results, is what an agent sends
    /// beside them in an entry of its own (media a provider takes in no
    /// tool result): the model sees it after the program's result.
    fn follows_results(_entry: &RawValue) -> bool {
        false
    }

    /// Takes off the end of `out` what the model's turn of `e` holds again
    /// (entries a client sends back before the program's calls).
    fn before_run(_out: &mut Vec<Box<RawValue>>, _e: &Execution) {}

    /// The model's view of one execution: its turn, and its result once
    /// ended, with `beside` (what the client sent beside the nested
    /// results) after it.
    fn pair(e: &Execution, beside: &[Value]) -> Vec<Value>;

    /// The `run_code` call and result telling the model `text`: the record
    /// of `exec_id` is gone.
    fn missing_pair(exec_id: &str, text: &str, beside: Vec<Value>) -> Vec<Value>;

    /// Replaces each execution's nested traffic by the model's `run_code`
    /// turn and its result. A program the conversation moved past before it
    /// finished is recorded as interrupted. Executions the tenant does not
    /// hold become a placeholder pair, so the conversation stays well
    /// formed: another tenant's execution is never looked at.
    fn rewrite(&self, entries: &mut Vec<Box<RawValue>>, limits: &Limits) {
        if !entries.iter().any(|m| Self::may_hold(m.get())) {
            return;
        }
        let ids = self.ids();
        let kinds = self.kinds(entries);
        let mut out = Vec::with_capacity(entries.len());
        let mut i = 0;
        while i < entries.len() {
            let exec_id = match &kinds[i] {
                Kind::Calls(e, _) => e,
                Kind::Results(e, _, _) if Self::RESULTS_BEGIN_A_RUN => e,
                Kind::Results(..) if Self::STRAY_RESULTS_DROPPED => {
                    i += 1;
                    continue;
                }
                _ => {
                    out.push(entries[i].clone());
                    i += 1;
                    continue;
                }
            };
            // This execution's entries: its calls, their results, and what
            // an agent sent after results.
            let mut sent = BTreeMap::new();
            let mut beside = Vec::new();
            let mut after = Vec::new();
            let mut j = i;
            while j < entries.len() {
                match &kinds[j] {
                    Kind::Calls(e, _) if e == exec_id => {}
                    Kind::Results(e, results, others) if e == exec_id => {
                        sent.extend(results.iter().map(|(n, text)| (*n, text.as_str())));
                        beside.extend(others.iter().cloned());
                    }
                    Kind::Other
                        if (matches!(kinds[j - 1], Kind::Results(..))
                            || after.last() == Some(&(j - 1)))
                            && Self::follows_results(&entries[j]) =>
                    {
                        after.push(j);
                    }
                    _ => break,
                }
                j += 1;
            }
            let held = ids.store.get(ids.tenant, exec_id);
            if let Some(e) = &held {
                Self::before_run(&mut out, e);
            }
            let pair = match held {
                Some(e) if e.outcome.is_some() => Self::pair(&e, &beside),
                Some(e) => {
                    let mut e = Execution::clone(&e);
                    e.outcome = Some(interrupted(&e, &sent, limits));
                    tracing::info!(target: "codemode::program", run_call = %e.run_call_id, calls = e.calls.len(), outcome = "interrupted", "program ended: the client moved on before it finished");
                    let v = Self::pair(&e, &beside);
                    ids.store.put(std::sync::Arc::new(e));
                    v
                }
                None => {
                    let text = missing_text(exec_id, ids.tenant, limits.lifetime);
                    Self::missing_pair(exec_id, text, beside)
                }
            };
            out.extend(pair.iter().map(to_raw));
            out.extend(after.iter().map(|&k| entries[k].clone()));
            i = j;
        }
        *entries = out;
    }
}

/// The results at the end of `entries` for a program's calls, and the call
/// entries before them, for a dialect whose every call and result is an
/// entry of its own (Responses' items, Interactions' steps), `kind` reading
/// one: a stateless client sends both; one that continues an answer the
/// provider stored sends only the results. `Err` names results the proxy
/// cannot place (refused, never guessed).
pub fn trailing_entries(
    entries: &[Box<RawValue>],
    kind: impl Fn(&RawValue) -> Kind,
) -> Result<Option<Trailing>, Refused> {
    let mut results = Vec::new();
    let mut unplaced = Vec::new();
    let mut i = entries.len();
    while i > 0 {
        match kind(&entries[i - 1]) {
            Kind::Results(e, r, _) => {
                results.extend(r.into_iter().rev().map(|(n, text)| (e.clone(), n, text)))
            }
            Kind::Unplaced(ids) => unplaced.extend(ids.into_iter().rev()),
            _ => break,
        }
        i -= 1;
    }
    if !unplaced.is_empty() {
        unplaced.reverse();
        return Err(Refused::NotHandedOut(unplaced));
    }
    let mut calls = Vec::new();
    let mut exec = None;
    while i > 0 {
        match kind(&entries[i - 1]) {
            Kind::Calls(e, named) if exec.as_ref().is_none_or(|x| *x == e) => {
                exec.get_or_insert_with(|| e.clone());
                calls.extend(named.into_iter().rev());
            }
            _ => break,
        }
        i -= 1;
    }
    let Some(exec) = exec.or_else(|| results.first().map(|(e, _, _)| e.clone())) else {
        return Ok(None);
    };
    results.reverse();
    calls.reverse();
    let results = results
        .into_iter()
        .filter(|(e, _, _)| *e == exec)
        .map(|(_, n, c)| (n, c))
        .collect();
    Ok(Some(Trailing {
        exec,
        results,
        calls,
    }))
}

/// The program a continuation of an answer the proxy minted goes on from,
/// and the provider's stored answer that held its `run_code` (where the
/// continuation is pointed back). `field` names what the client sent
/// (`previous_response_id`), `answer` what it names ("a response"); a
/// record lost or never stored is the 400 that says how to go on.
pub fn stored_program(
    store: &dyn ExecutionLookup,
    tenant: &Tenant,
    exec_id: &str,
    field: &str,
    answer: &str,
) -> Result<(Arc<Execution>, String), ProxyError> {
    store
        .get(tenant, exec_id)
        .and_then(|e| {
            let upstream = e.upstream_response.clone()?;
            Some((e, upstream))
        })
        .ok_or_else(|| {
            ProxyError::InvalidRequest(format!(
                "`{field}` names {answer} codemode-proxy minted for program `{exec_id}`, whose \
                 record it no longer holds (it restarted, or the record expired), or whose model \
                 turn the provider did not store; send the whole conversation as `input` (with \
                 `store: false`) instead"
            ))
        })
}

/// The entries of a request that continues an answer the proxy minted for
/// `exec` (`previous_response_id`, `previous_interaction_id`): the provider
/// holds the model's turn, so the program's calls and their results (its
/// entries by `kinds`) become its own result, `answer` of the execution
/// (ended now, as interrupted, if it had not); other entries stay.
pub fn continue_entries(
    entries: &mut Vec<Box<RawValue>>,
    kinds: &[Kind],
    exec: &Execution,
    store: &dyn ExecutionLookup,
    limits: &Limits,
    answer: impl Fn(&Execution) -> Vec<Value>,
) {
    let mut sent = BTreeMap::new();
    let mut out = Vec::with_capacity(entries.len());
    let mut placed = false;
    for (raw, kind) in entries.iter().zip(kinds) {
        match kind {
            Kind::Calls(e, _) | Kind::Results(e, _, _) if *e == exec.id => {
                if let Kind::Results(_, results, _) = kind {
                    sent.extend(results.iter().map(|(n, text)| (*n, text.as_str())));
                }
                if !placed {
                    placed = true;
                    out.push(None);
                }
            }
            _ => out.push(Some(raw.clone())),
        }
    }
    let mut e = exec.clone();
    if e.outcome.is_none() {
        e.outcome = Some(interrupted(&e, &sent, limits));
        store.put(std::sync::Arc::new(e.clone()));
    }
    let answer: Vec<Box<RawValue>> = answer(&e).iter().map(to_raw).collect();
    let mut rewritten = Vec::with_capacity(out.len() + answer.len());
    if !placed {
        rewritten.extend(answer.iter().cloned());
    }
    for entry in out {
        match entry {
            Some(raw) => rewritten.push(raw),
            None => rewritten.extend(answer.iter().cloned()),
        }
    }
    *entries = rewritten;
}
