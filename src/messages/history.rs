//! Programs in a Messages conversation: what differs from other dialects
//! in reading a history ([`crate::runtime::history`] walks it): an
//! assistant message's `tool_use` blocks, and the `tool_result` blocks of
//! the user message after it, beside blocks of the client's own.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::embedded::pair;
use crate::runtime::history::{CallIds, Kind, Refused, Trailing, Transcript};
use crate::runtime::output::{output_text, Field};
use crate::runtime::{
    echoed_batch, may_echo, may_echo_calls, CallEntry, EchoedCall, EchoedResult, Execution,
    ExecutionLookup, MINTED_PREFIX,
};
use crate::tenant::Tenant;
use crate::wire::to_raw;

#[derive(Deserialize)]
struct MessageView {
    role: Option<String>,
    content: Option<Value>,
}

/// An assistant turn as the echo search first reads it: its blocks'
/// heads, borrowed from the client's text (no tree of its text, thinking
/// and results is built for a turn that echoes nothing, which is nearly
/// every turn).
#[derive(Deserialize)]
struct TurnHead<'a> {
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct UseHead<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    /// `null` is read as the text `null`, as the whole turn's reading does.
    #[serde(borrow, default, deserialize_with = "present")]
    input: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Finds executions' calls in one tenant's Messages conversation.
pub struct MessageReader<'a> {
    ids: CallIds<'a>,
}

impl<'a> MessageReader<'a> {
    /// A reader of `tenant`'s conversations, finding executions in `store`.
    pub fn new(store: &'a dyn ExecutionLookup, tenant: &'a Tenant) -> MessageReader<'a> {
        MessageReader {
            ids: CallIds { store, tenant },
        }
    }

    /// Whether the assistant turn `text` may echo a batch the tenant was
    /// handed ([`may_echo`] on its `tool_use` blocks), read from its
    /// blocks' heads; `true` when they do not read so (the whole turn is
    /// read then, as any candidate is).
    fn may_echo_turn(&self, text: &str) -> bool {
        let Ok(turn) = serde_json::from_str::<TurnHead<'_>>(text) else {
            return true;
        };
        if turn.role.as_deref() != Some("assistant") {
            return false;
        }
        let Some(content) = turn.content.filter(|c| c.get().starts_with('[')) else {
            return false;
        };
        let Ok(blocks) = serde_json::from_str::<Vec<UseHead<'_>>>(content.get()) else {
            return true;
        };
        let uses = || {
            blocks
                .iter()
                .filter(|b| b.kind.as_deref() == Some("tool_use"))
        };
        if uses().any(|b| {
            b.id.as_deref()
                .is_some_and(|id| self.ids.names_proxy_id(id))
        }) {
            return false;
        }
        let calls: Vec<(&str, &str)> = uses()
            .map(|b| {
                let name = b.name.as_deref().unwrap_or("");
                (name, b.input.map_or("{}", RawValue::get))
            })
            .collect();
        may_echo_calls(self.ids.store, self.ids.tenant, &calls)
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
                    let Some((e, n)) = b["id"].as_str().and_then(|id| self.ids.resolve(id)) else {
                        continue;
                    };
                    if exec.get_or_insert_with(|| e.clone()) == &e {
                        calls.push((n, b["name"].as_str().unwrap_or("").to_owned()));
                    }
                }
                exec.map_or(Kind::Other, |e| Kind::Calls(e, calls))
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
                    match id.as_deref().map(|id| (id, self.ids.resolve(id))) {
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

impl Transcript for MessageReader<'_> {
    fn ids(&self) -> &CallIds<'_> {
        &self.ids
    }

    fn kinds(&self, messages: &[Box<RawValue>]) -> Vec<Kind> {
        messages.iter().map(|m| self.kind(m)).collect()
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
            if !self.may_echo_turn(text) {
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
            if uses.iter().any(|b| {
                b["id"]
                    .as_str()
                    .is_some_and(|id| self.ids.names_proxy_id(id))
            }) {
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
            if !may_echo(self.ids.store, self.ids.tenant, &keys) {
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
            let Some(echo) = echoed_batch(self.ids.store, self.ids.tenant, &calls, &results)?
            else {
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

    fn pair(e: &Execution, beside: &[Value]) -> Vec<Value> {
        pair(e, beside)
    }

    fn missing_pair(exec_id: &str, text: &str, beside: Vec<Value>) -> Vec<Value> {
        let id = crate::runtime::lost_program_call_id(crate::runtime::TOOL_USE_PREFIX, exec_id);
        let mut result = vec![json!({"type": "tool_result", "tool_use_id": id,
            "is_error": true, "content": [{"type": "text", "text": text}]})];
        result.extend(beside);
        vec![
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": id,
                "name": crate::mode::RUN_CODE, "input": {"code": "/* no longer available */"}}]}),
            json!({"role": "user", "content": result}),
        ]
    }
}

/// A `tool_result`'s content as a program reads it
/// ([`crate::runtime::output`]): a string, or its text blocks, and a line
/// for each `tool_reference` (Claude Code's `ToolSearch`).
fn result_text(content: &Value) -> String {
    output_text(Field::MessagesContent, Some(content))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::runtime::{CallRecord, MemoryExecutionStore};

    /// A turn echoing a batch whose blocks' heads do not read as the
    /// search first reads them (an id that is a number) is read whole, and
    /// found, as before the heads were read apart.
    #[test]
    fn a_turn_whose_heads_do_not_read_is_read_whole_and_its_echo_found() {
        let tenant = Tenant::anonymous("s");
        let store =
            MemoryExecutionStore::new(Duration::from_secs(60), Duration::from_secs(60), 1 << 20);
        let mut e = Execution::new(
            tenant,
            "call_1".into(),
            "x".into(),
            None,
            vec!["read".into()],
        );
        e.batches.push(0);
        e.calls = vec![CallRecord {
            name: "read".into(),
            args: r#"{"path":"a"}"#.into(),
            result: None,
        }];
        ExecutionLookup::put(&store, Arc::new(e.clone()));
        let reader = MessageReader::new(&store, &tenant);
        let turn = |id: Value| {
            to_raw(&json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": id, "name": "read", "input": {"path": "a"}}]}))
        };
        let answer = to_raw(&json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_mine", "content": "text"}]}));
        for id in [json!("toolu_mine"), json!(7)] {
            let history = vec![turn(id.clone()), answer.clone()];
            let renamed = reader.echoes(&history).unwrap();
            let renamed = renamed.unwrap_or_else(|| panic!("{id}: no echo found"));
            assert!(renamed[0].get().contains(&e.call_id(0)), "{id}");
        }
    }
}
