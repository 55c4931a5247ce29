//! Programs in a Gemini conversation: what differs from other dialects in
//! reading a history ([`crate::runtime::history`] walks it): a model
//! turn's `functionCall` parts, and the `functionResponse` parts of the
//! user content after it, beside parts of the client's own.
//!
//! A `functionResponse` names its call by `id`; one without (or with an id
//! of the client's own) is placed by name and position in the model turn
//! before it ([`super::parts::answered_ids`]). The API makes a call's id
//! optional, and clients drop the ones the proxy gave (`langchain-google-
//! genai`, agno, pi): a model turn whose calls carry none of the proxy's
//! ids is found by what it calls ([`crate::runtime::echoed_batch`]).

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::embedded::{pair, UNSIGNED};
use super::parts::{answered_ids, called, function_call, function_response, response_text};
use crate::runtime::history::{CallIds, Kind, Trailing, Transcript};
use crate::runtime::{
    echoed_batch, handed_out, is_minted, may_name_minted, EchoedCall, Execution, ExecutionLookup,
    MINTED_PREFIX,
};
use crate::tenant::Tenant;

#[derive(Deserialize)]
struct ContentView {
    role: Option<String>,
    #[serde(default)]
    parts: Vec<Value>,
}

/// Finds executions' calls in one tenant's Gemini conversation.
pub struct ContentReader<'a> {
    ids: CallIds<'a>,
}

impl<'a> ContentReader<'a> {
    /// A reader of `tenant`'s conversations, finding executions in `store`.
    pub fn new(store: &'a dyn ExecutionLookup, tenant: &'a Tenant) -> ContentReader<'a> {
        ContentReader {
            ids: CallIds { store, tenant },
        }
    }

    /// The kind of every content, each user content read against the
    /// model turn before it.
    fn read_kinds(&self, contents: &[Box<RawValue>]) -> Vec<Kind> {
        let mut kinds = Vec::with_capacity(contents.len());
        let mut calls: Vec<(String, String)> = Vec::new();
        let mut after_nested = false;
        for raw in contents {
            // Only a content naming a minted id, answering a turn that does
            // (by name and place), or calling without ids, is read.
            let text = raw.get();
            let view = (after_nested || Self::may_hold(text))
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
                after_nested = matches!(kind, Kind::Calls(..));
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
            let Some((e, n)) = self.ids.resolve(id) else {
                continue;
            };
            if exec.get_or_insert_with(|| e.clone()) == &e {
                mine.push((n, name.clone()));
            }
        }
        exec.map_or(Kind::Other, |e| Kind::Calls(e, mine))
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
        // Each call's mark first: a turn with a call no program handed out
        // costs no digest of the whole turn.
        if !echoed
            .iter()
            .all(|c| handed_out(self.ids.store, self.ids.tenant, c.name, &c.args))
        {
            return None;
        }
        let echo = echoed_batch(self.ids.store, self.ids.tenant, &echoed, &[]).ok()??;
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
            match self.ids.resolve(&id) {
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
        let mut kinds = self.read_kinds(&contents[start..]);
        let (exec, results) = match kinds.pop() {
            Some(Kind::Unplaced(ids)) => return Err(ids),
            Some(Kind::Results(e, r, _)) => (e, r),
            _ => return Ok(None),
        };
        let calls = match kinds.pop() {
            Some(Kind::Calls(e, calls)) if e == exec => calls,
            _ => Vec::new(),
        };
        Ok(Some(Trailing {
            exec,
            results,
            calls,
        }))
    }
}

impl Transcript for ContentReader<'_> {
    fn ids(&self) -> &CallIds<'_> {
        &self.ids
    }

    /// A model turn calling without ids may echo a batch
    /// ([`ContentReader::by_content`]).
    fn may_hold(text: &str) -> bool {
        may_name_minted(text) || text.contains("unctionCall") || text.contains("unction_call")
    }

    fn kinds(&self, contents: &[Box<RawValue>]) -> Vec<Kind> {
        self.read_kinds(contents)
    }

    fn pair(e: &Execution, beside: &[Value]) -> Vec<Value> {
        pair(e, beside)
    }

    fn missing_pair(exec_id: &str, text: &str, beside: Vec<Value>) -> Vec<Value> {
        let id = crate::runtime::lost_program_call_id(crate::runtime::CALL_PREFIX, exec_id);
        let mut result = vec![json!({"functionResponse": {"id": id,
            "name": crate::mode::RUN_CODE, "response": {"error": text}}})];
        result.extend(beside);
        vec![
            json!({"role": "model", "parts": [{"functionCall": {"id": id,
                "name": crate::mode::RUN_CODE,
                "args": {"code": "/* no longer available */"}},
                "thoughtSignature": UNSIGNED}]}),
            json!({"role": "user", "parts": result}),
        ]
    }
}
