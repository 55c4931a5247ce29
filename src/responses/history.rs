//! Programs in a Responses input: the client's items hold the nested
//! traffic (call items with minted `call_id`s and their outputs); the model
//! sees its own `run_code` turn and one output instead, on every request.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::mode::RUN_CODE;
use crate::runtime::history::{interrupted, Refused, Trailing};
use crate::runtime::output::Field;
use crate::runtime::{resolve_call_id, Execution, ExecutionLookup, Limits, MINTED_PREFIX};
use crate::tenant::Tenant;
use crate::wire::to_raw;

mod echoes;

#[derive(Deserialize)]
struct ItemView {
    #[serde(rename = "type")]
    kind: Option<String>,
    call_id: Option<String>,
    output: Option<Value>,
    /// A `tool_search_output`'s loaded tools, its answer.
    tools: Option<Value>,
    name: Option<String>,
    namespace: Option<String>,
}

/// An input item's relation to executions.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    /// A call item minted for call `n` of this execution, with the tool it names.
    Call(String, usize, String),
    /// An output for call `n` of this execution.
    Output(String, usize, String),
    /// An output whose `call_id` has the proxy's prefix but was not minted by it.
    Unplaced(String),
    Other,
}

/// Finds executions' calls in one tenant's Responses input.
pub struct ItemReader<'a> {
    store: &'a dyn ExecutionLookup,
    tenant: &'a Tenant,
}

impl<'a> ItemReader<'a> {
    /// A reader of `tenant`'s inputs, finding executions in `store`.
    pub fn new(store: &'a dyn ExecutionLookup, tenant: &'a Tenant) -> ItemReader<'a> {
        ItemReader { store, tenant }
    }

    fn kind(&self, raw: &RawValue) -> Kind {
        let text = raw.get();
        if !crate::runtime::may_name_minted(text) {
            return Kind::Other;
        }
        let Ok(item) = serde_json::from_str::<ItemView>(text) else {
            return Kind::Other;
        };
        let (Some(kind), Some(id)) = (item.kind.as_deref(), item.call_id.as_deref()) else {
            return Kind::Other;
        };
        let found = resolve_call_id(id, self.tenant, self.store);
        if kind.ends_with("_output") {
            return match found {
                Some((e, n)) => Kind::Output(e, n, output_text(item.output.or(item.tools))),
                None if id.starts_with(MINTED_PREFIX) => Kind::Unplaced(id.to_owned()),
                None => Kind::Other,
            };
        }
        match found {
            Some((e, n)) if super::items::is_call_type(kind) => {
                let mut fields = serde_json::Map::new();
                fields.insert("type".into(), json!(kind));
                if let Some(name) = item.name {
                    fields.insert("name".into(), json!(name));
                }
                if let Some(ns) = item.namespace {
                    fields.insert("namespace".into(), json!(ns));
                }
                Kind::Call(e, n, super::items::tool_name(&fields))
            }
            _ => Kind::Other,
        }
    }

    /// Whether `id` is one the proxy gave, or has its shape: a run naming
    /// one is read by its ids (an id of its shape it never minted is
    /// refused), never looked up by what it calls.
    fn names_proxy_id(&self, id: &str) -> bool {
        id.starts_with(MINTED_PREFIX) || resolve_call_id(id, self.tenant, self.store).is_some()
    }

    /// The outputs at the end of the input for a program's calls, and the
    /// call items before them (a stateless client sends both; one that
    /// continues with `previous_response_id` sends only the outputs).
    /// `Err` names outputs the proxy cannot place (refused, never guessed).
    /// Call items sent back with ids the proxy never gave are read as the
    /// batch they echo ([`ItemReader::echoes`]).
    pub fn trailing_results(&self, items: &[Box<RawValue>]) -> Result<Option<Trailing>, Refused> {
        let renamed = self.echoes(items).map_err(Refused::Unclear)?;
        let items = renamed.as_deref().unwrap_or(items);
        let mut results = Vec::new();
        let mut unplaced = Vec::new();
        let mut i = items.len();
        while i > 0 {
            match self.kind(&items[i - 1]) {
                Kind::Output(e, n, text) => results.push((e, n, text)),
                Kind::Unplaced(id) => unplaced.push(id),
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
            match self.kind(&items[i - 1]) {
                Kind::Call(e, n, name) if exec.as_ref().is_none_or(|x| *x == e) => {
                    exec.get_or_insert_with(|| e.clone());
                    calls.push((n, name));
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

    /// Replaces each execution's nested items by the model's `run_code`
    /// turn and its output; a program the input moved past before it
    /// finished is recorded as interrupted.
    pub fn rewrite(&self, items: &mut Vec<Box<RawValue>>, limits: &Limits) {
        // A run whose outputs cannot be told apart was refused with its
        // request; read after, it is left as it came.
        if let Ok(Some(renamed)) = self.echoes(items) {
            *items = renamed;
        }
        if !items
            .iter()
            .any(|m| crate::runtime::may_name_minted(m.get()))
        {
            return;
        }
        let kinds: Vec<Kind> = items.iter().map(|m| self.kind(m)).collect();
        let mut out = Vec::with_capacity(items.len());
        let mut i = 0;
        while i < items.len() {
            let exec_id = match &kinds[i] {
                Kind::Call(e, _, _) | Kind::Output(e, _, _) => e.clone(),
                _ => {
                    out.push(items[i].clone());
                    i += 1;
                    continue;
                }
            };
            let mut sent = BTreeMap::new();
            let mut j = i;
            while j < items.len() {
                match &kinds[j] {
                    Kind::Call(e, _, _) if *e == exec_id => {}
                    Kind::Output(e, n, text) if *e == exec_id => {
                        sent.insert(*n, text.as_str());
                    }
                    _ => break,
                }
                j += 1;
            }
            let held = self.store.get(self.tenant, &exec_id);
            // The model's own items (reasoning, text) reached the client
            // with the program's first calls, and the client sent them back
            // before those calls: the model's turn below holds them.
            if let Some(e) = &held {
                let ids = model_item_ids(e);
                while out
                    .last()
                    .is_some_and(|raw| item_id(raw).is_some_and(|id| ids.contains(&id)))
                {
                    out.pop();
                }
            }
            let pair = match held {
                Some(e) if e.outcome.is_some() => pair(&e),
                Some(e) => {
                    let mut e = Execution::clone(&e);
                    e.outcome = Some(interrupted(&e, &sent, limits));
                    tracing::info!(target: "codemode::program", run_call = %e.run_call_id, calls = e.calls.len(), outcome = "interrupted", "program ended: the client moved on before it finished");
                    let v = pair(&e);
                    self.store.put(std::sync::Arc::new(e));
                    v
                }
                None => missing_pair(&exec_id, self.tenant, limits.lifetime),
            };
            out.extend(pair.iter().map(to_raw));
            i = j;
        }
        *items = out;
    }
}

/// Whether an item is an output (`function_call_output`, ...).
fn is_output(item: &Value) -> bool {
    item["type"]
        .as_str()
        .is_some_and(|t| t.ends_with("_output"))
}

/// The ids of the model's items other than calls in a program's turn.
fn model_item_ids(e: &Execution) -> Vec<String> {
    let Some(Ok(Value::Array(items))) = e.model_turn.as_deref().map(serde_json::from_str) else {
        return Vec::new();
    };
    items
        .iter()
        .filter(|i| !super::items::is_judged_item(i))
        .filter_map(|i| i.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// An item's `id`, when it has one.
fn item_id(raw: &RawValue) -> Option<String> {
    #[derive(Deserialize)]
    struct Id {
        id: Option<String>,
    }
    serde_json::from_str::<Id>(raw.get()).ok()?.id
}

impl ItemReader<'_> {
    /// The input of a request that continues a response the proxy minted
    /// (`previous_response_id`): the provider holds the model's turn, so
    /// the outputs of the program's calls become the program's own output
    /// (and the answers of calls denied beside it); other items stay.
    pub fn rewrite_continued(
        &self,
        items: &mut Vec<Box<RawValue>>,
        exec: &Execution,
        limits: &Limits,
    ) {
        let kinds: Vec<Kind> = items.iter().map(|m| self.kind(m)).collect();
        let mut sent = BTreeMap::new();
        let mut out = Vec::with_capacity(items.len());
        let mut placed = false;
        for (raw, kind) in items.iter().zip(&kinds) {
            match kind {
                Kind::Call(e, _, _) | Kind::Output(e, _, _) if *e == exec.id => {
                    if let Kind::Output(_, n, text) = kind {
                        sent.insert(*n, text.as_str());
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
            self.store.put(std::sync::Arc::new(e.clone()));
        }
        let mut answer = vec![
            json!({"type": "function_call_output", "call_id": e.run_call_id,
                                     "output": e.outcome}),
        ];
        answer.extend(e.denials.iter().cloned());
        let answer: Vec<Box<RawValue>> = answer.iter().map(to_raw).collect();
        let mut rewritten = Vec::with_capacity(out.len() + answer.len());
        if !placed {
            rewritten.extend(answer.iter().cloned());
        }
        for item in out {
            match item {
                Some(raw) => rewritten.push(raw),
                None => rewritten.extend(answer.iter().cloned()),
            }
        }
        *items = rewritten;
    }
}

/// An output as a program reads it ([`crate::runtime::output`]).
fn output_text(output: Option<Value>) -> String {
    crate::runtime::output::output_text(Field::ResponsesOutput, output.as_ref())
}

/// The model's view of one execution: its turn, and the program's output
/// once it ended, with the answers of calls denied beside it.
pub fn pair(e: &Execution) -> Vec<Value> {
    let mut v = run_code_turn(e);
    if let Some(outcome) = &e.outcome {
        v.push(
            json!({"type": "function_call_output", "call_id": e.run_call_id, "output": outcome}),
        );
        v.extend(e.denials.iter().cloned());
    }
    v
}

/// The model's `run_code` turn: its output items as they arrived (reasoning
/// items included), or rebuilt when the proxy kept none.
fn run_code_turn(e: &Execution) -> Vec<Value> {
    if let Some(Ok(Value::Array(items))) = e.model_turn.as_deref().map(serde_json::from_str) {
        return items;
    }
    let mut v = vec![
        json!({"type": "function_call", "call_id": e.run_call_id, "name": RUN_CODE,
                            "arguments": json!({"code": e.code}).to_string()}),
    ];
    v.extend(e.denied_calls.iter().cloned());
    v
}

/// What the model is told of a program whose record the tenant lacks.
fn missing_pair(exec_id: &str, tenant: &Tenant, lifetime: std::time::Duration) -> Vec<Value> {
    let id = crate::runtime::lost_program_call_id(crate::runtime::CALL_PREFIX, exec_id);
    let content = crate::runtime::history::missing_text(exec_id, tenant, lifetime);
    vec![
        json!({"type": "function_call", "call_id": id, "name": RUN_CODE,
               "arguments": "{\"code\":\"/* no longer available */\"}"}),
        json!({"type": "function_call_output", "call_id": id, "output": content}),
    ]
}
