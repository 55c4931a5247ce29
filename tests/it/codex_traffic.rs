//! Codex (the OpenAI Codex CLI, unmodified) against a scripted Responses
//! model, without the proxy: what Codex sends on `POST /v1/responses`, what
//! it needs back, and what it sends for a tool call. The shapes the
//! Responses dialect must handle, checked against the real agent.
//!
//! The model answers the first request of a turn with a reasoning item and
//! an `exec_command` call (`cat a.txt`), and a request ending in the call's
//! `function_call_output` with text echoing that output.
//!
//! Codex is installed by `tests/agents/install.sh` into
//! `$CODEMODE_AGENTS_DIR` (default `~/.cache/codemode-agents`) and driven by
//! `tests/agents/codex.mjs`. Outside CI a missing Codex skips the tests with a
//! note; under CI (`CI` set) it fails them.
//!
//! `CODEX_TRAFFIC_DUMP=<dir>` appends every request Codex sent (method, path,
//! headers, body) to `<dir>/codex.jsonl`.

use crate::common::agent_driver::{dump_traffic, traffic};
use crate::common::codex::{codex_ready, run_codex, workdir};
use crate::common::mount;

use serde_json::{json, Value};
use wiremock::{MockServer, Request, Respond, ResponseTemplate};

// ---------------------------------------------------------- the model

/// The content of the file the model has Codex read.
const SECRET: &str = "codex-read-this-7f3a";

/// One server-sent event of a Responses stream, numbered.
fn event(seq: &mut u64, mut data: Value) -> String {
    data["sequence_number"] = json!(*seq);
    *seq += 1;
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap()
    )
}

/// A whole streamed response holding `items`, as OpenAI sends it.
fn stream(id: &str, items: &[Value]) -> String {
    let mut seq = 0;
    let mut out = event(
        &mut seq,
        json!({"type": "response.created",
               "response": {"id": id, "object": "response", "status": "in_progress", "output": []}}),
    );
    for (i, item) in items.iter().enumerate() {
        out += &event(
            &mut seq,
            json!({"type": "response.output_item.added", "output_index": i, "item": item}),
        );
        out += &event(
            &mut seq,
            json!({"type": "response.output_item.done", "output_index": i, "item": item}),
        );
    }
    out += &event(
        &mut seq,
        json!({"type": "response.completed",
               "response": {"id": id, "object": "response", "status": "completed", "output": items,
                            "usage": {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}}}),
    );
    out
}

/// The model: a turn ending in a user message gets reasoning and a call of
/// Codex's shell tool; one ending in the call's output gets text echoing it.
struct Model;

impl Respond for Model {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let input = body["input"].as_array().cloned().unwrap_or_default();
        let n = input.len();
        let items = match input.last() {
            Some(last) if last["type"] == "function_call_output" => {
                let output = match &last["output"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                vec![
                    json!({"type": "message", "id": format!("msg_{n}"), "role": "assistant",
                            "status": "completed",
                            "content": [{"type": "output_text", "annotations": [],
                                         "text": format!("ANSWER: {output}")}]}),
                ]
            }
            _ => vec![
                json!({"type": "reasoning", "id": format!("rs_{n}"),
                       "summary": [{"type": "summary_text", "text": "Reading a.txt."}],
                       "encrypted_content": format!("ENC-{n}")}),
                json!({"type": "function_call", "id": format!("fc_{n}"),
                       "call_id": format!("call_{n}"), "name": "exec_command",
                       "arguments": json!({"cmd": "cat a.txt"}).to_string(),
                       "status": "completed"}),
            ],
        };
        ResponseTemplate::new(200)
            .set_body_raw(stream(&format!("resp_{n}"), &items), "text/event-stream")
    }
}

/// A model server: `POST /v1/responses` is the model; anything else is
/// recorded and answered 404.
async fn model_server() -> MockServer {
    let server = MockServer::start().await;
    mount(&server, "POST", "/v1/responses", Model).await;
    server
}

// ---------------------------------------------------------- the agent

fn items_of<'a>(body: &'a Value, kind: &str) -> Vec<&'a Value> {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == kind)
        .collect()
}

// ---------------------------------------------------------- tests

#[tokio::test]
async fn codex_runs_the_models_command_and_answers_with_its_output() {
    if !codex_ready() {
        return;
    }
    let server = model_server().await;
    let dir = workdir("one", &[("a.txt", SECRET)]);
    let summary = codex(&server, &dir.0, &["Read a.txt and tell me what it says."]).await;
    let reqs = traffic(&server).await;
    dump_traffic("codex", "one_turn", &reqs);

    assert_eq!(summary["error"], Value::Null, "{summary:#}");
    let commands = summary["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "{summary:#}");
    assert!(commands[0]["command"]
        .as_str()
        .unwrap()
        .contains("cat a.txt"));
    assert_eq!(commands[0]["output"].as_str().unwrap().trim(), SECRET);
    let answer = summary["final"].as_str().unwrap();
    assert!(
        answer.starts_with("ANSWER: ") && answer.contains(SECRET),
        "{answer}"
    );

    // Two model requests, nothing else (no GET /v1/models).
    let seen: Vec<String> = reqs
        .iter()
        .map(|r| format!("{} {}", r["method"], r["path"]))
        .collect();
    assert_eq!(
        seen,
        vec![r#""POST" "/v1/responses""#; 2],
        "Codex called only the model"
    );
    let (first, second) = (&reqs[0]["body"], &reqs[1]["body"]);

    // The request: stateless, streamed, its system prompt two developer
    // messages at the start of `input`, no `instructions`.
    for body in [first, second] {
        assert_eq!(body["stream"], true);
        assert_eq!(body["store"], false);
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(body["tool_choice"], "auto");
        assert_eq!(body["parallel_tool_calls"], true);
        assert!(body["prompt_cache_key"].is_string());
        assert!(body.get("instructions").is_none());
        assert!(body.get("previous_response_id").is_none());
        let roles: Vec<&Value> = body["input"].as_array().unwrap()[..3]
            .iter()
            .map(|i| &i["role"])
            .collect();
        assert_eq!(
            roles,
            [&json!("developer"), &json!("developer"), &json!("user")]
        );
    }
    assert_eq!(first["prompt_cache_key"], second["prompt_cache_key"]);
    assert_eq!(first["tools"], second["tools"], "tools are sent unchanged");
    assert_eq!(reqs[0]["headers"]["accept"], "text/event-stream");
    assert_eq!(reqs[0]["headers"]["accept-encoding"], "zstd,gzip");

    // The shell tool the model called, and the kinds of tools beside it.
    let tools = first["tools"].as_array().unwrap();
    let exec = tools.iter().find(|t| t["name"] == "exec_command").unwrap();
    assert_eq!(exec["type"], "function");
    assert_eq!(exec["parameters"]["required"], json!(["cmd"]));
    let patch = tools.iter().find(|t| t["name"] == "apply_patch").unwrap();
    assert_eq!(patch["type"], "custom", "freeform apply_patch for GPT-5");
    assert_eq!(patch["format"]["syntax"], "lark");

    // What comes back after the call: the model's reasoning item and call
    // replayed (with their ids), then the output under the call's id.
    let reasoning = items_of(second, "reasoning");
    assert_eq!(reasoning.len(), 1);
    assert_eq!(reasoning[0]["id"], "rs_4");
    assert_eq!(reasoning[0]["encrypted_content"], "ENC-4");
    let calls = items_of(second, "function_call");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["id"], "fc_4");
    assert_eq!(calls[0]["call_id"], "call_4");
    assert_eq!(calls[0]["name"], "exec_command");
    let outputs = items_of(second, "function_call_output");
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0]["call_id"], "call_4");
    assert!(outputs[0]["output"].as_str().unwrap().contains(SECRET));
    let kinds: Vec<&str> = second["input"].as_array().unwrap()[4..]
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["reasoning", "function_call", "function_call_output"]
    );
}

#[tokio::test]
async fn codex_resume_continues_the_session_with_its_whole_history() {
    if !codex_ready() {
        return;
    }
    let server = model_server().await;
    let dir = workdir("two", &[("a.txt", SECRET)]);
    let summary = codex(&server, &dir.0, &["Read a.txt.", "Read it again."]).await;
    let reqs = traffic(&server).await;
    dump_traffic("codex", "resume", &reqs);

    assert_eq!(summary["error"], Value::Null, "{summary:#}");
    assert_eq!(
        summary["commands"].as_array().unwrap().len(),
        2,
        "{summary:#}"
    );
    let turns = summary["turns"].as_array().unwrap();
    assert_eq!(turns[0]["thread"], turns[1]["thread"], "one session");
    assert!(summary["final"].as_str().unwrap().contains(SECRET));

    // Four model requests; the resumed turn re-sends the first turn whole
    // (store:false) under the same prompt_cache_key.
    assert_eq!(reqs.len(), 4, "{reqs:#?}");
    let first_turn = reqs[1]["body"]["input"].as_array().unwrap();
    let resumed = reqs[2]["body"]["input"].as_array().unwrap();
    assert_eq!(
        reqs[0]["body"]["prompt_cache_key"],
        reqs[2]["body"]["prompt_cache_key"]
    );
    let kinds = |items: &[Value]| -> Vec<String> {
        items
            .iter()
            .map(|i| format!("{}/{}", i["type"], i["role"]))
            .collect()
    };
    let resumed_kinds = kinds(resumed);
    let first_kinds = kinds(first_turn);
    assert_eq!(
        resumed_kinds[..first_kinds.len()],
        first_kinds[..],
        "the resumed turn starts with the first turn's items"
    );
    let rest: Vec<&str> = resumed_kinds[first_kinds.len()..]
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(
        rest,
        [r#""message"/"assistant""#, r#""message"/"user""#],
        "then the answer and the new prompt"
    );
}

/// Runs Codex against `server` in `dir`; its JSON summary.
async fn codex(server: &MockServer, dir: &std::path::Path, prompts: &[&str]) -> Value {
    run_codex(&format!("{}/v1", server.uri()), dir, prompts).await
}
