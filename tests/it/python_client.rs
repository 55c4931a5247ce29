//! A real client library (Python `openai`) through the proxy in code mode.
//!
//! Needs `python3` with `openai` installed (`pip install openai`); `.ci/run`
//! installs it. Outside CI the test is skipped with a note when it is missing;
//! under CI (`CI` set) a missing package fails the test.

use crate::common;
use std::process::Command;

use crate::common::*;
use serde_json::Value;

fn openai_available() -> bool {
    Command::new("python3")
        .args(["-c", "import openai"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs a script from tests/python against the proxy; returns the JSON it printed.
async fn run_python(proxy: &Proxy, script: &str, stream: bool) -> Value {
    let path = format!("{}/tests/python/{script}", env!("CARGO_MANIFEST_DIR"));
    let mut cmd = tokio::process::Command::new("python3");
    cmd.arg(&path).env("PROXY_BASE_URL", proxy.url("/v1"));
    if stream {
        cmd.env("STREAM", "1");
    }
    let out = cmd.output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script} failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Whether the Python tests can run here; under CI they must.
fn openai_ready() -> bool {
    common::needs::needs(
        openai_available(),
        "python3 with the openai package",
        "python3 -m pip install openai",
    )
}

#[tokio::test]
async fn openai_python_client_in_code_mode_sees_run_code_only() {
    if !openai_ready() {
        return;
    }
    let p = provider([
        calls_completion(
            vec![call("c1", "read", r#"{"path":"a.txt"}"#)],
            usage(50, 5),
        ),
        calls_completion(
            vec![call(
                "c2",
                "run_code",
                r#"{"code":"return await tools.read({path: 'a.txt'})"}"#,
            )],
            usage(70, 9),
        ),
    ])
    .await;
    let proxy = start(&p, &[]).await;
    let report = run_python(&proxy, "code_mode_client.py", false).await;
    assert_eq!(report["names"], serde_json::json!(["run_code"]));
    assert_eq!(report["usage"], 134, "usage is the sum of both rounds");
    let sent = received(&p).await;
    assert_eq!(sent.len(), 2);
    assert!(sent.iter().all(|b| wire_tool_names(b) == vec!["run_code"]));
}

#[tokio::test]
async fn openai_python_stream_accumulator_in_code_mode_sees_run_code_only() {
    if !openai_ready() {
        return;
    }
    let turn = |id: &str, text: &str, name: &str, args: &str, prompt: u64| {
        wiremock::ResponseTemplate::new(200).set_body_raw(
            sse_call_turn(id, text, name, args, prompt),
            "text/event-stream",
        )
    };
    let p = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/v1/chat/completions"))
        .respond_with(Script::new([
            turn("s1", "Let me look. ", "read", r#"{"path":"a.txt"}"#, 40),
            turn(
                "s2",
                "Through code. ",
                "run_code",
                r#"{"code":"return 1"}"#,
                60,
            ),
        ]))
        .mount(&p)
        .await;
    let proxy = start(&p, &[]).await;
    let report = run_python(&proxy, "code_mode_client.py", true).await;
    assert_eq!(report["names"], serde_json::json!(["run_code"]));
    assert_eq!(
        report["usage"], 114,
        "usage is the sum of both rounds: (40 + 7) + (60 + 7)"
    );
    assert_eq!(report["text"], "Let me look. Through code. ");
}

#[tokio::test]
async fn openai_python_agent_with_its_own_tools_gets_the_answer_through_run_code() {
    if !openai_ready() {
        return;
    }
    let code = "const files = (await tools.list({})).split('\\n'); const texts = await Promise.all(files.map(path => tools.read({path}))); const lines = texts.reduce((n, t) => n + t.split('\\n').length, 0); await tools.write({path: 'count.txt', content: String(lines)}); return lines;";
    let p = provider([
        calls_completion(
            vec![call(
                "prog",
                "run_code",
                &serde_json::json!({"code": code}).to_string(),
            )],
            usage(90, 30),
        ),
        text_completion("The files have 6 lines.", usage(120, 8)),
    ])
    .await;
    let proxy = start(&p, &[("CODEMODE_RUNTIME", "embedded")]).await;
    let report = run_python(&proxy, "embedded_agent.py", false).await;
    assert_eq!(report["answer"], "The files have 6 lines.");
    assert_eq!(
        report["executed"],
        serde_json::json!(["list", "read", "read", "read", "write"])
    );
    assert_eq!(report["files"]["count.txt"], "6");
    let sent = received(&p).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[1]["messages"].as_array().unwrap().last().unwrap()["content"],
        "Result: 6"
    );
}

/// The program both agents' models write: c.txt from a.txt and b.txt.
const COPY: &str = "const a = await tools.read({path: 'a.txt'});\n\
                    const b = await tools.read({path: 'b.txt'});\n\
                    await tools.write({path: 'c.txt', content: a + b});\n\
                    return 'copied';";

/// Asserts the agent's report of the copying program: its answer, the
/// reads and the write it ran, and c.txt holding both files.
fn assert_copied(report: &Value) {
    assert_eq!(report["answer"], "c.txt now holds alphabravo.");
    assert_eq!(
        report["executed"],
        serde_json::json!(["read", "read", "write"])
    );
    assert_eq!(report["files"]["c.txt"], "alphabravo");
}

/// The Python client's Responses API (`client.responses.create`, and
/// `client.responses.stream`) with its own tool loop, stateless as Codex
/// is: a program copies two files; the agent never sees `run_code`.
async fn responses_agent(stream: bool) {
    use common::responses_model::*;
    if !openai_ready() {
        return;
    }
    let model = ResponsesModel::new([
        vec![
            reasoning("rs_1"),
            said("Copying."),
            run_code_call("call_p", COPY),
        ],
        vec![said("c.txt now holds alphabravo.")],
    ]);
    let server = model.serve().await;
    let proxy = start(&server, &[("CODEMODE_RUNTIME", "embedded")]).await;
    let report = run_python(&proxy, "responses_agent.py", stream).await;
    assert_copied(&report);
    let seen = model.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|s| s.status == 200), "{seen:?}");
    let last = seen[1].body["input"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["type"], "function_call_output");
    assert_eq!(last["output"], "Result: \"copied\"");
}

#[tokio::test]
async fn openai_python_responses_agent_runs_a_program_it_never_sees() {
    responses_agent(false).await;
}

#[tokio::test]
async fn openai_python_responses_agent_streaming_runs_a_program_it_never_sees() {
    responses_agent(true).await;
}

/// The Python `anthropic` client (`messages.create`, and `messages.stream`)
/// with its own tool loop, run from the agents' venv (tests/agents/
/// requirements.txt): a program copies two files; the agent never sees
/// `run_code`.
async fn anthropic_agent(stream: bool) {
    use common::messages_model::*;
    let python = common::codex::agents_dir().join("venv/bin/python");
    let ready = python.exists()
        && Command::new(&python)
            .args(["-c", "import anthropic"])
            .output()
            .is_ok_and(|o| o.status.success());
    if !common::needs::needs(
        ready,
        "the anthropic package in the agents' venv",
        common::needs::AGENTS,
    ) {
        return;
    }
    let model = MessagesModel::new([
        vec![
            thinking("One program.", "sig-PY="),
            text("Copying."),
            run_code_use("toolu_p", COPY),
        ],
        vec![text("c.txt now holds alphabravo.")],
    ]);
    let server = model.serve().await;
    let upstream = format!("{}/v1", server.uri());
    let proxy = start(
        &server,
        &[
            ("CODEMODE_RUNTIME", "embedded"),
            ("CODEMODE_ANTHROPIC_UPSTREAM", upstream.as_str()),
        ],
    )
    .await;
    let script = format!(
        "{}/tests/python/anthropic_agent.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut cmd = tokio::process::Command::new(&python);
    cmd.arg(&script)
        .env("PROXY_BASE_URL", proxy.url("").trim_end_matches('/'));
    if stream {
        cmd.env("STREAM", "1");
    }
    let out = cmd.output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "anthropic_agent.py failed: {stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_copied(&report);
    let seen = model.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|s| s.status == 200), "{seen:?}");
}

#[tokio::test]
async fn anthropic_python_agent_runs_a_program_it_never_sees() {
    anthropic_agent(false).await;
}

#[tokio::test]
async fn anthropic_python_agent_streaming_runs_a_program_it_never_sees() {
    anthropic_agent(true).await;
}
