//! Programs in a Messages conversation: the client's history holds the
//! nested traffic (`tool_use` blocks with minted ids and their
//! `tool_result`s); the model sees its own `run_code` turn and one result
//! instead, on every request.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::embedded::pair;
use crate::runtime::history::{interrupted, missing_text, Refused, Trailing};
use crate::runtime::output::{output_text, Field};
use crate::runtime::{
    echoed_batch, may_echo, resolve_call_id, CallEntry, EchoedCall, EchoedResult, Execution,
    ExecutionLookup, Limits, MINTED_PREFIX,
};
use crate::tenant::Tenant;
use crate::wire::to_raw;

#[derive(Deserialize)]
struct MessageView {
    role: Option<String>,
    content: Option<Value>,
}

/// A message's relation to executions.
#[derive(Debug)]
enum Kind {
    /// An assistant turn carrying calls minted for this execution: their
    /// numbers and names.
    Nested(String, Vec<(usize, String)>),
    /// A user message with results for this execution's calls, and the
    /// blocks it holds beside them.
    Results(String, Vec<(usize, String)>, Vec<Value>),
    /// A user message with a result whose id has the proxy's prefix but
    /// was not minted by it.
    Unplaced(Vec<String>),
    Other,
}

/// Finds executions' calls in one tenant's Messages conversation.
pub struct MessageReader<'a> {
    store: &'a dyn ExecutionLookup,
    tenant: &'a Tenant,
}

impl<'a> MessageReader<'a> {
    /// A reader of `tenant`'s conversations, finding executions in `store`.
    pub fn new(store: &'a dyn ExecutionLookup, tenant: &'a Tenant) -> MessageReader<'a> {
        MessageReader { store, tenant }
    }

    fn kind(&self, raw: &RawValue) -> Kind {
        let text = raw.get();
        if !crate::runtime::may_name_minted(text) {
            return Kind::Other;
        }
        let Ok(m) = serde_json::from_str::<MessageView>(text) else {
            return Kind::Other;
        };
        let Some(Value::Array(blocks)) = m.content else {
            return Kind::Other;
        };
        match m.role.as_deref() {
            Some("assistant") => {
                let mut exec = None;
                let mut calls = Vec::new();
                for b in blocks.iter().filter(|b| b["type"] == "tool_use") {
                    let Some((e, n)) = b["id"].as_str().and_then(|id| self.resolve(id)) else {
                        continue;
                    };
                    if exec.get_or_insert_with(|| e.clone()) == &e {
                        calls.push((n, b["name"].as_str().unwrap_or("").to_owned()));
                    }
                }
                exec.map_or(Kind::Other, |e| Kind::Nested(e, calls))
            }
            Some("user") => {
                let mut exec = None;
                let mut results = Vec::new();
                let mut others = Vec::new();
                let mut unplaced = Vec::new();
                for b in blocks {
                    let id = (b["type"] == "tool_result")
                        .then(|| b["tool_use_id"].as_str().map(str::to_owned))
                        .flatten();
                    match id.as_deref().map(|id| (id, self.resolve(id))) {
                        Some((_, Some((e, n)))) if exec.get_or_insert_with(|| e.clone()) == &e => {
                            results.push((n, result_text(&b["content"])));
                        }
                        Some((id, None)) if id.starts_with(MINTED_PREFIX) => {
                            unplaced.push(id.to_owned());
                        }
                        _ => others.push(b),
                    }
                }
                match exec {
                    _ if !unplaced.is_empty() => Kind::Unplaced(unplaced),
                    Some(e) => Kind::Results(e, results, others),
                    None => Kind::Other,
                }
            }
            _ => Kind::Other,
        }
    }

    /// Whether `id` is one the proxy gave, or has its shape: a turn naming
    /// one is read by its ids (an id of its shape it never minted is
    /// refused), never looked up by what it calls.
    fn names_proxy_id(&self, id: &str) -> bool {
        id.starts_with(MINTED_PREFIX) || self.resolve(id).is_some()
    }

    fn resolve(&self, id: &str) -> Option<(String, usize)> {
        resolve_call_id(id, self.tenant, self.store)
    }

    /// The results the client returns now: the last message's `tool_result`
    /// blocks, when the assistant turn before it carries minted calls.
    /// `Err` names results the proxy cannot place (refused, not guessed).
    /// A turn sent back with ids the proxy never gave is read as the batch
    /// it echoes ([`MessageReader::echoes`]).
    pub fn trailing_results(
        &self,
        messages: &[Box<RawValue>],
    ) -> Result<Option<Trailing>, Refused> {
        let from = messages.len().saturating_sub(2);
        let renamed = self.echoes(&messages[from..]).map_err(Refused::Unclear)?;
        let messages = renamed.as_deref().unwrap_or(&messages[from..]);
        let Some(last) = messages.last() else {
            return Ok(None);
        };
        let (exec, results) = match self.kind(last) {
            Kind::Unplaced(ids) => return Err(Refused::NotHandedOut(ids)),
            Kind::Results(e, r, _) => (e, r),
            _ => return Ok(None),
        };
        let calls = match messages
            .len()
            .checked_sub(2)
            .map(|i| self.kind(&messages[i]))
        {
            Some(Kind::Nested(e, calls)) if e == exec => calls,
            _ => Vec::new(),
        };
        Ok(Some(Trailing {
            exec,
            results,
            calls,
        }))
    }

    /// `messages` with each assistant turn whose `tool_use` blocks carry
    /// none of the proxy's ids, when it echoes a batch one of the tenant's
    /// programs handed out, given the ids the proxy gave its calls, and the
    /// `tool_result` blocks of the user message after it theirs, paired as
    /// the client paired them. `None` when no turn needs it; `Err` when a
    /// turn's results cannot be told apart.
    fn echoes(&self, messages: &[Box<RawValue>]) -> Result<Option<Vec<Box<RawValue>>>, String> {
        let mut renamed: Option<Vec<Box<RawValue>>> = None;
        for i in 0..messages.len() {
            let text = messages[i].get();
            if !text.contains("\"tool_use\"") || !text.contains("\"assistant\"") {
                continue;
            }
            let Ok(mut turn) = serde_json::from_str::<Value>(text) else {
                continue;
            };
            let Some(blocks) = turn["content"]
                .as_array()
                .filter(|_| turn["role"] == "assistant")
            else {
                continue;
            };
            let uses: Vec<&Value> = blocks.iter().filter(|b| b["type"] == "tool_use").collect();
            if uses
                .iter()
                .any(|b| b["id"].as_str().is_some_and(|id| self.names_proxy_id(id)))
            {
                continue;
            }
            let calls: Vec<EchoedCall<'_>> = uses
                .iter()
                .map(|b| EchoedCall {
                    id: b["id"].as_str(),
                    name: b["name"].as_str().unwrap_or(""),
                    args: b
                        .get("input")
                        .map_or_else(|| "{}".into(), |a| a.to_string().into()),
                })
                .collect();
            // One store lookup before the results are read: most turns
            // are no batch the proxy handed out.
            let keys: Vec<CallEntry> = calls
                .iter()
                .map(|c| CallEntry::of(c.name, &c.args))
                .collect();
            if !may_echo(self.store, self.tenant, &keys) {
                continue;
            }
            // The user message right after the turn answers it.
            let mut answer = messages
                .get(i + 1)
                .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
                .filter(|m| m["role"] == "user" && m["content"].is_array());
            let answered: Vec<&Value> = answer
                .as_ref()
                .map(|m| m["content"].as_array().into_iter().flatten())
                .into_iter()
                .flatten()
                .filter(|b| b["type"] == "tool_result")
                .collect();
            let contents: Vec<String> = answered.iter().map(|b| b["content"].to_string()).collect();
            let results: Vec<EchoedResult<'_>> = answered
                .iter()
                .zip(&contents)
                .map(|(b, content)| EchoedResult {
                    id: b["tool_use_id"].as_str(),
                    content,
                })
                .collect();
            let Some(echo) = echoed_batch(self.store, self.tenant, &calls, &results)? else {
                continue;
            };
            let out = renamed.get_or_insert_with(|| messages.to_vec());
            let uses = turn["content"].as_array_mut().into_iter().flatten();
            for (b, id) in uses.filter(|b| b["type"] == "tool_use").zip(&echo.calls) {
                b["id"] = json!(id);
            }
            out[i] = to_raw(&turn);
            if let Some(m) = answer.as_mut() {
                let blocks = m["content"].as_array_mut().into_iter().flatten();
                let results = blocks.filter(|b| b["type"] == "tool_result");
                for (b, id) in results.zip(&echo.results) {
                    if let Some(id) = id {
                        b["tool_use_id"] = json!(id);
                    }
                }
                out[i + 1] = to_raw(m);
            }
        }
        Ok(renamed)
    }

    /// Replaces each execution's nested traffic by the model's `run_code`
    /// turn and its result; a program the conversation moved past before
    /// it finished is recorded as interrupted.
    pub fn rewrite(&self, messages: &mut Vec<Box<RawValue>>, limits: &Limits) {
        // A turn whose results cannot be told apart was refused with its
        // request; read after, it is left as it came.
        if let Ok(Some(renamed)) = self.echoes(messages) {
            *messages = renamed;
        }
        if !messages
            .iter()
            .any(|m| crate::runtime::may_name_minted(m.get()))
        {
            return;
        }
        let kinds: Vec<Kind> = messages.iter().map(|m| self.kind(m)).collect();
        let mut out = Vec::with_capacity(messages.len());
        let mut i = 0;
        while i < messages.len() {
            let Kind::Nested(exec_id, _) = &kinds[i] else {
                out.push(messages[i].clone());
                i += 1;
                continue;
            };
            let mut sent = BTreeMap::new();
            let mut carried = Vec::new();
            let mut j = i + 1;
            while j < messages.len() {
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
                    let id = crate::runtime::lost_program_call_id(
                        crate::runtime::TOOL_USE_PREFIX,
                        exec_id,
                    );
                    let text = missing_text(exec_id, self.tenant, limits.lifetime);
                    let mut result = vec![json!({"type": "tool_result", "tool_use_id": id,
                        "is_error": true, "content": [{"type": "text", "text": text}]})];
                    result.extend(carried);
                    vec![
                        json!({"role": "assistant", "content": [{"type": "tool_use", "id": id,
                            "name": crate::mode::RUN_CODE, "input": {"code": "/* no longer available */"}}]}),
                        json!({"role": "user", "content": result}),
                    ]
                }
            };
            out.extend(pair.iter().map(to_raw));
            i = j;
        }
        *messages = out;
    }
}

/// A `tool_result`'s content as a program reads it
/// ([`crate::runtime::output`]): a string, or its text blocks, and a line
/// for each `tool_reference` (Claude Code's `ToolSearch`).
fn result_text(content: &Value) -> String {
    output_text(Field::MessagesContent, Some(content))
}
