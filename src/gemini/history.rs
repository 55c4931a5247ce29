//! Programs in a Gemini conversation: the client's history holds the
//! nested traffic (`functionCall` parts with minted ids and their
//! `functionResponse`s); the model sees its own `run_code` turn and one
//! result instead, on every request.
//!
//! A `functionResponse` names its call by `id`; one without (or with an id
//! of the client's own) is placed by name and position in the model turn
//! before it ([`super::parts::answered_ids`]). The API makes a call's id
//! optional, and clients drop the ones the proxy gave (`langchain-google-
//! genai`, agno, pi): a model turn whose calls carry none of the proxy's
//! ids is found by what it calls ([`crate::runtime::echoed_batch`]).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::embedded::{pair, UNSIGNED};
use super::parts::{answered_ids, called, function_call, function_response, response_text};
use crate::runtime::history::{interrupted, missing_text, Trailing};
use crate::runtime::{
    echoed_batch, is_minted, resolve_call_id, EchoedCall, Execution, ExecutionLookup, Limits,
    MINTED_PREFIX,
};
use crate::tenant::Tenant;
use crate::wire::to_raw;

#[derive(Deserialize)]
struct ContentView {
    role: Option<String>,
    #[serde(default)]
    parts: Vec<Value>,
}

/// A content's relation to executions.
#[derive(Debug)]
enum Kind {
    /// A model turn carrying calls minted for this execution: their
    /// numbers and names.
    Nested(String, Vec<(usize, String)>),
    /// A user content with results for this execution's calls, and the
    /// parts it holds beside them.
    Results(String, Vec<(usize, String)>, Vec<Value>),
    /// A user content with a result whose id has the proxy's prefix but
    /// was not minted by it.
    Unplaced(Vec<String>),
    Other,
}

/// Finds executions' calls in one tenant's Gemini conversation.
pub struct ContentReader<'a> {
    store: &'a dyn ExecutionLookup,
    tenant: &'a Tenant,
}

impl<'a> ContentReader<'a> {
    /// A reader of `tenant`'s conversations, finding executions in `store`.
    pub fn new(store: &'a dyn ExecutionLookup, tenant: &'a Tenant) -> ContentReader<'a> {
        ContentReader { store, tenant }
    }

    fn resolve(&self, id: &str) -> Option<(String, usize)> {
        resolve_call_id(id, self.tenant, self.store)
    }

    /// The kind of every content, each user content read against the
    /// model turn before it.
    fn kinds(&self, contents: &[Box<RawValue>]) -> Vec<Kind> {
        let mut kinds = Vec::with_capacity(contents.len());
        let mut calls: Vec<(String, String)> = Vec::new();
        let mut after_nested = false;
        for raw in contents {
            // Only a content naming a minted id, answering a turn that does
            // (by name and place), or calling without ids, is read.
            let text = raw.get();
            let view = (after_nested
                || crate::runtime::may_name_minted(text)
                || text.contains("unctionCall")
                || text.contains("unction_call"))
            .then(|| serde_json::from_str::<ContentView>(raw.get()).ok())
            .flatten();
            let Some(c) = view else {
                calls.clear();
                after_nested = false;
                kinds.push(Kind::Other);
                continue;
            };
            if c.role.as_deref() == Some("model") {
                calls = called(&c.parts);
                let mut kind = self.nested(&calls);
                if matches!(kind, Kind::Other) {
                    if let Some(found) = self.by_content(&c.parts, &calls) {
                        kind = self.nested(&found);
                        calls = found;
                    }
                }
                after_nested = matches!(kind, Kind::Nested(..));
                kinds.push(kind);
            } else {
                kinds.push(self.results(&calls, c.parts));
                calls.clear();
                after_nested = false;
            }
        }
        kinds
    }

    fn nested(&self, calls: &[(String, String)]) -> Kind {
        let mut exec = None;
        let mut mine = Vec::new();
        for (id, name) in calls {
            let Some((e, n)) = self.resolve(id) else {
                continue;
            };
            if exec.get_or_insert_with(|| e.clone()) == &e {
                mine.push((n, name.clone()));
            }
        }
        exec.map_or(Kind::Other, |e| Kind::Nested(e, mine))
    }

    /// The calls of a model turn that names none of the proxy's ids, with
    /// the ids of the batch it echoes, when one of the tenant's programs
    /// handed out exactly these calls (names and arguments, in any order).
    fn by_content(
        &self,
        parts: &[Value],
        calls: &[(String, String)],
    ) -> Option<Vec<(String, String)>> {
        // A turn naming one of the proxy's ids is read by its ids.
        if calls
            .iter()
            .any(|(id, _)| is_minted(id) || id.starts_with(MINTED_PREFIX))
        {
            return None;
        }
        let echoed: Vec<EchoedCall<'_>> = parts
            .iter()
            .filter_map(function_call)
            .map(|c| EchoedCall {
                id: None,
                name: c.get("name").and_then(Value::as_str).unwrap_or(""),
                args: c
                    .get("args")
                    .map_or_else(|| "{}".into(), |a| a.to_string().into()),
            })
            .collect();
        let echo = echoed_batch(self.store, self.tenant, &echoed, &[]).ok()??;
        Some(
            echo.calls
                .into_iter()
                .zip(calls)
                .map(|(id, (_, name))| (id, name.clone()))
                .collect(),
        )
    }

    fn results(&self, calls: &[(String, String)], parts: Vec<Value>) -> Kind {
        let ids = answered_ids(calls, &parts);
        let mut ids = ids.into_iter();
        let mut exec = None;
        let mut results = Vec::new();
        let mut others = Vec::new();
        let mut unplaced = Vec::new();
        for part in parts {
            let Some(response) = function_response(&part) else {
                others.push(part);
                continue;
            };
            let own = response.get("id").and_then(Value::as_str).unwrap_or("");
            let id = ids.next().flatten().unwrap_or_else(|| own.to_owned());
            match self.resolve(&id) {
                Some((e, n)) if exec.get_or_insert_with(|| e.clone()) == &e => {
                    // The tool it answers: the call's name in the turn
                    // before, else the name the answer gives.
                    let called = calls
                        .iter()
                        .find(|(c, _)| c == &id)
                        .map(|(_, name)| name.as_str())
                        .or_else(|| response.get("name").and_then(Value::as_str))
                        .unwrap_or("");
                    results.push((n, response_text(response, called)));
                }
                None if id.starts_with(MINTED_PREFIX) => unplaced.push(id),
                _ => others.push(part),
            }
        }
        match exec {
            _ if !unplaced.is_empty() => Kind::Unplaced(unplaced),
            Some(e) => Kind::Results(e, results, others),
            None => Kind::Other,
        }
    }

    /// The results the client returns now: the last content's
    /// `functionResponse` parts, when the model turn before it carries
    /// minted calls. `Err` names results the proxy cannot place.
    pub fn trailing_results(
        &self,
        contents: &[Box<RawValue>],
    ) -> Result<Option<Trailing>, Vec<String>> {
        let start = contents.len().saturating_sub(2);
        let mut kinds = self.kinds(&contents[start..]);
        let (exec, results) = match kinds.pop() {
            Some(Kind::Unplaced(ids)) => return Err(ids),
            Some(Kind::Results(e, r, _)) => (e, r),
            _ => return Ok(None),
        };
        let calls = match kinds.pop() {
            Some(Kind::Nested(e, calls)) if e == exec => calls,
            _ => Vec::new(),
        };
        Ok(Some(Trailing {
            exec,
            results,
            calls,
        }))
    }

    /// Replaces each execution's nested traffic by the model's `run_code`
    /// turn and its result; a program the conversation moved past before
    /// it finished is recorded as interrupted.
    pub fn rewrite(&self, contents: &mut Vec<Box<RawValue>>, limits: &Limits) {
        let may_hold = |m: &RawValue| {
            let text = m.get();
            crate::runtime::may_name_minted(text)
                || text.contains("unctionCall")
                || text.contains("unction_call")
        };
        if !contents.iter().any(|m| may_hold(m)) {
            return;
        }
        let kinds = self.kinds(contents);
        let mut out = Vec::with_capacity(contents.len());
        let mut i = 0;
        while i < contents.len() {
            let Kind::Nested(exec_id, _) = &kinds[i] else {
                out.push(contents[i].clone());
                i += 1;
                continue;
            };
            let mut sent = BTreeMap::new();
            let mut carried = Vec::new();
            let mut j = i + 1;
            while j < contents.len() {
                match &kinds[j] {
                    Kind::Nested(e, _) if e == exec_id => {}
                    Kind::Results(e, results, others) if e == exec_id => {
                        for (n, text) in results {
                            sent.insert(*n, text.as_str());
                        }
                        carried.extend(others.iter().cloned());
                    }
                    _ => break,
                }
                j += 1;
            }
            let pair = match self.store.get(self.tenant, exec_id) {
                Some(e) if e.outcome.is_some() => pair(&e, &carried),
                Some(e) => {
                    let mut e = Execution::clone(&e);
                    e.outcome = Some(interrupted(&e, &sent, limits));
                    tracing::info!(target: "codemode::program", run_call = %e.run_call_id, calls = e.calls.len(), outcome = "interrupted", "program ended: the client moved on before it finished");
                    let v = pair(&e, &carried);
                    self.store.put(std::sync::Arc::new(e));
                    v
                }
                None => {
                    let id =
                        crate::runtime::lost_program_call_id(crate::runtime::CALL_PREFIX, exec_id);
                    let text = missing_text(exec_id, self.tenant, limits.lifetime);
                    let mut result = vec![json!({"functionResponse": {"id": id,
                        "name": crate::mode::RUN_CODE, "response": {"error": text}}})];
                    result.extend(carried);
                    vec![
                        json!({"role": "model", "parts": [{"functionCall": {"id": id,
                            "name": crate::mode::RUN_CODE,
                            "args": {"code": "/* no longer available */"}},
                            "thoughtSignature": UNSIGNED}]}),
                        json!({"role": "user", "parts": result}),
                    ]
                }
            };
            out.extend(pair.iter().map(to_raw));
            i = j;
        }
        *contents = out;
    }
}
