//! Running a driver of tests/agents (a real agent or SDK client behind a
//! small script): its command, the JSON summary it prints last, and the
//! tools that summary says the client ran.

use std::ffi::OsStr;
use std::time::Duration;

use serde_json::{json, Value};

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

/// Every request `server` received (method, path, query, headers, body),
/// as a traffic test reads them and as JSON lines for [`dump_traffic`].
pub async fn traffic(server: &wiremock::MockServer) -> Vec<Value> {
    let mut out = Vec::new();
    for r in server.received_requests().await.unwrap_or_default() {
        let mut headers = serde_json::Map::new();
        for (k, v) in &r.headers {
            headers.insert(
                k.as_str().into(),
                json!(String::from_utf8_lossy(v.as_bytes())),
            );
        }
        let body = serde_json::from_slice(&r.body)
            .unwrap_or_else(|_| json!(String::from_utf8_lossy(&r.body)));
        out.push(json!({"method": r.method.as_str(), "path": r.url.path(),
                        "query": r.url.query(), "headers": headers, "body": body}));
    }
    out
}

/// Appends `test`'s `requests` to `$<AGENT>_TRAFFIC_DUMP/<agent>.jsonl`
/// when that variable is set: a record of what `agent` really sends.
pub fn dump_traffic(agent: &str, test: &str, requests: &[Value]) {
    let var = format!("{}_TRAFFIC_DUMP", agent.to_uppercase());
    let Some(dir) = std::env::var_os(var) else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let text: String = requests
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r["test"] = json!(test);
            format!("{r}\n")
        })
        .collect();
    use std::io::Write;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{agent}.jsonl")))
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .unwrap();
}

/// Keeps the caller's own keys, endpoints and models out of a driver's
/// environment: Google's, `AGENT_MODEL`, and `more`.
pub fn without_callers_env(cmd: &mut tokio::process::Command, more: &[&str]) {
    let google = [
        "GOOGLE_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_GEMINI_BASE_URL",
        "AGENT_MODEL",
    ];
    for k in google.iter().chain(more) {
        cmd.env_remove(k);
    }
}
