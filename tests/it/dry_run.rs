//! `POST /codemode/dry-run` on every dialect: the dialect is named by the
//! `dialect` parameter, or told by an `anthropic-version` header or the
//! body; the answer shows the sections, the SDK and the wire tools.

use crate::common;
use crate::common::messages_model::fs_input_schema_tools;
use crate::common::responses_model::fs_function_tools;
use crate::common::*;
use serde_json::{json, Value};

async fn dry_run(
    proxy: &Proxy,
    query: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let res = proxy
        .post(&format!("/codemode/dry-run{query}"), body, headers)
        .await;
    let status = res.status().as_u16();
    (status, res.json().await.unwrap())
}

fn names(v: &Value) -> Vec<String> {
    v["wire_tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn every_dialect_is_told_from_its_body_and_shows_what_the_model_sees() {
    let p = provider([]).await;
    let proxy = start(&p, &[("CODEMODE_RUNTIME", "embedded")]).await;

    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": common::agent::fs_tools()});
    let (status, v) = dry_run(&proxy, "", &chat, &[]).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["dialect"], "chat");
    assert_eq!(names(&v), ["run_code"]);
    assert!(v["sdk"].as_str().unwrap().contains("read(args: {"), "{v}");
    assert_eq!(v["request"]["messages"][0]["role"], "system");

    let responses = json!({"model": "m", "input": "hi", "tools": fs_function_tools()});
    let (status, v) = dry_run(&proxy, "", &responses, &[]).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["dialect"], "responses");
    assert_eq!(names(&v), ["run_code"]);
    assert!(v["request"]["instructions"]
        .as_str()
        .unwrap()
        .contains("declare const tools"));

    let messages = json!({"model": "m", "max_tokens": 10, "system": "You are an agent.",
                          "messages": [{"role": "user", "content": "hi"}], "tools": fs_input_schema_tools()});
    let (status, v) = dry_run(&proxy, "", &messages, &[]).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["dialect"], "messages");
    assert_eq!(names(&v), ["run_code"]);
    assert!(v["sdk"].as_str().unwrap().contains("Read(args: {"), "{v}");
    assert!(v["request"]["tools"][0]["input_schema"].is_object());
    assert!(
        p.received_requests().await.unwrap().is_empty(),
        "nothing went upstream"
    );
}

#[tokio::test]
async fn the_parameter_or_an_anthropic_header_names_the_dialect() {
    let p = provider([]).await;
    let proxy = start(&p, &[("CODEMODE_RUNTIME", "embedded")]).await;
    // A Messages body without `system`, and tools with no schema hint.
    let messages =
        json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    let (_, v) = dry_run(&proxy, "?dialect=messages", &messages, &[]).await;
    assert_eq!(v["dialect"], "messages");
    let (_, v) = dry_run(
        &proxy,
        "",
        &messages,
        &[("anthropic-version", "2023-06-01")],
    )
    .await;
    assert_eq!(v["dialect"], "messages");
    let (_, v) = dry_run(&proxy, "", &messages, &[("x-codemode-mode", "native")]).await;
    assert_eq!(v["dialect"], "chat");
    assert_eq!(v["mode"], "native");
    assert!(v["sdk"].is_null());

    let (status, v) = dry_run(&proxy, "?dialect=palm", &messages, &[]).await;
    assert_eq!(status, 400);
    assert_eq!(v["error"]["code"], "invalid_request");
    assert!(error_message(&v).contains("chat, responses, messages, gemini"));
}

#[tokio::test]
async fn a_gemini_body_is_told_by_its_contents_and_shows_its_declarations() {
    let p = provider([]).await;
    let proxy = start(
        &p,
        &[("CODEMODE_RUNTIME", "embedded"), ("CODEMODE_MODE", "code")],
    )
    .await;
    let gemini = json!({
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "tools": [{"functionDeclarations": [
            {"name": "read_file", "parametersJsonSchema": {"type": "object"}},
            {"name": "write_file", "parametersJsonSchema": {"type": "object"}}]},
            {"googleSearch": {}}]
    });
    for query in ["", "?dialect=gemini"] {
        let (status, v) = dry_run(&proxy, query, &gemini, &[]).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["dialect"], "gemini");
        assert_eq!(names(&v), ["run_code", "googleSearch"]);
        let sdk = v["sdk"].as_str().unwrap();
        assert!(
            sdk.contains("read_file") && sdk.contains("write_file"),
            "{sdk}"
        );
        assert!(v["request"]["systemInstruction"]["parts"][0]["text"].is_string());
    }
}
