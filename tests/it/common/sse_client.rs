//! What a client makes of an SSE body, the way the OpenAI SDKs accumulate
//! deltas. Written independently of the proxy's parser on purpose.

use serde_json::{json, Value};

#[derive(Debug, Default, PartialEq)]
pub struct ClientCall {
    pub index: i64,
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Default, PartialEq)]
pub struct ClientView {
    pub text: String,
    pub calls: Vec<ClientCall>,
    pub finish_reasons: Vec<String>,
    pub errors: Vec<Value>,
    pub done: usize,
    pub usage: Vec<Value>,
    pub ids: Vec<String>,
}

impl ClientView {
    pub fn call_names(&self) -> Vec<&str> {
        self.calls.iter().map(|c| c.name.as_str()).collect()
    }

    /// The assistant message an SDK makes of the stream.
    pub fn message(&self) -> Value {
        let text = (!self.text.is_empty()).then_some(&self.text);
        let mut m = json!({"role": "assistant", "content": text});
        let calls: Vec<Value> = self
            .calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        if !calls.is_empty() {
            m["tool_calls"] = json!(calls);
        }
        m
    }
}

/// The `data:` payloads of an SSE body, one an event, in order.
pub fn payloads(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    text.split("\n\n")
        .filter_map(|block| {
            let data: Vec<&str> = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .collect()
}

pub fn reassemble(bytes: &[u8]) -> ClientView {
    let mut view = ClientView::default();
    for data in payloads(bytes) {
        if data.trim() == "[DONE]" {
            view.done += 1;
            continue;
        }
        let Ok(chunk) = serde_json::from_str::<Value>(&data) else {
            continue;
        };
        if let Some(e) = chunk.get("error").filter(|e| !e.is_null()) {
            view.errors.push(e.clone());
        }
        if let Some(id) = chunk
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            if !view.ids.iter().any(|x| x == id) {
                view.ids.push(id.to_owned());
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            view.usage.push(u.clone());
        }
        let Some(choice) = chunk.pointer("/choices/0") else {
            continue;
        };
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            view.finish_reasons.push(f.to_owned());
        }
        let Some(delta) = choice.get("delta") else {
            continue;
        };
        if let Some(t) = delta.get("content").and_then(Value::as_str) {
            view.text.push_str(t);
        }
        for d in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = d
                .get("index")
                .and_then(Value::as_i64)
                .expect("clients need an index on every delta");
            let pos = match view.calls.iter().position(|c| c.index == index) {
                Some(p) => p,
                None => {
                    view.calls.push(ClientCall {
                        index,
                        ..Default::default()
                    });
                    view.calls.len() - 1
                }
            };
            let call = &mut view.calls[pos];
            if let Some(id) = d
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                call.id = id.to_owned();
            }
            if let Some(n) = d.pointer("/function/name").and_then(Value::as_str) {
                call.name.push_str(n);
            }
            if let Some(a) = d.pointer("/function/arguments").and_then(Value::as_str) {
                call.arguments.push_str(a);
            }
        }
    }
    view
}
