//! `codemode-proxy configure <claude|codex|opencode|gemini> [--url URL] [--undo]`:
//! points an agent's own settings file at a running proxy.
//!
//! Only the keys the proxy owns change (Claude Code's
//! `env.ANTHROPIC_BASE_URL`; Codex's `model_provider` and
//! `[model_providers.codemode]`; opencode's `baseURL` of its `openai` and
//! `anthropic` providers; gemini-cli's `security.auth.selectedType`, since
//! its settings hold no base URL: it reads `GOOGLE_GEMINI_BASE_URL` from
//! the environment alone, and `configure` prints the line for the
//! user's shell). The file as it was is kept next to it
//! (`<file>.codemode-backup`, or `<file>.codemode-absent` when there was
//! none) the first time, and `--undo` puts those bytes back.
//!
//! The settings may hold keys: the file keeps its mode (a new one is
//! 0600), a link keeps pointing at the file it names (which is the one
//! written), and the JSON agents' files are edited as text, so numbers and
//! layout stay exactly as written (docs/security.md).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{json, Value};

use super::agents::{self, Agent};
use super::{json_text, private_file};

/// Where a proxy runs when `--url` is not given (`CODEMODE_LISTEN`'s default).
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";

/// What `configure` was asked to do.
#[derive(Debug, PartialEq, Eq)]
pub struct ConfigureArgs {
    /// The agent whose settings change.
    pub agent: Agent,
    /// The proxy's root URL (no `/v1`).
    pub url: String,
    /// Restore the file as it was before the first `configure`.
    pub undo: bool,
}

/// The agent's settings file, under the directories it reads: `$HOME`,
/// and `CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `XDG_CONFIG_HOME` or
/// `GEMINI_CLI_HOME` when set.
pub fn settings_path(agent: Agent, env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let set = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = set("HOME");
    Some(match agent {
        Agent::Claude => set("CLAUDE_CONFIG_DIR")
            .or_else(|| Some(home?.join(".claude")))?
            .join("settings.json"),
        Agent::Codex => set("CODEX_HOME")
            .or_else(|| Some(home?.join(".codex")))?
            .join("config.toml"),
        Agent::Opencode => set("XDG_CONFIG_HOME")
            .or_else(|| Some(home?.join(".config")))?
            .join("opencode/opencode.json"),
        Agent::Gemini => set(agents::GEMINI_CLI_HOME)
            .or(home)?
            .join(".gemini/settings.json"),
    })
}

/// Runs `configure`; prints what changed.
pub fn configure(args: ConfigureArgs) -> ExitCode {
    let Some(path) = settings_path(args.agent, |k| std::env::var(k).ok()) else {
        eprintln!("codemode-proxy: HOME is not set, so the settings file cannot be found");
        return ExitCode::from(2);
    };
    let done = if args.undo {
        undo(&path).map(|mut lines| {
            if args.agent == Agent::Gemini {
                lines.push(format!(
                    "  and remove `export {}=...` from your shell profile if you added it",
                    agents::GOOGLE_GEMINI_BASE_URL
                ));
            }
            lines
        })
    } else {
        // The variable holding the agent's API key, when it is set.
        let key = match args.agent {
            Agent::Gemini => agents::GEMINI_API_KEY,
            _ => "OPENAI_API_KEY",
        };
        let key_var = std::env::var_os(key).filter(|v| !v.is_empty()).map(|_| key);
        let catalog = match args.agent {
            Agent::Codex => codex_catalog(&path),
            _ => None,
        };
        apply(args.agent, &path, &args.url, key_var, catalog.as_deref())
    };
    match done {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("codemode-proxy: {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}

/// Codex's model catalog with direct tools for every model, written next
/// to its config (`codemode-models.json`), so the proxy's Code Mode runs on
/// Codex's default model too (docs/run.md); `None`, saying why, when the
/// `codex` on PATH cannot print its catalog.
fn codex_catalog(config: &Path) -> Option<PathBuf> {
    let path = catalog_of(config);
    let _ = std::fs::remove_file(&path);
    match agents::codex_direct_catalog(std::ffi::OsStr::new("codex"), &path) {
        Ok(()) => Some(path),
        Err(e) => {
            println!(
                "codex: its models keep their own tool mode ({e}); on Codex's default model \
                 that is Codex's own code mode, which the proxy respects"
            );
            None
        }
    }
}

/// Where `configure codex` keeps the catalog it writes.
fn catalog_of(config: &Path) -> PathBuf {
    config.with_file_name("codemode-models.json")
}

fn backup_of(path: &Path) -> PathBuf {
    sibling(path, ".codemode-backup")
}

fn absent_marker_of(path: &Path) -> PathBuf {
    sibling(path, ".codemode-absent")
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// The file `configure` edits at `path`: a link's target (a settings file
/// kept with dotfiles), so the link stays a link. A link to a file not yet
/// made names where to make it.
fn resolve(path: &Path) -> Result<PathBuf, String> {
    let mut at = path.to_owned();
    // As many hops as the kernel follows before it calls it a loop.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target =
                    std::fs::read_link(&at).map_err(|e| format!("cannot read the link: {e}"))?;
                at = match at.parent() {
                    Some(dir) => dir.join(target),
                    None => target,
                };
            }
            _ => return Ok(at),
        }
    }
    Err("its links loop; edit it by hand".into())
}

/// Writes the proxy's keys into the file at `path` (through a link); the
/// lines to print. The file, and its backup, keep the mode the file had (a
/// settings file holding keys stays 0600); a new one is 0600. `key_var`
/// names the agent's API key variable when it is set (Codex's `env_key`;
/// gemini-cli is told when it needs one).
pub fn apply(
    agent: Agent,
    path: &Path,
    url: &str,
    key_var: Option<&str>,
    catalog: Option<&Path>,
) -> Result<Vec<String>, String> {
    let target = resolve(path)?;
    let old = match std::fs::read(&target) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    let mode = match &old {
        Some(_) => private_file::mode_of(&target).map_err(|e| format!("cannot read it: {e}"))?,
        None => private_file::PRIVATE,
    };
    let text = match &old {
        Some(bytes) => {
            Some(std::str::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_owned())?)
        }
        None => None,
    };
    let (new, changes) = match agent {
        Agent::Claude => edit_claude(text, url)?,
        Agent::Codex => edit_codex(text, url, key_var, catalog)?,
        Agent::Opencode => edit_opencode(text, url)?,
        Agent::Gemini => edit_gemini(text)?,
    };
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create its directory: {e}"))?;
    }
    let backup = backup_of(&target);
    let absent = absent_marker_of(&target);
    let mut lines = vec![format!("{}: {}", agent.as_str(), path.display())];
    if target != path {
        lines.push(format!("  (a link: writing {})", target.display()));
    }
    lines.extend(changes.into_iter().map(|c| format!("  {c}")));
    if backup.exists() || absent.exists() {
        lines.push("  backup kept from the first configure".into());
    } else {
        match &old {
            Some(bytes) => {
                private_file::write_new_with_mode(&backup, bytes, mode)
                    .map_err(|e| format!("cannot back it up: {e}"))?;
                lines.push(format!("  backup: {}", backup.display()));
            }
            None => {
                private_file::write_new(&absent, b"")
                    .map_err(|e| format!("cannot note that it was absent: {e}"))?;
                lines.push("  (the file was new; --undo removes it)".into());
            }
        }
    }
    // A whole new file, renamed over the old one: never half a file, and
    // never readable by more than the old one was.
    let tmp = sibling(&target, ".codemode-tmp");
    let written = remove_if_there(&tmp)
        .and_then(|()| private_file::write_new_with_mode(&tmp, new.as_bytes(), mode))
        .and_then(|()| std::fs::rename(&tmp, &target));
    written.map_err(|e| format!("cannot write it: {e}"))?;
    lines.push(format!(
        "  undo: codemode-proxy configure {} --undo",
        agent.as_str()
    ));
    if agent == Agent::Gemini {
        lines.extend(gemini_environment(url, key_var.is_some()));
    }
    Ok(lines)
}

/// What the user adds to their shell for gemini-cli, whose settings hold no
/// base URL: `GOOGLE_GEMINI_BASE_URL` (the proxy's root; gemini-cli appends
/// `/v1beta/...`), and a `GEMINI_API_KEY` when none is set.
pub fn gemini_environment(url: &str, has_key: bool) -> Vec<String> {
    let mut lines = vec![
        "gemini-cli reads its base URL from the environment only; add to your shell profile:"
            .to_owned(),
        format!("  export {}={url}", agents::GOOGLE_GEMINI_BASE_URL),
    ];
    if !has_key {
        lines.push(format!(
            "  export {}=...   # your Gemini API key; any value when the proxy holds CODEMODE_GEMINI_API_KEY",
            agents::GEMINI_API_KEY
        ));
    }
    lines
}

fn remove_if_there(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Puts back the file as it was before the first `configure`: its bytes
/// and its mode (the backup was written with the mode the file had).
pub fn undo(path: &Path) -> Result<Vec<String>, String> {
    let target = resolve(path)?;
    // The catalog `configure codex` wrote is its own: it goes too.
    if path.file_name().is_some_and(|n| n == "config.toml") {
        let _ = std::fs::remove_file(catalog_of(&target));
    }
    let backup = backup_of(&target);
    let absent = absent_marker_of(&target);
    if backup.exists() {
        std::fs::rename(&backup, &target).map_err(|e| format!("cannot restore it: {e}"))?;
        return Ok(vec![format!(
            "{}: restored from {}",
            path.display(),
            backup.display()
        )]);
    }
    if absent.exists() {
        remove_if_there(&target).map_err(|e| format!("cannot remove it: {e}"))?;
        let _ = std::fs::remove_file(&absent);
        return Ok(vec![format!(
            "{}: removed (it did not exist before configure)",
            path.display()
        )]);
    }
    Err(format!(
        "nothing to undo: no {} next to it",
        backup.display()
    ))
}

fn shown(v: Option<&Value>) -> String {
    v.map_or_else(|| "unset".to_owned(), Value::to_string)
}

/// Claude Code: `env.ANTHROPIC_BASE_URL` in settings.json, the rest of
/// the text as it was.
pub fn edit_claude(text: Option<&str>, url: &str) -> Result<(String, Vec<String>), String> {
    let (new, was) = json_text::set_string(text, &["env", "ANTHROPIC_BASE_URL"], url)?;
    let change = format!(
        "env.ANTHROPIC_BASE_URL: {} -> {}",
        shown(was.as_ref()),
        json!(url)
    );
    Ok((new, vec![change]))
}

/// gemini-cli: `security.auth.selectedType = "gemini-api-key"` in
/// settings.json (the Gemini API with a key, the API the proxy speaks; a
/// base URL with no auth type selected makes gemini-cli pick a "gateway"
/// auth that it then refuses), the rest of the text as it was.
pub fn edit_gemini(text: Option<&str>) -> Result<(String, Vec<String>), String> {
    let path = ["security", "auth", "selectedType"];
    let (new, was) = json_text::set_string(text, &path, agents::GEMINI_AUTH_TYPE)?;
    let change = format!(
        "security.auth.selectedType: {} -> {}",
        shown(was.as_ref()),
        json!(agents::GEMINI_AUTH_TYPE)
    );
    Ok((new, vec![change]))
}

/// opencode: `provider.openai` and `provider.anthropic` `options.baseURL`,
/// the rest of the text as it was.
pub fn edit_opencode(text: Option<&str>, url: &str) -> Result<(String, Vec<String>), String> {
    let base = format!("{url}/v1");
    let mut text = text.map(str::to_owned);
    let mut changes = Vec::new();
    for provider in ["openai", "anthropic"] {
        let path = ["provider", provider, "options", "baseURL"];
        let (new, was) = json_text::set_string(text.as_deref(), &path, &base)?;
        text = Some(new);
        changes.push(format!(
            "provider.{provider}.options.baseURL: {} -> {}",
            shown(was.as_ref()),
            json!(base)
        ));
    }
    Ok((text.unwrap_or_default(), changes))
}

/// Codex: `model_provider` and `[model_providers.codemode]` in config.toml,
/// the rest of the document (comments, order) kept as it was.
pub fn edit_codex(
    text: Option<&str>,
    url: &str,
    key_var: Option<&str>,
    catalog: Option<&Path>,
) -> Result<(String, Vec<String>), String> {
    use toml_edit::{value, DocumentMut, Item, Table};
    let mut doc: DocumentMut = text
        .unwrap_or("")
        .parse()
        .map_err(|e| format!("it is not valid TOML ({e}); edit it by hand"))?;
    let p = agents::CODEX_PROVIDER;
    let was = doc
        .get("model_provider")
        .and_then(Item::as_str)
        .map_or_else(|| "unset".to_owned(), |s| format!("{s:?}"));
    doc["model_provider"] = value(p);
    if !doc.contains_key("model_providers") {
        let mut t = Table::new();
        t.set_implicit(true);
        doc["model_providers"] = Item::Table(t);
    }
    let providers = doc["model_providers"]
        .as_table_mut()
        .ok_or("`model_providers` is not a table; edit it by hand")?;
    let mut t = Table::new();
    t["name"] = value(p);
    t["base_url"] = value(format!("{url}/v1"));
    t["wire_api"] = value("responses");
    let auth = match key_var {
        Some(var) => {
            t["env_key"] = value(var);
            format!("env_key = {var:?}")
        }
        None => {
            t["requires_openai_auth"] = value(true);
            "requires_openai_auth = true (Codex's own login)".to_owned()
        }
    };
    providers.insert(p, Item::Table(t));
    let mut changes = vec![
        format!("model_provider: {was} -> {p:?}"),
        format!("[model_providers.{p}]: base_url = \"{url}/v1\", wire_api = \"responses\", {auth}"),
    ];
    if let Some(catalog) = catalog {
        let shown = catalog.to_string_lossy().into_owned();
        doc["model_catalog_json"] = value(shown.as_str());
        changes.push(format!(
            "model_catalog_json = {shown:?} (every model with direct tools, for the proxy's Code Mode)"
        ));
    }
    Ok((doc.to_string(), changes))
}

/// `--url` as the proxy's root: `http(s)://host:port[/preset/NAME]`, no
/// trailing `/` or `/v1`.
pub fn normalize_url(url: &str) -> Result<String, String> {
    let trimmed = url.trim().trim_end_matches('/');
    let root = trimmed.strip_suffix("/v1").unwrap_or(trimmed);
    if !(root.starts_with("http://") || root.starts_with("https://")) || root.contains(' ') {
        return Err(format!(
            "--url `{url}` is not an http(s) URL such as {DEFAULT_URL}"
        ));
    }
    Ok(root.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_paths_honour_the_agents_own_directory_variables() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let home = env(&[("HOME", "/h")]);
        assert_eq!(
            settings_path(Agent::Claude, home).unwrap(),
            Path::new("/h/.claude/settings.json")
        );
        assert_eq!(
            settings_path(Agent::Codex, env(&[("HOME", "/h"), ("CODEX_HOME", "/c")])).unwrap(),
            Path::new("/c/config.toml")
        );
        assert_eq!(
            settings_path(Agent::Opencode, env(&[("XDG_CONFIG_HOME", "/x")])).unwrap(),
            Path::new("/x/opencode/opencode.json")
        );
        assert_eq!(
            settings_path(Agent::Gemini, env(&[("HOME", "/h")])).unwrap(),
            Path::new("/h/.gemini/settings.json")
        );
        assert_eq!(
            settings_path(
                Agent::Gemini,
                env(&[("HOME", "/h"), ("GEMINI_CLI_HOME", "/g")])
            )
            .unwrap(),
            Path::new("/g/.gemini/settings.json")
        );
    }

    #[test]
    fn gemini_edit_selects_the_api_key_auth_and_keeps_the_rest() {
        let old = "{\n  \"security\": {\"auth\": {\"selectedType\": \"oauth-personal\"}},\n  \"model\": {\"name\": \"gemini-2.5-pro\"}\n}\n";
        let (new, changes) = edit_gemini(Some(old)).unwrap();
        assert_eq!(
            new,
            old.replace("oauth-personal", "gemini-api-key"),
            "only the value changes"
        );
        assert_eq!(
            changes,
            vec!["security.auth.selectedType: \"oauth-personal\" -> \"gemini-api-key\""]
        );
        let lines = gemini_environment("http://127.0.0.1:8080/preset/code", false);
        assert!(
            lines
                .iter()
                .any(|l| l.trim()
                    == "export GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8080/preset/code")
        );
        assert!(lines.iter().any(|l| l.contains("export GEMINI_API_KEY=")));
        assert!(!gemini_environment("http://h", true)
            .iter()
            .any(|l| l.contains("GEMINI_API_KEY")));
    }

    #[test]
    fn codex_edit_keeps_comments_and_other_providers() {
        let old = "# mine\nmodel = \"gpt-5.5\"\nmodel_provider = \"openai\"\n\n[model_providers.other]\nbase_url = \"http://x\"\n";
        let (new, _) = edit_codex(Some(old), "http://127.0.0.1:8080", None, None).unwrap();
        assert!(
            new.starts_with("# mine\nmodel = \"gpt-5.5\"\nmodel_provider = \"codemode\"\n"),
            "{new}"
        );
        assert!(
            new.contains("[model_providers.other]\nbase_url = \"http://x\""),
            "{new}"
        );
        assert!(new.contains("[model_providers.codemode]"), "{new}");
        assert!(new.contains("requires_openai_auth = true"), "{new}");
    }

    #[test]
    fn urls_lose_a_trailing_v1() {
        assert_eq!(normalize_url("http://h:1/v1/").unwrap(), "http://h:1");
        assert!(normalize_url("h:1").is_err());
    }
}
