//! A test agent with its own tools (read, write, list over an in-memory
//! filesystem) and an ordinary tool loop. It has never heard of run_code.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::sse_client::reassemble;
use super::{read_write_tools, tool, Proxy};

/// The agent's tools: read, write and list.
pub fn fs_tools() -> Vec<Value> {
    let mut tools = read_write_tools();
    tools.push(tool(
        "list",
        "List the files.",
        json!({"type": "object", "properties": {}}),
    ));
    tools
}

/// A conversation's opening: a system prompt and the user's `text`.
pub fn conversation(text: &str) -> Vec<Value> {
    vec![
        json!({"role": "system", "content": "You are an agent."}),
        json!({"role": "user", "content": text}),
    ]
}

/// A Chat Completions body with `messages` and the agent's file tools.
pub fn fs_body(messages: &[Value]) -> Value {
    json!({"model": "m", "messages": messages, "tools": fs_tools()})
}

/// The agent's answer to the call `id`.
pub fn tool_result(id: &Value, content: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": content})
}

#[derive(Default)]
pub struct FsAgent {
    pub files: BTreeMap<String, String>,
    /// Every call the agent executed: (id, name, arguments).
    pub executed: Vec<(String, String, Value)>,
    pub stream: bool,
}

impl FsAgent {
    pub fn with_files(files: &[(&str, &str)]) -> FsAgent {
        FsAgent {
            files: files
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    fn execute(&mut self, id: &str, name: &str, args: Value) -> String {
        self.executed
            .push((id.to_owned(), name.to_owned(), args.clone()));
        match name {
            "read" => self
                .files
                .get(args["path"].as_str().unwrap_or(""))
                .cloned()
                .unwrap_or_else(|| "ENOENT".into()),
            "write" => {
                self.files.insert(
                    args["path"].as_str().unwrap_or("").into(),
                    args["content"].as_str().unwrap_or("").into(),
                );
                "ok".into()
            }
            "list" => self.files.keys().cloned().collect::<Vec<_>>().join("\n"),
            other => panic!("the agent was asked to run a tool it does not have: {other}"),
        }
    }

    /// One request, as the agent's SDK would make it; returns the assistant message.
    pub async fn ask(&self, proxy: &Proxy, messages: &[Value]) -> Value {
        let mut body = json!({"model": "test-model", "messages": messages, "tools": fs_tools()});
        if self.stream {
            body["stream"] = json!(true);
        }
        let res = proxy.chat(&body, &[]).await;
        assert_eq!(res.status(), 200, "the proxy answered {}", res.status());
        if self.stream {
            reassemble(&res.bytes().await.unwrap()).message()
        } else {
            let v: Value = res.json().await.unwrap();
            v["choices"][0]["message"].clone()
        }
    }

    /// The agent's loop: ask, run every tool call, ask again, until an answer.
    pub async fn run(&mut self, proxy: &Proxy, messages: &mut Vec<Value>) -> Value {
        for _ in 0..20 {
            let message = self.ask(proxy, messages).await;
            messages.push(message.clone());
            let calls = message["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if calls.is_empty() {
                return message;
            }
            for c in calls {
                let name = c["function"]["name"].as_str().unwrap().to_owned();
                assert_ne!(name, "run_code", "the client never receives run_code");
                let id = c["id"].as_str().unwrap().to_owned();
                let args: Value =
                    serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap();
                let result = self.execute(&id, &name, args);
                messages.push(json!({"role": "tool", "tool_call_id": id, "content": result}));
            }
        }
        panic!("the agent loop did not end");
    }
}
