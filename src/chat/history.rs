//! Programs in a chat conversation: the client's history holds a program's
//! nested traffic (calls with minted ids and their results); the model sees
//! one `run_code` call and its result instead, on every request. What every
//! dialect shares (an interrupted program's result, a lost record's text,
//! the results a turn returns) is in `crate::runtime::history`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::mode::RUN_CODE;
use crate::runtime::history::{interrupted, missing_text, Refused, Trailing};
use crate::runtime::output::{output_text, Field};
use crate::runtime::{
    echoed_batch, may_echo, may_name_minted, resolve_call_id, short_form, CallEntry, EchoedCall,
    EchoedResult, Execution, ExecutionLookup, Limits, MINTED_PREFIX,
};
use crate::tenant::Tenant;
use crate::wire::to_raw;

#[derive(Deserialize)]
struct Msg<'a> {
    #[serde(borrow)]
    role: Option<std::borrow::Cow<'a, str>>,
    tool_call_id: Option<String>,
    content: Option<Value>,
    tool_calls: Option<Vec<CallView>>,
}

#[derive(Deserialize)]
struct CallView {
    id: Option<String>,
    function: Option<FunctionView>,
}

#[derive(Deserialize)]
struct FunctionView {
    name: Option<String>,
}

/// A message's relation to executions.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    /// An assistant turn carrying calls minted for this execution: their
    /// numbers and the names the client gives them.
    Nested(String, Vec<(usize, String)>),
    /// A tool result for a minted call of this execution: `(execution, call number)`.
    Result(String, usize, String),
    /// A tool result whose id has the proxy's prefix but is no id it minted.
    Unplaced(String),
    Other,
}

/// Finds executions' calls in one tenant's history.
pub struct Reader<'a> {
    store: &'a dyn ExecutionLookup,
    tenant: &'a Tenant,
}

impl<'a> Reader<'a> {
    /// A reader of `tenant`'s histories, finding executions in `store`.
    pub fn new(store: &'a dyn ExecutionLookup, tenant: &'a Tenant) -> Reader<'a> {
        Reader { store, tenant }
    }

    fn kind(&self, raw: &RawValue) -> Kind {
        let text = raw.get();
        if !may_name_minted(text) {
            return Kind::Other;
        }
        let Ok(m) = serde_json::from_str::<Msg<'_>>(text) else {
            return Kind::Other;
        };
        match m.role.as_deref() {
            Some("assistant") => {
                let mut exec = None;
                let mut calls = Vec::new();
                for c in m.tool_calls.iter().flatten() {
                    let Some(id) = c.id.as_deref() else { continue };
                    let Some((e, n)) = self.resolve(id) else {
                        continue;
                    };
                    if exec.get_or_insert_with(|| e.clone()) == &e {
                        let name = c.function.as_ref().and_then(|f| f.name.clone());
                        calls.push((n, name.unwrap_or_default()));
                    }
                }
                exec.map_or(Kind::Other, |e| Kind::Nested(e, calls))
            }
            Some("tool") => {
                let id = m.tool_call_id.unwrap_or_default();
                match self.resolve(&id) {
                    Some((e, n)) => Kind::Result(e, n, result_text(m.content)),
                    None if id.starts_with(MINTED_PREFIX) => Kind::Unplaced(id),
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
        let found = resolve_call_id(id, self.tenant, self.store);
        if found.is_none() && short_form(id).is_some() && !id.starts_with(MINTED_PREFIX) {
            tracing::warn!(target: "codemode::program", "a call id shaped like a shortened proxy id names no call this proxy holds (its record is gone, or the id is the provider's own): left as it is, so the model sees an ordinary call");
        }
        found
    }
}

/// A tool message's content as a program reads it
/// ([`crate::runtime::output`]).
fn result_text(content: Option<Value>) -> String {
    output_text(Field::ChatContent, content.as_ref())
}

/// Whether a message is media an agent sends after tool results, in a user
/// message, because its provider takes no media in tool results (opencode:
/// "Attached media from tool result:" and the images): a user message whose
/// content holds an image, audio or file part.
fn is_media_carrier(raw: &RawValue) -> bool {
    #[derive(Deserialize)]
    struct User<'a> {
        #[serde(borrow)]
        role: Option<std::borrow::Cow<'a, str>>,
        content: Option<Vec<Part<'a>>>,
    }
    #[derive(Deserialize)]
    struct Part<'a> {
        #[serde(borrow, rename = "type")]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    let text = raw.get();
    if !text.contains("\"user\"") {
        return false;
    }
    let Ok(m) = serde_json::from_str::<User<'_>>(text) else {
        return false;
    };
    m.role.as_deref() == Some("user")
        && m.content.into_iter().flatten().any(|p| {
            matches!(
                p.kind.as_deref(),
                Some("image_url" | "input_audio" | "file" | "image")
            )
        })
}

impl Reader<'_> {
    /// The tool messages after the last assistant turn, when that turn
    /// carries calls minted for an execution, and any media an agent sent
    /// after them in a user message (the program resumes; the media reach
    /// the model after its result).
    ///
    /// `Err` names results the proxy cannot place: ids with its prefix
    /// that it never minted (changed, or made up). They are refused, never
    /// guessed at. A turn sent back with ids the proxy never gave is read
    /// as the batch it echoes ([`Reader::echoes`]).
    pub fn trailing_results(
        &self,
        messages: &[Box<RawValue>],
    ) -> Result<Option<Trailing>, Refused> {
        let renamed = self.echoes(messages).map_err(Refused::Unclear)?;
        let messages = renamed.as_deref().unwrap_or(messages);
        let mut unplaced = Vec::new();
        let found = self.trailing(messages, &mut unplaced);
        if unplaced.is_empty() {
            Ok(found)
        } else {
            unplaced.reverse();
            Err(Refused::NotHandedOut(unplaced))
        }
    }

    /// `messages` with each assistant turn whose calls carry none of the
    /// proxy's ids (agno rewrites every id that does not start with
    /// `call_`), when it echoes a batch one of the tenant's programs handed
    /// out, given the ids the proxy gave its calls, and the tool messages
    /// after it theirs, paired as the client paired them. `None` when no
    /// turn needs it; `Err` when a turn's results cannot be told apart.
    fn echoes(&self, messages: &[Box<RawValue>]) -> Result<Option<Vec<Box<RawValue>>>, String> {
        let mut renamed: Option<Vec<Box<RawValue>>> = None;
        for i in 0..messages.len() {
            let text = messages[i].get();
            if !text.contains("\"tool_calls\"") || !text.contains("\"assistant\"") {
                continue;
            }
            let Ok(turn) = serde_json::from_str::<Value>(text) else {
                continue;
            };
            let Some(tool_calls) = turn.get("tool_calls").and_then(Value::as_array) else {
                continue;
            };
            let id = |c: &Value| c.get("id").and_then(Value::as_str).map(str::to_owned);
            if tool_calls
                .iter()
                .any(|c| id(c).is_some_and(|id| self.names_proxy_id(&id)))
            {
                continue;
            }
            let calls: Vec<EchoedCall<'_>> = tool_calls
                .iter()
                .map(|c| EchoedCall {
                    id: c.get("id").and_then(Value::as_str),
                    name: c["function"]["name"].as_str().unwrap_or(""),
                    args: c["function"]["arguments"].as_str().unwrap_or("{}").into(),
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
            // The tool messages right after the turn answer it.
            let answers: Vec<(usize, Value)> = messages[i + 1..]
                .iter()
                .map_while(|raw| {
                    serde_json::from_str::<Value>(raw.get())
                        .ok()
                        .filter(|m| m["role"] == "tool")
                })
                .enumerate()
                .map(|(k, m)| (i + 1 + k, m))
                .collect();
            let contents: Vec<String> = answers
                .iter()
                .map(|(_, m)| m["content"].to_string())
                .collect();
            let results: Vec<EchoedResult<'_>> = answers
                .iter()
                .zip(&contents)
                .map(|((_, m), content)| EchoedResult {
                    id: m.get("tool_call_id").and_then(Value::as_str),
                    content,
                })
                .collect();
            let Some(echo) = echoed_batch(self.store, self.tenant, &calls, &results)? else {
                continue;
            };
            let out = renamed.get_or_insert_with(|| messages.to_vec());
            let mut turn = turn.clone();
            for (call, id) in turn["tool_calls"]
                .as_array_mut()
                .into_iter()
                .flatten()
                .zip(&echo.calls)
            {
                call["id"] = json!(id);
            }
            out[i] = to_raw(&turn);
            for ((k, m), id) in answers.iter().zip(&echo.results) {
                if let Some(id) = id {
                    let mut m = m.clone();
                    m["tool_call_id"] = json!(id);
                    out[*k] = to_raw(&m);
                }
            }
        }
        Ok(renamed)
    }

    fn trailing(&self, messages: &[Box<RawValue>], unplaced: &mut Vec<String>) -> Option<Trailing> {
        // Most requests hold no program at all: a byte scan, no parse.
        if !messages.iter().any(|m| may_name_minted(m.get())) {
            return None;
        }
        let mut end = messages.len();
        while end > 0 && is_media_carrier(&messages[end - 1]) {
            end -= 1;
        }
        let carried = end < messages.len();
        let mut results = Vec::new();
        for raw in messages[..end].iter().rev() {
            match self.kind(raw) {
                Kind::Result(e, n, content) => results.push((e, n, content)),
                Kind::Unplaced(id) => unplaced.push(id),
                // Media straight after the calls is the user's own message.
                Kind::Nested(_, _) if carried && results.is_empty() => return None,
                Kind::Nested(exec, calls) => {
                    results.reverse();
                    let results = results
                        .into_iter()
                        .filter(|(e, _, _)| *e == exec)
                        .map(|(_, n, c)| (n, c))
                        .collect();
                    return Some(Trailing {
                        exec,
                        results,
                        calls,
                    });
                }
                Kind::Other => return None,
            }
        }
        None
    }

    /// Replaces each execution's nested traffic by one `run_code` call and
    /// its result. A program the conversation moved past before it finished
    /// is recorded as interrupted. Executions the tenant does not hold
    /// become a placeholder pair, so the conversation stays well formed:
    /// another tenant's execution is never looked at.
    pub fn rewrite(&self, messages: &mut Vec<Box<RawValue>>, limits: &Limits) {
        // A turn whose results cannot be told apart was refused with its
        // request; read after, it is left as it came.
        if let Ok(Some(renamed)) = self.echoes(messages) {
            *messages = renamed;
        }
        if !messages.iter().any(|m| may_name_minted(m.get())) {
            return;
        }
        let kinds: Vec<Kind> = messages.iter().map(|m| self.kind(m)).collect();
        let mut out = Vec::with_capacity(messages.len());
        let mut i = 0;
        while i < messages.len() {
            let Kind::Nested(exec_id, _) = &kinds[i] else {
                if !matches!(kinds[i], Kind::Result(..)) {
                    out.push(messages[i].clone());
                }
                i += 1;
                continue;
            };
            // This execution's blocks: its nested turns, their results, and
            // media an agent sent after results.
            let mut sent = BTreeMap::new();
            let mut carried = Vec::new();
            let mut j = i + 1;
            while j < messages.len() {
                match &kinds[j] {
                    Kind::Nested(e, _) if e == exec_id => {}
                    Kind::Result(e, n, content) if e == exec_id => {
                        sent.insert(*n, content.as_str());
                    }
                    Kind::Other
                        if matches!(kinds[j - 1], Kind::Result(..))
                            || carried.last() == Some(&(j - 1)) =>
                    {
                        if !is_media_carrier(&messages[j]) {
                            break;
                        }
                        carried.push(j);
                    }
                    _ => break,
                }
                j += 1;
            }
            let pair = match self.store.get(self.tenant, exec_id) {
                Some(e) if e.outcome.is_some() => pair(&e),
                Some(e) => {
                    let mut e = Execution::clone(&e);
                    e.outcome = Some(interrupted(&e, &sent, limits));
                    tracing::info!(target: "codemode::program", run_call = %e.run_call_id, calls = e.calls.len(), outcome = "interrupted", "program ended: the client moved on before it finished");
                    let v = pair(&e);
                    self.store.put(std::sync::Arc::new(e));
                    v
                }
                None => missing_pair(exec_id, self.tenant, limits.lifetime),
            };
            out.extend(pair.iter().map(to_raw));
            out.extend(carried.iter().map(|&k| messages[k].clone()));
            i = j;
        }
        *messages = out;
    }
}

/// The model's view of one execution: its call, and its result once ended.
pub fn pair(e: &Execution) -> Vec<Value> {
    let mut v = vec![run_code_turn(e)];
    if let Some(outcome) = &e.outcome {
        v.push(json!({"role": "tool", "tool_call_id": e.run_call_id, "content": outcome}));
        v.extend(e.denials.iter().cloned());
    }
    v
}

/// What the model is told of a program whose record `tenant` does not
/// have: a `run_code` call and an error it can act on (run it again).
pub fn missing_pair(exec_id: &str, tenant: &Tenant, lifetime: std::time::Duration) -> Vec<Value> {
    let id = crate::runtime::lost_program_call_id(crate::runtime::CALL_PREFIX, exec_id);
    let content = missing_text(exec_id, tenant, lifetime);
    vec![
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
               "function": {"name": RUN_CODE, "arguments": "{\"code\":\"/* no longer available */\"}"}}]}),
        json!({"role": "tool", "tool_call_id": id, "content": content}),
    ]
}

/// The assistant turn with the model's `run_code` call, as the model made
/// it: its whole message as it arrived when the proxy kept one.
pub fn run_code_turn(e: &Execution) -> Value {
    if let Some(turn) = e
        .model_turn
        .as_deref()
        .and_then(|t| serde_json::from_str(t).ok())
    {
        return turn;
    }
    let mut calls = vec![json!({"id": e.run_call_id, "type": "function",
                                "function": {"name": RUN_CODE, "arguments": json!({"code": e.code}).to_string()}})];
    calls.extend(e.denied_calls.iter().cloned());
    json!({"role": "assistant", "content": e.assistant_content, "tool_calls": calls})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_ids_are_spotted_whole_or_shortened() {
        assert!(may_name_minted(r#"{"tool_call_id":"cm_abc"}"#));
        assert!(may_name_minted(r#"{"tool_call_id":"cm1a2b3c4"}"#));
        assert!(!may_name_minted(r#"{"content":"cm"}"#));
        assert!(!may_name_minted(r#"{"tool_call_id":"call_1"}"#));
    }

    #[test]
    fn media_carriers_are_user_messages_with_media() {
        let raw = |v: Value| to_raw(&v);
        assert!(is_media_carrier(&raw(json!({"role": "user", "content": [
            {"type": "text", "text": "Attached media from tool result:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}))));
        assert!(!is_media_carrier(&raw(
            json!({"role": "user", "content": "look at this"})
        )));
        assert!(!is_media_carrier(&raw(
            json!({"role": "assistant", "content": [
            {"type": "image_url", "image_url": {"url": "x"}}]})
        )));
    }
}
