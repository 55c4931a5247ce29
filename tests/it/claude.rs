//! Claude Code, unmodified, through the proxy in code mode (docs/agents.md,
//! "Claude Code and the Messages API"): its model sees only `run_code` and the SDK; a program the
//! model writes calls Claude Code's own `Read` on two files; Claude Code
//! runs the nested calls it is handed, and its answer holds their content.
//!
//! The scripted model (tests/common/messages_model.rs) enforces the
//! Messages API's rules (tool_result placement, thinking replayed with its
//! signature). Claude Code is installed by tests/agents/install.sh; outside
//! CI a missing Claude Code skips with a note.

use crate::common::claude::{claude_ready, run_claude, sees_run_code_and_the_sdk, workdir};
use crate::common::messages_model::*;
use serde_json::{json, Value};
use std::path::Path;

/// How many times Claude Code ran `tool`, as its `report` lists them.
fn times_ran(report: &Value, tool: &str) -> usize {
    report["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["name"] == tool)
        .count()
}

/// Claude Code, with `env`, run in `dir` on `prompts` through the proxy in
/// code mode in front of `model`: its report, which has no error, and
/// what the model saw (each request's status, path and refusal).
async fn through_the_proxy(
    model: &MessagesModel,
    dir: &Path,
    prompts: &[&str],
    env: &[(&str, &str)],
) -> (Value, Vec<String>) {
    let server = model.serve().await;
    let proxy = anthropic_proxy(
        &server,
        &[("CODEMODE_RUNTIME", "embedded"), ("CODEMODE_MODE", "code")],
    )
    .await;
    let base = proxy.url("");
    let report = run_claude(base.trim_end_matches('/'), dir, prompts, env).await;
    let transcript: Vec<String> = model
        .seen()
        .iter()
        .map(|s| format!("{} {} {}", s.status, s.path, s.refusal))
        .collect();
    assert!(
        report["error"].is_null(),
        "claude failed: {report}\nthe model saw:\n{}",
        transcript.join("\n")
    );
    (report, transcript)
}

#[tokio::test]
async fn claude_code_runs_a_program_of_two_reads_through_the_proxy() {
    if !claude_ready() {
        return;
    }
    let dir = workdir("proxy", &[("a.txt", "alpha-1\n"), ("b.txt", "bravo-2\n")]);
    let a = dir.0.join("a.txt");
    let b = dir.0.join("b.txt");
    let code = format!(
        "const a = await tools.Read({{file_path: {}}});\nconst b = await tools.Read({{file_path: {}}});\nreturn [a, b].join('\\n---\\n');",
        json!(a.to_str().unwrap()),
        json!(b.to_str().unwrap())
    );
    let model = MessagesModel::new([
        vec![
            thinking("Both files in one program.", "sig-CC="),
            run_code_use("toolu_prog", &code),
        ],
        vec![json!({"type": "echo"})],
    ]);
    let (report, transcript) =
        through_the_proxy(&model, &dir.0, &["Show me a.txt and b.txt."], &[]).await;
    let seen = model.seen();
    let answer = report["final"].as_str().unwrap_or("");
    assert!(
        answer.contains("alpha-1") && answer.contains("bravo-2"),
        "the answer holds both files: {report}\nthe model saw:\n{}",
        transcript.join("\n")
    );
    let turns: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.path.starts_with("/v1/messages?"))
        .collect();
    assert_eq!(
        turns.len(),
        2,
        "the model was asked twice:\n{}",
        transcript.join("\n")
    );
    for s in &turns {
        assert_eq!(s.status, 200, "{}", transcript.join("\n"));
        sees_run_code_and_the_sdk(&s.body);
    }
    assert_eq!(
        times_ran(&report, "Read"),
        2,
        "Claude Code ran the two nested reads: {report}"
    );
}

/// With its tool search on (`ENABLE_TOOL_SEARCH=true`; `run` turns it off
/// in code mode, `configure` leaves it as Claude Code has it), Claude Code
/// declares WebFetch only once its `ToolSearch` loaded it: a program runs
/// `ToolSearch`, Claude Code answers with a `tool_reference` and declares
/// WebFetch deferred from then on. The model reads what was loaded in the
/// program's result, finds WebFetch in the SDK, and never sees a deferred
/// tool or a reference (the scripted model refuses a reference to a tool
/// the request does not declare, as the API does).
#[tokio::test]
async fn claude_code_with_tool_search_loads_a_tool_from_a_program() {
    if !claude_ready() {
        return;
    }
    let dir = workdir("tool-search", &[]);
    let model = MessagesModel::new([
        vec![
            thinking("Load WebFetch first.", "sig-TS="),
            run_code_use(
                "toolu_prog",
                "return await tools.ToolSearch({query: 'select:WebFetch'});",
            ),
        ],
        vec![json!({"type": "echo"})],
    ]);
    let (report, transcript) = through_the_proxy(
        &model,
        &dir.0,
        &["Get ready to fetch a page."],
        &[("ENABLE_TOOL_SEARCH", "true")],
    )
    .await;
    let seen = model.seen();
    assert_eq!(
        times_ran(&report, "ToolSearch"),
        1,
        "Claude Code ran ToolSearch: {report}"
    );
    let answer = report["final"].as_str().unwrap_or("");
    assert!(
        answer.contains("Loaded tool") && answer.contains("tools.WebFetch"),
        "the program's result names what it loaded: {report}"
    );
    let turns: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.path.starts_with("/v1/messages?"))
        .collect();
    assert_eq!(turns.len(), 2, "{}", transcript.join("\n"));
    for s in &turns {
        assert_eq!(s.status, 200, "{}", transcript.join("\n"));
        let names: Vec<&str> = s.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert_eq!(names, ["run_code"], "{}", transcript.join("\n"));
        let text = s.body.to_string();
        assert!(!text.contains("defer_loading") && !text.contains("\"tool_reference\""));
    }
    let sdk = |s: &Seen| s.body["system"].to_string();
    assert!(sdk(turns[0]).contains("ToolSearch(") && !sdk(turns[0]).contains("WebFetch("));
    assert!(sdk(turns[1]).contains("WebFetch("), "loaded into the SDK");
}
