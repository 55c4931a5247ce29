//! A Responses request, parsed only as deep as the proxy needs.

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::error::ProxyError;
use crate::plan::ToolPlan;
use crate::splice::TenantSplices;
use crate::wire::{raw_array, to_raw, ParseError, RawObject};

/// A `POST /v1/responses` body.
#[derive(Debug)]
pub struct ResponsesRequest {
    object: RawObject,
    /// The input items, each still the client's bytes unless rewritten;
    /// `None` when `input` is a string (no call can be in it).
    pub input: Option<Vec<Box<RawValue>>>,
    /// `stream: true`.
    pub stream: bool,
}

impl ResponsesRequest {
    /// Parses a request body.
    pub fn parse(bytes: &[u8]) -> Result<ResponsesRequest, ProxyError> {
        let object = RawObject::parse(bytes).map_err(|e| match e {
            ParseError::Json(e) => ProxyError::InvalidJson(e.to_string()),
            ParseError::DuplicateKey(key) => ProxyError::DuplicateKey(key),
        })?;
        let input = match object.get("input") {
            None => None,
            Some(raw) if raw.get().trim_start().starts_with('"') => None,
            Some(raw) => Some(serde_json::from_str(raw.get()).map_err(|_| {
                ProxyError::InvalidRequest(
                    "`input` must be a string or an array of input items".into(),
                )
            })?),
        };
        let stream = object
            .get("stream")
            .is_some_and(|s| s.get().trim() == "true");
        Ok(ResponsesRequest {
            object,
            input,
            stream,
        })
    }

    /// The raw value of a top-level field.
    pub fn field(&self, key: &str) -> Option<&RawValue> {
        self.object.get(key)
    }

    /// Replaces (or adds) a top-level field.
    pub fn set_field(&mut self, key: &str, value: &Value) {
        self.object.set(key, to_raw(value));
    }

    /// Serialises the request with its current input.
    pub fn to_bytes(&self) -> Bytes {
        match &self.input {
            Some(items) => {
                let input = raw_array(items.iter().map(AsRef::as_ref));
                Bytes::from(self.object.to_vec_with("input", Some(&input)))
            }
            None => Bytes::from(self.object.to_vec()),
        }
    }

    /// Appends items to the input (a repair round's turn and answers); a
    /// string input becomes the user message it stands for first.
    pub fn push_items(&mut self, items: &[Value]) {
        let input = self.input.get_or_insert_with(|| {
            let text = self
                .object
                .get("input")
                .and_then(|r| serde_json::from_str::<String>(r.get()).ok());
            text.map(|t| vec![to_raw(&serde_json::json!({"role": "user", "content": t}))])
                .unwrap_or_default()
        });
        input.extend(items.iter().map(to_raw));
    }

    /// Applies the plan: the wire tools.
    pub fn rewrite(&mut self, plan: &ToolPlan, splices: &TenantSplices) -> Result<(), ProxyError> {
        let _ = splices;
        if let Some(tools) = &plan.wire_tools {
            self.object.set("tools", tools.clone());
        }
        Ok(())
    }
}
