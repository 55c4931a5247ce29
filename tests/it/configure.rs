//! `codemode-proxy configure <agent>` and `--undo`, through the real
//! binary, on settings files in a temp HOME that hold keys of their own:
//! those keys survive, and undo restores the file byte for byte.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

struct Home(PathBuf);

impl Home {
    fn new(test: &str) -> Home {
        let dir = std::env::temp_dir().join(format!("cm-configure-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Home(dir)
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.0.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `codemode-proxy configure ARGS` with only PATH, HOME and `vars` set.
fn configure(home: &Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_codemode-proxy"));
    cmd.arg("configure")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the binary starts");
    assert!(
        out.status.success(),
        "configure {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn configure_claude_keeps_unrelated_keys_and_undo_restores_the_bytes() {
    let home = Home::new("claude");
    // Tabs and a key order of the user's own: undo must give these bytes back.
    let original = "{\n\t\"model\": \"opus\",\n\t\"env\": {\"FOO\": \"1\"},\n\t\"permissions\": {\"allow\": [\"Bash(ls)\"]}\n}\n";
    let path = home.write(".claude/settings.json", original);
    let out = configure(&home.0, &["claude", "--url", "http://127.0.0.1:9999"], &[]);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("env.ANTHROPIC_BASE_URL: unset -> \"http://127.0.0.1:9999\""),
        "it prints what it changed: {printed}"
    );
    let now: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(now["env"]["ANTHROPIC_BASE_URL"], "http://127.0.0.1:9999");
    assert_eq!(now["env"]["FOO"], "1");
    assert_eq!(now["model"], "opus");
    assert_eq!(now["permissions"]["allow"][0], "Bash(ls)");
    // A second configure keeps the first backup: undo goes back to the start.
    configure(&home.0, &["claude", "--url", "http://127.0.0.1:7777"], &[]);
    configure(&home.0, &["claude", "--undo"], &[]);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
    assert_eq!(dir_names(&home.0.join(".claude")), vec!["settings.json"]);
}

#[test]
fn configure_codex_keeps_comments_and_other_providers_and_undo_restores_the_bytes() {
    let home = Home::new("codex");
    let codex_home = home.0.join("codex-home");
    let original = "# my settings\nmodel = \"gpt-5.5\"\nmodel_provider = \"mine\"\n\n[model_providers.mine]\nname = \"mine\"\nbase_url = \"https://gw.example/v1\"\n\n[tui]\nnotifications = true\n";
    let path = home.write("codex-home/config.toml", original);
    let vars = [("CODEX_HOME", codex_home.to_str().unwrap())];
    let out = configure(&home.0, &["codex"], &vars);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("model_provider: \"mine\" -> \"codemode\""),
        "{printed}"
    );
    let now = std::fs::read_to_string(&path).unwrap();
    let doc: toml::Table = now.parse().unwrap();
    assert_eq!(doc["model_provider"].as_str(), Some("codemode"));
    let ours = &doc["model_providers"]["codemode"];
    assert_eq!(ours["base_url"].as_str(), Some("http://127.0.0.1:8080/v1"));
    assert_eq!(ours["wire_api"].as_str(), Some("responses"));
    assert_eq!(
        doc["model_providers"]["mine"]["base_url"].as_str(),
        Some("https://gw.example/v1")
    );
    assert_eq!(doc["tui"]["notifications"].as_bool(), Some(true));
    assert!(now.starts_with("# my settings\n"), "{now}");
    assert!(
        !home.0.join(".codex").exists(),
        "CODEX_HOME is honoured, ~/.codex untouched"
    );
    configure(&home.0, &["codex", "--undo"], &vars);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
}

#[test]
fn configure_opencode_keeps_unrelated_keys_and_undo_restores_the_bytes() {
    let home = Home::new("opencode");
    let original = "{\"$schema\":\"https://opencode.ai/config.json\",\"theme\":\"dark\",\"provider\":{\"openai\":{\"models\":{\"gpt-5.5\":{}}}}}";
    let path = home.write(".config/opencode/opencode.json", original);
    configure(
        &home.0,
        &["opencode", "--url", "http://127.0.0.1:9999/"],
        &[],
    );
    let now: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(now["theme"], "dark");
    assert_eq!(
        now["provider"]["openai"]["models"]["gpt-5.5"],
        serde_json::json!({})
    );
    assert_eq!(
        now["provider"]["openai"]["options"]["baseURL"],
        "http://127.0.0.1:9999/v1"
    );
    assert_eq!(
        now["provider"]["anthropic"]["options"]["baseURL"],
        "http://127.0.0.1:9999/v1"
    );
    configure(&home.0, &["opencode", "--undo"], &[]);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A private settings file behind a dotfiles link, holding a number no
/// `f64` holds: the link stays a link, the file and its backup stay 0600,
/// the number stays as written, and undo gives back the bytes and the mode.
#[cfg(unix)]
#[test]
fn configure_keeps_a_private_mode_a_link_and_numbers_as_written() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new("private");
    let original = "{\n  \"apiKeyHelper\": \"pass show claude\",\n  \"cleanupPeriodDays\": 123456789012345678901234567890\n}\n";
    let real = home.write("dotfiles/claude-settings.json", original);
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::create_dir_all(home.0.join(".claude")).unwrap();
    let link = home.0.join(".claude/settings.json");
    std::os::unix::fs::symlink("../dotfiles/claude-settings.json", &link).unwrap();

    let out = configure(&home.0, &["claude"], &[]);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("(a link: writing "), "{printed}");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link is still a link"
    );
    let now = std::fs::read_to_string(&real).unwrap();
    assert!(
        now.contains("\"cleanupPeriodDays\": 123456789012345678901234567890"),
        "{now}"
    );
    let v: Value = serde_json::from_str(&now).unwrap();
    assert_eq!(v["env"]["ANTHROPIC_BASE_URL"], "http://127.0.0.1:8080");
    assert_eq!(mode(&real), 0o600, "the settings file stays private");
    let backup = home.0.join("dotfiles/claude-settings.json.codemode-backup");
    assert_eq!(mode(&backup), 0o600, "so does its backup");

    // A file the user made group-readable stays exactly that, no wider.
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
    configure(&home.0, &["claude", "--url", "http://127.0.0.1:9"], &[]);
    assert_eq!(mode(&real), 0o640);

    configure(&home.0, &["claude", "--undo"], &[]);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&real).unwrap(), original);
    assert_eq!(mode(&real), 0o600, "undo restores the mode the file had");
    assert_eq!(
        dir_names(&home.0.join("dotfiles")),
        vec!["claude-settings.json"]
    );
    // A settings file configure creates is private too.
    let fresh = Home::new("fresh-mode");
    configure(&fresh.0, &["opencode"], &[]);
    assert_eq!(mode(&fresh.0.join(".config/opencode/opencode.json")), 0o600);
}

#[test]
fn undo_removes_a_settings_file_that_configure_created() {
    let home = Home::new("created");
    configure(&home.0, &["claude"], &[]);
    let path = home.0.join(".claude/settings.json");
    let now: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(now["env"]["ANTHROPIC_BASE_URL"], "http://127.0.0.1:8080");
    configure(&home.0, &["claude", "--undo"], &[]);
    assert!(dir_names(&home.0.join(".claude")).is_empty());
}

/// With the real Codex on PATH, `configure codex` also writes Codex's own
/// model catalog with direct tools for every model (its default model
/// would otherwise run Codex's own code mode) and names it in
/// `model_catalog_json`; `--undo` removes it and restores the bytes.
#[test]
fn configure_codex_gives_every_model_direct_tools_through_a_catalog() {
    let agents = std::env::var_os("CODEMODE_AGENTS_DIR")
        .map(|d| Path::new(env!("CARGO_MANIFEST_DIR")).join(d))
        .unwrap_or_else(|| {
            Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cache/codemode-agents")
        })
        .join("node/node_modules/.bin");
    if !crate::common::needs::agent("Codex", &agents.join("codex")) {
        return;
    }
    let home = Home::new("codex-catalog");
    let codex_home = home.0.join("codex-home");
    let original = "model = \"gpt-5.5\"\n";
    let path = home.write("codex-home/config.toml", original);
    let search = format!(
        "{}:{}",
        agents.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let vars = [
        ("CODEX_HOME", codex_home.to_str().unwrap()),
        ("PATH", search.as_str()),
    ];
    let out = configure(&home.0, &["codex"], &vars);
    let printed = String::from_utf8_lossy(&out.stdout);
    let doc: toml::Table = std::fs::read_to_string(&path).unwrap().parse().unwrap();
    let catalog = codex_home.join("codemode-models.json");
    assert_eq!(
        doc["model_catalog_json"].as_str(),
        Some(catalog.to_str().unwrap()),
        "{printed}"
    );
    let models: Value = serde_json::from_str(&std::fs::read_to_string(&catalog).unwrap()).unwrap();
    let models = models["models"].as_array().unwrap();
    assert!(!models.is_empty());
    for m in models {
        assert_eq!(m["tool_mode"], "direct", "{}", m["slug"]);
        assert_eq!(m["use_responses_lite"], false, "{}", m["slug"]);
    }
    configure(&home.0, &["codex", "--undo"], &vars);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
    assert!(!catalog.exists(), "undo removes the catalog");
}

/// gemini-cli's settings hold no base URL: `configure gemini` selects the
/// Gemini API key auth in `$GEMINI_CLI_HOME/.gemini/settings.json` (else
/// `~/.gemini/settings.json`), keeps every other byte, prints the
/// `export GOOGLE_GEMINI_BASE_URL=...` line for the shell, and `--undo`
/// gives the bytes back.
#[test]
fn configure_gemini_selects_the_api_key_auth_and_prints_the_base_url_to_export() {
    let home = Home::new("gemini");
    let gemini_home = home.0.join("gemini-home");
    let original = "{\n\t\"security\": {\"auth\": {\"selectedType\": \"oauth-personal\"}, \"folderTrust\": {\"enabled\": true}},\n\t\"model\": {\"name\": \"gemini-2.5-pro\"},\n\t\"general\": {\"vimMode\": true}\n}\n";
    let path = home.write("gemini-home/.gemini/settings.json", original);
    let vars = [("GEMINI_CLI_HOME", gemini_home.to_str().unwrap())];
    let out = configure(
        &home.0,
        &["gemini", "--url", "http://127.0.0.1:9999/preset/code/v1"],
        &vars,
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("security.auth.selectedType: \"oauth-personal\" -> \"gemini-api-key\""),
        "it prints what it changed: {printed}"
    );
    assert!(
        printed
            .lines()
            .any(|l| l.trim() == "export GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:9999/preset/code"),
        "it prints the base URL to export (the proxy's root: gemini-cli appends /v1beta): {printed}"
    );
    assert!(
        printed.contains("export GEMINI_API_KEY="),
        "without a key it says gemini-cli needs one: {printed}"
    );
    let now = std::fs::read_to_string(&path).unwrap();
    assert_eq!(now, original.replace("oauth-personal", "gemini-api-key"));
    assert!(
        !home.0.join(".gemini").exists(),
        "GEMINI_CLI_HOME is honoured, ~/.gemini untouched"
    );
    let out = configure(&home.0, &["gemini", "--undo"], &vars);
    assert!(String::from_utf8_lossy(&out.stdout).contains("GOOGLE_GEMINI_BASE_URL"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
    assert_eq!(
        dir_names(&gemini_home.join(".gemini")),
        vec!["settings.json"]
    );

    // With a key set, no key line; a new settings file is private and
    // removed by --undo.
    let fresh = Home::new("gemini-fresh");
    let out = configure(&fresh.0, &["gemini"], &[("GEMINI_API_KEY", "k")]);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(!printed.contains("export GEMINI_API_KEY"), "{printed}");
    assert!(printed.contains("export GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8080"));
    let path = fresh.0.join(".gemini/settings.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(v["security"]["auth"]["selectedType"], "gemini-api-key");
    #[cfg(unix)]
    assert_eq!(mode(&path), 0o600);
    configure(&fresh.0, &["gemini", "--undo"], &[]);
    assert!(dir_names(&fresh.0.join(".gemini")).is_empty());
}

/// gemini-cli allows comments in its settings; `configure` edits plain
/// JSON only, so such a file is left alone with a message.
#[test]
fn configure_gemini_leaves_a_settings_file_with_comments_alone() {
    let home = Home::new("gemini-comments");
    let original = "{\n  // my theme\n  \"ui\": {\"theme\": \"GitHub\"}\n}\n";
    let path = home.write(".gemini/settings.json", original);
    let out = Command::new(env!("CARGO_BIN_EXE_codemode-proxy"))
        .args(["configure", "gemini"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home.0)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("edit it by hand"), "{said}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
    assert_eq!(dir_names(&home.0.join(".gemini")), vec!["settings.json"]);
}
