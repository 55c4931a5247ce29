//! A Responses request (`POST /v1/responses`), parsed only as deep as the
//! proxy needs, and its rewrite: the wire tools, `tool_choice`, stored
//! denials of mixed turns and the prompt sections (docs/agents.md, "Codex and the Responses API").
//!
//! Every field stays the client's bytes unless the proxy changes it; input
//! items are kept raw one by one, so only the system/developer message that
//! takes the sections is re-printed. The rewrite is a pure function of the
//! request and the plan: the same request gives the same bytes (prompt
//! caches hit), and `prompt_cache_key` passes untouched.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::conversation::Anchor;
use crate::error::ProxyError;
use crate::plan::ToolPlan;
use crate::responses::items::is_call_type;
use crate::splice::flat::{self, Entry};
use crate::splice::TenantSplices;
use crate::turn::{lent_history, WireRequest};
use crate::wire::{append_to_message, join_text, to_raw, RawObject};

/// A Responses request.
#[derive(Clone, Debug)]
pub struct ResponsesRequest {
    object: RawObject,
    /// The input items, each still the client's bytes unless rewritten;
    /// `None` while `input` is a string (kept as sent: it holds no calls)
    /// or absent (a stored prompt, or `previous_response_id` alone).
    input: Option<Vec<Box<RawValue>>>,
    /// `stream: true`.
    pub stream: bool,
}

/// The fields of an input item the rewrite looks at.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow)]
    call_id: Option<Cow<'a, str>>,
}

/// What an input item is to the splice: a call item (`function_call`,
/// `custom_tool_call`, built-ins) or the answer to one
/// (`function_call_output`, ...), by `call_id`.
fn entry_of(raw: &RawValue) -> Entry {
    let Ok(head) = serde_json::from_str::<Head<'_>>(raw.get()) else {
        return Entry::Other;
    };
    let (Some(kind), Some(id)) = (head.kind, head.call_id) else {
        return Entry::Other;
    };
    if is_call_type(&kind) {
        Entry::Call(id.into_owned())
    } else if kind.strip_suffix("_output").is_some_and(is_call_type) {
        Entry::Result(id.into_owned())
    } else {
        Entry::Other
    }
}

/// Whether an input item is a system or developer message.
fn is_instruction_message(raw: &RawValue) -> bool {
    serde_json::from_str::<Head<'_>>(raw.get()).is_ok_and(|h| {
        matches!(h.kind.as_deref(), None | Some("message"))
            && matches!(h.role.as_deref(), Some("system" | "developer"))
    })
}

impl ResponsesRequest {
    /// Parses a request body.
    pub fn parse(bytes: &[u8]) -> Result<ResponsesRequest, ProxyError> {
        let (object, input) = RawObject::parse_lending(bytes, Some(Self::HISTORY))?;
        let input = lent_history(
            input,
            &object,
            Self::HISTORY,
            |raw| raw.get() == "null" || raw.get().starts_with('"'),
            "`input` must be a string or an array of input items",
        )?;
        let stream = object
            .get("stream")
            .is_some_and(|s| s.get().trim() == "true");
        Ok(ResponsesRequest {
            object,
            input,
            stream,
        })
    }

    /// `previous_response_id`, when the request continues a stored response.
    pub fn previous_response_id(&self) -> Option<String> {
        self.field("previous_response_id").and_then(|r| {
            serde_json::from_str::<Option<String>>(r.get())
                .ok()
                .flatten()
        })
    }

    /// Every tool the request declares, wherever it declares them
    /// ([`declared::tools`]).
    pub fn declared_tools(&self) -> Result<Option<Cow<'_, RawValue>>, ProxyError> {
        declared::tools(self.field("tools"), self.input_items())
    }

    /// The input items (none when `input` is a string or absent).
    pub fn input_items(&self) -> &[Box<RawValue>] {
        self.input.as_deref().unwrap_or(&[])
    }

    /// The input items to rewrite, when `input` is a list.
    pub fn input_mut(&mut self) -> Option<&mut Vec<Box<RawValue>>> {
        self.input.as_mut()
    }

    /// Replaces (or adds) a top-level field.
    pub fn set_field(&mut self, key: &str, value: &Value) {
        self.object.set(key, to_raw(value));
    }

    /// Appends items to the input (a repair round's model items and
    /// answers). A string input becomes the user message it stands for.
    pub fn push_items(&mut self, new: &[Value]) {
        self.items_mut().extend(new.iter().map(to_raw));
    }

    /// The input as a list of items, converting a string or no input.
    fn items_mut(&mut self) -> &mut Vec<Box<RawValue>> {
        if self.input.is_none() {
            let text = self
                .object
                .get("input")
                .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
            let first = text
                .map(|t| to_raw(&json!({"type": "message", "role": "user", "content": t})))
                .into_iter()
                .collect();
            return self.input.insert(first);
        }
        self.input.get_or_insert_with(Vec::new)
    }

    /// Splices stored denials back into the turns they belong to
    /// ([`flat::splice_denials`]); with `previous_response_id` the input
    /// carries only the outputs.
    fn splice_denials(&mut self, splices: &TenantSplices) {
        let anchor = self.anchor();
        let Some(items) = &mut self.input else {
            return;
        };
        let kinds: Vec<Entry> = items.iter().map(|i| entry_of(i)).collect();
        flat::splice_denials(items, &kinds, &anchor, splices);
    }

    /// Appends the sections to `instructions` when the client sent them,
    /// else to the first system/developer input message, else as new
    /// `instructions`.
    fn append_prompt(&mut self, plan: &ToolPlan) -> Result<(), ProxyError> {
        let prompt = &plan.prompt_json;
        if let Some(raw) = self
            .object
            .get("instructions")
            .filter(|r| r.get() != "null")
        {
            let joined = join_text(raw, prompt).ok_or_else(|| {
                ProxyError::InvalidRequest(
                    "`instructions` must be a string; send the system prompt as text".into(),
                )
            })?;
            self.object.set("instructions", joined);
            return Ok(());
        }
        if let Some(items) = &mut self.input {
            if let Some(i) = items.iter().position(|m| is_instruction_message(m)) {
                if let Some(spliced) = append_to_message(&items[i], prompt, "input_text") {
                    items[i] = spliced;
                    return Ok(());
                }
                // A message with repeated keys: read as serde reads it.
                let mut msg: Value = serde_json::from_str(items[i].get())
                    .map_err(|e| ProxyError::InvalidRequest(format!("`input[{i}]`: {e}")))?;
                match msg.get_mut("content") {
                    Some(Value::String(s)) if !s.is_empty() => {
                        s.push_str("\n\n");
                        s.push_str(&plan.prompt);
                    }
                    Some(Value::Array(parts)) => {
                        parts.push(json!({"type": "input_text", "text": plan.prompt}))
                    }
                    _ => msg["content"] = Value::String(plan.prompt.clone()),
                }
                items[i] = to_raw(&msg);
                return Ok(());
            }
        }
        self.object.set("instructions", prompt.clone());
        Ok(())
    }
}

impl WireRequest for ResponsesRequest {
    const HISTORY: &'static str = "input";

    fn object(&self) -> &RawObject {
        &self.object
    }

    fn history(&self) -> Option<&[Box<RawValue>]> {
        self.input.as_deref()
    }

    fn streams(&self) -> bool {
        self.stream
    }

    /// The conversation this request continues: its first user message;
    /// none when the provider holds the conversation
    /// (`previous_response_id`), whose call ids are the provider's own.
    fn anchor(&self) -> Anchor {
        if self.previous_response_id().is_some() {
            return Anchor::NONE;
        }
        match &self.input {
            Some(items) => Anchor::of_history(items),
            None => self
                .field("input")
                .and_then(|r| serde_json::from_str::<Value>(r.get()).ok())
                .map_or(Anchor::NONE, |text| Anchor::of_content(&text)),
        }
    }

    /// Refuses what the proxy cannot judge: a background response is
    /// fetched later, on a route the judge never sees; a conversation or a
    /// stored prompt the provider keeps holds turns or tools the proxy
    /// never reads.
    fn check(&self) -> Result<(), ProxyError> {
        let set = |key| self.field(key).is_some_and(|v| v.get() != "null");
        if set("conversation") {
            return Err(ProxyError::InvalidRequest(
                "`conversation` is refused in this tool mode: the provider keeps that \
                 conversation's items, which the proxy never reads, so the model could see and \
                 repeat calls nobody judged. Send the conversation as `input` (or continue it \
                 with `previous_response_id`), or use native mode"
                    .into(),
            ));
        }
        if set("prompt") {
            return Err(ProxyError::InvalidRequest(
                "`prompt` (a stored prompt) is refused in this tool mode: a stored prompt can \
                 declare tools the proxy never sees, so the model's calls to them would reach \
                 your tools unchecked. Send its instructions and tools in the request, or use \
                 native mode"
                    .into(),
            ));
        }
        if self
            .field("background")
            .is_some_and(|b| b.get().trim() == "true")
        {
            return Err(ProxyError::InvalidRequest(
                "`background: true` is refused in this tool mode: a background response is \
                 read later with GET /v1/responses/{id}, which the proxy cannot judge, so the \
                 model's calls would reach your tools unchecked. Send the request without \
                 `background` (stream it to keep a long turn alive), or in native mode"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Applies the plan: wire tools, `tool_choice`, stored denials, sections.
    fn rewrite(&mut self, plan: &ToolPlan, splices: &TenantSplices) -> Result<(), ProxyError> {
        if let Some(tools) = &plan.wire_tools {
            // The wire tools stand for every declaration site: tools the
            // input declared are in them (or collapsed into the SDK).
            self.object.set("tools", tools.clone());
            if let Some(items) = &mut self.input {
                declared::take_out(items);
            }
        }
        if plan.narrows_tools() {
            if let Some(raw) = self.object.get("tool_choice").filter(|r| r.get() != "null") {
                let value: Value = serde_json::from_str(raw.get())
                    .map_err(|e| ProxyError::InvalidRequest(format!("`tool_choice`: {e}")))?;
                let choice = super::choice::tool_choice(&value, plan)?;
                self.object.set("tool_choice", to_raw(&choice));
            }
        }
        if !splices.is_empty() {
            self.splice_denials(splices);
        }
        if !plan.prompt.is_empty() {
            self.append_prompt(plan)?;
        }
        Ok(())
    }
}

mod declared;

#[cfg(test)]
mod codex_tests;
#[cfg(test)]
mod tests;
