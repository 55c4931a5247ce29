//! Code Mode on Anthropic's Messages API (docs/agents.md, "Claude Code and the Messages API"), through the
//! proxy as a client sees it: a scripted Messages model that enforces the
//! API's rules (tool_result placement, thinking blocks replayed), the proxy
//! in front of it, and a client that runs the tools it is handed.

use crate::common::messages_model::*;
use crate::common::sse_client::payloads;
use crate::common::{error_message, start, Proxy};
use serde_json::{json, Value};

async fn proxy_for(server: &wiremock::MockServer, mode: &str) -> Proxy {
    let upstream = format!("{}/v1", server.uri());
    start(
        server,
        &[
            ("CODEMODE_RUNTIME", "embedded"),
            ("CODEMODE_MODE", mode),
            ("CODEMODE_ANTHROPIC_UPSTREAM", upstream.as_str()),
            // Chat traffic would go here: nothing may reach it.
            ("CODEMODE_UPSTREAM", "http://127.0.0.1:9/v1"),
        ],
    )
    .await
}

const HEADERS: &[(&str, &str)] = &[
    ("anthropic-version", "2023-06-01"),
    ("anthropic-beta", "interleaved-thinking-2025-05-14"),
    ("x-api-key", "sk-ant-test"),
];

fn body(messages: &[Value], stream: bool) -> Value {
    json!({"model": "claude-test", "max_tokens": 1024, "messages": messages,
           "system": [{"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral"}}],
           "tools": fs_input_schema_tools(), "stream": stream,
           "thinking": {"type": "enabled", "budget_tokens": 1024}})
}

/// A client's turn: the assistant message, read from JSON or its events.
async fn ask(proxy: &Proxy, messages: &[Value], stream: bool) -> Value {
    let res = proxy
        .post("/v1/messages?beta=true", &body(messages, stream), HEADERS)
        .await;
    let status = res.status();
    let bytes = res.bytes().await.unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    if !stream {
        return serde_json::from_slice(&bytes).unwrap();
    }
    rebuild(&bytes)
}

/// The message a client rebuilds from a stream, checking its shape.
fn rebuild(bytes: &[u8]) -> Value {
    let events: Vec<Value> = payloads(bytes)
        .into_iter()
        .filter_map(|p| serde_json::from_str(&p).ok())
        .collect();
    let count = |t: &str| events.iter().filter(|e| e["type"] == t).count();
    assert_eq!(count("message_start"), 1, "{events:?}");
    assert_eq!(count("message_stop"), 1, "{events:?}");
    assert_eq!(count("message_delta"), 1, "{events:?}");
    let mut message = events[0]["message"].clone();
    let mut blocks: Vec<Value> = Vec::new();
    let mut partial: Vec<String> = Vec::new();
    for e in &events {
        match e["type"].as_str().unwrap_or("") {
            "content_block_start" => {
                let i = e["index"].as_u64().unwrap() as usize;
                assert_eq!(i, blocks.len(), "indices stay contiguous: {events:?}");
                blocks.push(e["content_block"].clone());
                partial.push(String::new());
            }
            "content_block_delta" => {
                let i = e["index"].as_u64().unwrap() as usize;
                let d = &e["delta"];
                match d["type"].as_str().unwrap_or("") {
                    "text_delta" => {
                        let t = format!(
                            "{}{}",
                            blocks[i]["text"].as_str().unwrap_or(""),
                            d["text"].as_str().unwrap()
                        );
                        blocks[i]["text"] = json!(t);
                    }
                    "input_json_delta" => partial[i].push_str(d["partial_json"].as_str().unwrap()),
                    "thinking_delta" => {
                        let t = format!(
                            "{}{}",
                            blocks[i]["thinking"].as_str().unwrap_or(""),
                            d["thinking"].as_str().unwrap()
                        );
                        blocks[i]["thinking"] = json!(t);
                    }
                    "signature_delta" => blocks[i]["signature"] = d["signature"].clone(),
                    _ => {}
                }
            }
            "content_block_stop" => {
                let i = e["index"].as_u64().unwrap() as usize;
                if blocks[i]["type"] == "tool_use" && !partial[i].is_empty() {
                    blocks[i]["input"] = serde_json::from_str(&partial[i]).unwrap();
                }
            }
            "message_delta" => {
                message["stop_reason"] = e["delta"]["stop_reason"].clone();
                message["usage"]["output_tokens"] = e["usage"]["output_tokens"].clone();
            }
            _ => {}
        }
    }
    message["content"] = json!(blocks);
    message
}

/// Runs the client's tools on the calls of `message`; true when there were any.
fn run_tools(message: &Value, messages: &mut Vec<Value>, files: &[(&str, &str)]) -> bool {
    let content = message["content"].as_array().unwrap();
    messages.push(json!({"role": "assistant", "content": content}));
    let mut results = Vec::new();
    for b in content.iter().filter(|b| b["type"] == "tool_use") {
        assert_ne!(b["name"], "run_code", "the proxy runs run_code itself");
        let path = b["input"]["file_path"].as_str().unwrap_or("");
        let content = files
            .iter()
            .find(|(p, _)| *p == path)
            .map_or("no such file", |(_, c)| c);
        results.push(json!({"type": "tool_result", "tool_use_id": b["id"], "content": content}));
    }
    if results.is_empty() {
        return false;
    }
    // Claude Code puts reminders after the results in the same message.
    results.push(json!({"type": "text", "text": "<system-reminder>keep going</system-reminder>"}));
    messages.push(json!({"role": "user", "content": results}));
    true
}

fn text_of(message: &Value) -> String {
    message["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect()
}

fn wire_tools(seen: &Seen) -> Vec<String> {
    seen.body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["name"].as_str().unwrap_or("?").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

const FILES: [(&str, &str); 2] = [("a.txt", "alpha-1"), ("b.txt", "bravo-2")];

async fn program_of_two_reads(stream: bool) {
    let code = "const a = await tools.Read({file_path: 'a.txt'}); const b = await tools.Read({file_path: 'b.txt'}); return a + ' ' + b;";
    let model = MessagesModel::new([
        vec![
            thinking("Two files: one program.", "sig-AAA="),
            text("Let me run a program."),
            run_code_use("toolu_p", code),
        ],
        vec![text("The files say alpha-1 bravo-2.")],
    ]);
    let server = model.serve().await;
    let proxy = proxy_for(&server, "code").await;
    let mut messages = vec![json!({"role": "user", "content": "Read a.txt and b.txt"})];
    let mut turns = 0;
    let answer = loop {
        let message = ask(&proxy, &messages, stream).await;
        turns += 1;
        assert!(turns < 6, "the program ends");
        if !run_tools(&message, &mut messages, &FILES) {
            break message;
        }
    };
    assert_eq!(text_of(&answer), "The files say alpha-1 bravo-2.");
    assert_eq!(turns, 3, "two nested turns, then the answer");
    let seen = model.seen();
    assert!(seen.iter().all(|s| s.status == 200), "{seen:?}");
    assert_eq!(seen.len(), 2);
    for s in &seen {
        assert_eq!(s.path, "/v1/messages?beta=true", "the query is forwarded");
        assert_eq!(
            wire_tools(s),
            vec!["run_code"],
            "code mode carries run_code only"
        );
        assert_eq!(s.headers["anthropic-version"], "2023-06-01");
        assert_eq!(
            s.headers["anthropic-beta"],
            "interleaved-thinking-2025-05-14"
        );
        assert_eq!(s.headers["x-api-key"], "sk-ant-test");
        assert!(s.body["tools"][0]["input_schema"].is_object());
    }
    let last = seen[1].body["messages"].as_array().unwrap();
    assert_eq!(
        last.len(),
        3,
        "user, the program's turn, its result: {last:?}"
    );
    assert_eq!(
        last[1]["content"][0]["signature"], "sig-AAA=",
        "thinking replayed byte for byte"
    );
    let result = &last[2]["content"][0];
    assert_eq!(result["tool_use_id"], "toolu_p");
    assert_eq!(result["content"][0]["text"], "Result: \"alpha-1 bravo-2\"");
}

#[tokio::test]
async fn a_program_runs_through_nested_tool_use_json() {
    program_of_two_reads(false).await;
}

#[tokio::test]
async fn a_program_runs_through_nested_tool_use_streamed() {
    program_of_two_reads(true).await;
}

async fn denial_and_repair(stream: bool) {
    let model = MessagesModel::new([
        vec![
            thinking("Read it directly.", "sig-BBB="),
            tool_use("toolu_r", "Read", json!({"file_path": "a.txt"})),
        ],
        vec![text("I will use run_code.")],
    ]);
    let server = model.serve().await;
    let proxy = proxy_for(&server, "code").await;
    let message = ask(
        &proxy,
        &[json!({"role": "user", "content": "Read a.txt"})],
        stream,
    )
    .await;
    assert_eq!(text_of(&message), "I will use run_code.");
    assert!(
        message["content"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["type"] != "tool_use"),
        "the denied call never reaches the client: {message}"
    );
    let seen = model.seen();
    assert_eq!(seen.len(), 2, "one repair: {seen:?}");
    assert!(seen.iter().all(|s| s.status == 200), "{seen:?}");
    let repair = seen[1].body["messages"].as_array().unwrap();
    assert_eq!(repair[1]["content"][0]["signature"], "sig-BBB=");
    let denial = &repair[2]["content"][0];
    assert_eq!(denial["type"], "tool_result");
    assert_eq!(denial["is_error"], true);
    let text = denial["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("UNKNOWN_TOOL:")
            && text.contains("await tools.Read({\"file_path\": \"a.txt\"})"),
        "{text}"
    );
}

#[tokio::test]
async fn a_direct_native_call_is_denied_and_repaired_json() {
    denial_and_repair(false).await;
}

#[tokio::test]
async fn a_direct_native_call_is_denied_and_repaired_streamed() {
    denial_and_repair(true).await;
}

#[tokio::test]
async fn count_tokens_gets_the_rewrite_its_messages_request_would_get() {
    let model = MessagesModel::new([]);
    let server = model.serve().await;
    let proxy = proxy_for(&server, "code").await;
    let mut b = body(&[json!({"role": "user", "content": "hi"})], false);
    b.as_object_mut().unwrap().remove("stream");
    b.as_object_mut().unwrap().remove("max_tokens");
    let res = proxy.post("/v1/messages/count_tokens", &b, HEADERS).await;
    assert_eq!(res.status(), 200);
    let seen = model.seen();
    assert_eq!(seen[0].path, "/v1/messages/count_tokens");
    assert_eq!(wire_tools(&seen[0]), vec!["run_code"]);
}

#[tokio::test]
async fn proxy_errors_on_messages_routes_are_anthropic_shaped() {
    let server = MessagesModel::new([]).serve().await;
    let proxy = proxy_for(&server, "code").await;
    let res = proxy
        .post_raw(
            "/v1/messages",
            "{not json",
            &[
                ("anthropic-version", "2023-06-01"),
                ("content-type", "application/json"),
            ],
        )
        .await;
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["type"], "error", "{err}");
    assert_eq!(err["error"]["type"], "invalid_request_error", "{err}");
    assert!(error_message(&err).len() > 10);
}

#[tokio::test]
async fn the_anthropic_key_replaces_the_clients() {
    let model = MessagesModel::new([vec![text("hi")]]);
    let server = model.serve().await;
    let upstream = format!("{}/v1", server.uri());
    let proxy = start(
        &server,
        &[
            ("CODEMODE_ANTHROPIC_UPSTREAM", upstream.as_str()),
            ("CODEMODE_ANTHROPIC_API_KEY", "sk-ant-operator"),
            ("CODEMODE_MODE", "native"),
        ],
    )
    .await;
    let res = proxy
        .post(
            "/v1/messages",
            &body(&[json!({"role": "user", "content": "hi"})], false),
            &[
                ("anthropic-version", "2023-06-01"),
                ("x-api-key", "sk-ant-client"),
                ("authorization", "Bearer x"),
            ],
        )
        .await;
    let status = res.status();
    assert_eq!(status, 200, "{}", res.text().await.unwrap());
    let seen = model.seen();
    assert_eq!(seen[0].headers["x-api-key"], "sk-ant-operator");
    assert!(!seen[0].headers.contains_key("authorization"));
}

/// A program gets a tool's output, not the blocks its client put it in
/// (docs/embedded-runtime.md, "What a program's call resolves to"): a
/// `tool_result` whose content is text blocks (Claude Code's, a cache mark
/// on the last) reaches `await tools.Read()` as their text; a content
/// holding another block (an image) reaches it as it came, as JSON.
#[tokio::test]
async fn a_program_gets_the_text_of_a_tool_results_text_blocks() {
    let code = "return await tools.Read({file_path: 'a.txt'});";
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}});
    let cases = [
        (
            json!([{"type": "text", "text": "alpha-1\n"},
                   {"type": "text", "text": "bravo-2", "cache_control": {"type": "ephemeral"}}]),
            "alpha-1\nbravo-2".to_owned(),
        ),
        (
            json!([{"type": "text", "text": "a.png"}, image]),
            json!([{"type": "text", "text": "a.png"}, image]).to_string(),
        ),
    ];
    for stream in [false, true] {
        for (content, output) in &cases {
            let model =
                MessagesModel::new([vec![run_code_use("toolu_p", code)], vec![text("Read.")]]);
            let server = model.serve().await;
            let proxy = proxy_for(&server, "code").await;
            let mut messages = vec![json!({"role": "user", "content": "Read a.txt"})];
            let message = ask(&proxy, &messages, stream).await;
            let calls: Vec<&Value> = message["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .collect();
            assert_eq!(calls.len(), 1, "{message}");
            let id = calls[0]["id"].clone();
            messages.push(json!({"role": "assistant", "content": message["content"]}));
            messages.push(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": content}]}));
            let answer = ask(&proxy, &messages, stream).await;
            assert_eq!(text_of(&answer), "Read.");
            let seen = model.seen();
            assert_eq!(seen.len(), 2, "{seen:?}");
            let last = seen[1].body["messages"].as_array().unwrap();
            assert_eq!(
                last[2]["content"][0]["content"][0]["text"],
                format!("Result: {}", json!(output)),
                "stream: {stream}, {content}"
            );
        }
    }
}
