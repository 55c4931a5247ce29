//! A Gemini request (`:generateContent`, `:streamGenerateContent`, and
//! `:countTokens` bodies), parsed only as deep as the proxy needs, and its
//! rewrite: the wire tools, `toolConfig`, stored denials of mixed turns and
//! the prompt sections.
//!
//! The model and whether it streams are in the path, not the body. Every
//! field stays the client's bytes unless the proxy changes it; `contents`
//! are kept raw one by one, so only a content that takes a splice is
//! re-written. A `countTokens` body that wraps the whole request
//! (`generateContentRequest`) is rewritten inside its wrapper.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::parts::{answered_ids, called, function_response};
use crate::conversation::Anchor;
use crate::error::ProxyError;
use crate::mode::RUN_CODE;
use crate::plan::ToolPlan;
use crate::splice::TenantSplices;
use crate::turn::callable;
use crate::turn::{lent_history, WireRequest};
use crate::wire::{to_raw, Keys, RawObject};

/// A Gemini request.
#[derive(Clone, Debug)]
pub struct GeminiRequest {
    /// The request's fields (inside `generateContentRequest` for a
    /// `countTokens` body that wraps one).
    object: RawObject,
    /// A `countTokens` body's own fields around the request it wraps.
    wrapper: Option<RawObject>,
    /// The contents, each still the client's bytes unless rewritten;
    /// `None` when `contents` is absent.
    contents: Option<Vec<Box<RawValue>>>,
    /// The path asked for `:streamGenerateContent`.
    pub stream: bool,
    /// The model the path names.
    pub model: String,
}

/// The fields of a content the rewrite looks at.
#[derive(Deserialize)]
struct ContentHead {
    role: Option<String>,
    #[serde(default)]
    parts: Vec<Value>,
}

fn content_head(raw: &RawValue) -> Option<ContentHead> {
    serde_json::from_str(raw.get()).ok()
}

/// The first of `keys` the object holds (the REST API takes camelCase and
/// snake_case field names).
fn either<'a>(object: &RawObject, keys: [&'a str; 2]) -> &'a str {
    keys.into_iter()
        .find(|k| object.get(k).is_some())
        .unwrap_or(keys[0])
}

/// The one spelling of a field the body uses: both at once have no single
/// reading (which one Google reads is not documented), so such a body is
/// refused rather than half rewritten.
fn spelling(
    present: impl Fn(&str) -> bool,
    keys: [&'static str; 2],
) -> Result<&'static str, ProxyError> {
    match (present(keys[0]), present(keys[1])) {
        (true, true) => Err(ProxyError::InvalidRequest(format!(
            "the body holds both `{}` and `{}`; send one of the two spellings",
            keys[0], keys[1]
        ))),
        (false, true) => Ok(keys[1]),
        _ => Ok(keys[0]),
    }
}

impl GeminiRequest {
    /// Parses a body sent to `path` (`/v1beta/models/{model}:{method}`).
    pub fn parse(bytes: &[u8], path: &str) -> Result<GeminiRequest, ProxyError> {
        let (model, method) = path
            .rsplit('/')
            .next()
            .and_then(|last| last.split_once(':'))
            .unwrap_or(("", ""));
        let counting = method == "countTokens";
        // countTokens may hold its request inside a wrapper, whose copy of
        // it is the one written back: its contents are lent from the inner
        // request only.
        let (mut object, mut contents) =
            RawObject::parse_lending(bytes, (!counting).then_some(Self::HISTORY))?;
        let mut wrapper = None;
        if counting {
            let key = spelling(
                |k| object.get(k).is_some(),
                ["generateContentRequest", "generate_content_request"],
            )?;
            if let Some(inner) = object.get(key).filter(|r| r.get() != "null") {
                let (inner, listed) =
                    RawObject::parse_lending(inner.get().as_bytes(), Some(Self::HISTORY))?;
                contents = listed;
                wrapper = Some(std::mem::replace(&mut object, inner));
            } else if let Some(raw) = object.get("contents").filter(|r| r.get().starts_with('[')) {
                contents = serde_json::from_str(raw.get()).ok();
            }
        }
        let contents = lent_history(
            contents,
            &object,
            Self::HISTORY,
            |raw| raw.get() == "null",
            "`contents` must be an array of Content objects",
        )?;
        Ok(GeminiRequest {
            object,
            wrapper,
            contents,
            stream: method == "streamGenerateContent",
            model: model.to_owned(),
        })
    }

    /// The contents (none when `contents` is absent).
    pub fn contents(&self) -> &[Box<RawValue>] {
        self.contents.as_deref().unwrap_or(&[])
    }

    /// The contents to rewrite (an absent `contents` becomes a list).
    pub fn contents_mut(&mut self) -> &mut Vec<Box<RawValue>> {
        self.contents.get_or_insert_with(Vec::new)
    }

    /// Appends contents (a repair round's model turn and answers).
    pub fn push_contents(&mut self, new: &[Value]) {
        self.contents_mut().extend(new.iter().map(to_raw));
    }

    /// `toolConfig.functionCallingConfig.allowedFunctionNames` names only
    /// tools the wire announces: a name the wire lacks becomes `run_code`
    /// where the wire has it (the route to that tool), else is dropped; a
    /// list left empty goes, so the mode applies to what the wire holds.
    fn narrow_tool_config(&mut self, plan: &ToolPlan) -> Result<(), ProxyError> {
        let key = spelling(
            |k| self.object.get(k).is_some(),
            ["toolConfig", "tool_config"],
        )?;
        let Some(raw) = self.object.get(key).filter(|r| r.get() != "null") else {
            return Ok(());
        };
        let mut config: Value = serde_json::from_str(raw.get())
            .map_err(|e| ProxyError::InvalidRequest(format!("`{key}`: {e}")))?;
        let field = spelling(
            |k| config.get(k).is_some(),
            ["functionCallingConfig", "function_calling_config"],
        )?;
        let Some(calling) = config.get_mut(field).and_then(Value::as_object_mut) else {
            return Ok(());
        };
        let list = spelling(
            |k| calling.contains_key(k),
            ["allowedFunctionNames", "allowed_function_names"],
        )?;
        if !calling.contains_key(list) {
            return Ok(());
        }
        let Some(names) = calling.get(list).and_then(Value::as_array) else {
            return Err(ProxyError::InvalidRequest(format!(
                "`{key}.functionCallingConfig.{list}` must be an array of names"
            )));
        };
        let mut kept: Vec<Value> = Vec::new();
        for name in names {
            let Some(name) = name.as_str() else {
                return Err(ProxyError::InvalidRequest(format!(
                    "`{key}.functionCallingConfig.{list}` must be an array of names"
                )));
            };
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
            calling.remove(list);
        } else {
            calling.insert(list.to_owned(), Value::Array(kept));
        }
        self.object.set(key, to_raw(&config));
        Ok(())
    }

    /// Splices stored denials back into the turns they belong to: a turn
    /// is found by its answers (the ids the user content's
    /// `functionResponse`s answer must be exactly a stored turn's); the
    /// denied calls go at the end of the model content before it (after
    /// the call that carries the turn's thought signature), their answers
    /// after the user content's own. Nothing is added twice.
    fn splice_denials(&mut self, splices: &TenantSplices) -> Result<(), ProxyError> {
        let anchor = self.anchor();
        let Some(contents) = &mut self.contents else {
            return Ok(());
        };
        for i in 1..contents.len() {
            let (Some(model), Some(user)) =
                (content_head(&contents[i - 1]), content_head(&contents[i]))
            else {
                continue;
            };
            if model.role.as_deref() != Some("model") || user.role.as_deref() == Some("model") {
                continue;
            }
            let calls = called(&model.parts);
            let answered: Vec<String> = answered_ids(&calls, &user.parts)
                .into_iter()
                .flatten()
                .collect();
            if answered.is_empty() {
                continue;
            }
            let Some(splice) = splices.get(&anchor, &answered) else {
                continue;
            };
            let call_id = |v: &Value| {
                super::parts::function_call(v)
                    .and_then(|c| c.get("id"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            let answer_id = |v: &Value| {
                function_response(v)
                    .and_then(|r| r.get("id"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            let new_calls: Vec<Value> = splice
                .denied_calls
                .iter()
                .filter(|c| call_id(c).is_none_or(|id| !calls.iter().any(|(c, _)| *c == id)))
                .cloned()
                .collect();
            let new_answers: Vec<Value> = splice
                .denials
                .iter()
                .filter(|a| answer_id(a).is_none_or(|id| !answered.contains(&id)))
                .cloned()
                .collect();
            if !new_calls.is_empty() {
                contents[i - 1] = with_parts(&contents[i - 1], new_calls, true)?;
            }
            if !new_answers.is_empty() {
                contents[i] = with_parts(&contents[i], new_answers, false)?;
            }
        }
        Ok(())
    }

    /// Puts the sections into `systemInstruction` as a text part after the
    /// client's own; no instruction becomes the sections alone.
    fn append_prompt(&mut self, plan: &ToolPlan) -> Result<(), ProxyError> {
        let key = spelling(
            |k| self.object.get(k).is_some(),
            ["systemInstruction", "system_instruction"],
        )?;
        let part = TextPart {
            text: &plan.prompt_json,
        };
        let Some(system) = self.object.get(key).filter(|r| r.get() != "null") else {
            self.object.set(key, to_raw(&PartsAlone { parts: [part] }));
            return Ok(());
        };
        if system.get().starts_with('"') {
            // A plain string, as some SDKs send it: the sections follow it.
            let joined = crate::wire::join_text(system, &plan.prompt_json).ok_or_else(|| {
                ProxyError::InvalidRequest(format!("`{key}` must be a Content object"))
            })?;
            self.object.set(key, joined);
            return Ok(());
        }
        let mut instruction = RawObject::parse(system.get().as_bytes())
            .map_err(|_| ProxyError::InvalidRequest(format!("`{key}` must be a Content object")))?;
        let mut parts: Vec<Box<RawValue>> = match instruction.get("parts") {
            Some(p) if p.get() != "null" => serde_json::from_str(p.get()).map_err(|_| {
                ProxyError::InvalidRequest(format!("`{key}.parts` must be an array of parts"))
            })?,
            _ => Vec::new(),
        };
        parts.push(to_raw(&part));
        instruction.set("parts", to_raw(&parts));
        self.object.set(key, to_raw(&instruction));
        Ok(())
    }
}

impl WireRequest for GeminiRequest {
    const HISTORY: &'static str = "contents";
    const KEYS: Keys = Keys::Proto;

    fn object(&self) -> &RawObject {
        &self.object
    }

    fn history(&self) -> Option<&[Box<RawValue>]> {
        self.contents.as_deref()
    }

    fn streams(&self) -> bool {
        self.stream
    }

    /// Serialises the request with its current contents, inside the
    /// batch wrapper it came in.
    fn to_bytes(&self) -> Bytes {
        let inner = self.object.to_vec_with_list(Self::HISTORY, self.history());
        let Some(wrapper) = &self.wrapper else {
            return Bytes::from(inner);
        };
        let key = either(
            wrapper,
            ["generateContentRequest", "generate_content_request"],
        );
        Bytes::from(wrapper.to_vec_with(key, Some(&String::from_utf8_lossy(&inner))))
    }

    /// The conversation this request continues: its first user content.
    fn anchor(&self) -> Anchor {
        self.contents()
            .iter()
            .filter_map(|c| content_head(c))
            .find(|c| c.role.as_deref().is_none_or(|r| r == "user"))
            .map_or(Anchor::NONE, |c| Anchor::of_content(&Value::Array(c.parts)))
    }

    /// More than one candidate per turn cannot be judged as one turn.
    /// `candidateCount` is read as proto JSON reads it: `"2"` and `2.0`
    /// are 2 (a double spelling was refused before).
    fn check(&self) -> Result<(), ProxyError> {
        let Some(config) = ["generationConfig", "generation_config"]
            .iter()
            .find_map(|k| self.field(k))
            .and_then(|g| serde_json::from_str::<Value>(g.get()).ok())
        else {
            return Ok(());
        };
        let count = config
            .get("candidateCount")
            .or_else(|| config.get("candidate_count"));
        match count {
            Some(n) if crate::wire::lenient_number(n).is_some_and(|n| n > 1.0) => {
                Err(ProxyError::InvalidRequest(format!(
                    "`generationConfig.candidateCount` is {n}: the proxy judges one candidate \
                     per turn in this tool mode; ask for one (or send the self in native \
                     mode)"
                )))
            }
            _ => Ok(()),
        }
    }

    /// Applies the plan: wire tools, `toolConfig`, stored denials, sections.
    fn rewrite(&mut self, plan: &ToolPlan, splices: &TenantSplices) -> Result<(), ProxyError> {
        if let Some(wire) = &plan.wire_tools {
            self.object.set("tools", wire.clone());
        }
        if plan.narrows_tools() {
            // A cached content declares tools and a system instruction the
            // proxy never sees: the wire would announce more than it shows.
            let cached = spelling(
                |k| self.object.get(k).is_some_and(|v| v.get() != "null"),
                ["cachedContent", "cached_content"],
            )?;
            if self.object.get(cached).is_some_and(|v| v.get() != "null") {
                return Err(ProxyError::InvalidRequest(format!(
                    "`{cached}` names a cached content, whose tools the proxy cannot see, so in \
                     tool mode `{}` it is refused; send the contents and tools in the request, \
                     or send it in native mode",
                    plan.mode
                )));
            }
            self.narrow_tool_config(plan)?;
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

/// The sections' text part, written from raw values as they are: joined
/// as text, the system instruction was read again whole to become a raw
/// value, three times a request.
#[derive(Serialize)]
struct TextPart<'a> {
    text: &'a RawValue,
}

/// A system instruction of the sections alone.
#[derive(Serialize)]
struct PartsAlone<'a> {
    parts: [TextPart<'a>; 1],
}

/// The content with `new` parts after its own; every other field as sent.
/// In a model turn (`calls`), the turn's thought signature stays on its
/// first call: when the model signed a call the client never saw (a
/// parallel turn signs its first call only), that signature moves to the
/// first call the client sent back, which Gemini 3 checks for one.
fn with_parts(
    content: &RawValue,
    new: Vec<Value>,
    calls: bool,
) -> Result<Box<RawValue>, ProxyError> {
    let mut object = RawObject::parse(content.get().as_bytes())
        .map_err(|e| ProxyError::InvalidRequest(format!("a content: {e}")))?;
    let mut parts: Vec<Value> = match object.get("parts") {
        Some(p) => serde_json::from_str(p.get())
            .map_err(|e| ProxyError::InvalidRequest(format!("a content's parts: {e}")))?,
        None => Vec::new(),
    };
    let own = parts.len();
    parts.extend(new);
    if calls {
        move_signature(&mut parts, own);
    }
    object.set("parts", to_raw(&parts));
    Ok(to_raw(&object))
}

/// Moves the first signature among `parts[added..]` onto the first call
/// part of `parts`, when that has none (or the placeholder of a call no
/// model signed).
fn move_signature(parts: &mut [Value], added: usize) {
    let signature = |p: &Value| {
        p.get("thoughtSignature")
            .or_else(|| p.get("thought_signature"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let Some(first) = parts
        .iter()
        .position(|p| super::parts::function_call(p).is_some())
    else {
        return;
    };
    if first >= added || signature(&parts[first]).is_some_and(|s| s != super::embedded::UNSIGNED) {
        return;
    }
    let Some((from, sig)) = parts[added..]
        .iter()
        .enumerate()
        .find_map(|(i, p)| signature(p).map(|s| (added + i, s)))
    else {
        return;
    };
    if let Some(p) = parts[from].as_object_mut() {
        p.remove("thoughtSignature");
        p.remove("thought_signature");
    }
    if let Some(p) = parts[first].as_object_mut() {
        p.remove("thought_signature");
        p.insert("thoughtSignature".into(), Value::String(sig));
    }
}

#[cfg(test)]
mod tests;
