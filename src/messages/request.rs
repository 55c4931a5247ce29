//! A Messages request (`POST /v1/messages`, and `count_tokens` bodies of
//! the same shape), parsed only as deep as the proxy needs, and its
//! rewrite: the wire tools, `tool_choice`, `tool_reference`s to tools the
//! wire lacks ([`references`]), stored denials of mixed turns and the
//! prompt sections (docs/agents.md, "Claude Code and the Messages API").
//!
//! Every field stays the client's bytes unless the proxy changes it;
//! messages are kept raw one by one, so only a message that takes a splice
//! is re-written (and then only its `content` list, block by block). The
//! rewrite is a pure function of the request and the plan: the same request
//! gives the same bytes, so the client's `cache_control` breakpoints keep
//! hitting, and they are moved so they still cover what the proxy adds.

use std::borrow::Cow;
use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::conversation::Anchor;
use crate::error::ProxyError;
use crate::plan::ToolPlan;
use crate::splice::TenantSplices;
use crate::turn::{lent_history, WireRequest};
use crate::wire::{join_text, raw_array, to_raw, RawObject};

mod references;

/// A Messages request.
#[derive(Clone, Debug)]
pub struct MessagesRequest {
    object: RawObject,
    /// The messages, each still the client's bytes unless rewritten; `None`
    /// when `messages` is absent.
    messages: Option<Vec<Box<RawValue>>>,
    /// `stream: true`.
    pub stream: bool,
}

/// The fields of a message the rewrite looks at.
#[derive(Deserialize)]
struct MessageHead<'a> {
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
}

/// The fields of a content block (or a tool) the rewrite looks at.
#[derive(Deserialize)]
struct BlockHead<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    tool_use_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    cache_control: Option<&'a RawValue>,
}

/// A text block the proxy adds to the system prompt.
#[derive(Serialize)]
struct TextBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<&'a RawValue>,
}

fn head(raw: &RawValue) -> Option<BlockHead<'_>> {
    serde_json::from_str(raw.get()).ok()
}

/// The items of a raw JSON array, each raw; `None` for anything else.
fn items(raw: &RawValue) -> Option<Vec<&RawValue>> {
    serde_json::from_str(raw.get()).ok()
}

fn raw(text: String) -> Result<Box<RawValue>, ProxyError> {
    RawValue::from_string(text).map_err(|e| ProxyError::InvalidRequest(e.to_string()))
}

fn raw_object(value: &RawValue, what: &str) -> Result<RawObject, ProxyError> {
    RawObject::parse(value.get().as_bytes())
        .map_err(|e| ProxyError::InvalidRequest(format!("{what}: {e}")))
}

impl MessagesRequest {
    /// Parses a request body.
    pub fn parse(bytes: &[u8]) -> Result<MessagesRequest, ProxyError> {
        let (object, messages) = RawObject::parse_lending(bytes, Some(Self::HISTORY))?;
        let messages = lent_history(
            messages,
            &object,
            Self::HISTORY,
            |raw| raw.get() == "null",
            "`messages` must be an array of message objects",
        )?;
        let stream = object
            .get("stream")
            .is_some_and(|s| s.get().trim() == "true");
        Ok(MessagesRequest {
            object,
            messages,
            stream,
        })
    }

    /// Replaces (or adds) a top-level field.
    #[cfg(test)]
    pub fn set_field(&mut self, key: &str, value: &Value) {
        self.object.set(key, to_raw(value));
    }

    /// The messages (none when `messages` is absent).
    pub fn messages(&self) -> &[Box<RawValue>] {
        self.messages.as_deref().unwrap_or(&[])
    }

    /// The messages to rewrite (an absent `messages` becomes a list).
    pub fn messages_mut(&mut self) -> &mut Vec<Box<RawValue>> {
        self.messages.get_or_insert_with(Vec::new)
    }

    /// Appends messages (a repair round's assistant turn and answers).
    pub fn push_messages(&mut self, new: &[Value]) {
        self.messages_mut().extend(new.iter().map(to_raw));
    }

    fn splice_denials(&mut self, splices: &TenantSplices) -> Result<(), ProxyError> {
        let anchor = self.anchor();
        let Some(messages) = &mut self.messages else {
            return Ok(());
        };
        for i in 1..messages.len() {
            let Some((answered, at)) = tool_results(&messages[i]) else {
                continue;
            };
            let Some(splice) = splices.get(&anchor, &answered) else {
                continue;
            };
            let Some(called) = tool_uses(&messages[i - 1]) else {
                continue;
            };
            let id = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
            let calls: Vec<&Value> = splice
                .denied_calls
                .iter()
                .filter(|c| id(c, "id").is_none_or(|id| !called.contains(&id)))
                .collect();
            let answers: Vec<&Value> = splice
                .denials
                .iter()
                .filter(|a| id(a, "tool_use_id").is_none_or(|id| !answered.contains(&id)))
                .collect();
            if !calls.is_empty() {
                messages[i - 1] = with_blocks(&messages[i - 1], None, &calls)?;
            }
            if !answers.is_empty() {
                messages[i] = with_blocks(&messages[i], Some(at), &answers)?;
            }
        }
        Ok(())
    }

    /// Puts the sections into `system`, inside the client's cached prefix:
    /// a string gets them after a blank line; a list of blocks gets them as
    /// a text block right after the last block with `cache_control`, which
    /// moves onto the new block (so the prefix it caches now ends after the
    /// sections), or at the end when no block has one; no `system` becomes
    /// the sections alone.
    fn append_prompt(&mut self, plan: &ToolPlan) -> Result<(), ProxyError> {
        let bad = || {
            ProxyError::InvalidRequest(
                "`system` must be a string or an array of text blocks".into(),
            )
        };
        let prompt = &plan.prompt_json;
        let Some(system) = self.object.get("system").filter(|r| r.get() != "null") else {
            self.object.set("system", prompt.clone());
            return Ok(());
        };
        if system.get().starts_with('"') {
            let joined = join_text(system, prompt).ok_or_else(bad)?;
            self.object.set("system", joined);
            return Ok(());
        }
        let mut blocks: Vec<Box<RawValue>> =
            serde_json::from_str(system.get()).map_err(|_| bad())?;
        let breakpoint = blocks
            .iter()
            .rposition(|b| head(b).is_some_and(|h| h.cache_control.is_some()));
        // Written from raw values as they are (`to_raw`), not read again.
        match breakpoint {
            Some(i) => {
                let mut block = raw_object(&blocks[i], &format!("`system[{i}]`"))?;
                let cc = block
                    .get("cache_control")
                    .map(ToOwned::to_owned)
                    .ok_or_else(bad)?;
                block.remove("cache_control");
                blocks[i] = to_raw(&block);
                let new = TextBlock {
                    kind: "text",
                    text: prompt,
                    cache_control: Some(&cc),
                };
                blocks.insert(i + 1, to_raw(&new));
            }
            None => blocks.push(to_raw(&TextBlock {
                kind: "text",
                text: prompt,
                cache_control: None,
            })),
        }
        self.object.set("system", to_raw(&blocks));
        Ok(())
    }
}

impl WireRequest for MessagesRequest {
    const HISTORY: &'static str = "messages";

    fn object(&self) -> &RawObject {
        &self.object
    }

    fn history(&self) -> Option<&[Box<RawValue>]> {
        self.messages.as_deref()
    }

    fn streams(&self) -> bool {
        self.stream
    }

    /// Splices stored denials back into the turns they belong to.
    ///
    /// A turn is found by its answers: the `tool_use_id`s of a user
    /// message's `tool_result` blocks must be exactly the ids of a stored
    /// turn of this tenant. The denied `tool_use` blocks go at the end of
    /// the assistant message before it, their `tool_result`s right after
    /// the user message's own (every `tool_result` before other content,
    /// as the API requires). Nothing is added twice.
    /// The conversation this request continues: its first user message.
    fn anchor(&self) -> Anchor {
        self.messages
            .as_deref()
            .map_or(Anchor::NONE, Anchor::of_history)
    }

    /// A message thread (`thread`, `previous_message_id`) keeps the
    /// conversation at Anthropic, out of the proxy's reading: the model
    /// would see turns the proxy never judged, and programs could not be
    /// resumed. Refused with the code clients answer by resending the
    /// whole conversation without a thread.
    fn check(&self) -> Result<(), ProxyError> {
        let set = |key| self.field(key).is_some_and(|v| v.get() != "null");
        match ["thread", "previous_message_id"]
            .into_iter()
            .find(|k| set(k))
        {
            Some(field) => Err(ProxyError::ThreadUnsupported(field)),
            None => Ok(()),
        }
    }

    /// Applies the plan: wire tools, `tool_choice`, references to tools the
    /// wire lacks, stored denials, sections.
    fn rewrite(&mut self, plan: &ToolPlan, splices: &TenantSplices) -> Result<(), ProxyError> {
        if let Some(wire) = &plan.wire_tools {
            // With the client's cache breakpoint already (the plan's).
            self.object.set("tools", wire.clone());
        }
        if plan.narrows_tools() {
            if let Some(raw) = self.object.get("tool_choice").filter(|r| r.get() != "null") {
                let value: Value = serde_json::from_str(raw.get())
                    .map_err(|e| ProxyError::InvalidRequest(format!("`tool_choice`: {e}")))?;
                let servers = crate::messages::tools::server_tool_names(self.object.get("tools"));
                let choice = super::choice::tool_choice(&value, plan, &servers)?;
                self.object.set("tool_choice", to_raw(&choice));
            }
        }
        if plan.narrows_tools() {
            if let Some(messages) = &mut self.messages {
                references::rewrite(messages, plan, self.object.get("tools"))?;
            }
        }
        if !splices.is_empty() {
            self.splice_denials(splices)?;
        }
        if !plan.prompt.is_empty() {
            self.append_prompt(plan)?;
        }
        Ok(())
    }
}

/// A user message's `tool_result` ids and the position after its last
/// `tool_result` block; `None` when it has none.
fn tool_results(message: &RawValue) -> Option<(Vec<String>, usize)> {
    let blocks = blocks_of(message, "user")?;
    let mut ids = Vec::new();
    let mut end = 0;
    for (i, block) in blocks.iter().enumerate() {
        let Some(h) = head(block) else { continue };
        if h.kind.as_deref() == Some("tool_result") {
            ids.extend(h.tool_use_id.map(Cow::into_owned));
            end = i + 1;
        }
    }
    (!ids.is_empty()).then_some((ids, end))
}

/// The `tool_use` ids of an assistant message; `None` for another role.
fn tool_uses(message: &RawValue) -> Option<HashSet<String>> {
    let h: MessageHead<'_> = serde_json::from_str(message.get()).ok()?;
    if h.role.as_deref() != Some("assistant") {
        return None;
    }
    let Some(blocks) = h.content.and_then(items) else {
        // A string (or no) content holds no calls.
        return Some(HashSet::new());
    };
    Some(
        blocks
            .iter()
            .filter_map(|b| head(b))
            .filter(|h| h.kind.as_deref() == Some("tool_use"))
            .filter_map(|h| h.id.map(Cow::into_owned))
            .collect(),
    )
}

/// The content blocks of a message of `role` whose content is a list.
fn blocks_of<'a>(message: &'a RawValue, role: &str) -> Option<Vec<&'a RawValue>> {
    let h: MessageHead<'a> = serde_json::from_str(message.get()).ok()?;
    if h.role.as_deref() != Some(role) {
        return None;
    }
    items(h.content?)
}

/// The message with `new` blocks inserted at `at` (at the end when `None`);
/// every other block, and every other field, as sent. A string content
/// becomes the text block it stands for.
fn with_blocks(
    message: &RawValue,
    at: Option<usize>,
    new: &[&Value],
) -> Result<Box<RawValue>, ProxyError> {
    let mut object = raw_object(message, "a message")?;
    let owned: Vec<Box<RawValue>>;
    let mut blocks: Vec<&RawValue> = match object.get("content") {
        Some(c) if c.get().starts_with('"') => {
            let text: String = serde_json::from_str(c.get())
                .map_err(|e| ProxyError::InvalidRequest(format!("a message's content: {e}")))?;
            owned = if text.is_empty() {
                Vec::new()
            } else {
                vec![to_raw(&json!({"type": "text", "text": text}))]
            };
            owned.iter().map(AsRef::as_ref).collect()
        }
        Some(c) => items(c).unwrap_or_default(),
        None => Vec::new(),
    };
    let added: Vec<Box<RawValue>> = new.iter().map(|v| to_raw(*v)).collect();
    let at = at.unwrap_or(blocks.len()).min(blocks.len());
    blocks.splice(at..at, added.iter().map(AsRef::as_ref));
    let content = raw(raw_array(blocks))?;
    object.set("content", content);
    raw(object.to_text())
}

#[cfg(test)]
mod claude_code_tests;
#[cfg(test)]
mod deferred_tests;
#[cfg(test)]
mod tests;
