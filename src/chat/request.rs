//! Request rewrite: the wire tools, `tool_choice`, spliced denials and the
//! prompt sections (docs/presets.md, docs/modes.md).
//!
//! Messages the proxy does not change stay the bytes the client sent; only
//! the first system message and assistant turns with stored denials are
//! parsed into trees.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::conversation::Anchor;
use crate::error::ProxyError;
use crate::mode::Mode;
use crate::plan::ToolPlan;
use crate::splice::TenantSplices;
use crate::turn::{lent_history, WireRequest};
use crate::wire::{append_to_message, to_raw, RawObject};

/// A chat-completions request, parsed only as deep as the proxy needs.
#[derive(Clone, Debug)]
pub struct ChatRequest {
    object: RawObject,
    /// The messages, each still the client's bytes unless rewritten.
    pub messages: Vec<Box<RawValue>>,
    /// `stream: true`.
    pub stream: bool,
    /// The `n` field (1 when absent).
    pub n: u64,
}

#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
}

impl ChatRequest {
    /// Parses a request body.
    pub fn parse(bytes: &[u8]) -> Result<ChatRequest, ProxyError> {
        let (object, messages) = RawObject::parse_lending(bytes, Some(Self::HISTORY))?;
        let messages = lent_history(
            messages,
            &object,
            Self::HISTORY,
            |_| false,
            "`messages` must be an array of message objects",
        )?
        .ok_or_else(|| {
            ProxyError::InvalidRequest(
                "the request has no `messages`; send the conversation as `messages`".into(),
            )
        })?;
        let stream = object
            .get("stream")
            .is_some_and(|s| s.get().trim() == "true");
        // Read leniently (`"2"` and `2.0` are 2), so no spelling of a
        // count above 1 slips past the refusal.
        let n = match object
            .get("n")
            .map(|raw| serde_json::from_str::<Value>(raw.get()))
        {
            None | Some(Ok(Value::Null)) => 1,
            Some(v) => v
                .ok()
                .as_ref()
                .and_then(crate::wire::lenient_number)
                .filter(|n| *n >= 0.0 && n.fract() == 0.0)
                .map(|n| n as u64)
                .ok_or_else(|| {
                    ProxyError::InvalidRequest("`n` must be a positive integer".into())
                })?,
        };
        Ok(ChatRequest {
            object,
            messages,
            stream,
            n,
        })
    }

    /// Whether a streaming client asked for a usage chunk
    /// (`stream_options.include_usage`).
    pub fn include_usage(&self) -> bool {
        self.field("stream_options")
            .and_then(|o| serde_json::from_str::<Value>(o.get()).ok())
            .is_some_and(|o| o.get("include_usage") == Some(&Value::Bool(true)))
    }

    /// Appends a message (a repair round's assistant turn or denial).
    pub fn push_message(&mut self, message: &Value) {
        self.messages.push(to_raw(message));
    }

    /// The other fields that name tools (`tool_choice`, legacy `functions`
    /// and `function_call`), each rewritten to name only what the wire
    /// carries, from the proxy's own reading of it.
    fn rewrite_choices(&mut self, plan: &ToolPlan) -> Result<(), ProxyError> {
        let parse = |key: &str, raw: &RawValue| {
            serde_json::from_str::<Value>(raw.get())
                .map_err(|e| ProxyError::InvalidRequest(format!("`{key}`: {e}")))
        };
        if let Some(raw) = self.object.get("tool_choice").filter(|r| r.get() != "null") {
            let choice = choice::tool_choice(&parse("tool_choice", raw)?, plan)?;
            self.object.set("tool_choice", to_raw(&choice));
        }
        if let Some(raw) = self.object.get("functions").filter(|r| r.get() != "null") {
            match choice::functions(&parse("functions", raw)?, plan)? {
                Some(kept) => self.object.set("functions", to_raw(&kept)),
                None => {
                    // A `function_call` without `functions` is an error upstream.
                    self.object.remove("functions");
                    self.object.remove("function_call");
                }
            }
        }
        if let Some(raw) = self
            .object
            .get("function_call")
            .filter(|r| r.get() != "null")
        {
            let call = choice::function_call(&parse("function_call", raw)?, plan)?;
            self.object.set("function_call", to_raw(&call));
        }
        Ok(())
    }

    /// Splices stored denials into the assistant turns they belong to: a
    /// turn of this tenant and conversation whose calls carry exactly the
    /// ids the client got.
    fn splice_denials(&mut self, splices: &TenantSplices) -> Result<(), ProxyError> {
        #[derive(Deserialize)]
        struct Calls {
            tool_calls: Option<Vec<CallId>>,
        }
        #[derive(Deserialize)]
        struct CallId {
            id: Option<Value>,
        }
        let anchor = self.anchor();
        let mut i = 0;
        while i < self.messages.len() {
            let raw = self.messages[i].get();
            if !raw.contains("\"tool_calls\"") || !is_role(raw, "assistant") {
                i += 1;
                continue;
            }
            // A turn of another shape has nothing stored for it.
            let ids: Vec<String> = serde_json::from_str::<Calls>(raw)
                .ok()
                .and_then(|m| m.tool_calls)
                .into_iter()
                .flatten()
                .filter_map(|c| match c.id {
                    Some(Value::String(id)) => Some(id),
                    _ => None,
                })
                .collect();
            let Some(splice) = splices.get(&anchor, &ids) else {
                i += 1;
                continue;
            };
            let mut msg: Value = serde_json::from_str(raw)
                .map_err(|e| ProxyError::InvalidRequest(format!("messages[{i}]: {e}")))?;
            if let Some(calls) = msg["tool_calls"].as_array_mut() {
                calls.extend(splice.denied_calls.iter().cloned());
            }
            self.messages[i] = to_raw(&msg);
            // The denials follow the tool results the client sent for this turn.
            let mut end = i + 1;
            while end < self.messages.len() && is_role(self.messages[end].get(), "tool") {
                end += 1;
            }
            let denials: Vec<Box<RawValue>> = splice.denials.iter().map(to_raw).collect();
            let added = denials.len();
            self.messages.splice(end..end, denials);
            i = end + added;
        }
        Ok(())
    }

    fn append_prompt(&mut self, plan: &ToolPlan) -> Result<(), ProxyError> {
        let first = self
            .messages
            .iter()
            .position(|m| is_role(m.get(), "system") || is_role(m.get(), "developer"));
        let Some(i) = first else {
            let message = format!(
                r#"{{"role":"system","content":{}}}"#,
                plan.prompt_json.get()
            );
            let message = RawValue::from_string(message)
                .map_err(|e| ProxyError::InvalidRequest(e.to_string()))?;
            self.messages.insert(0, message);
            return Ok(());
        };
        if let Some(spliced) = append_to_message(&self.messages[i], &plan.prompt_json, "text") {
            self.messages[i] = spliced;
            return Ok(());
        }
        // A message with repeated keys: read as serde reads it.
        let prompt = &plan.prompt;
        let mut msg: Value = serde_json::from_str(self.messages[i].get())
            .map_err(|e| ProxyError::InvalidRequest(format!("messages[{i}]: {e}")))?;
        match msg.get_mut("content") {
            Some(Value::String(s)) if !s.is_empty() => {
                s.push_str("\n\n");
                s.push_str(prompt);
            }
            Some(Value::Array(parts)) => parts.push(json!({"type": "text", "text": prompt})),
            _ => msg["content"] = Value::String(prompt.to_owned()),
        }
        self.messages[i] = to_raw(&msg);
        Ok(())
    }
}

impl WireRequest for ChatRequest {
    const HISTORY: &'static str = "messages";

    fn object(&self) -> &RawObject {
        &self.object
    }

    fn history(&self) -> Option<&[Box<RawValue>]> {
        Some(&self.messages)
    }

    fn streams(&self) -> bool {
        self.stream
    }

    /// The conversation this request continues: its first user message.
    fn anchor(&self) -> Anchor {
        Anchor::of_history(&self.messages)
    }

    fn check(&self) -> Result<(), ProxyError> {
        // Another choice would be a turn nobody judged.
        if self.n > 1 {
            return Err(ProxyError::UnsupportedN(self.n));
        }
        Ok(())
    }

    /// Applies the plan: wire tools, `tool_choice`, stored denials, sections.
    fn rewrite(&mut self, plan: &ToolPlan, splices: &TenantSplices) -> Result<(), ProxyError> {
        // Legacy `functions` would announce native tools the collapse cannot
        // withdraw from the wire; refuse rather than carry them unchecked.
        if plan.mode == Mode::Code
            && self
                .object
                .get("functions")
                .is_some_and(|f| f.get() != "null")
        {
            return Err(ProxyError::InvalidRequest(
                "the legacy `functions` field cannot be used in code mode; declare the same \
                 functions as `tools` (type \"function\"), or use mode native"
                    .into(),
            ));
        }
        if let Some(tools) = &plan.wire_tools {
            self.object.set("tools", tools.clone());
        }
        if plan.narrows_tools() {
            self.rewrite_choices(plan)?;
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

/// Whether a raw message has role `role` (false for anything unparsable).
fn is_role(raw: &str, role: &str) -> bool {
    serde_json::from_str::<Head<'_>>(raw).is_ok_and(|h| h.role.as_deref() == Some(role))
}

pub(crate) mod choice;
#[cfg(test)]
mod tests;
