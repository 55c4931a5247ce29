//! Codex (the OpenAI Codex CLI, unmodified), driven by
//! tests/agents/codex.mjs: where it is installed, a work directory, a run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

/// Where install.sh put the agents (a relative path is relative to the repo).
pub fn agents_dir() -> PathBuf {
    match std::env::var_os("CODEMODE_AGENTS_DIR") {
        Some(d) => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/codemode-agents"),
    }
}

/// Whether Codex can run here; under CI it must.
pub fn codex_ready() -> bool {
    super::needs::agent("Codex", &agents_dir().join("node/node_modules/.bin/codex"))
}

/// A fresh directory holding `files`, removed when dropped.
pub struct WorkDir(pub PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh work directory for `test` with `files` in it.
pub fn workdir(test: &str, files: &[(&str, &str)]) -> WorkDir {
    let dir = std::env::temp_dir().join(format!("cm-codex-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, content) in files {
        std::fs::write(dir.join(name), content).unwrap();
    }
    WorkDir(dir)
}

/// Runs tests/agents/codex.mjs against `base_url` (ending in `/v1`) in
/// `dir`; its JSON summary.
pub async fn run_codex(base_url: &str, dir: &Path, prompts: &[&str]) -> Value {
    let script = format!("{}/tests/agents/codex.mjs", env!("CARGO_MANIFEST_DIR"));
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(script)
        .env("AGENT_BASE_URL", base_url)
        .env("AGENT_DIR", dir)
        // A slug of Codex's model catalog, so it sends the tools it sends
        // for GPT-5 models (freeform apply_patch, tool_search).
        .env("AGENT_MODEL", "gpt-5.5")
        .env("AGENT_PROMPTS", json!(prompts).to_string())
        .env("AGENT_TIMEOUT_MS", "40000")
        .env("CODEMODE_AGENTS_DIR", agents_dir())
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .current_dir(dir)
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("codex did not finish in 60 s")
        .expect("the driver starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "codex driver failed: {stderr}");
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    serde_json::from_str(line.unwrap_or(""))
        .unwrap_or_else(|_| panic!("codex printed no summary: {stdout}\n{stderr}"))
}
