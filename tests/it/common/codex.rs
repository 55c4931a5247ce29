//! Codex (the OpenAI Codex CLI, unmodified), driven by
//! tests/agents/codex.mjs: where it is installed, a work directory, a run.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

use super::agent_driver::{driver, summary};

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
    agent_workdir("codex", test, files)
}

/// A fresh work directory for `agent`'s `test` with `files` in it.
pub fn agent_workdir(agent: &str, test: &str, files: &[(&str, &str)]) -> WorkDir {
    let dir = std::env::temp_dir().join(format!("cm-{agent}-{}-{test}", std::process::id()));
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
    let mut cmd = driver("node", "codex.mjs");
    cmd.env("AGENT_BASE_URL", base_url)
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
    summary(&mut cmd, "codex", 60).await
}
