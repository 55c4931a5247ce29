//! What each known agent reads to reach the proxy, and which credential
//! it needs when the provider refuses one.
//!
//! Checked against the agents' own documentation and source (versions in
//! `tests/agents/package.json`):
//! - Claude Code reads `ANTHROPIC_BASE_URL` (the server root: it appends
//!   `/v1/messages`) and sends its own API key (`x-api-key`) or its login's
//!   OAuth token (`authorization: Bearer`); the proxy forwards both.
//! - Codex takes `-c key=value` overrides (TOML values) on its command
//!   line: a `model_providers` entry with `wire_api = "responses"` and
//!   `model_provider` naming it. `env_key` names the variable holding an
//!   API key; without one, `requires_openai_auth = true` makes Codex use
//!   its own login (`codex login`: ChatGPT or a stored key).
//! - opencode merges the JSON of `OPENCODE_CONFIG_CONTENT` over its
//!   configuration, last; a provider's `options.baseURL` moves its
//!   built-in `openai` and `anthropic` providers and keeps their keys.

use std::ffi::{OsStr, OsString};
use std::path::Path;

use serde_json::{json, Value};

/// Codex's name for the provider the proxy adds.
pub const CODEX_PROVIDER: &str = "codemode";

/// opencode's inline configuration, merged over its files.
pub const OPENCODE_CONFIG_CONTENT: &str = "OPENCODE_CONFIG_CONTENT";

/// An agent the proxy knows how to point at itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agent {
    /// Claude Code (`claude`).
    Claude,
    /// The OpenAI Codex CLI (`codex`).
    Codex,
    /// opencode (`opencode`).
    Opencode,
}

impl Agent {
    /// The agent a command runs, by its program's file name.
    pub fn of_program(program: &OsStr) -> Option<Agent> {
        let name = Path::new(program).file_name()?.to_str()?;
        Agent::named(name)
    }

    /// The agent called `name` on the command line of `configure`.
    pub fn named(name: &str) -> Option<Agent> {
        match name {
            "claude" => Some(Agent::Claude),
            "codex" => Some(Agent::Codex),
            "opencode" => Some(Agent::Opencode),
            _ => None,
        }
    }

    /// The command's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Opencode => "opencode",
        }
    }

    /// What the user does when the provider refuses this agent's
    /// credential on `route` (`anthropic` or `openai` routes).
    pub fn credential_hint(self, anthropic: bool) -> &'static str {
        match (self, anthropic) {
            (Agent::Claude, _) => {
                "Claude Code needs ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), or a login: run `claude` and `/login`"
            }
            (Agent::Codex, _) => {
                "Codex needs OPENAI_API_KEY, or a login: `codex login` (a ChatGPT login also needs CODEMODE_UPSTREAM=https://chatgpt.com/backend-api/codex)"
            }
            (Agent::Opencode, true) => {
                "opencode needs ANTHROPIC_API_KEY, or a login: `opencode auth login` (anthropic)"
            }
            (Agent::Opencode, false) => {
                "opencode needs OPENAI_API_KEY, or a login: `opencode auth login` (openai)"
            }
        }
    }
}

/// What a refused credential means for a command that is no known agent.
pub fn generic_hint(anthropic: bool) -> &'static str {
    if anthropic {
        "set ANTHROPIC_API_KEY for the command, or CODEMODE_ANTHROPIC_API_KEY for the proxy"
    } else {
        "set OPENAI_API_KEY for the command, or CODEMODE_UPSTREAM_API_KEY for the proxy"
    }
}

/// The proxy's two base URLs for a child: `openai` ends in `/v1`,
/// `anthropic` is the root Anthropic SDKs append `/v1/...` to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseUrls {
    /// `OPENAI_BASE_URL`.
    pub openai: String,
    /// `ANTHROPIC_BASE_URL`.
    pub anthropic: String,
}

impl BaseUrls {
    /// The URLs of a proxy at `root` (`http://127.0.0.1:PORT`, no slash
    /// at the end), through `/preset/NAME` when a preset is chosen.
    pub fn new(root: &str, preset: Option<&str>) -> BaseUrls {
        let anthropic = match preset {
            Some(p) => format!("{root}/preset/{p}"),
            None => root.to_owned(),
        };
        BaseUrls {
            openai: format!("{anthropic}/v1"),
            anthropic,
        }
    }
}

/// Codex's `-c` overrides for a provider at `urls`: Codex parses each
/// value as TOML, and a JSON string is a TOML basic string.
pub fn codex_overrides(urls: &BaseUrls, api_key_var: Option<&str>) -> Vec<OsString> {
    let p = CODEX_PROVIDER;
    let mut pairs = vec![
        ("model_provider".to_owned(), json!(p)),
        (format!("model_providers.{p}.name"), json!(p)),
        (format!("model_providers.{p}.base_url"), json!(urls.openai)),
        (format!("model_providers.{p}.wire_api"), json!("responses")),
    ];
    match api_key_var {
        Some(var) => pairs.push((format!("model_providers.{p}.env_key"), json!(var))),
        None => pairs.push((
            format!("model_providers.{p}.requires_openai_auth"),
            json!(true),
        )),
    }
    pairs
        .into_iter()
        .flat_map(|(k, v)| [OsString::from("-c"), OsString::from(format!("{k}={v}"))])
        .collect()
}

/// Codex's own model catalog with every model set to direct tools, so
/// the proxy's Code Mode applies: `tool_mode = "direct"` gives the model
/// ordinary tools, `use_responses_lite = false` declares them in `tools`
/// (on its default model Codex runs its own code mode, `exec`, and
/// declares its tools in an `additional_tools` input item). Read from the
/// installed Codex itself (`codex debug models --bundled`), so it holds
/// what that version ships; written to `path` as a new private file,
/// which `model_catalog_json` names.
pub fn codex_direct_catalog(
    program: &std::ffi::OsStr,
    path: &std::path::Path,
) -> Result<(), String> {
    let out = std::process::Command::new(program)
        .args(["debug", "models", "--bundled"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("`codex debug models --bundled` did not start: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`codex debug models --bundled` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut catalog: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("`codex debug models --bundled` printed no catalog: {e}"))?;
    let Some(models) = catalog.get_mut("models").and_then(Value::as_array_mut) else {
        return Err("Codex's model catalog has no `models` list".into());
    };
    for model in models.iter_mut().filter_map(Value::as_object_mut) {
        model.insert("tool_mode".into(), json!("direct"));
        model.insert("use_responses_lite".into(), json!(false));
    }
    crate::cli::private_file::write_new(path, catalog.to_string().as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The `-c` override naming a model catalog file.
pub fn codex_catalog_override(path: &std::path::Path) -> Vec<OsString> {
    let value = json!(path.to_string_lossy());
    vec![
        OsString::from("-c"),
        OsString::from(format!("model_catalog_json={value}")),
    ]
}

/// opencode's providers moved to the proxy, merged into `existing` (the
/// user's own `OPENCODE_CONFIG_CONTENT`, when set and a JSON object).
pub fn opencode_config(urls: &BaseUrls, existing: Option<&str>) -> String {
    let mut config = existing
        .and_then(|s| serde_json::from_str::<Value>(s).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    for provider in ["openai", "anthropic"] {
        set_path(
            &mut config,
            &["provider", provider, "options", "baseURL"],
            json!(urls.openai),
        );
    }
    config.to_string()
}

/// Sets `value` at `path` in `root`, making objects on the way (and
/// replacing a non-object that stands where one must be).
pub fn set_path(root: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = root;
    for key in parents {
        if !at.is_object() {
            *at = json!({});
        }
        let Value::Object(map) = at else { return };
        at = map.entry(*key).or_insert_with(|| json!({}));
    }
    if !at.is_object() {
        *at = json!({});
    }
    if let Value::Object(map) = at {
        map.insert((*last).to_owned(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_are_known_by_their_program_file_name() {
        assert_eq!(
            Agent::of_program(OsStr::new("/usr/local/bin/claude")),
            Some(Agent::Claude)
        );
        assert_eq!(Agent::of_program(OsStr::new("codex")), Some(Agent::Codex));
        assert_eq!(Agent::of_program(OsStr::new("sh")), None);
    }

    #[test]
    fn a_preset_moves_both_base_urls_under_its_path() {
        let urls = BaseUrls::new("http://127.0.0.1:9", Some("code"));
        assert_eq!(urls.openai, "http://127.0.0.1:9/preset/code/v1");
        assert_eq!(urls.anthropic, "http://127.0.0.1:9/preset/code");
    }

    #[test]
    fn codex_overrides_name_a_responses_provider() {
        let urls = BaseUrls::new("http://127.0.0.1:9", None);
        let args: Vec<String> = codex_overrides(&urls, Some("OPENAI_API_KEY"))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert!(args.contains(&r#"model_provider="codemode""#.to_owned()));
        assert!(args
            .contains(&r#"model_providers.codemode.base_url="http://127.0.0.1:9/v1""#.to_owned()));
        assert!(args.contains(&r#"model_providers.codemode.wire_api="responses""#.to_owned()));
        assert!(args.contains(&r#"model_providers.codemode.env_key="OPENAI_API_KEY""#.to_owned()));
    }

    #[test]
    fn opencode_config_keeps_the_users_own_inline_config() {
        let urls = BaseUrls::new("http://127.0.0.1:9", None);
        let merged = opencode_config(
            &urls,
            Some(r#"{"lsp":false,"provider":{"openai":{"models":{}}}}"#),
        );
        let v: Value = serde_json::from_str(&merged).unwrap();
        assert_eq!(v["lsp"], false);
        assert_eq!(v["provider"]["openai"]["models"], json!({}));
        assert_eq!(
            v["provider"]["anthropic"]["options"]["baseURL"],
            "http://127.0.0.1:9/v1"
        );
    }
}
