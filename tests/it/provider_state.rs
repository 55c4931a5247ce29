//! State a provider keeps for the client (Anthropic's message threads,
//! Responses' conversations and stored prompts) is judged or refused in a
//! mode that can deny; a compaction is judged as the model turn it is
//! (docs/security.md, "Routes").

use serde_json::{json, Value};
use wiremock::{MockServer, ResponseTemplate};

use crate::common::all_bodies;
use crate::common::{error_message, mount, start};

async fn provider(at: &str, answer: Value) -> MockServer {
    let server = MockServer::start().await;
    mount(
        &server,
        "POST",
        at,
        ResponseTemplate::new(200).set_body_json(answer),
    )
    .await;
    server
}

fn anthropic(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

#[tokio::test]
async fn a_message_thread_is_refused_with_the_code_clients_resend_whole_on() {
    let answer = json!({"id": "msg_1", "type": "message", "role": "assistant",
        "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1}});
    let server = provider("/v1/messages", answer).await;
    let upstream = anthropic(&server);
    let headers = [("x-api-key", "k"), ("anthropic-version", "2023-06-01")];
    let base = json!({"model": "m", "max_tokens": 10,
        "messages": [{"role": "user", "content": "go"}],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}]});
    let with = |key: &str, value: Value| {
        let mut b = base.clone();
        b[key] = value;
        b
    };
    let threaded = [
        with("thread", json!({"type": "create"})),
        with(
            "thread",
            json!({"type": "continue", "previous_message_id": "msg_0"}),
        ),
        with("previous_message_id", json!("msg_0")),
    ];
    let locked = start(
        &server,
        &[
            ("CODEMODE_MODE", "code"),
            ("CODEMODE_RUNTIME", "embedded"),
            ("CODEMODE_ANTHROPIC_UPSTREAM", &upstream),
        ],
    )
    .await;
    for body in &threaded {
        let res = locked.post("/v1/messages", body, &headers).await;
        assert_eq!(res.status(), 400, "{body}");
        let err: Value = res.json().await.unwrap();
        // As the anthropic SDK and Claude Code read it.
        assert_eq!(err["type"], "error");
        assert_eq!(err["error"]["type"], "invalid_request_error");
        assert_eq!(
            err["error"]["details"]["error_code"],
            "thread_unsupported_request"
        );
        assert!(error_message(&err).contains("resend the whole conversation"));
    }
    assert!(
        all_bodies(&server).await.is_empty(),
        "no thread reached the provider"
    );
    // The resend without a thread is served.
    let res = locked.post("/v1/messages", &base, &headers).await;
    assert_eq!(res.status(), 200);
    // Native mode is transparent.
    let native = start(
        &server,
        &[
            ("CODEMODE_MODE", "native"),
            ("CODEMODE_ANTHROPIC_UPSTREAM", &upstream),
        ],
    )
    .await;
    let res = native.post("/v1/messages", &threaded[1], &headers).await;
    assert_eq!(res.status(), 200);
    assert_eq!(all_bodies(&server).await[1]["thread"]["type"], "continue");
}

#[tokio::test]
async fn a_conversation_or_stored_prompt_the_provider_keeps_is_refused_naming_the_field() {
    let answer = json!({"id": "resp_1", "object": "response", "status": "completed",
        "output": [{"type": "message", "id": "m1", "role": "assistant",
                    "content": [{"type": "output_text", "text": "hi"}]}]});
    let server = provider("/v1/responses", answer).await;
    let locked = start(
        &server,
        &[("CODEMODE_MODE", "code"), ("CODEMODE_RUNTIME", "embedded")],
    )
    .await;
    let tools = json!([{"type": "function", "name": "read", "parameters": {"type": "object"}}]);
    for (field, value) in [
        ("conversation", json!("conv_1")),
        ("conversation", json!({"id": "conv_1"})),
        ("prompt", json!({"id": "pmpt_1", "version": "2"})),
    ] {
        let mut body = json!({"model": "m", "input": "go", "tools": tools});
        body[field] = value;
        let res = locked.post("/v1/responses", &body, &[]).await;
        assert_eq!(res.status(), 400, "{field}");
        let err: Value = res.json().await.unwrap();
        let message = error_message(&err);
        assert!(message.contains(&format!("`{field}`")), "{message}");
        assert!(message.contains("native mode"), "{message}");
    }
    assert!(all_bodies(&server).await.is_empty());
    let native = start(&server, &[("CODEMODE_MODE", "native")]).await;
    let body = json!({"model": "m", "input": "go", "conversation": "conv_1"});
    assert_eq!(native.post("/v1/responses", &body, &[]).await.status(), 200);
}

#[tokio::test]
async fn a_compaction_is_judged_as_the_model_turn_it_is() {
    let compacted = r#"{"id":"resp_c","object":"response.compaction","created_at":1,
  "output":[{"type":"message","id":"m1","role":"user","content":[{"type":"input_text","text":"go"}]},
            {"type":"compaction","id":"cmp_1","encrypted_content":"gAAA"}],
  "usage":{"input_tokens":10,"output_tokens":2,"total_tokens":12}}"#;
    let server = MockServer::start().await;
    mount(
        &server,
        "POST",
        "/v1/responses/compact",
        ResponseTemplate::new(200).set_body_raw(compacted.as_bytes(), "application/json"),
    )
    .await;
    let locked = start(
        &server,
        &[("CODEMODE_MODE", "code"), ("CODEMODE_RUNTIME", "embedded")],
    )
    .await;
    let body = json!({"model": "m", "instructions": "You are Codex.",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}],
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]});
    let res = locked.post("/v1/responses/compact", &body, &[]).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap(), compacted, "passed as it came");
    let seen = all_bodies(&server).await;
    let names: Vec<&str> = seen[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["run_code"],
        "the client's tools reach it as the SDK"
    );
    assert!(seen[0]["instructions"].as_str().unwrap().contains("shell"));
}
