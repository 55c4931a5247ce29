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

impl std::ops::Deref for WorkDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

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

/// Asserts a code-mode request Codex made (through the proxy) offers the
/// model run_code alone among its functions, custom tools and namespaces.
pub fn sees_run_code_only(body: &Value) {
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["type"] == "function" || t["type"] == "custom" || t["type"] == "namespace")
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, vec!["run_code"], "the model sees run_code only");
}

/// A model whose program runs `cat a.txt` and `cat b.txt` through Codex's
/// exec_command and returns both outputs, then echoes what it is given.
pub fn two_commands_model() -> super::responses_model::ResponsesModel {
    use super::responses_model::{reasoning, run_code_call, ResponsesModel};
    let code = "const a = await tools.exec_command({cmd: 'cat a.txt'});\n\
                const b = await tools.exec_command({cmd: 'cat b.txt'});\n\
                return [a, b].join('\\n---\\n');";
    ResponsesModel::new([
        vec![reasoning("rs_1"), run_code_call("call_prog", code)],
        vec![json!({"type": "echo"})],
    ])
}
