//! Google's Interactions API (`POST /v1/interactions`) through the proxy
//! with the real SDK clients, unmodified, on their defaults: the Python SDK
//! (`google-genai`) and the JS SDK (`@google/genai`), each in a manual
//! function-calling loop over one tool, `get_weather`
//! (tests/agents/google_genai_interactions.py and .mjs, installed by
//! tests/agents/install.sh; outside CI a missing SDK skips its test with a
//! note, under CI it fails). Native and code mode, JSON and streamed, turns
//! continued with `previous_interaction_id` (stateful) or the whole history
//! re-sent with `store: false` (stateless), in front of a scripted
//! Interactions model (common/interactions_model.rs) that enforces the
//! API's rules on what it gets.
//!
//! Each run: the model answers first with a call (native: `get_weather`
//! for Paris; code: a `run_code` whose program makes that call, which the
//! proxy runs, handing the client the native call and resuming on its
//! result), then with text echoing the last function result it was sent.
//! Code mode also: the model calling the client's tool directly first
//! (the proxy answers it UNKNOWN_TOOL and asks again; the client never
//! sees it), a program making two calls at once, and the conversation
//! going on with a second question after the program's answer.

use std::path::PathBuf;

use crate::common::agent_driver::{driver, ran_tools, summary, without_callers_env};
use crate::common::codex::{agents_dir, workdir};
use crate::common::interactions_model::{self as im, InteractionsModel, Seen};
use crate::common::{is_minted_shape, minted_ids_in, start, Proxy};
use serde_json::{json, Value};
use wiremock::MockServer;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Sdk {
    Python,
    Js,
}

impl Sdk {
    fn name(self) -> &'static str {
        match self {
            Sdk::Python => "google-genai",
            Sdk::Js => "@google/genai",
        }
    }

    /// The file whose presence says the SDK is installed.
    fn marker(self) -> PathBuf {
        match self {
            Sdk::Python => agents_dir().join("venv/.stamp"),
            Sdk::Js => agents_dir().join("node/node_modules/@google/genai/package.json"),
        }
    }

    /// Whether the SDK can run here; under CI it must.
    fn ready(self) -> bool {
        crate::common::needs::agent(self.name(), &self.marker())
    }

    fn command(self) -> tokio::process::Command {
        match self {
            Sdk::Python => driver(
                agents_dir().join("venv/bin/python"),
                "google_genai_interactions.py",
            ),
            Sdk::Js => driver("node", "google_genai_interactions.mjs"),
        }
    }
}

/// How a run goes.
#[derive(Clone, Copy, Debug)]
struct Run {
    sdk: Sdk,
    code: bool,
    stream: bool,
    stateless: bool,
    /// The SDK set to `v1beta` (Google's REST examples' version), not its
    /// default `v1`.
    beta: bool,
}

impl Run {
    fn label(self) -> String {
        format!(
            "interactions-{}-{}-{}-{}",
            self.sdk.name().replace(['@', '/'], "_"),
            if self.code { "code" } else { "native" },
            if self.stream { "stream" } else { "json" },
            if self.stateless {
                "stateless"
            } else {
                "stateful"
            }
        ) + if self.beta { "-v1beta" } else { "" }
    }
}

/// The program the model runs in code mode.
const PROGRAM: &str = "const a = await tools.get_weather({location: \"Paris\"});\nreturn a;";

/// The program making two calls at once.
const PARALLEL: &str = "const [a, b] = await Promise.all([tools.get_weather({location: \"Paris\"}), tools.get_weather({location: \"Rome\"})]);\nreturn [a, b];";

/// What the model does in code mode.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Model {
    /// Runs [`PROGRAM`].
    Program,
    /// Calls `get_weather` for Oslo directly first (the proxy answers that
    /// itself, UNKNOWN_TOOL, and asks again), then runs [`PROGRAM`].
    Direct,
    /// Runs [`PARALLEL`].
    Parallel,
}

/// The client's question.
const PROMPT: &str = "What is the weather in Paris?";

/// Its next one, in the same conversation.
const FOLLOW_UP: &str = "And tomorrow?";

/// The client's own instructions, kept in code mode beside the SDK.
const SYSTEM: &str = "You are a weather bot.";

/// What the client got for Paris.
const PARIS: &str = "sunny in Paris";

/// The proxy in `mode` in front of the model's provider, and the base URL
/// the client is given (the server root, as Google's is).
async fn proxy_for(server: &MockServer, code: bool) -> (Proxy, String) {
    let uri = server.uri();
    let mut vars = vec![
        ("CODEMODE_MODE", if code { "code" } else { "native" }),
        ("CODEMODE_GEMINI_UPSTREAM", uri.as_str()),
    ];
    if code {
        vars.push(("CODEMODE_RUNTIME", "embedded"));
    }
    let proxy = start(server, &vars).await;
    let base = proxy.url("").trim_end_matches('/').to_owned();
    (proxy, base)
}

/// Runs the SDK's driver against `base`; its JSON summary.
async fn drive(run: Run, base: &str, prompts: &[&str]) -> Value {
    let dir = workdir(&run.label(), &[]);
    let mut cmd = run.sdk.command();
    cmd.env("AGENT_BASE_URL", base)
        .env("AGENT_PROMPTS", json!(prompts).to_string())
        .env("AGENT_SYSTEM", SYSTEM)
        .env("CODEMODE_AGENTS_DIR", agents_dir())
        .current_dir(&dir.0)
        .kill_on_drop(true);
    without_callers_env(
        &mut cmd,
        &["AGENT_STREAM", "AGENT_STATELESS", "AGENT_API_VERSION"],
    );
    if run.stream {
        cmd.env("AGENT_STREAM", "1");
    }
    if run.stateless {
        cmd.env("AGENT_STATELESS", "1");
    }
    if run.beta {
        cmd.env("AGENT_API_VERSION", "v1beta");
    }
    summary(&mut cmd, run.sdk.name(), 120).await
}

/// The names of the tools a create declares, sorted.
fn declared(body: &Value) -> Vec<String> {
    let mut names: Vec<String> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["name"].as_str().unwrap_or("").to_owned())
        .collect();
    names.sort();
    names
}

/// The steps of a create's input of `type`.
fn steps_of(body: &Value, kind: &str) -> Vec<Value> {
    im::input_steps(&body["input"])
        .into_iter()
        .filter(|s| s["type"] == kind)
        .collect()
}

/// Every create the model got, for a failure's message.
fn dump(seen: &[Seen]) -> String {
    seen.iter()
        .map(|s| {
            format!(
                "\n  {} {} {} -> {} {}: {}",
                s.status,
                s.path,
                s.refusal,
                s.id,
                Value::from(s.steps.clone()),
                s.body
            )
        })
        .collect()
}

/// Whether `id` is an interaction id the proxy mints: `v1_` and hex.
fn is_minted_interaction(id: &str) -> bool {
    id.strip_prefix("v1_")
        .is_some_and(|h| !h.is_empty() && h.bytes().all(|c| c.is_ascii_hexdigit()))
}

/// A run: the client's summary, and what the model got.
async fn go(
    run: Run,
    script: Vec<Vec<Value>>,
    prompts: &[&str],
) -> Option<(Value, InteractionsModel)> {
    if !run.sdk.ready() {
        return None;
    }
    let model = InteractionsModel::new(script);
    let server = model.serve().await;
    let (proxy, base) = proxy_for(&server, run.code).await;
    let report = drive(run, &base, prompts).await;
    drop(proxy);
    Some((report, model))
}

/// The checks every run shares: the client ran `get_weather` once, for
/// Paris; it got the model's echo of the last result; every create was
/// accepted, on the SDK's default path, streamed or not as the client
/// asked, stateless or continuing the provider's own interaction.
fn common_checks(
    run: Run,
    report: &Value,
    model: &InteractionsModel,
    creates: usize,
    places: &[&str],
) {
    let seen = model.seen();
    let sent = dump(&seen);
    let who = run.label();
    assert!(
        report["error"].is_null(),
        "{who}: {report}\nthe model got:{sent}"
    );
    let mut ran = ran_tools(report);
    ran.sort_by_key(|(_, args)| args.to_string());
    let want: Vec<(String, Value)> = places
        .iter()
        .map(|p| ("get_weather".to_owned(), json!({"location": p})))
        .collect();
    assert_eq!(
        ran, want,
        "{who}: the tools it ran: {report}\nthe model got:{sent}"
    );
    let text = report["final"].as_str().unwrap_or("");
    assert!(
        text.starts_with("ANSWER: ") && text.contains(PARIS),
        "{who}: the answer echoes the result: {report}\nthe model got:{sent}"
    );
    assert_eq!(
        seen.len(),
        creates,
        "{who}: the model got {creates} creates:{sent}"
    );
    let ids = model.ids();
    for (i, s) in seen.iter().enumerate() {
        assert_eq!(s.status, 200, "{who}: the model refused a create:{sent}");
        let path = if run.beta {
            "/v1beta/interactions"
        } else {
            "/v1/interactions"
        };
        assert_eq!(s.path, path, "{who}: the SDK's path:{sent}");
        assert_eq!(
            s.body["stream"] == true,
            run.stream,
            "{who}: streamed as the client asked:{sent}"
        );
        if run.stateless {
            assert_eq!(s.body["store"], false, "{who}: stateless:{sent}");
            assert!(
                s.body.get("previous_interaction_id").is_none(),
                "{who}: stateless:{sent}"
            );
        } else if i > 0 {
            // Each turn continues the provider's interaction before it,
            // never one the proxy minted; or (a round of the proxy's own,
            // answering a call it denied) restates the whole history.
            match s.body.get("previous_interaction_id") {
                Some(prev) => assert_eq!(
                    prev,
                    &ids[i - 1],
                    "{who}: create {i} continues the provider's interaction:{sent}"
                ),
                None => assert_eq!(
                    im::input_steps(&s.body["input"])
                        .first()
                        .map(|s| &s["type"]),
                    Some(&json!("user_input")),
                    "{who}: create {i} continues nothing, so holds the whole history:{sent}"
                ),
            }
        }
        assert_eq!(
            s.body["system_instruction"]
                .as_str()
                .map(|t| t.contains(SYSTEM)),
            Some(true),
            "{who}: the client's system_instruction is kept:{sent}"
        );
    }
    let last = report["interactions"].as_array().and_then(|i| i.last());
    assert_eq!(
        last.map(|i| &i["status"]),
        Some(&json!("completed")),
        "{who}: the last interaction completed: {report}"
    );
}

/// A native run: everything passes as it is.
async fn native(run: Run) {
    let script = vec![
        vec![
            im::text("Let me look."),
            im::call("call_wx1", "get_weather", json!({"location": "Paris"})),
        ],
        vec![im::echo()],
    ];
    let Some((report, model)) = go(run, script, &[PROMPT]).await else {
        return;
    };
    common_checks(run, &report, &model, 2, &["Paris"]);
    let seen = model.seen();
    let sent = dump(&seen);
    let who = run.label();
    for s in &seen {
        assert_eq!(
            declared(&s.body),
            ["get_weather"],
            "{who}: the client's tools:{sent}"
        );
        assert_eq!(
            s.body["system_instruction"], SYSTEM,
            "{who}: unchanged:{sent}"
        );
    }
    // The client got the model's call and interactions as they were.
    assert_eq!(
        report["calls"],
        json!([{"id": "call_wx1", "name": "get_weather"}]),
        "{who}: {report}"
    );
    let got: Vec<&Value> = report["interactions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| &i["id"])
        .collect();
    assert_eq!(
        got,
        model.ids().iter().collect::<Vec<_>>(),
        "{who}: {report}"
    );
    if !run.stateless {
        assert_eq!(
            seen[1].body["previous_interaction_id"],
            model.ids()[0],
            "{who}: continues the provider's interaction:{sent}"
        );
    }
    let results = steps_of(&seen[1].body, "function_result");
    assert_eq!(results.len(), 1, "{who}:{sent}");
    assert_eq!(results[0]["call_id"], "call_wx1", "{who}:{sent}");
    assert!(
        results[0]["result"].to_string().contains(PARIS),
        "{who}:{sent}"
    );
}

/// A code-mode run, the model doing `what`.
async fn code(run: Run, what: Model) {
    let program = if what == Model::Parallel {
        PARALLEL
    } else {
        PROGRAM
    };
    let mut script = vec![
        vec![
            im::text("Let me look."),
            im::run_code("call_prog1", program),
        ],
        vec![im::echo()],
    ];
    if what == Model::Direct {
        script.insert(
            0,
            vec![im::call(
                "call_direct",
                "get_weather",
                json!({"location": "Oslo"}),
            )],
        );
    }
    let places: &[&str] = if what == Model::Parallel {
        &["Paris", "Rome"]
    } else {
        &["Paris"]
    };
    let creates = script.len();
    let Some((report, model)) = go(run, script, &[PROMPT]).await else {
        return;
    };
    common_checks(run, &report, &model, creates, places);
    let seen = model.seen();
    let sent = dump(&seen);
    let who = run.label();
    let ids = model.ids();
    for s in &seen {
        // Only run_code on the wire, the SDK (the client's tool) in the
        // instructions beside the client's own.
        assert_eq!(
            declared(&s.body),
            ["run_code"],
            "{who}: only run_code:{sent}"
        );
        let system = s.body["system_instruction"].as_str().unwrap_or("");
        assert!(
            system.contains("get_weather") && system.len() > SYSTEM.len(),
            "{who}: the SDK in system_instruction: {system}"
        );
        // The proxy's ids, the calls' and the interactions', stay between
        // it and the client.
        let text = s.body.to_string();
        assert_eq!(
            minted_ids_in(&text),
            Vec::<String>::new(),
            "{who}: a minted call id went upstream:{sent}"
        );
        if let Some(prev) = s.body["previous_interaction_id"].as_str() {
            assert!(
                ids.iter().any(|i| i == prev),
                "{who}: previous_interaction_id {prev} is not the provider's:{sent}"
            );
        }
        // The client's call never reaches the model as one it made.
        assert!(
            steps_of(&s.body, "function_call")
                .iter()
                .all(|c| c["id"] == "call_prog1" || c["id"] == "call_direct"),
            "{who}: only the model's own calls go back:{sent}"
        );
    }
    // The client was handed the program's call, under an id the proxy
    // minted, in an interaction the proxy minted; never run_code, never
    // the model's direct call.
    let calls = report["calls"].as_array().cloned().unwrap_or_default();
    assert_eq!(calls.len(), places.len(), "{who}: its calls: {report}");
    for c in &calls {
        assert_eq!(c["name"], "get_weather", "{who}: {report}");
        let id = c["id"].as_str().unwrap_or("");
        assert!(is_minted_shape(id), "{who}: a minted call id: {report}");
    }
    assert!(
        calls.len() < 2 || calls[0]["id"] != calls[1]["id"],
        "{who}: each call its own id: {report}"
    );
    let first = &report["interactions"][0];
    assert_eq!(first["status"], "requires_action", "{who}: {report}");
    let minted = first["id"].as_str().unwrap_or("");
    assert!(
        is_minted_interaction(minted) && !ids.iter().any(|i| i == minted),
        "{who}: the proxy minted the interaction handing out its call: {report}\nthe model gave: {ids:?}"
    );
    // The model got the program's result as run_code's.
    let last = &seen[creates - 1].body;
    let results = steps_of(last, "function_result");
    let answer = results
        .iter()
        .find(|r| r["call_id"] == "call_prog1")
        .unwrap_or_else(|| panic!("{who}: run_code answered:{sent}"));
    for place in places {
        assert!(
            answer["result"]
                .to_string()
                .contains(&format!("sunny in {place}")),
            "{who}: the program's result:{sent}"
        );
    }
    if run.stateless {
        // The whole history: the user's turn first, and last the model's
        // turn holding run_code exactly as the model gave it (its thought
        // with the call's signature, its words, the call), then the
        // program's result.
        let input = im::input_steps(&last["input"]);
        let turn = &seen[creates - 2].steps;
        assert_eq!(
            input.first().map(|s| &s["type"]),
            Some(&json!("user_input")),
            "{who}:{sent}"
        );
        assert!(input.len() >= turn.len() + 2, "{who}:{sent}");
        assert_eq!(
            &input[input.len() - 1 - turn.len()..input.len() - 1],
            &turn[..],
            "{who}: the model's turn as it gave it:{sent}"
        );
        assert_eq!(
            input.last().unwrap()["call_id"],
            "call_prog1",
            "{who}:{sent}"
        );
    } else {
        assert_eq!(
            last["previous_interaction_id"],
            ids[creates - 2],
            "{who}: run_code's result continues the provider's interaction holding it:{sent}"
        );
    }
    if what == Model::Direct {
        // The direct call was answered by the proxy, to the model.
        let denied = steps_of(&seen[1].body, "function_result");
        let denial = denied
            .iter()
            .find(|r| r["call_id"] == "call_direct")
            .unwrap_or_else(|| panic!("{who}: the direct call answered:{sent}"));
        assert!(
            denial.to_string().contains("UNKNOWN_TOOL"),
            "{who}: answered UNKNOWN_TOOL: {denial}"
        );
        assert!(
            !report["tools"].to_string().contains("Oslo"),
            "{who}: the direct call never reached the client: {report}"
        );
    }
}

fn run(sdk: Sdk, code: bool, stream: bool, stateless: bool) -> Run {
    Run {
        sdk,
        code,
        stream,
        stateless,
        beta: false,
    }
}

// ------------------------------------------------- Google's Python SDK

crate::async_cases! {
    python_native_json: native(run(Sdk::Python, false, false, false));
    python_native_stream: native(run(Sdk::Python, false, true, false));
    python_native_stateless: native(run(Sdk::Python, false, false, true));
    python_code_mode_json: code(run(Sdk::Python, true, false, false), Model::Program);
    python_code_mode_stream: code(run(Sdk::Python, true, true, false), Model::Program);
    python_code_mode_stateless: code(run(Sdk::Python, true, false, true), Model::Program);
    python_code_mode_stream_stateless: code(run(Sdk::Python, true, true, true), Model::Program);
    python_code_mode_direct_native_call: code(run(Sdk::Python, true, false, false), Model::Direct);

    // ------------------------------------------------- Google's JS SDK
    js_native_json: native(run(Sdk::Js, false, false, false));
    js_native_stream: native(run(Sdk::Js, false, true, false));
    js_native_stateless: native(run(Sdk::Js, false, false, true));
    js_code_mode_json: code(run(Sdk::Js, true, false, false), Model::Program);
    js_code_mode_stream: code(run(Sdk::Js, true, true, false), Model::Program);
    js_code_mode_stateless: code(run(Sdk::Js, true, false, true), Model::Program);
    js_code_mode_stream_stateless: code(run(Sdk::Js, true, true, true), Model::Program);
    js_code_mode_direct_native_call_stream_stateless: code(run(Sdk::Js, true, true, true), Model::Direct);
}

/// A code-mode conversation going on after a program: the next user turn
/// continues the provider's interaction holding the answer (stateful), or
/// re-sends the whole history, the program's round as the model had it
/// (stateless); either way the model accepts it and no id of the proxy's
/// goes upstream.
async fn follow_up(run: Run) {
    let script = vec![
        vec![
            im::text("Let me look."),
            im::run_code("call_prog1", PROGRAM),
        ],
        vec![im::echo()],
        vec![im::text("Sunny again.")],
    ];
    let Some((report, model)) = go(run, script, &[PROMPT, FOLLOW_UP]).await else {
        return;
    };
    let seen = model.seen();
    let sent = dump(&seen);
    let who = run.label();
    assert!(
        report["error"].is_null(),
        "{who}: {report}\nthe model got:{sent}"
    );
    let finals = report["finals"].as_array().cloned().unwrap_or_default();
    assert_eq!(finals.len(), 2, "{who}: two answers: {report}");
    assert!(
        finals[0].as_str().is_some_and(|t| t.contains(PARIS)),
        "{who}: {report}"
    );
    assert_eq!(finals[1], "Sunny again.", "{who}: {report}");
    assert_eq!(seen.len(), 3, "{who}: three creates:{sent}");
    assert!(seen.iter().all(|s| s.status == 200), "{who}:{sent}");
    let ids = model.ids();
    for s in &seen {
        assert_eq!(declared(&s.body), ["run_code"], "{who}:{sent}");
        assert_eq!(
            minted_ids_in(&s.body.to_string()),
            Vec::<String>::new(),
            "{who}: a minted call id went upstream:{sent}"
        );
    }
    let next = &seen[2].body;
    let input = im::input_steps(&next["input"]);
    assert_eq!(
        input.last().map(|s| &s["content"][0]["text"]),
        Some(&json!(FOLLOW_UP)),
        "{who}: the new question last:{sent}"
    );
    if run.stateless {
        // The whole conversation: the question, the model's run_code turn
        // as it gave it, the program's result, the answer, the next
        // question.
        assert_eq!(
            input.first().map(|s| &s["content"][0]["text"]),
            Some(&json!(PROMPT)),
            "{who}:{sent}"
        );
        let turn = &seen[0].steps;
        assert_eq!(&input[1..1 + turn.len()], &turn[..], "{who}:{sent}");
        assert_eq!(
            input[1 + turn.len()]["call_id"],
            "call_prog1",
            "{who}:{sent}"
        );
        assert_eq!(
            &input[2 + turn.len()..input.len() - 1],
            &seen[1].steps[..],
            "{who}:{sent}"
        );
    } else {
        assert_eq!(
            next["previous_interaction_id"], ids[1],
            "{who}: the next turn continues the provider's interaction holding the answer:{sent}"
        );
    }
}

crate::async_cases! {
    python_code_mode_follow_up: follow_up(run(Sdk::Python, true, false, false));
    python_code_mode_follow_up_stream_stateless: follow_up(run(Sdk::Python, true, true, true));
    js_code_mode_follow_up_stream: follow_up(run(Sdk::Js, true, true, false));
    js_code_mode_follow_up_stateless: follow_up(run(Sdk::Js, true, false, true));

    // ------------------------------------------------- both, two calls at once
    python_code_mode_parallel_calls_stream: code(run(Sdk::Python, true, true, false), Model::Parallel);
    js_code_mode_parallel_calls_stateless: code(run(Sdk::Js, true, false, true), Model::Parallel);

    // ------------------------------------------------- both, on v1beta
    python_code_mode_v1beta: code(Run { beta: true, ..run(Sdk::Python, true, false, false) }, Model::Program);
    js_code_mode_v1beta_stream_stateless: code(Run { beta: true, ..run(Sdk::Js, true, true, true) }, Model::Program);
}
