//! `codemode-proxy run -- COMMAND`, through the real binary: the child's
//! exit code and signals, the base URLs it sees, the log file and the
//! summary line. The real agents under `run` are in tests/run_agents.rs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A fresh directory, removed when dropped.
struct Temp(PathBuf);

impl Temp {
    fn new(test: &str) -> Temp {
        let dir = std::env::temp_dir().join(format!("cm-run-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Temp(dir)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `codemode-proxy run ARGS` with only PATH, HOME and `vars` set.
fn run_cmd(home: &Path, args: &[&str], vars: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_codemode-proxy"));
    cmd.arg("run")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TMPDIR", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd
}

fn run(home: &Path, args: &[&str]) -> Output {
    run_cmd(home, args, &[])
        .output()
        .expect("the binary starts")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn run_exits_with_the_commands_exit_code() {
    let home = Temp::new("exit");
    let out = run(&home.0, &["--", "sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
}

#[test]
fn run_exits_128_plus_the_signal_that_killed_the_command() {
    let home = Temp::new("killed");
    let out = run(&home.0, &["--", "sh", "-c", "kill -KILL $$"]);
    assert_eq!(out.status.code(), Some(128 + 9), "{}", stderr(&out));
}

#[test]
fn a_command_that_does_not_exist_exits_127() {
    let home = Temp::new("missing");
    let out = run(&home.0, &["--", "no-such-command-cm"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(stderr(&out).contains("cannot run `no-such-command-cm`"));
}

#[test]
fn the_child_sees_both_base_urls() {
    let home = Temp::new("urls");
    let file = home.0.join("urls");
    let script = format!(
        "echo \"$OPENAI_BASE_URL $ANTHROPIC_BASE_URL\" > {}",
        file.display()
    );
    let out = run(&home.0, &["--", "sh", "-c", &script]);
    assert!(out.status.success(), "{}", stderr(&out));
    let seen = std::fs::read_to_string(&file).unwrap();
    let urls: Vec<&str> = seen.split_whitespace().collect();
    assert_eq!(urls.len(), 2, "{seen}");
    let root = urls[1];
    assert!(root.starts_with("http://127.0.0.1:"), "{seen}");
    assert_eq!(urls[0], format!("{root}/v1"), "OPENAI_BASE_URL ends in /v1");
}

#[test]
fn the_child_sees_none_of_the_proxys_secrets() {
    let home = Temp::new("secrets");
    let file = home.0.join("env");
    let script = format!("env > {}", file.display());
    run_ok(
        &home.0,
        &["--", "sh", "-c", &script],
        &[
            ("CODEMODE_UPSTREAM_API_KEY", "sk-operator"),
            ("CODEMODE_ANTHROPIC_API_KEY", "sk-ant-operator"),
            ("CODEMODE_ADMIN_TOKEN", "admin-secret-0123456789abcdef"),
            ("CODEMODE_MODE", "code"),
            ("OPENAI_API_KEY", "sk-user"),
        ],
    );
    let env = std::fs::read_to_string(&file).unwrap();
    for secret in [
        "sk-operator",
        "sk-ant-operator",
        "admin-secret-0123456789abcdef",
    ] {
        assert!(!env.contains(secret), "the child saw {secret}");
    }
    assert!(
        env.contains("OPENAI_API_KEY=sk-user"),
        "the agent's own key stays"
    );
    assert!(
        env.contains("CODEMODE_MODE=code"),
        "what is no secret stays"
    );
}

/// `run -- gemini` without the real gemini-cli (tests/it/run_agents.rs
/// has it): a program named `gemini` records what it got. It reaches the
/// proxy's root through `GOOGLE_GEMINI_BASE_URL`; its home for the run
/// (`GEMINI_CLI_HOME`) is a private folder holding the user's own settings
/// with the Gemini API key auth selected, and links to the rest of the
/// user's `.gemini`; with only the operator's key at the proxy it gets a
/// placeholder key, never the operator's. The user's files stay as they
/// were, and the folder is gone when the run ends.
#[cfg(unix)]
#[test]
fn gemini_gets_the_proxys_root_and_a_home_of_its_own_with_the_users_settings() {
    use std::os::unix::fs::PermissionsExt;
    let home = Temp::new("gemini");
    let own = "{\"model\": {\"name\": \"gemini-2.5-flash\"}}";
    std::fs::create_dir_all(home.0.join(".gemini")).unwrap();
    std::fs::write(home.0.join(".gemini/settings.json"), own).unwrap();
    std::fs::write(home.0.join(".gemini/trustedFolders.json"), "{}").unwrap();
    std::fs::create_dir_all(home.0.join("bin")).unwrap();
    let gemini = home.0.join("bin/gemini");
    let seen = home.0.join("seen");
    std::fs::write(
        &gemini,
        format!(
            "#!/bin/sh\nset -e\nd=\"$GEMINI_CLI_HOME/.gemini\"\n{{ echo \"$GOOGLE_GEMINI_BASE_URL\"; echo \"$GEMINI_CLI_HOME\"; echo \"$GEMINI_API_KEY\"; \
             readlink \"$d/trustedFolders.json\"; ls -ld \"$d\" \"$d/settings.json\" | cut -c1-10; cat \"$d/settings.json\"; echo; }} > {seen}\nenv > {seen}.env\n",
            seen = seen.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&gemini, std::fs::Permissions::from_mode(0o755)).unwrap();
    let gemini = gemini.to_str().unwrap();

    run_ok(
        &home.0,
        &["--", gemini],
        &[("CODEMODE_GEMINI_API_KEY", "operator-gemini-key")],
    );
    let got = std::fs::read_to_string(&seen).unwrap();
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(lines.len(), 7, "{got}");
    assert!(
        lines[0].starts_with("http://127.0.0.1:") && lines[0].matches('/').count() == 2,
        "GOOGLE_GEMINI_BASE_URL is the proxy's root: {got}"
    );
    let run_home = Path::new(lines[1]);
    assert!(
        run_home.starts_with(&home.0) && run_home != home.0,
        "a folder of its own under the temporary folder: {got}"
    );
    assert_eq!(lines[2], "codemode-proxy-sends-the-operators-key", "{got}");
    assert_eq!(
        Path::new(lines[3]),
        home.0.join(".gemini/trustedFolders.json"),
        "the user's own files are linked: {got}"
    );
    assert_eq!(lines[4], "drwx------", "{got}");
    assert_eq!(lines[5], "-rw-------", "{got}");
    let settings: serde_json::Value = serde_json::from_str(lines[6]).unwrap();
    assert_eq!(settings["model"]["name"], "gemini-2.5-flash");
    assert_eq!(
        settings["security"]["auth"]["selectedType"],
        "gemini-api-key"
    );
    let env = std::fs::read_to_string(format!("{}.env", seen.display())).unwrap();
    assert!(
        !env.contains("operator-gemini-key"),
        "the child saw the operator's key"
    );
    assert!(!run_home.exists(), "the run's home is removed when it ends");
    assert_eq!(
        std::fs::read_to_string(home.0.join(".gemini/settings.json")).unwrap(),
        own,
        "the user's settings are not written"
    );
    assert!(home.0.join(".gemini/trustedFolders.json").is_file());

    // The user's own key is theirs to send.
    run_ok(
        &home.0,
        &["--", gemini],
        &[
            ("CODEMODE_GEMINI_API_KEY", "operator-gemini-key"),
            ("GEMINI_API_KEY", "user-gemini-key"),
        ],
    );
    let got = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(got.lines().nth(2), Some("user-gemini-key"), "{got}");
}

/// What a program called `claude` sees of `ENABLE_TOOL_SEARCH` under
/// `run ARGS` with `vars`.
#[cfg(unix)]
fn claude_tool_search(home: &Path, args: &[&str], vars: &[(&str, &str)]) -> String {
    use std::os::unix::fs::PermissionsExt;
    let claude = home.join("bin/claude");
    let seen = home.join("seen");
    std::fs::create_dir_all(home.join("bin")).unwrap();
    std::fs::write(
        &claude,
        format!(
            "#!/bin/sh\necho \"${{ENABLE_TOOL_SEARCH-unset}}\" > {}\n",
            seen.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut all = args.to_vec();
    all.extend(["--", claude.to_str().unwrap()]);
    run_ok(home, &all, vars);
    std::fs::read_to_string(&seen).unwrap().trim().to_owned()
}

#[cfg(unix)]
#[test]
fn claude_code_keeps_its_tool_search_in_native_mode_and_leaves_it_to_the_sdk_in_code_mode() {
    let home = Temp::new("tool-search");
    let h = &home.0;
    // Code mode (the default) and both: the SDK shows every tool.
    assert_eq!(claude_tool_search(h, &[], &[]), "false");
    assert_eq!(claude_tool_search(h, &["--mode", "both"], &[]), "false");
    // Native, to Anthropic's API: as Claude Code has it there.
    assert_eq!(claude_tool_search(h, &["--mode", "native"], &[]), "true");
    // Native, to a gateway of the user's: Claude Code decides.
    let gateway = [("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")];
    assert_eq!(
        claude_tool_search(h, &["--mode", "native"], &gateway),
        "unset"
    );
    // A preset's mode counts; the user's own setting always wins.
    assert_eq!(
        claude_tool_search(h, &["--mode", "native", "--preset", "code"], &[]),
        "false"
    );
    let own = [("ENABLE_TOOL_SEARCH", "true")];
    assert_eq!(claude_tool_search(h, &[], &own), "true");
}

#[test]
fn a_preset_flag_moves_the_base_urls_under_its_path() {
    let home = Temp::new("preset");
    let file = home.0.join("urls");
    let script = format!("echo \"$OPENAI_BASE_URL\" > {}", file.display());
    let out = run(&home.0, &["--preset", "code", "sh", "-c", &script]);
    assert!(out.status.success(), "{}", stderr(&out));
    let seen = std::fs::read_to_string(&file).unwrap();
    assert!(seen.trim().ends_with("/preset/code/v1"), "{seen}");
}

#[test]
fn logs_go_to_a_file_named_once_and_one_summary_line_ends_the_run() {
    let home = Temp::new("logs");
    let out = run(&home.0, &["--", "sh", "-c", "echo child-says-hi"]);
    assert!(out.status.success());
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "a log path and a summary: {err}");
    let path = lines[0]
        .strip_prefix("codemode-proxy: proxy logs in ")
        .expect("the log path first");
    let log = std::fs::read_to_string(path).unwrap();
    assert!(log.contains("listening on http://127.0.0.1:"), "{log}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the log is the user's alone");
    }
    let _ = std::fs::remove_file(path);
    assert_eq!(
        lines[1],
        "codemode-proxy: 0 programs run, 0 nested calls, 0 model round trips saved, 0 context bytes saved, 0 denials"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "child-says-hi\n");
}

#[test]
fn a_bad_flag_or_variable_stops_run_before_the_command_starts() {
    let home = Temp::new("bad");
    let marker = home.0.join("ran");
    let script = format!("touch {}", marker.display());
    let out = run(&home.0, &["--mode", "sideways", "--", "sh", "-c", &script]);
    assert_eq!(out.status.code(), Some(2));
    let out = run_cmd(
        &home.0,
        &["--", "sh", "-c", &script],
        &[("CODEMODE_MAX_REPAIRS", "many")],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("CODEMODE_MAX_REPAIRS"),
        "{}",
        stderr(&out)
    );
    assert!(!marker.exists(), "the command never ran");
}

#[test]
fn sigterm_to_run_reaches_the_child() {
    let home = Temp::new("term");
    let ready = home.0.join("ready");
    let got = home.0.join("got");
    let script = format!(
        "trap 'echo term > {got}; exit 3' TERM; touch {ready}; while :; do sleep 0.05; done",
        got = got.display(),
        ready = ready.display()
    );
    let child = run_cmd(&home.0, &["--", "sh", "-c", &script], &[])
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !ready.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the child never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "run exits with the code of the child's trap: {}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(&got).unwrap().trim(), "term");
    assert!(
        stderr(&out).contains("programs run"),
        "the summary still comes"
    );
}

/// `run` with `args` and `vars` to its end, which must be a success.
fn run_ok(home: &Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
    let out = run_cmd(home, args, vars).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// A provider refusing every POST with `status` and `error`.
async fn refusing(status: u16, error: serde_json::Value) -> wiremock::MockServer {
    let provider = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(wiremock::ResponseTemplate::new(status).set_body_json(error))
        .mount(&provider)
        .await;
    provider
}

/// The line of `run`'s stderr saying a provider refused the credential,
/// when `script` (run by `sh -c` under `run` in `home`, the proxy with
/// `vars`) sends a request with a wrong key; the run itself succeeds.
async fn refusal_hint(home: &Path, script: &str, vars: &[(&str, &str)]) -> String {
    let mut cmd = tokio::process::Command::from(run_cmd(home, &["--", "sh", "-c", script], vars));
    let out = cmd.output().await.unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let hint = err
        .lines()
        .find(|l| l.contains("refused the credential"))
        .unwrap_or_else(|| panic!("no hint: {err}"));
    hint.to_owned()
}

/// A Gemini request the provider refuses (403, as Google answers one
/// without a key): the hint names gemini-cli's variable and the proxy's.
#[tokio::test]
async fn a_refused_gemini_key_ends_the_run_with_the_variable_to_set() {
    let provider = refusing(
        403,
        serde_json::json!({
            "error": {"code": 403, "message": "Method doesn't allow unregistered callers.",
                      "status": "PERMISSION_DENIED"}
        }),
    )
    .await;
    // The child is a shell script that calls the proxy with curl.
    if !crate::common::needs::programs(&["curl"], "apt-get install curl") {
        return;
    }
    let home = Temp::new("refused-gemini");
    let script = "curl -s -o /dev/null -X POST \"$GOOGLE_GEMINI_BASE_URL/v1beta/models/gemini-2.5-pro:generateContent\" \
                  -H 'content-type: application/json' -H 'x-goog-api-key: wrong' \
                  -d '{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"hi\"}]}]}'";
    let hint = refusal_hint(
        &home.0,
        script,
        &[("CODEMODE_GEMINI_UPSTREAM", provider.uri().as_str())],
    )
    .await;
    assert!(
        hint.contains("Gemini") && hint.contains("GEMINI_API_KEY"),
        "{hint}"
    );
}

/// The provider that refused is the one named, whatever the route: a token
/// count or a side route of Google's is Google's refusal, never
/// Anthropic's (`count_tokens` was counted as a Messages route), and a
/// Responses token count is OpenAI's.
#[tokio::test]
async fn a_refusal_names_the_provider_the_request_went_to_on_every_route() {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    // The child is a shell script that calls the proxy with curl.
    if !crate::common::needs::programs(&["curl"], "apt-get install curl") {
        return;
    }
    let refusing = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(403).set_body_json(serde_json::json!({
            "error": {"code": 403, "message": "denied", "status": "PERMISSION_DENIED"}
        })))
        .mount(&refusing)
        .await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(401).set_body_json(serde_json::json!({
            "error": {"code": 401, "message": "denied", "status": "UNAUTHENTICATED"}
        })))
        .mount(&refusing)
        .await;
    let upstream = format!("{}/v1", refusing.uri());
    let gemini = "curl -s -o /dev/null -X POST \"$GOOGLE_GEMINI_BASE_URL/v1beta/models/gemini-2.5-pro:countTokens\" \
                  -H 'content-type: application/json' -H 'x-goog-api-key: wrong' \
                  -d '{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"hi\"}]}]}'; \
                  curl -s -o /dev/null \"$GOOGLE_GEMINI_BASE_URL/v1beta/models?key=wrong\"";
    let openai = "curl -s -o /dev/null -X POST \"$OPENAI_BASE_URL/responses/input_tokens\" \
                  -H 'content-type: application/json' -H 'authorization: Bearer wrong' \
                  -d '{\"model\":\"m\",\"input\":\"hi\"}'";
    for (script, named, count) in [(gemini, "Gemini", "2x"), (openai, "OpenAI", "1x")] {
        let home = Temp::new("refused-routes");
        let mut cmd = tokio::process::Command::from(run_cmd(
            &home.0,
            &["--", "sh", "-c", script],
            &[
                ("CODEMODE_GEMINI_UPSTREAM", refusing.uri().as_str()),
                ("CODEMODE_UPSTREAM", upstream.as_str()),
            ],
        ));
        let out = cmd.output().await.unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let err = stderr(&out);
        let hints: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("refused the credential"))
            .collect();
        assert_eq!(hints.len(), 1, "one provider refused: {err}");
        assert!(
            hints[0].contains(&format!(
                "the {named} provider refused the credential ({count} 401/403)"
            )),
            "{}",
            hints[0]
        );
    }
}

#[tokio::test]
async fn a_refused_credential_ends_the_run_with_the_variable_to_set() {
    let provider = refusing(
        401,
        serde_json::json!({
            "type": "error",
            "error": {"type": "authentication_error", "message": "invalid x-api-key"}
        }),
    )
    .await;
    // The child is a shell script that calls the proxy with curl.
    if !crate::common::needs::programs(&["curl"], "apt-get install curl") {
        return;
    }
    let home = Temp::new("refused");
    let upstream = format!("{}/v1", provider.uri());
    let script = "curl -s -o /dev/null -X POST \"$ANTHROPIC_BASE_URL/v1/messages\" \
                  -H 'content-type: application/json' -H 'x-api-key: wrong' \
                  -d '{\"model\":\"m\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}'";
    let hint = refusal_hint(
        &home.0,
        script,
        &[("CODEMODE_ANTHROPIC_UPSTREAM", upstream.as_str())],
    )
    .await;
    assert!(
        hint.contains("Anthropic") && hint.contains("ANTHROPIC_API_KEY"),
        "{hint}"
    );
}
