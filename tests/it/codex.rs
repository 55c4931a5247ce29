//! Codex, unmodified, through the proxy in code mode (docs/agents.md,
//! "Codex and the Responses API"): its model sees only `run_code` and the SDK; a program the model
//! writes calls Codex's own shell tool (`exec_command`) twice; Codex runs
//! the nested calls it is handed, and its final answer holds their output.
//!
//! The scripted model (tests/common/responses_model.rs) enforces the
//! Responses API's rules on every input it gets. Codex is installed by
//! tests/agents/install.sh; outside CI a missing Codex skips with a note.

use crate::common::codex::{
    codex_ready, run_codex, sees_run_code_only, two_commands_model, workdir,
};
use crate::common::start;

#[tokio::test]
async fn codex_runs_a_program_of_two_shell_commands_through_the_proxy() {
    if !codex_ready() {
        return;
    }
    let dir = workdir("proxy", &[("a.txt", "alpha-1"), ("b.txt", "bravo-2")]);
    let model = two_commands_model();
    let server = model.serve().await;
    let proxy = start(
        &server,
        &[("CODEMODE_RUNTIME", "embedded"), ("CODEMODE_MODE", "code")],
    )
    .await;
    let report = run_codex(&proxy.url("/v1"), &dir.0, &["Show me a.txt and b.txt."]).await;
    let seen = model.seen();
    let transcript: Vec<String> = seen
        .iter()
        .map(|s| {
            let types: Vec<String> = s.body["input"]
                .as_array()
                .map(|i| {
                    i.iter()
                        .map(|i| {
                            format!(
                                "{}{}",
                                i["type"].as_str().unwrap_or("message"),
                                i["name"]
                                    .as_str()
                                    .map(|n| format!(":{n}"))
                                    .unwrap_or_default()
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            format!("{} {} {}", s.status, s.refusal, types.join(" "))
        })
        .collect();
    assert!(
        report["error"].is_null(),
        "codex failed: {report}\nthe model saw:\n{}",
        transcript.join("\n")
    );
    let answer = report["final"].as_str().unwrap_or("");
    assert!(
        answer.contains("alpha-1") && answer.contains("bravo-2"),
        "the answer holds both commands' output: {report}\nthe model saw:\n{}",
        transcript.join("\n")
    );
    assert_eq!(
        seen.len(),
        2,
        "the model was asked twice:\n{}",
        transcript.join("\n")
    );
    for s in &seen {
        assert_eq!(s.status, 200, "{}", transcript.join("\n"));
        sees_run_code_only(&s.body);
        let nested = s.body["input"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"] == "exec_command");
        assert!(!nested, "the nested calls never reach the model");
    }
    let commands = report["commands"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        commands.len(),
        2,
        "Codex ran the two nested commands: {report}"
    );
}
