//! Claude Code (unmodified), driven by tests/agents/claude.mjs: whether it
//! is installed, a work directory, a run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::codex::agents_dir;
pub use super::codex::WorkDir;

/// Whether Claude Code can run here; under CI it must.
pub fn claude_ready() -> bool {
    super::needs::agent("Claude Code", &claude_bin())
}

/// A fresh work directory for `test` with `files` in it.
pub fn workdir(test: &str, files: &[(&str, &str)]) -> WorkDir {
    let dir = std::env::temp_dir().join(format!("cm-claude-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, content) in files {
        std::fs::write(dir.join(name), content).unwrap();
    }
    WorkDir(dir)
}

/// Runs tests/agents/claude.mjs against `base_url` (the server root, no
/// `/v1`) in `dir`, with `extra_env` for Claude Code; its JSON summary.
pub async fn run_claude(
    base_url: &str,
    dir: &Path,
    prompts: &[&str],
    extra_env: &[(&str, &str)],
) -> Value {
    let script = format!("{}/tests/agents/claude.mjs", env!("CARGO_MANIFEST_DIR"));
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(script)
        .env("AGENT_BASE_URL", base_url)
        .env("AGENT_DIR", dir)
        .env("AGENT_MODEL", "claude-sonnet-4-5")
        .env("AGENT_PROMPTS", json!(prompts).to_string())
        .env("AGENT_TIMEOUT_MS", "40000")
        .env("CODEMODE_AGENTS_DIR", agents_dir())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env_remove("ANTHROPIC_BASE_URL")
        .current_dir(dir)
        .kill_on_drop(true);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("claude did not finish in 60 s")
        .expect("the driver starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "claude driver failed: {stderr}");
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    serde_json::from_str(line.unwrap_or(""))
        .unwrap_or_else(|_| panic!("claude printed no summary: {stdout}\n{stderr}"))
}

/// Where install.sh put the `claude` binary.
pub fn claude_bin() -> PathBuf {
    agents_dir().join("node/node_modules/.bin/claude")
}
