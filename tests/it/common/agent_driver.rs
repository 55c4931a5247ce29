//! Running a driver of tests/agents (a real agent or SDK client behind a
//! small script): its command, the JSON summary it prints last, and the
//! tools that summary says the client ran.

use std::ffi::OsStr;
use std::time::Duration;

use serde_json::Value;

/// `prog` (`node`, a venv's `python`) running the driver `script`.
pub fn driver(prog: impl AsRef<OsStr>, script: &str) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(prog);
    cmd.arg(format!(
        "{}/tests/agents/{script}",
        env!("CARGO_MANIFEST_DIR")
    ));
    cmd
}

/// Runs `cmd`, the driver of `who`, to its end within `secs`; the JSON
/// summary it printed last. A driver that fails, or prints none, fails the
/// test with its output.
pub async fn summary(cmd: &mut tokio::process::Command, who: &str, secs: u64) -> Value {
    let out = tokio::time::timeout(Duration::from_secs(secs), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{who} did not finish in {secs} s"))
        .expect("the driver starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{who} driver failed: {stderr}");
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    serde_json::from_str(line.unwrap_or(""))
        .unwrap_or_else(|_| panic!("{who} printed no summary: {stdout}\n{stderr}"))
}

/// The tools a summary's `tools` says the client ran: (name, args), in
/// the order it ran them.
pub fn ran_tools(report: &Value) -> Vec<(String, Value)> {
    report["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("").to_owned(),
                t["args"].clone(),
            )
        })
        .collect()
}
