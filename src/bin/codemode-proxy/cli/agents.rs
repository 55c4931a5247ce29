//! What each known agent reads to reach the proxy, and which credential
//! it needs when the provider refuses one.
//!
//! Checked against the agents' own documentation and source (versions in
//! `tests/agents/package.json`):
//! - Claude Code reads `ANTHROPIC_BASE_URL` (the server root: it appends
//!   `/v1/messages`) and sends its own API key (`x-api-key`) or its login's
//!   OAuth token (`authorization: Bearer`); the proxy forwards both.
//!   `ENABLE_TOOL_SEARCH` turns its tool search on or off (see
//!   [`claude_tool_search`]).
//! - Codex takes `-c key=value` overrides (TOML values) on its command
//!   line: a `model_providers` entry with `wire_api = "responses"` and
//!   `model_provider` naming it. `env_key` names the variable holding an
//!   API key; without one, `requires_openai_auth = true` makes Codex use
//!   its own login (`codex login`: ChatGPT or a stored key).
//! - opencode merges the JSON of `OPENCODE_CONFIG_CONTENT` over its
//!   configuration, last; a provider's `options.baseURL` moves its
//!   built-in `openai` and `anthropic` providers and keeps their keys.
//! - gemini-cli reads `GOOGLE_GEMINI_BASE_URL` (a root: it appends
//!   `/v1beta/models/...`, keeping a path prefix) and sends `GEMINI_API_KEY`
//!   as `x-goog-api-key`. With that variable set and no auth type in its
//!   settings it picks a "gateway" auth that a headless run refuses (exit
//!   41), so its settings must hold `security.auth.selectedType =
//!   "gemini-api-key"`; no variable or flag names that type or another
//!   settings file it honours (the system settings files count only when
//!   root owns them and every folder above them), so `run` hands it a home
//!   of its own, `GEMINI_CLI_HOME` (see [`gemini_home`]).

use std::ffi::{OsStr, OsString};
use std::path::Path;

use codemode_proxy::Mode;
use serde_json::{json, Value};

/// Codex's name for the provider the proxy adds.
pub const CODEX_PROVIDER: &str = "codemode";

/// opencode's inline configuration, merged over its files.
pub const OPENCODE_CONFIG_CONTENT: &str = "OPENCODE_CONFIG_CONTENT";

/// Claude Code's switch for its tool search: `ToolSearch`, tools declared
/// with `defer_loading`, `tool_reference` blocks.
pub const ENABLE_TOOL_SEARCH: &str = "ENABLE_TOOL_SEARCH";

/// What `run` sets [`ENABLE_TOOL_SEARCH`] to for Claude Code whose requests
/// get `mode`, when the user has not set it; `anthropic_api` says the
/// proxy's Anthropic upstream is Anthropic's own API.
///
/// - Native mode: the proxy is transparent, so Claude Code should search
///   its tools as it does talking to Anthropic directly. Claude Code 2.1.332
///   does so behind any base URL; earlier versions turned tool search off
///   behind one that is not Anthropic's unless the variable says `true`.
///   So `true` when the upstream is Anthropic's API, and nothing otherwise
///   (behind a gateway of the user's, Claude Code decides as it would
///   without the proxy).
/// - Code and both modes: `false`. The SDK shows every tool Claude Code
///   declares, compact where the tool set is large, with `tools.describe`
///   for the rest: that is the proxy's deferred loading. With tool search
///   on, Claude Code declares only the tools loaded so far, so a program
///   must run `ToolSearch` first and a later one call the tool, and every
///   tool loaded changes the SDK, which sits in `system`, ahead of the
///   whole conversation in the provider's cached prefix.
pub fn claude_tool_search(mode: Mode, anthropic_api: bool) -> Option<&'static str> {
    match mode {
        Mode::Native if anthropic_api => Some("true"),
        Mode::Native => None,
        Mode::Code | Mode::Both => Some("false"),
    }
}

/// The Gemini API's base URL, as Google's JavaScript SDK (`@google/genai`)
/// and gemini-cli read it.
pub const GOOGLE_GEMINI_BASE_URL: &str = "GOOGLE_GEMINI_BASE_URL";

/// The folder gemini-cli takes for the user's home (its `.gemini` is there).
pub const GEMINI_CLI_HOME: &str = "GEMINI_CLI_HOME";

/// gemini-cli's API key, sent as `x-goog-api-key`.
pub const GEMINI_API_KEY: &str = "GEMINI_API_KEY";

/// gemini-cli's name for "a Gemini API key" auth (`security.auth.selectedType`).
pub const GEMINI_AUTH_TYPE: &str = "gemini-api-key";

/// What gemini-cli gets for `GEMINI_API_KEY` when the user has none and the
/// proxy holds the operator's key (`CODEMODE_GEMINI_API_KEY`), which
/// replaces it: gemini-cli refuses to start without a key, and the
/// operator's own key never reaches the agent.
pub const GEMINI_KEY_PLACEHOLDER: &str = "codemode-proxy-sends-the-operators-key";

/// An agent the proxy knows how to point at itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agent {
    /// Claude Code (`claude`).
    Claude,
    /// The OpenAI Codex CLI (`codex`).
    Codex,
    /// opencode (`opencode`).
    Opencode,
    /// Google's Gemini CLI (`gemini`).
    Gemini,
}

/// The APIs whose refused credentials `run` names a remedy for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Chat Completions and Responses (OpenAI).
    OpenAi,
    /// Messages (Anthropic).
    Anthropic,
    /// The Gemini API (Google).
    Gemini,
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
            "gemini" => Some(Agent::Gemini),
            _ => None,
        }
    }

    /// The command's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Opencode => "opencode",
            Agent::Gemini => "gemini",
        }
    }

    /// What the user does when the provider of `api` refuses this agent's
    /// credential.
    pub fn credential_hint(self, api: Refused) -> &'static str {
        match (self, api) {
            (Agent::Gemini, _) => {
                "gemini-cli needs GEMINI_API_KEY (a Gemini API key; a Google login's Code Assist API does not go through the proxy), or CODEMODE_GEMINI_API_KEY for the proxy"
            }
            (Agent::Claude, _) => {
                "Claude Code needs ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), or a login: run `claude` and `/login`"
            }
            (Agent::Codex, _) => {
                "Codex needs OPENAI_API_KEY, or a login: `codex login` (a ChatGPT login also needs CODEMODE_UPSTREAM=https://chatgpt.com/backend-api/codex)"
            }
            (Agent::Opencode, Refused::Anthropic) => {
                "opencode needs ANTHROPIC_API_KEY, or a login: `opencode auth login` (anthropic)"
            }
            (Agent::Opencode, _) => {
                "opencode needs OPENAI_API_KEY, or a login: `opencode auth login` (openai)"
            }
        }
    }
}

/// What a refused credential means for a command that is no known agent.
pub fn generic_hint(api: Refused) -> &'static str {
    match api {
        Refused::Anthropic => {
            "set ANTHROPIC_API_KEY for the command, or CODEMODE_ANTHROPIC_API_KEY for the proxy"
        }
        Refused::OpenAi => {
            "set OPENAI_API_KEY for the command, or CODEMODE_UPSTREAM_API_KEY for the proxy"
        }
        Refused::Gemini => {
            "set GEMINI_API_KEY for the command, or CODEMODE_GEMINI_API_KEY for the proxy"
        }
    }
}

/// The proxy's base URLs for a child: `openai` ends in `/v1`,
/// `anthropic` is the root Anthropic SDKs append `/v1/...` to, and
/// `gemini` the root Google's JavaScript SDK appends `/v1beta/...` to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseUrls {
    /// `OPENAI_BASE_URL`.
    pub openai: String,
    /// `ANTHROPIC_BASE_URL`.
    pub anthropic: String,
    /// `GOOGLE_GEMINI_BASE_URL`.
    pub gemini: String,
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
            gemini: anthropic.clone(),
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

/// gemini-cli's settings for a run: the user's own (`own`, the text of
/// their `settings.json`; gemini-cli allows comments in it) with the
/// Gemini API key auth selected. Text that holds no JSON object gives the
/// auth alone (gemini-cli would refuse to start on it anyway).
pub fn gemini_settings(own: Option<&str>) -> String {
    let mut settings = own
        .and_then(|s| serde_json::from_str::<Value>(&without_json_comments(s)).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    set_path(
        &mut settings,
        &["security", "auth", "selectedType"],
        json!(GEMINI_AUTH_TYPE),
    );
    settings.to_string()
}

/// `text` with its `//` and `/* */` comments blanked out (strings kept),
/// as gemini-cli reads its settings.
fn without_json_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push(c);
                while let Some(c) = chars.next() {
                    out.push(c);
                    match c {
                        '\\' => out.extend(chars.next()),
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                while chars.next_if(|c| *c != '\n').is_some() {}
                out.push(' ');
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    out
}

/// Lays out gemini-cli's home for a run in `dir` (a new private folder,
/// which `GEMINI_CLI_HOME` names): `.gemini/settings.json` is a new
/// private file holding the user's own settings with the Gemini API key
/// auth selected ([`gemini_settings`]); every other entry of the user's
/// `.gemini` (their credentials, trusted folders, memory, commands,
/// extensions, history) and their `.agents` and `.env` are links to the
/// user's own, so the run sees them and what gemini-cli writes to them
/// lands there. `own_home` is the home gemini-cli would have used
/// (`GEMINI_CLI_HOME` when the user set one, else `HOME`). Nothing of the
/// user's is written.
pub fn gemini_home(dir: &Path, own_home: Option<&Path>) -> std::io::Result<()> {
    let gemini = dir.join(".gemini");
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(&gemini)?;
    let mut own_settings = None;
    if let Some(home) = own_home {
        let own = home.join(".gemini");
        match std::fs::read_dir(&own) {
            Ok(entries) => {
                for entry in entries {
                    let name = entry?.file_name();
                    if name == "settings.json" {
                        own_settings = std::fs::read_to_string(own.join(&name)).ok();
                    } else {
                        link(&own.join(&name), &gemini.join(&name))?;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        for name in [".agents", ".env"] {
            let theirs = home.join(name);
            if std::fs::symlink_metadata(&theirs).is_ok() {
                link(&theirs, &dir.join(name))?;
            }
        }
    }
    crate::cli::private_file::write_new(
        &gemini.join("settings.json"),
        gemini_settings(own_settings.as_deref()).as_bytes(),
    )
}

#[cfg(unix)]
fn link(target: &Path, at: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, at)
}

#[cfg(not(unix))]
fn link(_target: &Path, _at: &Path) -> std::io::Result<()> {
    Ok(())
}

/// What gemini-cli gets beside `GOOGLE_GEMINI_BASE_URL`: its home for the
/// run (`home`, laid out by [`gemini_home`]) and, when the user has no
/// `GEMINI_API_KEY` (`own_key`) but the proxy holds the operator's
/// (`operator_key`), a placeholder key gemini-cli accepts and the proxy
/// replaces.
pub fn gemini_env(home: &Path, own_key: bool, operator_key: bool) -> Vec<(&'static str, OsString)> {
    let mut env = vec![(GEMINI_CLI_HOME, home.as_os_str().to_owned())];
    if !own_key && operator_key {
        env.push((GEMINI_API_KEY, OsString::from(GEMINI_KEY_PLACEHOLDER)));
    }
    env
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
    fn claude_code_searches_its_tools_natively_and_not_under_code_mode() {
        assert_eq!(claude_tool_search(Mode::Native, true), Some("true"));
        assert_eq!(claude_tool_search(Mode::Native, false), None);
        for mode in [Mode::Code, Mode::Both] {
            for api in [true, false] {
                assert_eq!(claude_tool_search(mode, api), Some("false"));
            }
        }
    }

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
    fn gemini_reaches_the_proxys_root_and_is_known_by_name() {
        assert_eq!(
            Agent::of_program(OsStr::new("/usr/bin/gemini")),
            Some(Agent::Gemini)
        );
        assert_eq!(Agent::named("gemini"), Some(Agent::Gemini));
        assert_eq!(
            BaseUrls::new("http://127.0.0.1:9", None).gemini,
            "http://127.0.0.1:9"
        );
        assert_eq!(
            BaseUrls::new("http://127.0.0.1:9", Some("code")).gemini,
            "http://127.0.0.1:9/preset/code"
        );
    }

    #[test]
    fn gemini_settings_keep_the_users_own_and_select_the_api_key_auth() {
        let own = "{\n  // mine\n  \"model\": {\"name\": \"gemini-2.5-flash\"}, /* a // b */\n  \"ui\": {\"theme\": \"a//b /*c*/ \\\"d\"},\n  \"security\": {\"auth\": {\"selectedType\": \"oauth-personal\", \"enforcedType\": \"x\"}}\n}";
        let v: Value = serde_json::from_str(&gemini_settings(Some(own))).unwrap();
        assert_eq!(v["model"]["name"], "gemini-2.5-flash");
        assert_eq!(v["ui"]["theme"], "a//b /*c*/ \"d");
        assert_eq!(v["security"]["auth"]["selectedType"], "gemini-api-key");
        assert_eq!(v["security"]["auth"]["enforcedType"], "x");
        for none in [None, Some(""), Some("[1]"), Some("{broken")] {
            let v: Value = serde_json::from_str(&gemini_settings(none)).unwrap();
            assert_eq!(
                v,
                json!({"security": {"auth": {"selectedType": "gemini-api-key"}}}),
                "{none:?}"
            );
        }
    }

    #[test]
    fn gemini_gets_a_placeholder_key_only_when_the_proxy_holds_the_operators() {
        let home = Path::new("/tmp/h");
        let names = |own, operator| -> Vec<(&str, OsString)> { gemini_env(home, own, operator) };
        assert_eq!(names(false, false), vec![(GEMINI_CLI_HOME, home.into())]);
        assert_eq!(names(true, true), vec![(GEMINI_CLI_HOME, home.into())]);
        assert_eq!(
            names(false, true),
            vec![
                (GEMINI_CLI_HOME, home.into()),
                (GEMINI_API_KEY, GEMINI_KEY_PLACEHOLDER.into())
            ]
        );
    }

    #[cfg(unix)]
    #[test]
    fn gemini_home_links_the_users_own_and_copies_only_the_settings() {
        use std::os::unix::fs::PermissionsExt;
        let root = std::env::temp_dir().join(format!("cm-gemini-home-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (own, dir) = (root.join("own"), root.join("run"));
        std::fs::create_dir_all(own.join(".gemini/commands")).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        let settings = "{\"model\": {\"name\": \"m\"}}";
        std::fs::write(own.join(".gemini/settings.json"), settings).unwrap();
        std::fs::write(own.join(".gemini/trustedFolders.json"), "{}").unwrap();
        std::fs::write(own.join(".env"), "GEMINI_API_KEY=k\n").unwrap();
        gemini_home(&dir, Some(&own)).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.join(".gemini")), 0o700);
        let ours = dir.join(".gemini/settings.json");
        assert_eq!(mode(&ours), 0o600);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&ours).unwrap()).unwrap();
        assert_eq!(v["model"]["name"], "m");
        assert_eq!(v["security"]["auth"]["selectedType"], "gemini-api-key");
        for (at, target) in [
            (".gemini/trustedFolders.json", ".gemini/trustedFolders.json"),
            (".gemini/commands", ".gemini/commands"),
            (".env", ".env"),
        ] {
            assert_eq!(
                std::fs::read_link(dir.join(at)).unwrap(),
                own.join(target),
                "{at}"
            );
        }
        assert!(
            !dir.join(".agents").exists(),
            "only what the user has is linked"
        );
        assert_eq!(
            std::fs::read_to_string(own.join(".gemini/settings.json")).unwrap(),
            settings,
            "the user's own file is not written"
        );
        // Removing the run's home removes the links, never what they name.
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(own.join(".gemini/commands").is_dir());
        assert!(own.join(".env").is_file());
        // A user with no gemini-cli home yet gets the settings alone.
        let fresh = root.join("fresh");
        std::fs::create_dir_all(&fresh).unwrap();
        gemini_home(&fresh, Some(&root.join("nobody"))).unwrap();
        let names: Vec<_> = std::fs::read_dir(fresh.join(".gemini"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![OsString::from("settings.json")]);
        std::fs::remove_dir_all(&root).unwrap();
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
