//! The real agents under `codemode-proxy run` (the binary), against a
//! scripted model on loopback that the proxy's upstream variables name:
//! `run -- claude -p ...`, `run -- codex exec ...`, `run -- opencode run`
//! and `run -- gemini -p ...` each complete a task through a program in
//! code mode (the model saw only `run_code` and the SDK; the agent ran the
//! nested calls), the summary line reports the program, and `run` wrote
//! no settings file in the agent's home.
//!
//! The agents are installed by tests/agents/install.sh; outside CI a
//! missing agent skips with a note.

use crate::common;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::common::claude::{claude_bin, claude_ready, sees_run_code_and_the_sdk};
use crate::common::codex::{
    agents_dir, codex_ready, sees_run_code_only, two_commands_model, WorkDir,
};
use serde_json::{json, Value};

fn workdir(test: &str, files: &[(&str, &str)]) -> WorkDir {
    let dir = std::env::temp_dir().join(format!("cm-run-agents-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("home")).unwrap();
    std::fs::create_dir_all(dir.join("work")).unwrap();
    for (name, content) in files {
        std::fs::write(dir.join("work").join(name), content).unwrap();
    }
    WorkDir(dir)
}

/// `codemode-proxy run -- COMMAND` with only PATH, HOME=`home` and
/// `vars`, in `cwd`; (exit code, stdout, stderr).
async fn run(
    home: &Path,
    cwd: &Path,
    command: &[&str],
    vars: &[(&str, &str)],
) -> (Option<i32>, String, String) {
    run_with(&[], home, cwd, command, vars).await
}

/// [`run`] with `run`'s own `flags` before the `--`.
async fn run_with(
    flags: &[&str],
    home: &Path,
    cwd: &Path,
    command: &[&str],
    vars: &[(&str, &str)],
) -> (Option<i32>, String, String) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_codemode-proxy"));
    cmd.arg("run")
        .args(flags)
        .arg("--")
        .args(command)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TMPDIR", home)
        .env("CODEMODE_RUNTIME", "embedded")
        .env("CODEMODE_MODE", "code")
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(90), cmd.output())
        .await
        .expect("run did not finish in 90 s")
        .expect("the binary starts");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `codex exec`'s flags for an unattended run that asks nothing and
/// reaches nothing but the proxy; the model flags and `-C DIR` follow.
const CODEX_EXEC: &[&str] = &[
    "exec",
    "--json",
    "--skip-git-repo-check",
    "--dangerously-bypass-approvals-and-sandbox",
    "--ignore-rules",
    "-c",
    "check_for_update_on_startup=false",
    "-c",
    "analytics.enabled=false",
    "--disable",
    "plugins",
    "--disable",
    "remote_plugin",
    "--disable",
    "apps",
];

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn assert_no_settings_written(home: &Path) {
    for rel in [
        ".claude/settings.json",
        ".codex/config.toml",
        ".config/opencode/opencode.json",
        // The opencode test's XDG_CONFIG_HOME.
        "config/opencode/opencode.json",
        ".gemini/settings.json",
    ] {
        assert!(!home.join(rel).exists(), "run wrote {rel}");
    }
}

#[tokio::test]
async fn claude_under_run_completes_a_program_of_two_reads() {
    use common::messages_model::*;
    if !claude_ready() {
        return;
    }
    let dir = workdir("claude", &[("a.txt", "alpha-1\n"), ("b.txt", "bravo-2\n")]);
    let (home, work) = (dir.0.join("home"), dir.0.join("work"));
    let code = format!(
        "const a = await tools.Read({{file_path: {}}});\nconst b = await tools.Read({{file_path: {}}});\nreturn [a, b].join('\\n---\\n');",
        json!(work.join("a.txt").to_str().unwrap()),
        json!(work.join("b.txt").to_str().unwrap())
    );
    let model = MessagesModel::new([
        vec![run_code_use("toolu_prog", &code)],
        vec![json!({"type": "echo"})],
    ]);
    let server = model.serve().await;
    let upstream = format!("{}/v1", server.uri());
    let claude = claude_bin();
    let (status, stdout, stderr) = run(
        &home,
        &work,
        &[
            claude.to_str().unwrap(),
            "-p",
            "Show me a.txt and b.txt.",
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
            "--model",
            "claude-sonnet-4-5",
        ],
        &[
            ("CODEMODE_ANTHROPIC_UPSTREAM", upstream.as_str()),
            ("ANTHROPIC_API_KEY", "sk-ant-test-key"),
            ("IS_SANDBOX", "1"),
            ("DISABLE_TELEMETRY", "1"),
            ("DISABLE_ERROR_REPORTING", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("CLAUDE_CODE_MAX_RETRIES", "0"),
        ],
    )
    .await;
    let events = json_lines(&stdout);
    let result = events.iter().find(|e| e["type"] == "result");
    let answer = result.and_then(|r| r["result"].as_str()).unwrap_or("");
    assert!(
        status == Some(0) && answer.contains("alpha-1") && answer.contains("bravo-2"),
        "claude under run: exit {status:?}\n{stdout}\n{stderr}"
    );
    let reads = events
        .iter()
        .filter(|e| e["type"] == "assistant")
        .flat_map(|e| {
            e["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|b| b["type"] == "tool_use" && b["name"] == "Read")
        .count();
    assert_eq!(reads, 2, "Claude Code ran the two nested reads");
    for s in model
        .seen()
        .iter()
        .filter(|s| s.path.starts_with("/v1/messages?"))
    {
        let system = sees_run_code_and_the_sdk(&s.body);
        // `run` turns Claude Code's tool search off in code mode: the SDK
        // shows every tool from the first request on, no ToolSearch.
        assert!(
            system.contains("WebFetch(") && !system.contains("ToolSearch("),
            "{system}"
        );
    }
    assert!(
        stderr.contains("codemode-proxy: 1 program run, 2 nested calls"),
        "the summary reports the program: {stderr}"
    );
    assert_no_settings_written(&home);
}

#[tokio::test]
async fn codex_under_run_completes_a_program_of_two_shell_commands() {
    codex_runs_a_program_under_run("codex", &["-m", "gpt-5.5"]).await;
}

/// Codex's default model runs Codex's own code mode (`exec`, tools in an
/// `additional_tools` item); `run` gives its models direct tools, so the
/// proxy's Code Mode runs instead.
#[tokio::test]
async fn codex_on_its_default_model_under_run_gets_the_proxys_code_mode() {
    codex_runs_a_program_under_run("codex-default", &[]).await;
}

/// `codex exec` under `run` with `model_args`: a program of two shell
/// commands, run by the proxy, its calls executed by Codex.
async fn codex_runs_a_program_under_run(test: &str, model_args: &[&str]) {
    if !codex_ready() {
        return;
    }
    let dir = workdir(test, &[("a.txt", "alpha-1"), ("b.txt", "bravo-2")]);
    let (home, work) = (dir.0.join("home"), dir.0.join("work"));
    let model = two_commands_model();
    let server = model.serve().await;
    let upstream = format!("{}/v1", server.uri());
    let codex = agents_dir().join("node/node_modules/.bin/codex");
    let work_s = work.to_str().unwrap();
    let (status, stdout, stderr) = run(
        &home,
        &work,
        &[codex.to_str().unwrap()]
            .into_iter()
            .chain(CODEX_EXEC.iter().copied())
            .chain(model_args.iter().copied())
            .chain(["-C", work_s, "Show me a.txt and b.txt."])
            .collect::<Vec<&str>>(),
        &[
            ("CODEMODE_UPSTREAM", upstream.as_str()),
            ("OPENAI_API_KEY", "test-key"),
        ],
    )
    .await;
    let events = json_lines(&stdout);
    let items: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "item.completed")
        .map(|e| &e["item"])
        .collect();
    let answer = items
        .iter()
        .rev()
        .find(|i| i["type"] == "agent_message")
        .and_then(|i| i["text"].as_str())
        .unwrap_or("");
    assert!(
        status == Some(0) && answer.contains("alpha-1") && answer.contains("bravo-2"),
        "codex under run: exit {status:?}\n{stdout}\n{stderr}"
    );
    let commands = items
        .iter()
        .filter(|i| i["type"] == "command_execution")
        .count();
    assert_eq!(commands, 2, "Codex ran the two nested commands");
    let seen = model.seen();
    assert_eq!(seen.len(), 2, "the model was asked twice");
    for s in &seen {
        assert_eq!(s.status, 200);
        sees_run_code_only(&s.body);
        assert_eq!(
            s.body["model"] == "gpt-5.5",
            !model_args.is_empty(),
            "the model asked for: {}",
            s.body["model"]
        );
        let input = s.body["input"].as_array().unwrap();
        assert!(
            input.iter().all(|i| i["type"] != "additional_tools"),
            "no tool is declared natively in the input"
        );
    }
    assert!(
        stderr.contains("codemode-proxy: 1 program run, 2 nested calls"),
        "the summary reports the program: {stderr}"
    );
    assert_no_settings_written(&home);
}

/// `run --agent-code-mode -- codex` on Codex's default model: Codex's own
/// code mode is respected, never wrapped in `run_code`; its `exec`
/// program runs in Codex, and the summary says whose code mode ran.
#[tokio::test]
async fn codex_keeps_its_own_code_mode_when_asked() {
    use common::responses_model::*;
    if !codex_ready() {
        return;
    }
    let dir = workdir("codex-own", &[("a.txt", "alpha-1")]);
    let (home, work) = (dir.0.join("home"), dir.0.join("work"));
    let exec = json!({"type": "custom_tool_call", "id": "ctc_1", "status": "completed",
        "call_id": "call_exec", "name": "exec", "namespace": "functions",
        "input": "const r = await tools.exec_command({cmd: 'cat a.txt'});\ntext(r.output);\n"});
    let model = ResponsesModel::new([vec![exec], vec![json!({"type": "echo"})]]);
    let server = model.serve().await;
    let upstream = format!("{}/v1", server.uri());
    let codex = agents_dir().join("node/node_modules/.bin/codex");
    let work_s = work.to_str().unwrap();
    let command: Vec<&str> = [codex.to_str().unwrap()]
        .into_iter()
        .chain(CODEX_EXEC.iter().copied())
        .chain(["-C", work_s, "Show me a.txt."])
        .collect();
    let (status, stdout, stderr) = run_with(
        &["--agent-code-mode"],
        &home,
        &work,
        &command,
        &[
            ("CODEMODE_UPSTREAM", upstream.as_str()),
            ("OPENAI_API_KEY", "test-key"),
        ],
    )
    .await;
    assert_eq!(status, Some(0), "{stdout}\n{stderr}");
    let seen = model.seen();
    assert_eq!(seen.len(), 2, "{stdout}\n{stderr}");
    for s in &seen {
        assert_eq!(s.status, 200, "{}", s.refusal);
        assert_eq!(
            s.body["input"][0]["type"], "additional_tools",
            "presented as sent"
        );
        assert!(
            !s.body.to_string().contains("run_code"),
            "no run_code is offered beside Codex's own code mode"
        );
    }
    let result = seen[1].body["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "custom_tool_call_output")
        .map(|i| i["output"].to_string())
        .unwrap_or_default();
    assert!(
        result.contains("alpha-1"),
        "Codex ran its exec program: {result}"
    );
    assert!(
        stderr.contains("0 programs run (2 requests in the agent's own code mode)"),
        "the summary says whose code mode ran: {stderr}"
    );
}

/// opencode's model on the Responses API (its built-in `openai`
/// provider): a side request without tools (the title) gets a title;
/// the task gets a program, then the program's result as the answer.
#[derive(Clone, Default)]
struct OpencodeModel {
    code: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
}

impl wiremock::Respond for OpencodeModel {
    fn respond(&self, req: &wiremock::Request) -> wiremock::ResponseTemplate {
        use common::responses_model::*;
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        self.seen.lock().unwrap().push(body.clone());
        let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
        let result = body["input"].as_array().and_then(|items| {
            items
                .iter()
                .find(|i| i["type"] == "function_call_output" && i["call_id"] == "call_prog")
                .map(|i| i["output"].to_string())
        });
        let output = match (has_tools, result) {
            (false, _) => vec![said("Two files")],
            (true, Some(result)) => vec![said(&format!("The files: {result}"))],
            (true, None) => vec![run_code_call("call_prog", &self.code)],
        };
        let response = response("resp_1", &output, responses_usage(100, 10));
        wiremock::ResponseTemplate::new(200)
            .set_body_raw(response_events(&response).into_bytes(), "text/event-stream")
    }
}

#[tokio::test]
async fn opencode_under_run_completes_a_program_of_two_reads() {
    let marker = agents_dir().join("node/node_modules/.bin/opencode");
    if !crate::common::needs::agent("opencode", &marker) {
        return;
    }
    let dir = workdir(
        "opencode",
        &[("a.txt", "alpha-1\n"), ("b.txt", "bravo-2\n")],
    );
    let (home, work) = (dir.0.join("home"), dir.0.join("work"));
    let code = format!(
        "const a = await tools.read({{filePath: {}}});\nconst b = await tools.read({{filePath: {}}});\nreturn [a, b].join('\\n---\\n');",
        json!(work.join("a.txt").to_str().unwrap()),
        json!(work.join("b.txt").to_str().unwrap())
    );
    let model = OpencodeModel {
        code,
        ..Default::default()
    };
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/v1/responses"))
        .respond_with(model.clone())
        .mount(&server)
        .await;
    let upstream = format!("{}/v1", server.uri());
    // The user's own inline config: a model of the built-in `openai`
    // provider and its key; `run` adds only the provider's baseURL.
    let own = json!({
        "autoupdate": false, "share": "disabled", "snapshot": false, "lsp": false,
        "formatter": false, "model": "openai/gpt-test", "small_model": "openai/gpt-test",
        "provider": {"openai": {
            "npm": "@ai-sdk/openai", "name": "OpenAI",
            "options": {"apiKey": "test-key"},
            "models": {"gpt-test": {"name": "gpt-test", "tool_call": true,
                                    "limit": {"context": 128000, "output": 4096}}}
        }},
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny", "external_directory": "allow"}
    })
    .to_string();
    let opencode = agents_dir().join("node/node_modules/.bin/opencode");
    let xdg = |d: &str| home.join(d).to_string_lossy().into_owned();
    let (data, config, state, cache) = (xdg("data"), xdg("config"), xdg("state"), xdg("cache"));
    let (status, stdout, stderr) = run(
        &home,
        &work,
        &[
            opencode.to_str().unwrap(),
            "run",
            "--format",
            "json",
            "Show me a.txt and b.txt.",
        ],
        &[
            ("CODEMODE_UPSTREAM", upstream.as_str()),
            ("OPENCODE_CONFIG_CONTENT", own.as_str()),
            ("XDG_DATA_HOME", data.as_str()),
            ("XDG_CONFIG_HOME", config.as_str()),
            ("XDG_STATE_HOME", state.as_str()),
            ("XDG_CACHE_HOME", cache.as_str()),
            ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
            ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
            ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"),
            ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
            ("OPENCODE_DISABLE_SHARE", "1"),
            ("OPENCODE_DISABLE_CLAUDE_CODE", "1"),
            ("OPENCODE_DISABLE_EXTERNAL_SKILLS", "1"),
            ("OPENCODE_DISABLE_AUTOCOMPACT", "1"),
            ("OPENCODE_DISABLE_TERMINAL_TITLE", "1"),
            ("OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER", "1"),
        ],
    )
    .await;
    let events = json_lines(&stdout);
    let answer: String = events
        .iter()
        .filter(|e| e["type"] == "text")
        .filter_map(|e| e["part"]["text"].as_str())
        .collect();
    assert!(
        status == Some(0) && answer.contains("alpha-1") && answer.contains("bravo-2"),
        "opencode under run: exit {status:?}\n{stdout}\n{stderr}"
    );
    for body in model.seen.lock().unwrap().iter() {
        let names: Vec<&str> = body["tools"]
            .as_array()
            .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
            .unwrap_or_default();
        assert!(
            names.is_empty() || names == vec!["run_code"],
            "the model sees run_code only: {names:?}"
        );
    }
    assert!(
        stderr.contains("codemode-proxy: 1 program run, 2 nested calls"),
        "the summary reports the program: {stderr}"
    );
    assert_no_settings_written(&home);
}

/// gemini-cli's model on the Gemini API (`/v1beta/models/{model}:...`),
/// holding the API's rules on what it gets: a turn of function calls is
/// answered by as many function responses in the next turn, and a call
/// the model made comes back with its thought signature (Gemini 3 models
/// refuse it otherwise). A request without tools (a side request) gets a
/// line of text; the task gets `code` as a `run_code` call (with no code,
/// a line of text), then, once the program's result is in, an answer
/// quoting it. It never answers 429: gemini-cli would retry for minutes.
#[derive(Clone, Default)]
struct GeminiCliModel {
    code: Option<String>,
    /// (path, `x-goog-api-key`, body) of every request.
    seen: std::sync::Arc<std::sync::Mutex<Vec<(String, String, Value)>>>,
}

/// The thought signature the scripted model puts on its `run_code` call.
const PROGRAM_SIGNATURE: &str = "c2lnLXByb2dyYW0=";

impl GeminiCliModel {
    fn seen(&self) -> Vec<(String, String, Value)> {
        self.seen.lock().unwrap().clone()
    }

    /// The first rule of the API `contents` breaks, as Google words it.
    fn broken_rule(contents: &[Value]) -> Option<String> {
        let parts = |c: &Value| c["parts"].as_array().cloned().unwrap_or_default();
        for (i, turn) in contents.iter().enumerate() {
            let calls: Vec<Value> = parts(turn)
                .into_iter()
                .filter(|p| p.get("functionCall").is_some())
                .collect();
            if turn["role"] != "model" || calls.is_empty() {
                continue;
            }
            let answered = contents.get(i + 1).map(parts).unwrap_or_default();
            let responses = answered
                .iter()
                .filter(|p| p.get("functionResponse").is_some())
                .count();
            if responses != calls.len() {
                return Some("Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.".into());
            }
            for call in &calls {
                if call["functionCall"]["name"] == "run_code"
                    && call["thoughtSignature"] != PROGRAM_SIGNATURE
                {
                    return Some(format!("Function call is missing a thought_signature in functionCall parts. Additional data, function call `default_api:run_code` , position {}.", i + 1));
                }
            }
        }
        None
    }
}

impl wiremock::Respond for GeminiCliModel {
    fn respond(&self, req: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let key = req
            .headers
            .get("x-goog-api-key")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let path = req.url.path().to_owned();
        self.seen
            .lock()
            .unwrap()
            .push((path.clone(), key, body.clone()));
        let contents = body["contents"].as_array().cloned().unwrap_or_default();
        if let Some(rule) = Self::broken_rule(&contents) {
            return wiremock::ResponseTemplate::new(400).set_body_json(json!({
                "error": {"code": 400, "message": rule, "status": "INVALID_ARGUMENT"}
            }));
        }
        let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
        let result = contents.last().and_then(|turn| {
            turn["parts"].as_array()?.iter().find_map(|p| {
                let r = p.get("functionResponse")?;
                (r["name"] == "run_code").then(|| r["response"].to_string())
            })
        });
        let parts = match (has_tools, &self.code, result) {
            (false, _, _) => json!([{"text": "ok"}]),
            (true, None, _) => json!([{"text": "Hello from the model."}]),
            (true, Some(_), Some(result)) => json!([{"text": format!("Wrote c.txt: {result}")}]),
            (true, Some(code), None) => json!([{
                "functionCall": {"name": "run_code", "args": {"code": code}, "id": "fc_prog"},
                "thoughtSignature": PROGRAM_SIGNATURE
            }]),
        };
        let response = json!({
            "candidates": [{"content": {"role": "model", "parts": parts},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10,
                              "totalTokenCount": 110},
            "modelVersion": "gemini-2.5-pro"
        });
        if path.ends_with(":streamGenerateContent") {
            // Each event is a whole GenerateContentResponse, as Google sends.
            let events = format!("data: {response}\r\n\r\n");
            wiremock::ResponseTemplate::new(200)
                .set_body_raw(events.into_bytes(), "text/event-stream")
        } else {
            wiremock::ResponseTemplate::new(200).set_body_json(response)
        }
    }
}

impl GeminiCliModel {
    async fn serve(&self) -> wiremock::MockServer {
        let server = wiremock::MockServer::start().await;
        wiremock::Mock::given(wiremock::matchers::method("POST"))
            .and(wiremock::matchers::path_regex(
                r"^/v1beta/models/[^/:]+:(streamGenerateContent|generateContent)$",
            ))
            .respond_with(self.clone())
            .mount(&server)
            .await;
        server
    }
}

/// The user's own gemini-cli settings in `home`: their model, no update
/// checks, no usage statistics; and no auth type (`run` selects it).
const GEMINI_USER_SETTINGS: &str = "{\n  \"model\": {\"name\": \"gemini-2.5-pro\"},\n  \"general\": {\"enableAutoUpdate\": false, \"enableAutoUpdateNotification\": false},\n  \"privacy\": {\"usageStatisticsEnabled\": false}\n}\n";

/// `run -- gemini -p ...` as a user would type it, headless: their own
/// settings in `home`, the workspace trusted for this run (`--skip-trust`,
/// as gemini-cli asks of a headless run in a folder not yet trusted).
async fn run_gemini(
    home: &Path,
    work: &Path,
    prompt: &str,
    vars: &[(&str, &str)],
) -> (Option<i32>, String, String) {
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(home.join(".gemini/settings.json"), GEMINI_USER_SETTINGS).unwrap();
    let gemini = common::gemini_cli::gemini_bin();
    run(
        home,
        work,
        &[
            gemini.to_str().unwrap(),
            "-p",
            prompt,
            "--yolo",
            "--skip-trust",
            "--output-format",
            "stream-json",
        ],
        vars,
    )
    .await
}

/// The user's settings as they were, and no folder of the run's left in
/// the temporary folder (`TMPDIR` is `home`).
fn assert_gemini_home_untouched(home: &Path) {
    assert_eq!(
        std::fs::read_to_string(home.join(".gemini/settings.json")).unwrap(),
        GEMINI_USER_SETTINGS,
        "run wrote the user's gemini-cli settings"
    );
    let left: Vec<String> = std::fs::read_dir(home)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("codemode-gemini-"))
        .collect();
    assert!(
        left.is_empty(),
        "the run's gemini-cli home is left: {left:?}"
    );
}

/// gemini-cli under `run`, with the user's own `GEMINI_API_KEY`: the model
/// sees only `run_code` and the SDK and writes one program; its two reads
/// and one write reach gemini-cli as calls in turns the proxy mints
/// (ids the proxy mints, `call_` and 24 letters and digits), which gemini-cli runs with its own
/// tools.
#[tokio::test]
async fn gemini_under_run_completes_a_program_of_two_reads_and_a_write() {
    if !common::gemini_cli::gemini_ready() {
        return;
    }
    let dir = workdir("gemini", &[("a.txt", "alpha-1\n"), ("b.txt", "bravo-2\n")]);
    let (home, work) = (dir.0.join("home"), dir.0.join("work"));
    // A read gives the program its result text, as the SDK says (gemini-cli
    // answers `{output: TEXT}`; the program gets the text).
    let code = "const text = (r) => { if (typeof r !== 'string') throw new Error('not text: ' + JSON.stringify(r)); return r; };\n\
                const a = text(await tools.read_file({file_path: 'a.txt'})).trim();\n\
                const b = text(await tools.read_file({file_path: 'b.txt'})).trim();\n\
                await tools.write_file({file_path: 'c.txt', content: a + ' ' + b + '\\n'});\n\
                return {a, b};";
    let model = GeminiCliModel {
        code: Some(code.into()),
        ..Default::default()
    };
    let server = model.serve().await;
    let (status, stdout, stderr) = run_gemini(
        &home,
        &work,
        "Join a.txt and b.txt into c.txt.",
        &[
            ("CODEMODE_GEMINI_UPSTREAM", server.uri().as_str()),
            ("GEMINI_API_KEY", "test-gemini-key"),
        ],
    )
    .await;
    let events = json_lines(&stdout);
    let answer: String = events
        .iter()
        .filter(|e| e["type"] == "message" && e["role"] == "assistant")
        .filter_map(|e| e["content"].as_str())
        .collect();
    assert!(
        status == Some(0) && answer.contains("Wrote c.txt") && answer.contains("alpha-1"),
        "gemini under run: exit {status:?}\n{stdout}\n{stderr}"
    );
    let written = std::fs::read_to_string(work.join("c.txt")).unwrap_or_default();
    assert!(
        written.contains("alpha-1") && written.contains("bravo-2"),
        "gemini-cli wrote c.txt from the program's reads: {written:?}"
    );
    let calls: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["type"] == "tool_use")
        .map(|e| {
            (
                e["tool_name"].as_str().unwrap_or(""),
                e["tool_id"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        calls.iter().map(|c| c.0).collect::<Vec<_>>(),
        vec!["read_file", "read_file", "write_file"],
        "gemini-cli ran the three nested calls: {stdout}"
    );
    // gemini-cli's event id is `<tool>__<call id>`.
    let minted = |tool_id: &str| {
        tool_id
            .split_once("__")
            .is_some_and(|(_, id)| crate::common::is_minted_shape(id))
    };
    assert!(
        calls.iter().all(|(_, tool_id)| minted(tool_id)),
        "under the ids the proxy minted: {calls:?}"
    );
    let seen = model.seen();
    let asked: Vec<&(String, String, Value)> = seen
        .iter()
        .filter(|(_, _, b)| b["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .collect();
    assert_eq!(asked.len(), 2, "the model was asked twice: {seen:?}");
    for (_, key, _) in &seen {
        assert_eq!(
            key, "test-gemini-key",
            "the user's key reaches the provider"
        );
    }
    for (path, _, body) in &asked {
        assert!(
            path.starts_with("/v1beta/models/gemini-2.5-pro:"),
            "the model of the user's own settings: {path}"
        );
        let names: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
            .filter_map(|d| d["name"].as_str())
            .collect();
        assert_eq!(names, vec!["run_code"], "the model sees run_code only");
        assert!(
            body["systemInstruction"]
                .to_string()
                .contains("declare const tools"),
            "the system instruction holds the SDK"
        );
    }
    let result = asked[1].2["contents"].to_string();
    assert!(
        result.contains("alpha-1") && result.contains("bravo-2"),
        "the program's result reached the model: {result}"
    );
    assert!(
        stderr.contains("codemode-proxy: 1 program run, 3 nested calls"),
        "the summary reports the program: {stderr}"
    );
    assert_gemini_home_untouched(&home);
}

/// A user with no Gemini key of their own, where the proxy holds the
/// operator's (`CODEMODE_GEMINI_API_KEY`): gemini-cli, which will not start
/// without a key, gets a placeholder, and the provider gets the operator's.
#[tokio::test]
async fn gemini_under_run_needs_no_key_of_its_own_when_the_proxy_holds_one() {
    if !common::gemini_cli::gemini_ready() {
        return;
    }
    let dir = workdir("gemini-operator", &[]);
    let (home, work) = (dir.0.join("home"), dir.0.join("work"));
    let model = GeminiCliModel::default();
    let server = model.serve().await;
    let (status, stdout, stderr) = run_gemini(
        &home,
        &work,
        "Say hello.",
        &[
            ("CODEMODE_GEMINI_UPSTREAM", server.uri().as_str()),
            ("CODEMODE_GEMINI_API_KEY", "operator-gemini-key"),
        ],
    )
    .await;
    assert!(
        status == Some(0) && stdout.contains("Hello from the model."),
        "gemini under run: exit {status:?}\n{stdout}\n{stderr}"
    );
    let seen = model.seen();
    assert!(!seen.is_empty());
    for (_, key, _) in &seen {
        assert_eq!(key, "operator-gemini-key", "the operator's key is sent");
    }
    assert_gemini_home_untouched(&home);
}
