//! Programs in a chat conversation: what differs from other dialects in
//! reading a history ([`crate::runtime::history`] walks it): an assistant
//! turn's `tool_calls` and `tool` messages, each answering one call, and
//! media an agent sends after the results in a user message.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::mode::RUN_CODE;
use crate::runtime::history::{CallIds, Kind, Refused, Trailing, Transcript};
use crate::runtime::output::{output_text, Field};
use crate::runtime::{
    echoed_batch, may_echo, may_echo_calls, may_name_minted, CallEntry, EchoedCall, EchoedResult,
    Execution, ExecutionLookup, MINTED_PREFIX,
};
use crate::tenant::Tenant;
use crate::wire::to_raw;

#[derive(Deserialize)]
struct Msg<'a> {
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
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

/// An assistant turn as the echo search first reads it: its calls' heads,
/// borrowed from the client's text (no tree of the turn is built for a
/// turn that echoes nothing, which is nearly every turn).
#[derive(Deserialize)]
struct TurnHead<'a> {
    #[serde(borrow)]
    tool_calls: Option<Vec<CallHead<'a>>>,
}

#[derive(Deserialize)]
struct CallHead<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    function: Option<FunctionHead<'a>>,
}

#[derive(Deserialize)]
struct FunctionHead<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<Cow<'a, str>>,
}

/// Finds executions' calls in one tenant's history.
pub struct Reader<'a> {
    ids: CallIds<'a>,
}

impl<'a> Reader<'a> {
    /// A reader of `tenant`'s histories, finding executions in `store`.
    pub fn new(store: &'a dyn ExecutionLookup, tenant: &'a Tenant) -> Reader<'a> {
        Reader {
            ids: CallIds { store, tenant },
        }
    }

    /// Whether the assistant turn `text` may echo a batch the tenant was
    /// handed ([`may_echo`] on its `tool_calls`), read from its calls'
    /// heads; `true` when they do not read so (the whole turn is read
    /// then, as any candidate is).
    fn may_echo_turn(&self, text: &str) -> bool {
        let Ok(turn) = serde_json::from_str::<TurnHead<'_>>(text) else {
            return true;
        };
        // As the whole turn's reading: `tool_calls` counts whatever the role.
        let Some(calls) = turn.tool_calls else {
            return false;
        };
        if calls.iter().any(|c| {
            c.id.as_deref()
                .is_some_and(|id| self.ids.names_proxy_id(id))
        }) {
            return false;
        }
        let calls: Vec<(&str, &str)> = calls
            .iter()
            .map(|c| {
                let function = c.function.as_ref();
                let name = function.and_then(|f| f.name.as_deref()).unwrap_or("");
                let args = function.and_then(|f| f.arguments.as_deref());
                (name, args.unwrap_or("{}"))
            })
            .collect();
        may_echo_calls(self.ids.store, self.ids.tenant, &calls)
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
                    let Some((e, n)) = self.ids.resolve(id) else {
                        continue;
                    };
                    if exec.get_or_insert_with(|| e.clone()) == &e {
                        let name = c.function.as_ref().and_then(|f| f.name.clone());
                        calls.push((n, name.unwrap_or_default()));
                    }
                }
                exec.map_or(Kind::Other, |e| Kind::Calls(e, calls))
            }
            Some("tool") => {
                let id = m.tool_call_id.unwrap_or_default();
                match self.ids.resolve(&id) {
                    Some((e, n)) => Kind::Results(e, vec![(n, result_text(m.content))], Vec::new()),
                    None if id.starts_with(MINTED_PREFIX) => Kind::Unplaced(vec![id]),
                    None => Kind::Other,
                }
            }
            _ => Kind::Other,
        }
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
        role: Option<Cow<'a, str>>,
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
    /// guessed at. A turn sent back with ids the proxy never gave was
    /// given its ids before ([`Reader::echoes`], `Dialect::rename_echoes`).
    pub fn trailing_results(
        &self,
        messages: &[Box<RawValue>],
    ) -> Result<Option<Trailing>, Refused> {
        let mut unplaced = Vec::new();
        let found = self.trailing(messages, &mut unplaced);
        if unplaced.is_empty() {
            Ok(found)
        } else {
            unplaced.reverse();
            Err(Refused::NotHandedOut(unplaced))
        }
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
                Kind::Results(e, r, _) => {
                    results.extend(r.into_iter().rev().map(|(n, c)| (e.clone(), n, c)))
                }
                Kind::Unplaced(ids) => unplaced.extend(ids.into_iter().rev()),
                // Media straight after the calls is the user's own message.
                Kind::Calls(_, _) if carried && results.is_empty() => return None,
                Kind::Calls(exec, calls) => {
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

impl Transcript for Reader<'_> {
    fn ids(&self) -> &CallIds<'_> {
        &self.ids
    }

    fn kinds(&self, messages: &[Box<RawValue>]) -> Vec<Kind> {
        messages.iter().map(|m| self.kind(m)).collect()
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
            if !self.may_echo_turn(text) {
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
                .any(|c| id(c).is_some_and(|id| self.ids.names_proxy_id(&id)))
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
            if !may_echo(self.ids.store, self.ids.tenant, &keys) {
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
            let Some(echo) = echoed_batch(self.ids.store, self.ids.tenant, &calls, &results)?
            else {
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

    /// A tool message needs the assistant turn with its call before it.
    const STRAY_RESULTS_DROPPED: bool = true;

    fn follows_results(message: &RawValue) -> bool {
        is_media_carrier(message)
    }

    fn pair(e: &Execution, _beside: &[Value]) -> Vec<Value> {
        pair(e)
    }

    fn missing_pair(exec_id: &str, content: &str, _beside: Vec<Value>) -> Vec<Value> {
        missing_pair(exec_id, content)
    }
}

/// What the model is told of a program whose record is gone: a `run_code`
/// call and `content`, an error it can act on (run it again).
fn missing_pair(exec_id: &str, content: &str) -> Vec<Value> {
    let id = crate::runtime::lost_program_call_id(crate::runtime::CALL_PREFIX, exec_id);
    vec![
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
               "function": {"name": RUN_CODE, "arguments": "{\"code\":\"/* no longer available */\"}"}}]}),
        json!({"role": "tool", "tool_call_id": id, "content": content}),
    ]
}

/// The assistant turn with the model's `run_code` call, as the model made
/// it: its whole message as it arrived when the proxy kept one.
pub fn run_code_turn(e: &Execution) -> Value {
    if let Some(turn) = e.kept_turn() {
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
