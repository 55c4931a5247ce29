//! The compact SDK (a preset's `sdk = "compact"`, `CODEMODE_SDK`): the
//! model sees each tool's signature and first sentence, and a program's
//! `tools.describe(name)` returns the full declaration without the agent
//! running anything.

use crate::common::*;
use serde_json::{json, Value};

const READ_DOC: &str = "Reads a file from the local filesystem, e.g. a log. The path must be \
                        absolute, not relative.\nLines are numbered from 1.";

fn tools() -> Vec<Value> {
    vec![
        tool(
            "read",
            READ_DOC,
            json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "The absolute path of the file."},
                "offset": {"type": "integer", "description": "The line to start at."}
            }, "required": ["path"]}),
        ),
        tool(
            "bash",
            "Runs a command in a shell. Quote paths with spaces.",
            json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
        ),
    ]
}

fn chat(text: &str) -> Value {
    json!({
        "model": "test-model",
        "messages": [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": text}],
        "tools": tools(),
    })
}

fn system_prompt(body: &Value) -> String {
    body["messages"][0]["content"].as_str().unwrap().to_owned()
}

fn run_code(id: &str, code: &str) -> Value {
    calls_completion(
        vec![call(id, "run_code", &json!({"code": code}).to_string())],
        usage(10, 10),
    )
}

#[tokio::test]
async fn a_compact_preset_sends_first_sentences_and_describe_answers_in_the_proxy() {
    let file = config_file(
        "compact",
        "[[preset]]\nname = \"lean\"\nextends = \"code\"\nsdk = \"compact\"\n",
    );
    let p = provider([
        run_code("call_doc", r#"return tools.describe("read");"#),
        text_completion("Read takes an absolute path.", usage(10, 5)),
    ])
    .await;
    let proxy = start(
        &p,
        &[("CODEMODE_CONFIG", &file), ("CODEMODE_RUNTIME", "embedded")],
    )
    .await;
    let res = proxy
        .chat(&chat("How do I read?"), &[("x-codemode-preset", "lean")])
        .await;
    assert_eq!(res.status(), 200);
    let answer: Value = res.json().await.unwrap();
    // The program ended inside the proxy: the agent got the answer and
    // no tool call to run.
    let message = &answer["choices"][0]["message"];
    assert_eq!(message["content"], "Read takes an absolute path.");
    assert!(
        message.get("tool_calls").is_none_or(Value::is_null),
        "{message}"
    );

    let sent = received(&p).await;
    assert_eq!(
        sent.len(),
        2,
        "the model is asked again with describe's result"
    );
    let system = system_prompt(&sent[0]);
    assert!(
        system.contains("/** Reads a file from the local filesystem, e.g. a log. */"),
        "{system}"
    );
    assert!(system.contains("read(args: {\n    path: string;\n    offset?: number;\n  })"));
    assert!(
        system.contains("/** Runs a command in a shell. */"),
        "{system}"
    );
    for full_only in [
        "The path must be absolute",
        "Lines are numbered",
        "The absolute path of the file.",
        "Quote paths with spaces.",
    ] {
        assert!(!system.contains(full_only), "`{full_only}` in {system}");
    }
    assert!(
        system.contains("`tools.describe(\"name\")` returns"),
        "{system}"
    );
    assert_eq!(wire_tool_names(&sent[0]), vec!["run_code"]);

    let messages = sent[1]["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["tool_call_id"], "call_doc");
    let result = last["content"].as_str().unwrap();
    let described: String = serde_json::from_str(result.strip_prefix("Result: ").unwrap()).unwrap();
    assert!(
        described.contains("The path must be absolute, not relative.\n"),
        "{described}"
    );
    assert!(
        described.contains(" * Lines are numbered from 1."),
        "{described}"
    );
    assert!(
        described.contains("/** The absolute path of the file. */"),
        "{described}"
    );
    assert!(described.contains("read(args: {"), "{described}");
    assert!(!described.contains("bash"), "{described}");
}

#[tokio::test]
async fn codemode_sdk_sets_the_default_and_dry_run_shows_either_rendering() {
    let file = config_file(
        "verbose",
        "[[preset]]\nname = \"verbose\"\nextends = \"code\"\nsdk = \"full\"\n",
    );
    let p = provider([]).await;
    let proxy = start(
        &p,
        &[
            ("CODEMODE_SDK", "compact"),
            ("CODEMODE_CONFIG", &file),
            ("CODEMODE_RUNTIME", "embedded"),
        ],
    )
    .await;
    let dry = |preset: &'static str| {
        let proxy = &proxy;
        async move {
            let res = proxy
                .post(
                    "/codemode/dry-run",
                    &chat("hi"),
                    &[("x-codemode-preset", preset)],
                )
                .await;
            assert_eq!(res.status(), 200);
            res.json::<Value>().await.unwrap()
        }
    };
    let listed: Value = proxy.get_json("/codemode/presets").await;
    let sdk_of = |name: &str| {
        listed["presets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap()["sdk"]
            .clone()
    };
    assert_eq!(sdk_of("code"), "compact");
    assert_eq!(sdk_of("verbose"), "full");
    let compact = dry("code").await;
    assert_eq!(compact["sdk_rendering"], "compact");
    let sdk = compact["sdk"].as_str().unwrap();
    assert!(sdk.contains("/** Runs a command in a shell. */"), "{sdk}");
    assert!(!sdk.contains("Quote paths"), "{sdk}");
    let full = dry("verbose").await;
    assert_eq!(full["sdk_rendering"], "full");
    let sdk_full = full["sdk"].as_str().unwrap();
    assert!(sdk_full.contains("Quote paths with spaces."), "{sdk_full}");
    assert!(!sdk_full.contains("tools.describe"), "{sdk_full}");
    assert!(received(&p).await.is_empty(), "a dry run calls no provider");
}

#[tokio::test]
async fn with_the_client_running_programs_compact_promises_no_describe() {
    let p = provider([]).await;
    let proxy = start(
        &p,
        &[("CODEMODE_SDK", "compact"), ("CODEMODE_RUNTIME", "client")],
    )
    .await;
    let mut body = chat("hi");
    body["tools"].as_array_mut().unwrap().push(tool(
        "run_code",
        "Run a program.",
        json!({"type": "object"}),
    ));
    let res = proxy
        .post("/codemode/dry-run", &body, &[("x-codemode-preset", "code")])
        .await;
    let v: Value = res.json().await.unwrap();
    let sdk = v["sdk"].as_str().unwrap();
    assert!(sdk.contains("/** Reads a file from the local filesystem, e.g. a log. */"));
    assert!(!sdk.contains("describe"), "{sdk}");
}

/// The captured first request of an agent (`tests/fixtures/<agent>/`).
fn captured(path: &str) -> Value {
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn by_default_real_agents_get_the_compact_sdk_and_a_few_tools_the_full_one() {
    let p = provider([]).await;
    // Default settings but the runtime: embedded, as `codemode-proxy` starts.
    let proxy = start(&p, &[("CODEMODE_RUNTIME", "embedded")]).await;
    let dry = |query: &'static str, body: Value| {
        let proxy = &proxy;
        async move {
            let res = proxy
                .post(
                    &format!("/codemode/dry-run{query}"),
                    &body,
                    &[("x-codemode-preset", "code")],
                )
                .await;
            let v: Value = res.json().await.unwrap();
            assert!(v["sdk"].is_string(), "{v}");
            v
        }
    };
    for (agent, query, fixture) in [
        (
            "Claude Code",
            "?dialect=messages",
            "claude/first_request.json",
        ),
        ("Codex", "?dialect=responses", "codex/first_request.json"),
        ("gemini-cli", "?dialect=gemini", "gemini/first_request.json"),
    ] {
        let v = dry(query, captured(fixture)).await;
        assert_eq!(v["sdk_setting"], "auto", "{agent}");
        assert_eq!(v["sdk_rendering"], "compact", "{agent}");
        let sdk = v["sdk"].as_str().unwrap();
        assert!(
            sdk.contains("describe(name: string): string;"),
            "{agent}: {sdk}"
        );
    }
    // Two small tools: their whole docs cost less than one describe.
    let v = dry("", chat("hi")).await;
    assert_eq!(v["sdk_setting"], "auto");
    assert_eq!(v["sdk_rendering"], "full");
    assert!(v["sdk"]
        .as_str()
        .unwrap()
        .contains("Quote paths with spaces."));
    // Where nothing answers tools.describe, auto keeps the whole docs.
    let client = start(&p, &[]).await;
    let mut body = captured("claude/first_request.json");
    body["tools"].as_array_mut().unwrap().push(json!({
        "name": "run_code", "description": "Run a program.",
        "input_schema": {"type": "object"}
    }));
    let res = client
        .post(
            "/codemode/dry-run?dialect=messages",
            &body,
            &[("x-codemode-preset", "code")],
        )
        .await;
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["sdk_rendering"], "full", "{v}");
    assert!(received(&p).await.is_empty(), "a dry run calls no provider");
}
