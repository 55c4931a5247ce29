//! Anthropic's advanced tool use (the `advanced-tool-use-2025-11-20` beta
//! Claude Code sends) through the proxy in code mode (docs/security.md,
//! "Fail closed"): tools declared with `defer_loading`, the
//! `tool_reference` blocks that load them (in answers, and in the history
//! a client echoes back), and programmatic tool calling (`allowed_callers`,
//! a `tool_use`'s `caller`). Each test checks what the scripted provider
//! got and what the client got, JSON and SSE where an answer is judged.

use crate::common::messages_model::{anthropic_proxy, handed, messages_provider};
use crate::common::strs;
use serde_json::{json, Value};
use wiremock::MockServer;

const LOCKED: &[(&str, &str)] = &[
    ("CODEMODE_MODE", "code"),
    ("CODEMODE_CLIENT_SELECT", "deny"),
    ("CODEMODE_RUNTIME", "embedded"),
];

/// The bodies the provider got.
async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
        .collect()
}

fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

fn reference(name: &str) -> Value {
    json!({"type": "tool_reference", "tool_name": name})
}

/// Claude Code's tools with tool search on: loaded ones, `ToolSearch`, and
/// one its search loaded, deferred.
fn tools() -> Value {
    json!([
        {"name": "Read", "description": "Reads a file.",
         "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}},
        {"name": "ToolSearch", "description": "Fetches full schema definitions for deferred tools.",
         "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}},
        {"name": "WebFetch", "description": "Fetches a URL.", "defer_loading": true,
         "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}}}
    ])
}

#[tokio::test]
async fn a_tool_reference_in_an_answer_reaches_the_client_only_for_a_tool_it_may_call() {
    for stream in [false, true] {
        let search = json!({"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1",
            "content": {"type": "tool_search_tool_search_result", "tool_references": []}});
        let server = messages_provider(
            vec![
                (
                    vec![
                        text("loading"),
                        reference("WebFetch"),
                        json!({"type": "tool_use", "id": "toolu_1", "name": "Read",
                               "input": {"file_path": "a.txt"}}),
                    ],
                    "tool_use",
                ),
                (
                    vec![
                        reference("Bash"),
                        text("done"),
                        reference("run_code"),
                        search.clone(),
                    ],
                    "end_turn",
                ),
            ],
            stream,
        )
        .await;
        let proxy = anthropic_proxy(&server, LOCKED).await;
        let body = json!({"model": "claude-test", "max_tokens": 100, "stream": stream,
            "messages": [{"role": "user", "content": "fetch it"}], "tools": tools()});
        let blocks = handed(&proxy, &body).await;
        let kinds: Vec<&str> = blocks
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .filter(|k| *k != "text")
            .collect();
        assert_eq!(
            kinds,
            ["tool_reference", "tool_search_tool_result"],
            "stream {stream}: {blocks:?}"
        );
        let passed: Vec<&Value> = blocks
            .iter()
            .filter(|b| b["type"] == "tool_reference")
            .collect();
        assert_eq!(passed, [&reference("run_code")], "stream {stream}");

        // The repair replays the model's turn without the reference it
        // could not be given, and answers the collapsed call.
        let seen = bodies(&server).await;
        assert_eq!(seen.len(), 2, "stream {stream}: repaired");
        let replayed = &seen[1]["messages"][1]["content"];
        assert_eq!(replayed[0], text("loading"), "stream {stream}");
        assert_eq!(replayed[1]["type"], "tool_use", "stream {stream}");
        assert_eq!(replayed.as_array().unwrap().len(), 2, "stream {stream}");
        assert!(
            !seen[1]["messages"]
                .to_string()
                .contains("\"tool_reference\""),
            "stream {stream}: {}",
            seen[1]["messages"]
        );
    }
}

/// A request Claude Code sent, captured (tests/fixtures/claude/).
fn captured(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/claude/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[tokio::test]
async fn claude_codes_history_after_its_tool_search_reaches_the_model_with_no_deferred_tool() {
    let server = messages_provider(vec![(vec![text("ok")], "end_turn")], true).await;
    let proxy = anthropic_proxy(&server, LOCKED).await;
    // ToolSearch loaded WebFetch: it is declared deferred, and ToolSearch's
    // result is a tool_reference to it.
    let body = captured("after_tool_search.json");
    assert_eq!(body["tools"][9]["defer_loading"], true);
    handed(&proxy, &body).await;

    let seen = bodies(&server).await;
    let sent = &seen[0];
    let wire: Vec<&str> = strs(&sent["tools"], "name");
    assert_eq!(wire, ["run_code"]);
    let system = sent["system"].to_string();
    assert!(system.contains("WebFetch("), "the SDK shows it: {system}");
    let messages = sent["messages"].to_string();
    assert!(!messages.contains("\"tool_reference\""), "{messages}");
    let result = &sent["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(
        result["content"][0]["text"],
        "Tool \"WebFetch\" is loaded: call it from inside a run_code program, as `await tools.WebFetch(args)`."
    );
    // Every other message as Claude Code sent it.
    assert_eq!(sent["messages"][0], body["messages"][0]);
    assert_eq!(sent["messages"][1], body["messages"][1]);
}

#[tokio::test]
async fn references_claude_code_echoes_from_the_models_turn_load_nothing_the_wire_lacks() {
    let server = messages_provider(vec![(vec![text("ok")], "end_turn")], true).await;
    let proxy = anthropic_proxy(&server, LOCKED).await;
    // The model's turn held a regex search's result naming WebFetch and a
    // reference to WebSearch; Claude Code sends both back as they came.
    let body = captured("after_echoed_reference_blocks.json");
    assert_eq!(body["messages"][1]["content"][2]["type"], "tool_reference");
    handed(&proxy, &body).await;

    let seen = bodies(&server).await;
    let turn = &seen[0]["messages"][1]["content"];
    assert_eq!(turn[0], body["messages"][1]["content"][0]);
    assert_eq!(turn[1]["content"]["tool_references"], json!([]));
    assert_eq!(
        turn[2],
        text("Tool \"WebSearch\" is not available in this conversation.")
    );
    assert_eq!(turn[3], body["messages"][1]["content"][3]);
    assert!(!seen[0].to_string().contains("\"tool_reference\""));
}

#[tokio::test]
async fn a_program_that_runs_a_tool_search_reads_what_it_loaded() {
    let code = "return await tools.ToolSearch({query: 'select:WebFetch'});";
    let server = messages_provider(
        vec![
            (
                vec![
                    json!({"type": "tool_use", "id": "toolu_prog", "name": "run_code",
                            "input": {"code": code}}),
                ],
                "tool_use",
            ),
            (vec![text("WebFetch is ready.")], "end_turn"),
        ],
        false,
    )
    .await;
    let proxy = anthropic_proxy(&server, LOCKED).await;
    let first = json!({"model": "claude-test", "max_tokens": 100, "tools": tools(),
        "messages": [{"role": "user", "content": "fetch it"}]});
    let blocks = handed(&proxy, &first).await;
    let call = blocks.iter().find(|b| b["type"] == "tool_use").unwrap();
    assert_eq!(call["name"], "ToolSearch");

    // Claude Code runs it: the result loads WebFetch, which its next
    // request declares, deferred.
    let mut tools = tools();
    tools
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "DeferredToolPlaceholder",
        "defer_loading": true, "input_schema": {"type": "object", "properties": {}}}));
    let second = json!({"model": "claude-test", "max_tokens": 100, "tools": tools,
        "messages": [
            {"role": "user", "content": "fetch it"},
            {"role": "assistant", "content": blocks},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call["id"],
                 "content": [reference("WebFetch")]},
                {"type": "text", "text": "Tool loaded."}]}]});
    let blocks = handed(&proxy, &second).await;
    assert_eq!(blocks, [text("WebFetch is ready.")]);

    let seen = bodies(&server).await;
    assert_eq!(seen.len(), 2);
    let after = &seen[1];
    let result = after["messages"][2]["content"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    // The program's value, as JSON text.
    assert!(
        result.starts_with("Result: \"Loaded tool \\\"WebFetch\\\": the next program can call it as `await tools.WebFetch(args)`."),
        "{result}"
    );
    assert!(
        !after.to_string().contains("defer_loading")
            && !after.to_string().contains("\"tool_reference\""),
        "{after}"
    );
    assert!(after["system"].to_string().contains("WebFetch("));
}

#[tokio::test]
async fn programmatic_tool_calling_reaches_no_collapsed_tool() {
    for stream in [false, true] {
        // The model's code execution calls Read (the API marks such a call
        // with its `caller`): Read is collapsed, so the call is withheld
        // and answered, and the client never runs it.
        let programmatic = json!({"type": "tool_use", "id": "toolu_1", "name": "Read",
            "input": {"file_path": "a.txt"},
            "caller": {"type": "code_execution_20250825", "tool_id": "srvtoolu_1"}});
        let server = messages_provider(
            vec![
                (
                    vec![
                        json!({"type": "server_tool_use", "id": "srvtoolu_1",
                               "name": "code_execution", "input": {"code": "read('a.txt')"}}),
                        programmatic,
                    ],
                    "tool_use",
                ),
                (vec![text("done")], "end_turn"),
            ],
            stream,
        )
        .await;
        let proxy = anthropic_proxy(&server, LOCKED).await;
        let body = json!({"model": "claude-test", "max_tokens": 100, "stream": stream,
        "messages": [{"role": "user", "content": "read a.txt"}],
        "tools": [
            {"type": "code_execution_20250825", "name": "code_execution"},
            {"name": "Read", "description": "Reads a file.",
             "allowed_callers": ["code_execution_20250825"],
             "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}
        ]});
        let blocks = handed(&proxy, &body).await;
        assert!(
            blocks.iter().all(|b| b["type"] != "tool_use"),
            "stream {stream}: {blocks:?}"
        );

        let seen = bodies(&server).await;
        assert_eq!(seen.len(), 2, "stream {stream}: repaired");
        // Only run_code and the provider's code execution on the wire: no
        // client tool a program of the provider's could call.
        let wire = seen[0]["tools"].to_string();
        assert!(!wire.contains("allowed_callers"), "stream {stream}: {wire}");
        let names: Vec<&str> = strs(&seen[0]["tools"], "name");
        assert_eq!(names, ["run_code", "code_execution"], "stream {stream}");
        let answer = &seen[1]["messages"][2]["content"][0];
        assert_eq!(answer["tool_use_id"], "toolu_1", "stream {stream}");
        assert_eq!(answer["is_error"], true, "stream {stream}");
        assert!(answer["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("UNKNOWN_TOOL"));
    }
}
