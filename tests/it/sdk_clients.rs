//! The clients people pick (issue 48, point 7), unmodified, on their
//! defaults, native and code mode: Google's Python SDK (`google-genai`)
//! and JS SDK (`@google/genai`) with automatic function calling, LangChain's
//! Gemini and Anthropic integrations (in LangGraph's `create_react_agent`),
//! the `anthropic` SDK's tool runner, and llama-index's `FunctionAgent`
//! with its OpenAI LLM. Drivers in tests/agents, installed by
//! tests/agents/install.sh (outside CI a missing one skips its test with a
//! note; under CI it fails).
//!
//! Each run: a scripted model answers first with a call (native: a
//! listing and a read in one turn; code: a `run_code` whose program makes
//! the same two calls in parallel with Promise.all, which the proxy runs,
//! handing the client the native calls and resuming on their results),
//! then with text echoing the last tool result it was sent.

use std::path::PathBuf;

use crate::common::agent_driver::{driver, ran_tools, summary, without_callers_env};
use crate::common::codex::{agents_dir, workdir};
use crate::common::gemini_model::GeminiModel;
use crate::common::messages_model::{self, MessagesModel};
use crate::common::scripted::{model_server, ChatModel};
use crate::common::{start, Proxy};
use serde_json::{json, Value};
use wiremock::MockServer;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Client {
    GenaiPython,
    GenaiJs,
    LangchainGoogle,
    LangchainAnthropic,
    AnthropicToolRunner,
    LlamaIndex,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Dialect {
    Chat,
    Messages,
    Gemini,
}

impl Client {
    fn name(self) -> &'static str {
        match self {
            Client::GenaiPython => "google-genai",
            Client::GenaiJs => "@google/genai",
            Client::LangchainGoogle => "langchain-google-genai",
            Client::LangchainAnthropic => "langchain-anthropic",
            Client::AnthropicToolRunner => "anthropic tool runner",
            Client::LlamaIndex => "llama-index FunctionAgent",
        }
    }

    fn dialect(self) -> Dialect {
        match self {
            Client::GenaiPython | Client::GenaiJs | Client::LangchainGoogle => Dialect::Gemini,
            Client::LangchainAnthropic | Client::AnthropicToolRunner => Dialect::Messages,
            Client::LlamaIndex => Dialect::Chat,
        }
    }

    /// The file whose presence says the client is installed.
    fn marker(self) -> PathBuf {
        let d = agents_dir();
        match self {
            Client::GenaiJs => d.join("node/node_modules/@google/genai/package.json"),
            Client::LlamaIndex => d.join("venv-llamaindex/.stamp"),
            _ => d.join("venv/.stamp"),
        }
    }

    /// Whether the client can run here; under CI it must.
    fn ready(self) -> bool {
        crate::common::needs::agent(self.name(), &self.marker())
    }

    fn command(self) -> tokio::process::Command {
        let python = agents_dir().join("venv/bin/python");
        let mut cmd = match self {
            Client::GenaiPython => driver(python, "google_genai.py"),
            Client::GenaiJs => driver("node", "google_genai.mjs"),
            Client::LangchainGoogle | Client::LangchainAnthropic => {
                driver(python, "langgraph_agent.py")
            }
            Client::AnthropicToolRunner => driver(python, "anthropic_tool_runner.py"),
            Client::LlamaIndex => driver(
                agents_dir().join("venv-llamaindex/bin/python"),
                "llamaindex_agent.py",
            ),
        };
        match self {
            Client::LangchainGoogle => {
                cmd.env("AGENT_LLM", "google");
            }
            Client::LangchainAnthropic => {
                cmd.env("AGENT_LLM", "anthropic");
            }
            _ => {}
        }
        cmd
    }

    /// The names of its listing and reading tools.
    fn tools(self) -> (&'static str, &'static str) {
        match self {
            Client::LangchainGoogle | Client::LangchainAnthropic => ("list", "read"),
            _ => ("list_files", "read_file"),
        }
    }
}

const FILES: [(&str, &str); 2] = [("a.txt", "alpha-1"), ("b.txt", "bravo-2")];

/// The scripted model of a client's dialect, on its fake provider.
enum Model {
    Chat(ChatModel),
    Messages(MessagesModel),
    Gemini(GeminiModel),
}

impl Model {
    /// The model answering (for `client`) first with a call, then with the
    /// last tool result it was sent.
    async fn new(client: Client, code: bool) -> (Model, MockServer) {
        let (list, read) = client.tools();
        let program = format!(
            "const [files, text] = await Promise.all([tools.{list}({{}}), tools.{read}({{path: 'a.txt'}})]);\nreturn [files, text];"
        );
        match client.dialect() {
            Dialect::Chat => {
                let calls = if code {
                    json!([{"id": "call_prog", "type": "function", "function": {"name": "run_code",
                        "arguments": json!({"code": program}).to_string()}}])
                } else {
                    json!([
                        {"id": "call_list", "type": "function", "function": {"name": list, "arguments": "{}"}},
                        {"id": "call_read", "type": "function", "function": {"name": read,
                            "arguments": r#"{"path":"a.txt"}"#}}
                    ])
                };
                let m = ChatModel::new([
                    json!({"role": "assistant", "content": "Let me look.", "tool_calls": calls}),
                    json!({"echo": true}),
                ]);
                let server = model_server(m.clone()).await;
                (Model::Chat(m), server)
            }
            Dialect::Messages => {
                use messages_model::*;
                let first = if code {
                    vec![text("Let me look."), run_code_use("toolu_prog", &program)]
                } else {
                    vec![
                        text("Let me look."),
                        tool_use("toolu_list", list, json!({})),
                        tool_use("toolu_read", read, json!({"path": "a.txt"})),
                    ]
                };
                let m = MessagesModel::new([first, vec![json!({"type": "echo"})]]);
                let server = m.serve().await;
                (Model::Messages(m), server)
            }
            Dialect::Gemini => {
                let first = if code {
                    vec![
                        json!({"text": "Let me look."}),
                        json!({"functionCall": {"name": "run_code", "args": {"code": program}}}),
                    ]
                } else {
                    vec![
                        json!({"text": "Let me look."}),
                        json!({"functionCall": {"name": list, "args": {}}}),
                        json!({"functionCall": {"name": read, "args": {"path": "a.txt"}}}),
                    ]
                };
                let m = GeminiModel::new([first, vec![json!({"echo": true})]]);
                let server = m.serve().await;
                (Model::Gemini(m), server)
            }
        }
    }

    /// Every model request: its status (and the rule broken) and body.
    fn seen(&self) -> Vec<(u16, String, Value)> {
        match self {
            Model::Chat(m) => m.seen().into_iter().map(|(b, s, r)| (s, r, b)).collect(),
            Model::Messages(m) => m
                .seen()
                .into_iter()
                .filter(|s| !s.path.contains("count_tokens"))
                .map(|s| (s.status, s.refusal, s.body))
                .collect(),
            Model::Gemini(m) => m
                .seen()
                .into_iter()
                .map(|s| (s.status, format!("{} {}", s.path, s.refusal), s.body))
                .collect(),
        }
    }

    /// The tool names a request declares.
    fn declared(&self, body: &Value) -> Vec<String> {
        let tools = body["tools"].as_array().cloned().unwrap_or_default();
        let names: Vec<&Value> = match self {
            Model::Chat(_) => tools.iter().map(|t| &t["function"]["name"]).collect(),
            Model::Messages(_) => tools.iter().map(|t| &t["name"]).collect(),
            Model::Gemini(_) => tools
                .iter()
                .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
                .map(|d| &d["name"])
                .collect(),
        };
        let mut names: Vec<String> = names
            .into_iter()
            .map(|n| n.as_str().unwrap_or("").to_owned())
            .collect();
        names.sort();
        names
    }

    /// The tool results a request carries, in order, as text.
    fn results(&self, body: &Value) -> Vec<String> {
        let text = |c: &Value| match c {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
            other => other.to_string(),
        };
        match self {
            Model::Chat(_) => body["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["role"] == "tool")
                .map(|m| text(&m["content"]))
                .collect(),
            Model::Messages(_) => body["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                .filter(|b| b["type"] == "tool_result")
                .map(|b| text(&b["content"]))
                .collect(),
            Model::Gemini(_) => body["contents"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
                .filter_map(|p| p.get("functionResponse").cloned())
                .map(|r| r["response"].to_string())
                .collect(),
        }
    }
}

/// The proxy in `mode` in front of the model's provider, and the base URL
/// the client is given.
async fn proxy_for(client: Client, server: &MockServer, code: bool) -> (Proxy, String) {
    let mode = if code { "code" } else { "native" };
    let mut vars = vec![("CODEMODE_MODE", mode.to_owned())];
    if code {
        vars.push(("CODEMODE_RUNTIME", "embedded".into()));
    }
    match client.dialect() {
        Dialect::Chat => {}
        Dialect::Messages => vars.push((
            "CODEMODE_ANTHROPIC_UPSTREAM",
            format!("{}/v1", server.uri()),
        )),
        Dialect::Gemini => vars.push(("CODEMODE_GEMINI_UPSTREAM", server.uri())),
    }
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let proxy = start(server, &vars).await;
    let base = match client.dialect() {
        Dialect::Chat => proxy.url("/v1"),
        _ => proxy.url("").trim_end_matches('/').to_owned(),
    };
    (proxy, base)
}

/// Runs the client's driver against `base` in `dir`; its JSON summary.
async fn run(client: Client, base: &str, dir: &std::path::Path, stream: bool) -> Value {
    let mut cmd = client.command();
    cmd.env("AGENT_BASE_URL", base)
        .env("AGENT_DIR", dir)
        .env(
            "AGENT_PROMPTS",
            json!(["What do the files say?"]).to_string(),
        )
        .env("CODEMODE_AGENTS_DIR", agents_dir())
        .env("LANGSMITH_TRACING", "false")
        .env("LANGCHAIN_TRACING_V2", "false")
        .env("DO_NOT_TRACK", "1")
        .current_dir(dir)
        .kill_on_drop(true);
    without_callers_env(
        &mut cmd,
        &[
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_AUTH_TOKEN",
        ],
    );
    if stream {
        cmd.env("AGENT_STREAM", "1");
    }
    summary(&mut cmd, client.name(), 120).await
}

/// One run of `client` through the proxy, native or code mode.
async fn scenario(client: Client, code: bool, stream: bool) {
    if !client.ready() {
        return;
    }
    let label = format!(
        "{}-{}-{}",
        client.name().replace(['@', '/', ' '], "_"),
        if code { "code" } else { "native" },
        if stream { "stream" } else { "json" }
    );
    let dir = workdir(&label, &FILES);
    let (model, server) = Model::new(client, code).await;
    let (_proxy, base) = proxy_for(client, &server, code).await;
    let report = run(client, &base, &dir.0, stream).await;
    let seen = model.seen();
    let sent: Vec<String> = seen
        .iter()
        .map(|(s, r, b)| format!("\n  {s} {r}: {b}"))
        .collect();
    let sent = sent.join("");
    assert!(
        report["error"].is_null(),
        "{}: {report}\nthe model got:{sent}",
        client.name()
    );

    // The client ran its own tools, each once, with the model's arguments.
    let (list, read) = client.tools();
    let mut ran = ran_tools(&report);
    ran.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        ran,
        vec![
            (list.to_owned(), json!({})),
            (read.to_owned(), json!({"path": "a.txt"}))
        ],
        "{}: the tools it ran: {report}\nthe model got:{sent}",
        client.name()
    );

    // The client printed the model's answer: the last tool result it sent.
    // Natively that is either call's: a client may run both calls at once
    // and send their results as they finish (llama-index does), so under
    // load the read can finish first. In code mode it is the program's,
    // which holds both.
    let results = seen
        .get(1)
        .map(|(_, _, body)| model.results(body))
        .unwrap_or_default();
    let echoed = match results.last() {
        Some(r) if r.contains("alpha-1") => "alpha-1",
        _ => "b.txt",
    };
    let text = report["final"].as_str().unwrap_or("");
    assert!(
        text.starts_with("ANSWER: ") && text.contains(echoed),
        "{}: the answer echoes the last result ({echoed}): {report}\nthe model got:{sent}",
        client.name()
    );

    // The model got two requests, each accepted.
    assert_eq!(
        seen.len(),
        2,
        "{}: the model got two requests:{sent}",
        client.name()
    );
    assert!(
        seen.iter().all(|(s, _, _)| *s == 200),
        "{}: the model refused a request:{sent}",
        client.name()
    );
    if stream {
        for (_, path, body) in &seen {
            let streamed = match client.dialect() {
                Dialect::Gemini => path.contains(":streamGenerateContent"),
                _ => body["stream"] == true,
            };
            assert!(streamed, "{}: a streamed request:{sent}", client.name());
        }
    }
    if client == Client::AnthropicToolRunner {
        // On its defaults the runner threads its turns (beta): natively the
        // provider keeps the thread; in code mode the proxy answers it
        // `thread_unsupported_request` and the runner goes on without one.
        let unthreaded = report["unthreaded"].as_array().cloned().unwrap_or_default();
        if code {
            assert!(
                !unthreaded.is_empty(),
                "the runner went on without a thread: {report}"
            );
        } else {
            assert!(unthreaded.is_empty(), "{report}");
            assert_eq!(
                seen[1].2["thread"]["type"], "continue",
                "the runner continued its thread:{sent}"
            );
        }
    }
    if code {
        // Only run_code was declared, and the program's result came back.
        for (_, _, body) in &seen {
            assert_eq!(
                model.declared(body),
                vec!["run_code"],
                "{}: code mode declares run_code only:{sent}",
                client.name()
            );
        }
        // The proxy keeps a Messages thread (beta) from the provider: the
        // tool runner went on without one.
        assert!(
            seen.iter().all(|(_, _, b)| b.get("thread").is_none()),
            "{}: code mode sends no thread upstream:{sent}",
            client.name()
        );
        assert_eq!(results.len(), 1, "{}: one result:{sent}", client.name());
        assert!(
            results[0].contains("alpha-1") && results[0].contains("b.txt"),
            "{}: the program's result (the listing and a.txt): {}\nthe model got:{sent}",
            client.name(),
            results[0]
        );
        assert!(
            text.contains("b.txt"),
            "{}: the answer holds the program's result: {report}",
            client.name()
        );
    } else {
        for (_, _, body) in &seen {
            let declared = model.declared(body);
            // A turn continuing a Messages thread (beta) leaves the tools
            // to the thread.
            let threaded = body["thread"]["type"] == "continue";
            assert!(
                (threaded && body.get("tools").is_none())
                    || declared.contains(&list.to_owned()) && declared.contains(&read.to_owned()),
                "{}: native mode declares the client's tools: {declared:?}",
                client.name()
            );
            assert!(
                !declared.iter().any(|n| n == "run_code"),
                "{}: native mode declares no run_code: {declared:?}",
                client.name()
            );
        }
        // In the order the client finished them, which is its own.
        assert_eq!(results.len(), 2, "{}: two results:{sent}", client.name());
        assert!(
            results.iter().any(|r| r.contains("b.txt"))
                && results.iter().any(|r| r.contains("alpha-1")),
            "{}: the results of both calls: {results:?}",
            client.name()
        );
    }
}

// ------------------------------------------------- Google's Python SDK

crate::async_cases! {
    google_genai_python_native: scenario(Client::GenaiPython, false, false);
    google_genai_python_streaming_native: scenario(Client::GenaiPython, false, true);
    google_genai_python_code_mode: scenario(Client::GenaiPython, true, false);
    google_genai_python_streaming_code_mode: scenario(Client::GenaiPython, true, true);

    // ----------------------------------------------------- Google's JS SDK
    google_genai_js_native: scenario(Client::GenaiJs, false, false);
    google_genai_js_streaming_native: scenario(Client::GenaiJs, false, true);
    google_genai_js_code_mode: scenario(Client::GenaiJs, true, false);
    google_genai_js_streaming_code_mode: scenario(Client::GenaiJs, true, true);

    // ------------------------------------------------ LangChain integrations
    langchain_google_genai_native: scenario(Client::LangchainGoogle, false, false);
    langchain_google_genai_streaming_native: scenario(Client::LangchainGoogle, false, true);
    langchain_google_genai_code_mode: scenario(Client::LangchainGoogle, true, false);
    langchain_google_genai_streaming_code_mode: scenario(Client::LangchainGoogle, true, true);
    langchain_anthropic_native: scenario(Client::LangchainAnthropic, false, false);
    langchain_anthropic_streaming_native: scenario(Client::LangchainAnthropic, false, true);
    langchain_anthropic_code_mode: scenario(Client::LangchainAnthropic, true, false);
    langchain_anthropic_streaming_code_mode: scenario(Client::LangchainAnthropic, true, true);

    // ------------------------------------------- the anthropic tool runner
    anthropic_tool_runner_native: scenario(Client::AnthropicToolRunner, false, false);
    anthropic_tool_runner_streaming_native: scenario(Client::AnthropicToolRunner, false, true);
    anthropic_tool_runner_code_mode: scenario(Client::AnthropicToolRunner, true, false);
    anthropic_tool_runner_streaming_code_mode: scenario(Client::AnthropicToolRunner, true, true);

    // ----------------------------------------- llama-index's FunctionAgent

    // FunctionAgent streams on its defaults (the driver sets nothing).
    llamaindex_function_agent_native: scenario(Client::LlamaIndex, false, true);
    llamaindex_function_agent_code_mode: scenario(Client::LlamaIndex, true, true);
}
