//! An Interactions request (`POST /v1/interactions`), parsed only as deep
//! as the proxy needs, and its rewrite: the wire tools, `tool_choice`,
//! stored denials of mixed turns and the prompt sections.
//!
//! Every field stays the client's bytes unless the proxy changes it; the
//! steps of `input` are kept raw one by one. `input` is a string, one
//! content, a list of contents (the user's turn) or a list of steps (a
//! history, or only the new steps when the provider keeps the rest:
//! `previous_interaction_id`); only a list of steps can hold calls.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::steps::{FUNCTION_CALL, FUNCTION_RESULT};
use crate::conversation::Anchor;
use crate::error::ProxyError;
use crate::mode::RUN_CODE;
use crate::plan::ToolPlan;
use crate::splice::flat::{self, Entry};
use crate::splice::TenantSplices;
use crate::turn::callable;
use crate::turn::WireRequest;
use crate::wire::{join_text, to_raw, RawObject};

/// The types of `input` entries that are contents, not steps.
const CONTENT_TYPES: &[&str] = &["text", "image", "audio", "document", "video"];

/// An Interactions request.
#[derive(Clone, Debug)]
pub struct InteractionsRequest {
    object: RawObject,
    /// The steps of `input`, each still the client's bytes unless
    /// rewritten; `None` while `input` is a string, contents or absent
    /// (kept as sent: they hold no calls).
    steps: Option<Vec<Box<RawValue>>>,
    /// `stream: true`.
    pub stream: bool,
}

/// The fields of a step the rewrite looks at.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    call_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
}

/// What a step is to the splice: a `function_call` by its `id`, a
/// `function_result` by its `call_id`.
fn entry_of(raw: &RawValue) -> Entry {
    let Ok(head) = serde_json::from_str::<Head<'_>>(raw.get()) else {
        return Entry::Other;
    };
    match (head.kind.as_deref(), head.id, head.call_id) {
        (Some(FUNCTION_CALL), Some(id), _) => Entry::Call(id.into_owned()),
        (Some(FUNCTION_RESULT), _, Some(id)) => Entry::Result(id.into_owned()),
        _ => Entry::Other,
    }
}

/// Whether `input` (a JSON array's entries) is a list of contents.
fn is_contents(entries: &[Box<RawValue>]) -> bool {
    entries.iter().all(|raw| {
        serde_json::from_str::<Head<'_>>(raw.get())
            .is_ok_and(|h| h.kind.is_some_and(|k| CONTENT_TYPES.contains(&k.as_ref())))
    })
}

impl InteractionsRequest {
    /// Parses a request body.
    pub fn parse(bytes: &[u8]) -> Result<InteractionsRequest, ProxyError> {
        let (mut object, entries) = RawObject::parse_lending(bytes, Some(Self::HISTORY))?;
        let steps = match entries {
            Some(entries) if is_contents(&entries) && !entries.is_empty() => {
                // Contents, not steps: the input is the object's again.
                object.give_back(&entries);
                None
            }
            entries => entries,
        };
        let stream = object
            .get("stream")
            .is_some_and(|s| s.get().trim() == "true");
        Ok(InteractionsRequest {
            object,
            steps,
            stream,
        })
    }

    /// Replaces (or adds) a top-level field.
    pub fn set_field(&mut self, key: &str, value: &Value) {
        self.object.set(key, to_raw(value));
    }

    /// `previous_interaction_id`, when the provider keeps the conversation.
    pub fn previous_interaction_id(&self) -> Option<String> {
        self.field("previous_interaction_id").and_then(|r| {
            serde_json::from_str::<Option<String>>(r.get())
                .ok()
                .flatten()
        })
    }

    /// The steps of `input` (none when it is a string, contents or absent).
    pub fn steps(&self) -> &[Box<RawValue>] {
        self.steps.as_deref().unwrap_or(&[])
    }

    /// The steps to rewrite, when `input` is a list of steps.
    pub fn steps_mut(&mut self) -> Option<&mut Vec<Box<RawValue>>> {
        self.steps.as_mut()
    }

    /// Appends steps to the input (a repair round's model steps and
    /// answers). A string or contents become the `user_input` step they
    /// stand for.
    pub fn push_steps(&mut self, new: &[Value]) {
        self.steps_as_list().extend(new.iter().map(to_raw));
    }

    /// The input as a list of steps, converting a string, contents or no
    /// input.
    fn steps_as_list(&mut self) -> &mut Vec<Box<RawValue>> {
        if self.steps.is_none() {
            let first = self
                .object
                .get("input")
                .filter(|raw| raw.get() != "null")
                .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
                .map(|input| {
                    let content = match input {
                        Value::String(text) => json!([{"type": "text", "text": text}]),
                        Value::Array(contents) => Value::Array(contents),
                        one => json!([one]),
                    };
                    to_raw(&json!({"type": "user_input", "content": content}))
                });
            return self.steps.insert(first.into_iter().collect());
        }
        self.steps.get_or_insert_with(Vec::new)
    }

    /// `generation_config.tool_choice.allowed_tools.tools` names only tools
    /// the wire announces: a name the wire lacks becomes `run_code` where
    /// the wire has it (the route to that tool), else is dropped; a list
    /// left empty leaves the choice its `mode` alone.
    fn narrow_tool_choice(&mut self, plan: &ToolPlan) -> Result<(), ProxyError> {
        let Some(raw) = self
            .object
            .get("generation_config")
            .filter(|r| r.get() != "null")
        else {
            return Ok(());
        };
        let mut config: Value = serde_json::from_str(raw.get())
            .map_err(|e| ProxyError::InvalidRequest(format!("`generation_config`: {e}")))?;
        let Some(choice) = config.get_mut("tool_choice") else {
            return Ok(());
        };
        let Some(allowed) = choice
            .get_mut("allowed_tools")
            .and_then(Value::as_object_mut)
        else {
            return Ok(());
        };
        let wrong = || {
            ProxyError::InvalidRequest(
                "`generation_config.tool_choice.allowed_tools.tools` must be an array of tool \
                 names"
                    .into(),
            )
        };
        let Some(names) = allowed.get("tools") else {
            return Ok(());
        };
        let names = names.as_array().ok_or_else(wrong)?;
        let mut kept: Vec<Value> = Vec::new();
        for name in names {
            let name = name.as_str().ok_or_else(wrong)?;
            let name = if callable(plan, name) {
                name
            } else if callable(plan, RUN_CODE) {
                RUN_CODE
            } else {
                continue;
            };
            if !kept.iter().any(|k| k == name) {
                kept.push(json!(name));
            }
        }
        if kept.is_empty() {
            let mode = allowed.get("mode").cloned().unwrap_or(json!("auto"));
            *choice = mode;
        } else {
            allowed.insert("tools".into(), Value::Array(kept));
        }
        self.object.set("generation_config", to_raw(&config));
        Ok(())
    }

    /// Splices stored denials back into the turns they belong to
    /// ([`flat::splice_denials`]); with `previous_interaction_id` the input
    /// carries only the results.
    fn splice_denials(&mut self, splices: &TenantSplices) {
        let anchor = self.anchor();
        let Some(steps) = &mut self.steps else {
            return;
        };
        let kinds: Vec<Entry> = steps.iter().map(|s| entry_of(s)).collect();
        flat::splice_denials(steps, &kinds, &anchor, splices);
    }

    /// Appends the sections to `system_instruction` (a string), or sets it.
    fn append_prompt(&mut self, plan: &ToolPlan) -> Result<(), ProxyError> {
        let prompt = &plan.prompt_json;
        match self
            .object
            .get("system_instruction")
            .filter(|r| r.get() != "null")
        {
            Some(raw) => {
                let joined = join_text(raw, prompt).ok_or_else(|| {
                    ProxyError::InvalidRequest(
                        "`system_instruction` must be a string; send the system prompt as text"
                            .into(),
                    )
                })?;
                self.object.set("system_instruction", joined);
            }
            None => self.object.set("system_instruction", prompt.clone()),
        }
        Ok(())
    }
}

impl WireRequest for InteractionsRequest {
    const HISTORY: &'static str = "input";

    fn object(&self) -> &RawObject {
        &self.object
    }

    fn history(&self) -> Option<&[Box<RawValue>]> {
        self.steps.as_deref()
    }

    fn streams(&self) -> bool {
        self.stream
    }

    /// The conversation this request continues: its first user turn with
    /// `store: false` (the client sends the whole history); none when the
    /// provider keeps the conversation (the default), whose call ids are
    /// its own: the turn's request names its first words, the one that
    /// continues it only `previous_interaction_id`, and both must find the
    /// turn's stored denials.
    fn anchor(&self) -> Anchor {
        let stored = self
            .field("store")
            .is_none_or(|s| s.get().trim() != "false");
        if stored || self.previous_interaction_id().is_some() {
            return Anchor::NONE;
        }
        if let Some(steps) = &self.steps {
            return steps
                .iter()
                .filter_map(|raw| serde_json::from_str::<Head<'_>>(raw.get()).ok())
                .find(|h| h.kind.as_deref() == Some("user_input"))
                .and_then(|h| h.content)
                .and_then(|c| serde_json::from_str::<Value>(c.get()).ok())
                .map_or(Anchor::NONE, |content| Anchor::of_content(&content));
        }
        self.field("input")
            .and_then(|r| serde_json::from_str::<Value>(r.get()).ok())
            .map_or(Anchor::NONE, |input| Anchor::of_content(&input))
    }

    /// Refuses what the proxy cannot judge: a background interaction is
    /// read later with `GET .../interactions/{id}`, which the proxy does
    /// not judge; an agent runs tools of its own choosing on the provider's
    /// side, in the background.
    fn check(&self) -> Result<(), ProxyError> {
        let set = |key| self.field(key).is_some_and(|v| v.get() != "null");
        if self
            .field("background")
            .is_some_and(|b| b.get().trim() == "true")
        {
            return Err(ProxyError::InvalidRequest(
                "`background: true` is refused in this tool mode: a background interaction is \
                 read later with GET /v1beta/interactions/{id}, which the proxy cannot judge, so \
                 the model's calls would reach your tools unchecked. Send the request without \
                 `background` (stream it to keep a long turn alive), or in native mode"
                    .into(),
            ));
        }
        if set("agent") {
            return Err(ProxyError::InvalidRequest(
                "`agent` is refused in this tool mode: an agent's interaction runs in the \
                 background with tools the proxy never sees, so its calls could not be judged. \
                 Name a `model`, or send the request in native mode"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Applies the plan: wire tools, `tool_choice`, stored denials, sections.
    fn rewrite(&mut self, plan: &ToolPlan, splices: &TenantSplices) -> Result<(), ProxyError> {
        if let Some(tools) = &plan.wire_tools {
            self.object.set("tools", tools.clone());
        }
        if plan.narrows_tools() {
            self.narrow_tool_choice(plan)?;
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

#[cfg(test)]
mod tests;
