//! Real, unmodified agents through the proxy in code mode (embedded runtime):
//! opencode, the Vercel AI SDK, the OpenAI Agents SDK and LangGraph.
//!
//! Each test starts a scripted model that enforces the providers' rules (a
//! 400 like OpenAI's for an assistant `tool_calls` message without its
//! results; Gemini's `thought_signature` and DeepSeek's `reasoning_content`
//! on replayed turns), starts the proxy in front of it, and runs an agent
//! driver from tests/agents/ as a subprocess.
//!
//! The agents are installed by `tests/agents/install.sh` (`.ci/run` runs it)
//! into `$CODEMODE_AGENTS_DIR` (default `~/.cache/codemode-agents`). Outside
//! CI a test whose agent is missing is skipped with a note; under CI (`CI`
//! set) it fails.
//!
//! The sections marked "issue 9" reproduced what real agents broke (each
//! test failed before the fix): stopped programs, provider fields of the
//! model's turn, rewritten tool-call ids, media after tool results.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::common::agent_driver::{driver, summary};
use crate::common::codex::{agent_workdir, agents_dir, WorkDir};
use crate::common::scripted::{model_server, openai_rules, provider_error, serve, transcript};
use crate::common::*;
use serde_json::{json, Value};
use wiremock::{MockServer, Request, Respond, ResponseTemplate};

// ---------------------------------------------------------------- agents

#[derive(Clone, Copy, Debug, PartialEq)]
enum Agent {
    Opencode,
    AiSdk,
    OpenaiAgents,
    Langgraph,
}

impl Agent {
    fn name(self) -> &'static str {
        match self {
            Agent::Opencode => "opencode",
            Agent::AiSdk => "ai-sdk",
            Agent::OpenaiAgents => "openai-agents",
            Agent::Langgraph => "langgraph",
        }
    }

    /// The file whose presence says the agent is installed.
    fn marker(self) -> PathBuf {
        let d = agents_dir();
        match self {
            Agent::Opencode => d.join("node/node_modules/.bin/opencode"),
            Agent::AiSdk => d.join("node/node_modules/@ai-sdk/openai-compatible/package.json"),
            Agent::OpenaiAgents | Agent::Langgraph => d.join("venv/.stamp"),
        }
    }

    /// Whether the agent can run here; under CI it must.
    fn ready(self) -> bool {
        crate::common::needs::agent(self.name(), &self.marker())
    }

    fn command(self) -> tokio::process::Command {
        let python = agents_dir().join("venv/bin/python");
        match self {
            Agent::Opencode => driver("node", "opencode.mjs"),
            Agent::AiSdk => driver("node", "ai_sdk.mjs"),
            Agent::OpenaiAgents => driver(python, "openai_agents.py"),
            Agent::Langgraph => driver(python, "langgraph_agent.py"),
        }
    }

    /// A call of this agent's read tool on `file`, as a program writes it.
    fn read_expr(self, dir: &std::path::Path, file: &str) -> String {
        match self {
            Agent::Opencode => format!(
                "tools.read({{filePath: {}}})",
                json!(dir.join(file).to_string_lossy())
            ),
            _ => format!("tools.read({{path: {}}})", json!(file)),
        }
    }
}

/// One run of an agent driver.
struct Run {
    agent: Agent,
    prompts: Vec<&'static str>,
    max_steps: Option<u32>,
    stream: bool,
    model: &'static str,
    /// opencode: the model takes images (AGENT_IMAGES=1).
    images: bool,
    /// AI SDK: `@ai-sdk/openai`'s chat model instead of openai-compatible.
    openai_provider: bool,
}

impl Run {
    fn new(agent: Agent) -> Run {
        Run {
            agent,
            prompts: vec!["Read the files a.txt to d.txt and tell me what they say."],
            max_steps: None,
            stream: false,
            model: "test-model",
            images: false,
            openai_provider: false,
        }
    }

    /// Runs the driver in `dir` against the proxy in front of the scripted
    /// model (`label`, answering `script`); its JSON summary, and the model.
    async fn go(
        &self,
        label: &str,
        script: impl IntoIterator<Item = Turn>,
        dir: &std::path::Path,
    ) -> (Value, Model) {
        let (p, m) = model(label, script).await;
        let proxy = proxy_for(&p).await;
        let mut cmd = self.agent.command();
        cmd.env("AGENT_BASE_URL", proxy.url("/v1"))
            .env("AGENT_DIR", dir)
            .env("AGENT_MODEL", self.model)
            .env("AGENT_PROMPTS", json!(self.prompts).to_string())
            .env("CODEMODE_AGENTS_DIR", agents_dir())
            // No telemetry, tracing or update checks anywhere.
            .env("OPENAI_AGENTS_DISABLE_TRACING", "1")
            .env("LANGSMITH_TRACING", "false")
            .env("LANGCHAIN_TRACING_V2", "false")
            .env("DO_NOT_TRACK", "1")
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .current_dir(dir)
            .kill_on_drop(true);
        if let Some(n) = self.max_steps {
            cmd.env("AGENT_MAX_STEPS", n.to_string());
        }
        if self.stream {
            cmd.env("AGENT_STREAM", "1");
        }
        if self.images {
            cmd.env("AGENT_IMAGES", "1");
        }
        if self.openai_provider {
            cmd.env("AGENT_PROVIDER", "openai");
        }
        (summary(&mut cmd, self.agent.name(), 180).await, m)
    }
}

/// A fresh directory holding `files`, one per call.
fn workdir(files: &[(&str, &str)]) -> WorkDir {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    agent_workdir("agents", &n.to_string(), files)
}

const FILES: [(&str, &str); 4] = [
    ("a.txt", "alpha-1"),
    ("b.txt", "bravo-2"),
    ("c.txt", "charlie-3"),
    ("d.txt", "delta-4"),
];

/// A program reading `files` one after the other, returning them joined.
fn sequential_reads(agent: Agent, dir: &std::path::Path, files: &[&str]) -> String {
    let parts: Vec<String> = files
        .iter()
        .enumerate()
        .map(|(i, f)| format!("const r{i} = await {};", agent.read_expr(dir, f)))
        .collect();
    let joined: Vec<String> = (0..files.len()).map(|i| format!("r{i}")).collect();
    format!(
        "{}\nreturn [{}].join(' | ');",
        parts.join("\n"),
        joined.join(", ")
    )
}

// ---------------------------------------------------------- the model

/// One scripted answer of the model.
#[derive(Clone, Debug)]
enum Turn {
    /// A `run_code` call, with the provider fields the model's turn carries.
    RunCode {
        code: String,
        /// DeepSeek-style `reasoning_content` on the message.
        reasoning: Option<String>,
        /// Gemini-style `extra_content.google.thought_signature` on the call.
        signature: Option<String>,
    },
    /// Text: "ANSWER: " and the content of the last tool result it was sent.
    Echo,
    /// Fixed text.
    Say(&'static str),
}

fn run_code(code: String) -> Turn {
    Turn::RunCode {
        code,
        reasoning: None,
        signature: None,
    }
}

#[derive(Default)]
struct ModelState {
    /// Where to append every request (`REAL_AGENTS_DUMP` dir + test label).
    dump: Option<PathBuf>,
    script: VecDeque<Turn>,
    /// Every chat request: its body and the status the model answered.
    log: Vec<(Value, u16, String)>,
    /// Fields the model put on its own turns, by call id, to check replays.
    reasoning: HashMap<String, String>,
    signatures: HashMap<String, String>,
    /// The ids of every call the model made.
    issued: Vec<String>,
    n: usize,
}

/// A model that answers its script in order and enforces providers' rules.
#[derive(Clone)]
struct Model(Arc<Mutex<ModelState>>);

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// Whether a request is an agent's side request (opencode's title).
fn is_side_request(body: &Value) -> bool {
    let first = body["messages"][0]["content"].to_string();
    first.contains("title generator") || first.contains("generate a title")
}

impl ModelState {
    /// The providers' rules: OpenAI's on tool messages, then Gemini's and
    /// DeepSeek's on the model's replayed turns; the first one broken, as
    /// the provider says it.
    fn check(&self, messages: &[Value]) -> Option<String> {
        openai_rules(messages).or_else(|| self.replay_rules(messages))
    }

    fn replay_rules(&self, messages: &[Value]) -> Option<String> {
        for (i, m) in messages.iter().enumerate() {
            if m["role"] != "assistant" {
                continue;
            }
            for c in m["tool_calls"].as_array().into_iter().flatten() {
                let id = c["id"].as_str().unwrap_or("");
                // Gemini: the call's thought signature comes back.
                if let Some(sig) = self.signatures.get(id) {
                    if c["extra_content"]["google"]["thought_signature"] != json!(sig) {
                        return Some(format!("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:{}` , position {}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", c["function"]["name"].as_str().unwrap_or(""), i + 1));
                    }
                }
                // DeepSeek: the turn's reasoning_content comes back.
                if let Some(r) = self.reasoning.get(id) {
                    if m["reasoning_content"] != json!(r) {
                        return Some(format!("Missing `reasoning_content` field in the assistant message at message index {i}. For more information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"));
                    }
                }
            }
        }
        None
    }
}

impl Respond for Model {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let mut st = self.0.lock().unwrap();
        if let Some(file) = &st.dump {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(file)
                .unwrap();
            let headers: HashMap<String, String> = req
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
                .collect();
            writeln!(f, "{}", json!({"headers": headers, "body": body})).unwrap();
        }
        if is_side_request(&body) {
            return serve(
                &body,
                json!({"role": "assistant", "content": "Reading files"}),
            );
        }
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        if let Some(message) = st.check(&messages) {
            st.log.push((body, 400, message.clone()));
            return provider_error(&message);
        }
        let Some(turn) = st.script.pop_front() else {
            st.log.push((body, 500, "script exhausted".into()));
            return ResponseTemplate::new(500).set_body_string("script exhausted");
        };
        st.n += 1;
        let message = match turn {
            Turn::RunCode {
                code,
                reasoning,
                signature,
            } => {
                let id = format!("call_prog_{}", st.n);
                st.issued.push(id.clone());
                let mut call = json!({"id": id, "type": "function",
                    "function": {"name": "run_code", "arguments": json!({"code": code}).to_string()}});
                let mut m = json!({"role": "assistant", "content": "Let me run a program.", "tool_calls": [call.clone()]});
                if let Some(s) = signature {
                    call["extra_content"] = json!({"google": {"thought_signature": s}});
                    m["tool_calls"] = json!([call]);
                    st.signatures.insert(id.clone(), s);
                }
                if let Some(r) = reasoning {
                    m["reasoning_content"] = json!(r);
                    st.reasoning.insert(id, r);
                }
                m
            }
            Turn::Echo => {
                let last = messages
                    .iter()
                    .rev()
                    .find(|m| m["role"] == "tool")
                    .map(|m| text_of(&m["content"]))
                    .unwrap_or_default();
                json!({"role": "assistant", "content": format!("ANSWER: {last}")})
            }
            Turn::Say(text) => json!({"role": "assistant", "content": text}),
        };
        let template = serve(&body, message);
        st.log.push((body, 200, String::new()));
        template
    }
}

/// The scripted model; with `REAL_AGENTS_DUMP=<dir>` set it writes every
/// request it gets to `<dir>/<label>.jsonl`.
async fn model(label: &str, script: impl IntoIterator<Item = Turn>) -> (MockServer, Model) {
    let dump = std::env::var_os("REAL_AGENTS_DUMP").map(|d| {
        let d = PathBuf::from(d);
        std::fs::create_dir_all(&d).unwrap();
        let file = d.join(format!("{label}.jsonl"));
        let _ = std::fs::remove_file(&file);
        file
    });
    let m = Model(Arc::new(Mutex::new(ModelState {
        dump,
        script: script.into_iter().collect(),
        ..Default::default()
    })));
    (model_server(m.clone()).await, m)
}

impl Model {
    fn log(&self) -> Vec<(Value, u16, String)> {
        self.0.lock().unwrap().log.clone()
    }

    /// The provider's refusals, for assertion messages.
    /// Asserts the agent's `report` has no error; the message shows the
    /// provider's refusals and what the model saw.
    fn assert_ran_without_error(&self, report: &Value) {
        assert!(
            report["error"].is_null(),
            "{}\nprovider refusals: {:?}\nthe model saw:{}",
            report["error"],
            self.refusals(),
            self.transcript()
        );
    }

    fn refusals(&self) -> Vec<String> {
        self.log()
            .into_iter()
            .filter(|(_, s, _)| *s != 200)
            .map(|(_, s, m)| format!("{s} {m}"))
            .collect()
    }

    /// Each request in short, for assertion messages.
    fn transcript(&self) -> String {
        let log = self.log();
        transcript(
            log.iter()
                .map(|(body, status, refusal)| (body, *status, refusal.as_str())),
        )
    }

    /// The model was shown only calls it made itself.
    fn assert_saw_only_its_calls(&self) {
        let issued = self.0.lock().unwrap().issued.clone();
        for (body, _, _) in self.log() {
            for m in body["messages"].as_array().cloned().unwrap_or_default() {
                for c in m["tool_calls"].as_array().cloned().unwrap_or_default() {
                    let id = c["id"].as_str().unwrap_or("");
                    assert!(
                        issued.iter().any(|i| i == id),
                        "the model was shown a call it never made: {c}\nthe model saw:{}",
                        self.transcript()
                    );
                }
            }
        }
    }

    /// Every request the model accepted carried `run_code` only.
    fn assert_code_mode_wire(&self) {
        for (body, _, _) in self.log() {
            assert_eq!(
                wire_tool_names(&body),
                vec!["run_code"],
                "code mode carries the proxy's run_code only"
            );
        }
    }
}

async fn proxy_for(p: &MockServer) -> Proxy {
    start_with(config(
        &format!("{}/v1", p.uri()),
        &[("CODEMODE_RUNTIME", "embedded"), ("CODEMODE_MODE", "code")],
    ))
    .await
}

// ---------------------------------------------------------- happy paths

/// What a four-read program on `agent` starts from: a work directory with
/// [`FILES`], the program reading a.txt to d.txt, the run's label (`what`,
/// the agent, json or stream) and a run streaming as asked; none where the
/// agent is not installed.
fn four_reads(agent: Agent, stream: bool, what: &str) -> Option<(WorkDir, String, String, Run)> {
    if !agent.ready() {
        return None;
    }
    let dir = workdir(&FILES);
    let code = sequential_reads(agent, &dir, &["a.txt", "b.txt", "c.txt", "d.txt"]);
    let label = format!(
        "{what}-{}-{}",
        agent.name(),
        if stream { "stream" } else { "json" }
    );
    let mut run = Run::new(agent);
    run.stream = stream;
    Some((dir, code, label, run))
}

/// A program with four sequential nested calls; the answer holds every file.
async fn happy_path(agent: Agent, stream: bool) {
    happy_path_with(agent, stream, false).await;
}

async fn happy_path_with(agent: Agent, stream: bool, openai_provider: bool) {
    let Some((dir, code, label, mut run)) = four_reads(agent, stream, "happy") else {
        return;
    };
    run.openai_provider = openai_provider;
    let (report, m) = run.go(&label, [run_code(code), Turn::Echo], &dir).await;
    assert!(
        report["error"].is_null(),
        "{}: {report}\nprovider refusals: {:?}",
        agent.name(),
        m.refusals()
    );
    let text = report["final"].as_str().unwrap_or("");
    for (_, content) in FILES {
        assert!(
            text.contains(content),
            "{}: the answer lacks {content}: {report}",
            agent.name()
        );
    }
    m.assert_code_mode_wire();
    m.assert_saw_only_its_calls();
    assert_eq!(m.log().len(), 2, "the model saw two requests");
}

crate::async_cases! {
    opencode_runs_a_program_of_sequential_reads: happy_path(Agent::Opencode, true);
    ai_sdk_runs_a_program_of_sequential_reads: happy_path(Agent::AiSdk, false);
    ai_sdk_streaming_runs_a_program_of_sequential_reads: happy_path(Agent::AiSdk, true);
    ai_sdk_openai_provider_runs_a_program_of_sequential_reads: happy_path_with(Agent::AiSdk, false, true);
    ai_sdk_openai_provider_streaming_runs_a_program_of_sequential_reads: happy_path_with(Agent::AiSdk, true, true);
    openai_agents_runs_a_program_of_sequential_reads: happy_path(Agent::OpenaiAgents, false);
    openai_agents_streaming_runs_a_program_of_sequential_reads: happy_path(Agent::OpenaiAgents, true);
    langgraph_runs_a_program_of_sequential_reads: happy_path(Agent::Langgraph, false);
    langgraph_streaming_runs_a_program_of_sequential_reads: happy_path(Agent::Langgraph, true);
}

// ------------------------------------- issue 9 item 1: stopped programs

/// The agent's step limit stops a four-call program after two calls; a new
/// user message must go on, and the model must see `run_code` with a result
/// that says the program was interrupted.
async fn step_limit_mid_program(agent: Agent, stream: bool) {
    let Some((dir, code, label, mut run)) = four_reads(agent, stream, "step-limit") else {
        return;
    };
    run.max_steps = Some(2);
    run.prompts = vec![
        "Read the files a.txt to d.txt and tell me what they say.",
        "Never mind the files. Say CONTINUED.",
    ];
    let (report, m) = run
        .go(
            &label,
            [
                run_code(code),
                Turn::Say("CONTINUED"),
                Turn::Say("CONTINUED"),
            ],
            &dir,
        )
        .await;
    assert!(
        report["error"].is_null(),
        "{}: the conversation is wedged: {}\nturns: {}\nprovider refusals: {:?}\nthe model saw:{}",
        agent.name(),
        report["error"],
        report["turns"],
        m.refusals(),
        m.transcript()
    );
    assert_eq!(
        report["final"],
        "CONTINUED",
        "{}: {report}\nthe model saw:{}",
        agent.name(),
        m.transcript()
    );
    // The model saw its run_code call answered as interrupted.
    let (last, _, _) = m.log().last().cloned().unwrap();
    let messages = last["messages"].as_array().cloned().unwrap_or_default();
    let run_code_id = messages
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .find(|c| c["function"]["name"] == "run_code")
        .map(|c| c["id"].clone())
        .unwrap_or_else(|| panic!("the model no longer sees its run_code call: {last}"));
    let result = messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == run_code_id)
        .map(|m| text_of(&m["content"]).to_lowercase())
        .expect("run_code has a result");
    assert!(
        result.contains("interrupt"),
        "the result says the program was interrupted: {result}"
    );
    m.assert_code_mode_wire();
}

crate::async_cases! {
    opencode_step_limit_mid_program_then_the_conversation_goes_on: step_limit_mid_program(Agent::Opencode, true);
    ai_sdk_step_limit_mid_program_then_the_conversation_goes_on: step_limit_mid_program(Agent::AiSdk, false);
    ai_sdk_streaming_step_limit_mid_program_then_the_conversation_goes_on: step_limit_mid_program(Agent::AiSdk, true);
    openai_agents_max_turns_mid_program_then_the_conversation_goes_on: step_limit_mid_program(Agent::OpenaiAgents, false);
    langgraph_recursion_limit_mid_program_then_the_conversation_goes_on: step_limit_mid_program(Agent::Langgraph, false);
}

// ------------------------------ issue 9 item 2: provider fields survive

/// The model's run_code turn carries a provider field that must come back on
/// every replay; the program makes several nested calls, so the turn is
/// rebuilt more than once.
async fn provider_fields_survive(agent: Agent, stream: bool, gemini: bool) {
    if !agent.ready() {
        return;
    }
    let dir = workdir(&FILES);
    let code = sequential_reads(agent, &dir, &["a.txt", "b.txt"]);
    let turn = if gemini {
        Turn::RunCode {
            code,
            reasoning: None,
            signature: Some("c2lnbmF0dXJlLW9mLXRoZS10dXJu".into()),
        }
    } else {
        Turn::RunCode {
            code,
            reasoning: Some("I should read both files in one program.".into()),
            signature: None,
        }
    };
    let label = format!(
        "{}-{}-{}",
        if gemini { "gemini" } else { "deepseek" },
        agent.name(),
        if stream { "stream" } else { "json" }
    );
    let mut run = Run::new(agent);
    run.stream = stream;
    let (report, m) = run.go(&label, [turn, Turn::Echo], &dir).await;
    assert!(
        report["error"].is_null(),
        "{}: {}\nprovider refusals: {:?}",
        agent.name(),
        report["error"],
        m.refusals()
    );
    let text = report["final"].as_str().unwrap_or("");
    assert!(
        text.contains("alpha-1") && text.contains("bravo-2"),
        "{report}"
    );
}

crate::async_cases! {
    ai_sdk_gemini_thought_signature_survives_the_replay: provider_fields_survive(Agent::AiSdk, false, true);
    ai_sdk_streaming_gemini_thought_signature_survives_the_replay: provider_fields_survive(Agent::AiSdk, true, true);
    openai_agents_deepseek_reasoning_content_survives_the_replay: provider_fields_survive(Agent::OpenaiAgents, false, false);
    langgraph_streaming_deepseek_reasoning_content_survives_the_replay: provider_fields_survive(Agent::Langgraph, true, false);
}

// ------------------------------- issue 9 item 3: rewritten tool-call ids

/// opencode rewrites tool-call ids to 9 alphanumerics for Mistral-family
/// models; the program must still run to its end. `parallel`: the nested
/// calls come in one batch (Promise.all), whose shortened ids collide.
async fn mistral_program(parallel: bool) {
    let agent = Agent::Opencode;
    if !agent.ready() {
        return;
    }
    let dir = workdir(&FILES);
    let files = ["a.txt", "b.txt", "c.txt"];
    let code = if parallel {
        let reads: Vec<String> = files.iter().map(|f| agent.read_expr(&dir, f)).collect();
        format!(
            "const parts = await Promise.all([{}]);\nreturn parts.join(' | ');",
            reads.join(", ")
        )
    } else {
        sequential_reads(agent, &dir, &files)
    };
    let label = format!(
        "mistral-opencode-{}",
        if parallel { "parallel" } else { "sequential" }
    );
    let mut run = Run::new(agent);
    run.model = "mistral-large-latest";
    let (report, m) = run.go(&label, [run_code(code), Turn::Echo], &dir).await;
    m.assert_ran_without_error(&report);
    m.assert_saw_only_its_calls();
    let text = report["final"].as_str().unwrap_or("");
    for (_, content) in &FILES[..3] {
        assert!(
            text.contains(content),
            "the answer lacks {content}: {report}\nthe model saw:{}",
            m.transcript()
        );
    }
    m.assert_code_mode_wire();
}

crate::async_cases! {
    opencode_with_a_mistral_model_gets_the_program_result: mistral_program(false);
    opencode_with_a_mistral_model_gets_a_parallel_program_result: mistral_program(true);
}

/// A 1x1 PNG.
const PNG: &[u8] = b"\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90\x77\x53\xde\x00\x00\x00\x0c\x49\x44\x41\x54\x78\x9c\x63\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92\xef\x00\x00\x00\x00\x49\x45\x4e\x44\xae\x42\x60\x82";

/// opencode sends an image a tool read after the tool results, in a user
/// message ("Attached media from tool result:"); the program must resume.
#[tokio::test]
async fn opencode_program_resumes_after_an_image_result() {
    let agent = Agent::Opencode;
    if !agent.ready() {
        return;
    }
    let dir = workdir(&FILES);
    std::fs::write(dir.join("pixel.png"), PNG).unwrap();
    let code = sequential_reads(agent, &dir, &["pixel.png", "a.txt", "b.txt"]);
    let mut run = Run::new(agent);
    run.images = true;
    let (report, m) = run
        .go("image-opencode", [run_code(code), Turn::Echo], &dir)
        .await;
    m.assert_ran_without_error(&report);
    let text = report["final"].as_str().unwrap_or("");
    assert!(
        text.contains("alpha-1") && text.contains("bravo-2"),
        "the program did not run to its end: {report}\nthe model saw:{}",
        m.transcript()
    );
    m.assert_code_mode_wire();
}
