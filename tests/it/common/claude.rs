//! Claude Code (unmodified), driven by tests/agents/claude.mjs: whether it
//! is installed, a work directory, a run.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::agent_driver::{driver, summary};
pub use super::codex::WorkDir;
use super::codex::{agent_workdir, agents_dir};

/// Whether Claude Code can run here; under CI it must.
pub fn claude_ready() -> bool {
    super::needs::agent("Claude Code", &claude_bin())
}

/// A fresh work directory for `test` with `files` in it.
pub fn workdir(test: &str, files: &[(&str, &str)]) -> WorkDir {
    agent_workdir("claude", test, files)
}

/// Runs tests/agents/claude.mjs against `base_url` (the server root, no
/// `/v1`) in `dir`, with `extra_env` for Claude Code; its JSON summary.
pub async fn run_claude(
    base_url: &str,
    dir: &Path,
    prompts: &[&str],
    extra_env: &[(&str, &str)],
) -> Value {
    let mut cmd = driver("node", "claude.mjs");
    cmd.env("AGENT_BASE_URL", base_url)
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
    summary(&mut cmd, "claude", 60).await
}

/// Where install.sh put the `claude` binary.
pub fn claude_bin() -> PathBuf {
    agents_dir().join("node/node_modules/.bin/claude")
}

/// Asserts a code-mode request Claude Code made (through the proxy)
/// offers the model run_code alone and carries the SDK in its system
/// prompt; that system prompt, as JSON text.
pub fn sees_run_code_and_the_sdk(body: &Value) -> String {
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t.get("type").is_none() || t["type"] == "custom")
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, vec!["run_code"], "the model sees run_code only");
    let system = body["system"].to_string();
    assert!(
        system.contains("declare const tools"),
        "the SDK is in system"
    );
    system
}
