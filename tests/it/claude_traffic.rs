//! Claude Code (unmodified) against a scripted Messages model, without the
//! proxy: what Claude Code sends on `POST /v1/messages`, what it needs back,
//! and what it sends after a tool call. The shapes the Messages dialect must
//! handle, checked against the real agent.
//!
//! The model answers a request whose last message is the user's prompt with
//! a thinking block and a `tool_use` of Claude Code's `Read` tool on a.txt,
//! and a request whose last message holds the `tool_result` with text
//! echoing that result. It streams when asked (Claude Code always asks) and
//! answers JSON otherwise; `/v1/messages/count_tokens` gets
//! `{"input_tokens": N}`; anything else is recorded and answered 404.
//!
//! Claude Code is installed by `tests/agents/install.sh` into
//! `$CODEMODE_AGENTS_DIR` (default `~/.cache/codemode-agents`) and driven by
//! `tests/agents/claude.mjs`. Outside CI a missing Claude Code skips the
//! tests with a note; under CI (`CI` set) it fails them.
//!
//! `CLAUDE_TRAFFIC_DUMP=<dir>` appends every request Claude Code sent
//! (method, path, query, headers, body) to `<dir>/claude.jsonl`, and the
//! stream the model answers a call with to `<dir>/model_tool_use_stream.sse`.

use crate::common::agent_driver::{dump_traffic, traffic};
use crate::common::claude::{claude_ready, run_claude, workdir};
use crate::common::mount;
use crate::common::strs;
use std::path::PathBuf;

use serde_json::{json, Value};
use wiremock::{MockServer, Request, Respond, ResponseTemplate};

// ---------------------------------------------------------- the model

/// The content of the file the model has Claude Code read.
const SECRET: &str = "claude-read-this-9b1e";

/// One server-sent event of a Messages stream.
fn event(data: Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap()
    )
}

/// A whole streamed message holding `blocks`, as Anthropic sends it: each
/// block starts empty and gets its content in deltas.
fn stream(id: &str, model: &Value, blocks: &[Value], stop: &str) -> String {
    let mut out = event(json!({"type": "message_start", "message": {
        "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 100, "output_tokens": 1}}}));
    for (i, block) in blocks.iter().enumerate() {
        let (start, deltas) = match block["type"].as_str().unwrap() {
            "thinking" => (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                vec![
                    json!({"type": "thinking_delta", "thinking": block["thinking"]}),
                    json!({"type": "signature_delta", "signature": block["signature"]}),
                ],
            ),
            "tool_use" => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                vec![
                    json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
                ],
            ),
            _ => (
                json!({"type": "text", "text": ""}),
                vec![json!({"type": "text_delta", "text": block["text"]})],
            ),
        };
        out += &event(json!({"type": "content_block_start", "index": i, "content_block": start}));
        for delta in deltas {
            out += &event(json!({"type": "content_block_delta", "index": i, "delta": delta}));
        }
        out += &event(json!({"type": "ping"}));
        out += &event(json!({"type": "content_block_stop", "index": i}));
    }
    out += &event(json!({"type": "message_delta",
                         "delta": {"stop_reason": stop, "stop_sequence": null},
                         "usage": {"output_tokens": 10}}));
    out += &event(json!({"type": "message_stop"}));
    out
}

/// The text of a `tool_result`'s content (a string or text blocks).
fn result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        other => other.to_string(),
    }
}

/// The model: a turn whose last message holds a `tool_result` gets text
/// echoing it; any other gets thinking and a `Read` of `file`. With
/// `search`, the first call is instead `ToolSearch` loading WebFetch, and its
/// result (a `tool_reference`) gets the `Read`.
struct Model {
    file: String,
    search: bool,
}

/// Thinking and one call, signed and numbered by the request's length.
fn call(n: usize, name: &str, input: Value) -> (Vec<Value>, &'static str) {
    (
        vec![
            json!({"type": "thinking", "thinking": format!("Calling {name}."), "signature": format!("SIG-{n}")}),
            json!({"type": "tool_use", "id": format!("toolu_{n}"), "name": name, "input": input}),
        ],
        "tool_use",
    )
}

impl Respond for Model {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let n = messages.len();
        let result = messages.last().and_then(|m| {
            m["content"]
                .as_array()?
                .iter()
                .find(|b| b["type"] == "tool_result")
                .cloned()
        });
        let read = json!({"file_path": self.file});
        let (blocks, stop) = match result {
            Some(r) if r["content"][0]["type"] == "tool_reference" => call(n, "Read", read),
            Some(r) => (
                vec![
                    json!({"type": "text", "text": format!("ANSWER: {}", result_text(&r["content"]))}),
                ],
                "end_turn",
            ),
            None if self.search => call(n, "ToolSearch", json!({"query": "select:WebFetch"})),
            None => call(n, "Read", read),
        };
        let id = format!("msg_{n}");
        if body["stream"] == true {
            return ResponseTemplate::new(200).set_body_raw(
                stream(&id, &body["model"], &blocks, stop),
                "text/event-stream",
            );
        }
        ResponseTemplate::new(200).set_body_json(json!({
            "id": id, "type": "message", "role": "assistant", "model": body["model"],
            "content": blocks, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 100, "output_tokens": 10}}))
    }
}

/// A model server for a work directory holding `a.txt`: `POST /v1/messages`
/// (any query) is the model, `POST /v1/messages/count_tokens` counts;
/// anything else is recorded and answered 404.
async fn model_server(dir: &std::path::Path) -> MockServer {
    server_with(dir, false).await
}

/// A model server whose model first calls ToolSearch when `search`.
async fn server_with(dir: &std::path::Path, search: bool) -> MockServer {
    let server = MockServer::start().await;
    mount(
        &server,
        "POST",
        "/v1/messages/count_tokens",
        ResponseTemplate::new(200).set_body_json(json!({"input_tokens": 1234})),
    )
    .await;
    mount(
        &server,
        "POST",
        "/v1/messages",
        Model {
            file: dir.join("a.txt").display().to_string(),
            search,
        },
    )
    .await;
    server
}

// ---------------------------------------------------------- the agent

/// The block types of each message of `body`, e.g. `["user: text", ...]`.
fn shape(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let kinds: Vec<&str> = match m["content"].as_array() {
                Some(blocks) => blocks.iter().map(|b| b["type"].as_str().unwrap()).collect(),
                None => vec!["string"],
            };
            format!("{}: {}", m["role"].as_str().unwrap(), kinds.join(","))
        })
        .collect()
}

/// Asserts what every model request of Claude Code carries.
fn assert_claude_request(r: &Value) {
    assert_eq!(r["method"], "POST");
    assert_eq!(r["path"], "/v1/messages");
    assert_eq!(r["query"], "beta=true");
    let h = &r["headers"];
    assert_eq!(h["anthropic-version"], "2023-06-01");
    let beta = h["anthropic-beta"].as_str().unwrap();
    assert!(beta.contains("claude-code-20250219"), "{beta}");
    assert!(beta.contains("interleaved-thinking-2025-05-14"), "{beta}");
    assert_eq!(
        h["x-api-key"], "sk-ant-test-key",
        "the key goes as x-api-key"
    );
    assert!(
        h.get("authorization").is_none(),
        "no bearer with an API key"
    );
    let body = &r["body"];
    assert_eq!(body["stream"], true, "Claude Code always streams");
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert!(body["max_tokens"].as_u64().unwrap() > 0);
    assert_eq!(body["thinking"]["type"], "enabled");
    assert!(body["metadata"]["user_id"].is_string());
    assert!(
        body.get("tool_choice").is_none(),
        "tool_choice left to auto"
    );
    // The system prompt: three text blocks, the last two cache breakpoints.
    let system = body["system"].as_array().unwrap();
    assert_eq!(system.len(), 3, "{system:#?}");
    assert!(system.iter().all(|b| b["type"] == "text"));
    assert!(system[0].get("cache_control").is_none());
    assert_eq!(system[1]["cache_control"]["type"], "ephemeral");
    assert_eq!(system[2]["cache_control"]["type"], "ephemeral");
    // Plain client tools with input_schema; Read among them.
    let tools = body["tools"].as_array().unwrap();
    assert!(tools
        .iter()
        .all(|t| t["input_schema"]["type"] == "object" && t.get("type").is_none()));
    let read = tools.iter().find(|t| t["name"] == "Read").unwrap();
    assert_eq!(read["input_schema"]["required"], json!(["file_path"]));
    // The last block of the last message is a cache breakpoint.
    let last = body["messages"].as_array().unwrap().last().unwrap();
    let last_block = last["content"].as_array().unwrap().last().unwrap();
    assert_eq!(last_block["cache_control"]["type"], "ephemeral");
}

// ---------------------------------------------------------- tests

#[tokio::test]
async fn claude_code_reads_the_file_the_model_asks_for_and_answers_with_it() {
    if !claude_ready() {
        return;
    }
    let dir = workdir("one", &[("a.txt", SECRET)]);
    let server = model_server(&dir.0).await;
    let summary = run_claude(
        &server.uri(),
        &dir.0,
        &["Read a.txt and tell me what it says."],
        &[],
    )
    .await;
    let reqs = traffic(&server).await;
    dump_traffic("claude", "one_turn", &reqs);
    if let Some(d) = std::env::var_os("CLAUDE_TRAFFIC_DUMP") {
        let (blocks, stop) = call(1, "Read", json!({"file_path": "a.txt"}));
        let sse = stream("msg_1", &json!("claude-sonnet-4-5"), &blocks, stop);
        std::fs::write(PathBuf::from(d).join("model_tool_use_stream.sse"), sse).unwrap();
    }

    assert_eq!(summary["error"], Value::Null, "{summary:#}");
    let tools = summary["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{summary:#}");
    assert_eq!(tools[0]["name"], "Read");
    assert_eq!(tools[0]["is_error"], false, "{summary:#}");
    assert!(tools[0]["result"].as_str().unwrap().contains(SECRET));
    let answer = summary["final"].as_str().unwrap();
    assert!(
        answer.starts_with("ANSWER: ") && answer.contains(SECRET),
        "{answer}"
    );

    // Two model requests, nothing else (no count_tokens, no /v1/models).
    assert_eq!(reqs.len(), 2, "{reqs:#?}");
    for r in &reqs {
        assert_claude_request(r);
    }
    let (first, second) = (&reqs[0]["body"], &reqs[1]["body"]);
    assert_eq!(first["system"], second["system"], "system is stable");
    assert_eq!(first["tools"], second["tools"], "tools are sent unchanged");

    // With tool search on (the default) most tools are deferred: a few
    // loaded ones, ToolSearch, and a placeholder with defer_loading.
    let names: Vec<&str> = strs(&first["tools"], "name");
    assert!(names.contains(&"ToolSearch"), "{names:?}");
    assert!(reqs[0]["headers"]["anthropic-beta"]
        .as_str()
        .unwrap()
        .contains("advanced-tool-use-2025-11-20"));

    // The prompt: reminders as text blocks, the prompt last.
    let prompt = first["messages"].as_array().unwrap();
    assert_eq!(prompt.len(), 1);
    let blocks = prompt[0]["content"].as_array().unwrap();
    assert!(blocks.iter().all(|b| b["type"] == "text"));
    assert_eq!(
        blocks.last().unwrap()["text"],
        "Read a.txt and tell me what it says."
    );

    // What comes back after the call: the model's turn replayed whole,
    // thinking (signature byte for byte) then the tool_use, and a user
    // message holding only the tool_result under the call's id.
    let kinds = shape(second);
    assert!(kinds[0].starts_with("user: text"), "{kinds:?}");
    assert_eq!(
        kinds[1..],
        ["assistant: thinking,tool_use", "user: tool_result"]
    );
    let turn = &second["messages"][1]["content"];
    assert_eq!(
        turn,
        &json!([
            {"type": "thinking", "thinking": "Calling Read.", "signature": "SIG-1"},
            {"type": "tool_use", "id": "toolu_1", "name": "Read",
             "input": {"file_path": dir.0.join("a.txt").display().to_string()}}
        ])
    );
    let result = &second["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_1");
    assert!(result.get("is_error").is_none(), "{result}");
    let text = result["content"].as_str().expect("a string result");
    assert!(
        text.contains(&format!("1\t{SECRET}")),
        "cat -n lines: {text}"
    );
}

#[tokio::test]
async fn claude_code_without_tool_search_sends_every_tool_schema() {
    if !claude_ready() {
        return;
    }
    let dir = workdir("all-tools", &[("a.txt", SECRET)]);
    let server = model_server(&dir.0).await;
    let summary = run_claude(
        &server.uri(),
        &dir.0,
        &["Read a.txt and tell me what it says."],
        &[("ENABLE_TOOL_SEARCH", "false")],
    )
    .await;
    let reqs = traffic(&server).await;
    dump_traffic("claude", "all_tools", &reqs);

    assert_eq!(summary["error"], Value::Null, "{summary:#}");
    assert!(summary["final"].as_str().unwrap().contains(SECRET));
    assert_eq!(reqs.len(), 2, "{reqs:#?}");
    for r in &reqs {
        assert_claude_request(r);
    }
    // About two dozen built-in tools, 60+ KB of schema, none deferred.
    let tools = reqs[0]["body"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(tools.len() >= 20, "{names:?}");
    for name in ["Bash", "Read", "Write", "Edit", "WebFetch", "Agent"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert!(!names.contains(&"ToolSearch"), "{names:?}");
    assert!(tools.iter().all(|t| t.get("defer_loading").is_none()));
    let bytes = Value::Array(tools.clone()).to_string().len();
    assert!(bytes > 60_000, "{bytes} bytes of tools");
}

#[tokio::test]
async fn claude_code_continue_resends_the_session_with_thinking_in_the_tool_loop() {
    if !claude_ready() {
        return;
    }
    let dir = workdir("continue", &[("a.txt", SECRET)]);
    let server = model_server(&dir.0).await;
    let summary = run_claude(
        &server.uri(),
        &dir.0,
        &["Read a.txt.", "Read it again."],
        &[],
    )
    .await;
    let reqs = traffic(&server).await;
    dump_traffic("claude", "continue", &reqs);

    assert_eq!(summary["error"], Value::Null, "{summary:#}");
    assert_eq!(summary["tools"].as_array().unwrap().len(), 2, "{summary:#}");
    let turns = summary["turns"].as_array().unwrap();
    assert_eq!(turns[0]["session"], turns[1]["session"], "one session");
    assert_eq!(reqs.len(), 4, "{reqs:#?}");

    // A new turn (its last message is the prompt) re-sends the earlier
    // turns; their thinking blocks are sometimes dropped there (seen both
    // ways across runs of the same version). Inside the turn's tool loop
    // every thinking block is back, signatures intact.
    let kinds = |i: usize| -> Vec<String> { shape(&reqs[i]["body"]).into_iter().skip(1).collect() };
    let without_thinking: Vec<String> = kinds(2)
        .iter()
        .map(|k| k.replace("thinking,", ""))
        .collect();
    assert_eq!(
        without_thinking,
        [
            "assistant: tool_use",
            "user: tool_result",
            "assistant: text",
            "user: text,text"
        ]
    );
    assert_eq!(
        kinds(3),
        [
            "assistant: thinking,tool_use",
            "user: tool_result",
            "assistant: text",
            "user: text,text",
            "assistant: thinking,tool_use",
            "user: tool_result"
        ]
    );
    let m = &reqs[3]["body"]["messages"];
    assert_eq!(m[1]["content"][0]["signature"], "SIG-1");
    assert_eq!(m[5]["content"][0]["signature"], "SIG-5");
}

#[tokio::test]
async fn claude_code_tool_search_answers_with_a_tool_reference_and_loads_the_tool() {
    if !claude_ready() {
        return;
    }
    let dir = workdir("search", &[("a.txt", SECRET)]);
    let server = server_with(&dir.0, true).await;
    let summary = run_claude(&server.uri(), &dir.0, &["Read a.txt."], &[]).await;
    let reqs = traffic(&server).await;
    dump_traffic("claude", "tool_search", &reqs);

    assert_eq!(summary["error"], Value::Null, "{summary:#}");
    let names: Vec<&Value> = summary["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["name"])
        .collect();
    assert_eq!(names, [&json!("ToolSearch"), &json!("Read")], "{summary:#}");
    assert!(summary["final"].as_str().unwrap().contains(SECRET));
    assert_eq!(reqs.len(), 3, "{reqs:#?}");
    for r in &reqs {
        assert_claude_request(r);
    }

    // ToolSearch's result is a tool_reference block, text blocks follow it
    // in the same user message; from then on the loaded tool is sent too,
    // deferred: the tool list grows inside the session.
    let after = &reqs[1]["body"];
    let user = after["messages"].as_array().unwrap().last().unwrap();
    let blocks = user["content"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "tool_result");
    assert_eq!(
        blocks[0]["content"],
        json!([{"type": "tool_reference", "tool_name": "WebFetch"}])
    );
    assert!(blocks[1..].iter().all(|b| b["type"] == "text"));
    let tools = |i: usize| reqs[i]["body"]["tools"].as_array().unwrap().clone();
    assert!(!tools(0).iter().any(|t| t["name"] == "WebFetch"));
    let fetch = tools(1)
        .into_iter()
        .find(|t| t["name"] == "WebFetch")
        .expect("WebFetch loaded");
    assert_eq!(fetch["defer_loading"], true);
    assert_eq!(tools(1).len(), tools(0).len() + 1);
    assert_eq!(tools(1), tools(2));
}
