//! The binary's JSON logs: one object a line, the request id on every line
//! of a request, one access line per request with the contract's fields,
//! and no argument, result, prompt or credential anywhere.

use std::io::Read;
use std::process::{Command, Stdio};

use crate::common::binary::{spawn_proxy, Running};
use crate::common::*;
use serde_json::{json, Value};
use wiremock::ResponseTemplate;

const PROMPT: &str = "PROMPT-MARKER-q9z";
const ARGUMENT: &str = "ARG-MARKER-k2x";
const RESULT: &str = "RESULT-MARKER-v7w";
const ANSWER: &str = "ANSWER-MARKER-p4n";
const CREDENTIAL: &str = "sk-CRED-MARKER-h6d";

fn spawn(vars: &[(&str, &str)]) -> (Running, String) {
    spawn_proxy(vars, Stdio::piped())
}

/// Stops the binary and returns what it wrote to stderr.
fn stop(mut running: Running) -> String {
    // Read while it shuts down: more than a pipe's buffer may still come.
    let mut stderr = running.0.stderr.take().expect("stderr is piped");
    let reader = std::thread::spawn(move || {
        let mut err = String::new();
        stderr.read_to_string(&mut err).unwrap();
        err
    });
    terminate(&mut running.0);
    reader.join().unwrap()
}

#[tokio::test]
async fn json_lines_carry_the_request_id_and_never_the_conversation() {
    let code = format!("const r = await tools.read({{path: '{ARGUMENT}'}}); return r.length;");
    // A streamed denial and its repair: the second round runs in the body's polls.
    let denied = sse_call_turn(
        "s1",
        "",
        "bash",
        &json!({"command": ARGUMENT}).to_string(),
        3,
    );
    let mut repair_turn = sse_chunk("s2", json!({"role": "assistant", "content": ANSWER}), None);
    repair_turn += &sse_chunk("s2", json!({}), Some("stop"));
    repair_turn += "data: [DONE]\n\n";
    let json_turn = |v: Value| ResponseTemplate::new(200).set_body_json(v);
    let sse_turn =
        |s: String| ResponseTemplate::new(200).set_body_raw(s.into_bytes(), "text/event-stream");
    let p = scripted::model_server(Script::new([
        json_turn(calls_completion(
            vec![call(
                "call_prog",
                "run_code",
                &json!({"code": code}).to_string(),
            )],
            usage(10, 2),
        )),
        json_turn(text_completion(ANSWER, usage(20, 3))),
        // A denial and its repair.
        json_turn(calls_completion(
            vec![call(
                "c1",
                "bash",
                &json!({"command": ARGUMENT}).to_string(),
            )],
            usage(1, 1),
        )),
        json_turn(text_completion(ANSWER, usage(1, 1))),
        sse_turn(denied),
        sse_turn(repair_turn),
    ]))
    .await;
    let upstream = format!("{}/v1", p.uri());
    let (running, addr) = spawn(&[
        ("CODEMODE_LISTEN", "127.0.0.1:0"),
        ("CODEMODE_UPSTREAM", &upstream),
        ("CODEMODE_RUNTIME", "embedded"),
        ("CODEMODE_LOG_FORMAT", "json"),
        // Every level of the proxy's own targets.
        ("RUST_LOG", "info,codemode=trace,codemode_proxy=trace"),
    ]);
    let http = crate::common::http_client();
    let send = |id: &'static str, messages: Vec<Value>| {
        let http = http.clone();
        let url = format!("http://{addr}/v1/chat/completions");
        async move {
            let res = http
                .post(url)
                .header("x-request-id", id)
                .header("authorization", format!("Bearer {CREDENTIAL}"))
                .json(&chat_body(Value::Array(messages)))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200);
            assert_eq!(res.headers()["x-request-id"], id);
            res.json::<Value>().await.unwrap()["choices"][0]["message"].clone()
        }
    };
    let mut messages = vec![
        json!({"role": "system", "content": "You are an agent."}),
        json!({"role": "user", "content": PROMPT}),
    ];
    let handed = send("log-req-1", messages.clone()).await;
    let id = handed["tool_calls"][0]["id"].as_str().unwrap().to_owned();
    messages.push(handed);
    messages.push(json!({"role": "tool", "tool_call_id": id, "content": RESULT}));
    let answer = send("log-req-2", messages).await;
    assert_eq!(answer["content"], ANSWER);
    let repaired = send(
        "log-req-3",
        vec![json!({"role": "user", "content": PROMPT})],
    )
    .await;
    assert_eq!(repaired["content"], ANSWER);
    let streamed = http
        .post(format!("http://{addr}/v1/chat/completions"))
        .header("x-request-id", "log-req-4")
        .json(
            &json!({"model": "m", "stream": true, "tools": agent_tools(),
                      "messages": [{"role": "user", "content": PROMPT}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.headers()["x-request-id"], "log-req-4");
    let _ = streamed.text().await.unwrap();

    let stderr = stop(running);
    let ids = ["log-req-1", "log-req-2", "log-req-3", "log-req-4"];
    let mut in_stream_repair = false;
    let mut access = Vec::new();
    for line in stderr.lines() {
        let entry: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
        assert!(entry.is_object(), "{line}");
        for marker in [PROMPT, ARGUMENT, RESULT, ANSWER, CREDENTIAL] {
            assert!(!line.contains(marker), "`{marker}` was logged: {line}");
        }
        let target = entry["target"].as_str().unwrap_or("");
        if target == "codemode::access" {
            access.push(entry.clone());
        }
        // Start-up lines: the listener, where programs run, and the first
        // sandbox worker's confinement (logged as the warm pool starts).
        let startup = entry["message"].as_str().is_some_and(|m| {
            m.starts_with("codemode-proxy listening on")
                || m.starts_with("programs run ")
                || m.starts_with("sandbox workers confined")
        });
        if startup || target.starts_with("codemode_proxy::server") {
            continue;
        }
        let id = entry["span"]["request_id"].as_str();
        assert!(
            id.is_some_and(|id| ids.contains(&id)),
            "a line of a request without its id: {line}"
        );
        if target == "codemode::repair" && id == Some("log-req-4") {
            in_stream_repair = true;
        }
    }
    assert!(
        in_stream_repair,
        "the stream's repair line carries its id:\n{stderr}"
    );
    assert_eq!(access.len(), 4, "one access line per request:\n{stderr}");
    // The JSON denial (log-req-3) and the streamed one (log-req-4): one
    // line each, however many places saw the call.
    for id in ["log-req-3", "log-req-4"] {
        assert_eq!(denial_lines(&stderr, id).len(), 1, "{id}:\n{stderr}");
    }
    for (line, id) in access.iter().zip(ids) {
        assert_eq!(line["request_id"], id);
        assert_eq!(line["level"], "INFO");
        for field in [
            "route",
            "scope",
            "preset",
            "mode",
            "status",
            "duration_ms",
            "upstream_ms",
            "repairs",
            "denials",
            "executions",
            "input_tokens",
            "output_tokens",
            "nested_calls",
            "context_bytes_saved",
        ] {
            assert!(line.get(field).is_some(), "`{field}` missing: {line}");
        }
        assert_eq!(line["completed"], true, "{line}");
        assert_eq!(line["route"], "chat");
        assert_eq!(line["mode"], "code");
        // A few small tools: `auto` keeps their whole docs.
        assert_eq!(line["sdk"], "full", "{line}");
        assert_eq!(line["status"], 200);
    }
    // The program started in the first request and ended in the second.
    assert_eq!(access[0]["input_tokens"], 10);
    assert_eq!(access[1]["executions"], 1);
    assert_eq!(access[1]["nested_calls"], 1);
    assert_eq!(access[1]["input_tokens"], 20);
    assert_eq!(access[2]["repairs"], 1);
    assert_eq!(access[2]["denials"], 1);
    assert_eq!(access[3]["repairs"], 1);
    assert_eq!(access[3]["upstream_rounds"], 2);
    // Lines of the program itself were emitted inside its requests.
    assert!(stderr.contains("codemode::program"), "{stderr}");
}

#[test]
fn an_unknown_log_format_stops_start_up_naming_the_variable() {
    let out = Command::new(env!("CARGO_BIN_EXE_codemode-proxy"))
        .env_clear()
        .env("CODEMODE_LOG_FORMAT", "yaml")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("CODEMODE_LOG_FORMAT"), "{err}");
    assert!(err.contains("`text` or `json`"), "{err}");
}

#[tokio::test]
async fn text_lines_carry_the_request_id_and_no_colours_off_a_terminal() {
    let p = scripted::model_server(Script::new([
        ResponseTemplate::new(200).set_body_json(calls_completion(
            vec![call(
                "c1",
                "bash",
                &json!({"command": ARGUMENT}).to_string(),
            )],
            usage(1, 1),
        )),
        ResponseTemplate::new(200).set_body_json(text_completion(ANSWER, usage(1, 1))),
    ]))
    .await;
    let upstream = format!("{}/v1", p.uri());
    let (running, addr) = spawn(&[
        ("CODEMODE_LISTEN", "127.0.0.1:0"),
        ("CODEMODE_UPSTREAM", &upstream),
        ("RUST_LOG", "info,codemode=trace,codemode_proxy=trace"),
    ]);
    let res = crate::common::http_client()
        .post(format!("http://{addr}/v1/chat/completions"))
        .header("x-request-id", "log-\"text\"-1")
        .json(&chat_body(json!([{"role": "user", "content": PROMPT}])))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let _ = res.text().await.unwrap();

    let stderr = stop(running);
    assert!(!stderr.contains('\x1b'), "colours in a pipe:\n{stderr}");
    let prefix = r#" request{request_id="log-\"text\"-1"}: "#;
    let repair = stderr
        .lines()
        .find(|l| l.contains("codemode::repair"))
        .unwrap_or_else(|| panic!("no repair line:\n{stderr}"));
    assert!(repair.contains(prefix), "{repair}");
    let access = stderr
        .lines()
        .find(|l| l.contains("codemode::access"))
        .unwrap_or_else(|| panic!("no access line:\n{stderr}"));
    assert!(access.contains(prefix), "{access}");
    assert!(access.contains(" INFO "), "{access}");
    for field in [
        r#"route="chat""#,
        "status=200",
        "repairs=1",
        "denials=1",
        "completed=true",
    ] {
        assert!(access.contains(field), "`{field}` missing: {access}");
    }
}

#[tokio::test]
async fn a_burst_of_requests_writes_every_access_line_by_shutdown() {
    const REQUESTS: usize = 400;
    let p = scripted::model_server(Script::new((0..REQUESTS).map(|_| {
        ResponseTemplate::new(200).set_body_json(text_completion(ANSWER, usage(1, 1)))
    })))
    .await;
    let upstream = format!("{}/v1", p.uri());
    let (running, addr) = spawn(&[
        ("CODEMODE_LISTEN", "127.0.0.1:0"),
        ("CODEMODE_UPSTREAM", &upstream),
        ("CODEMODE_LOG_FORMAT", "json"),
        ("RUST_LOG", "info"),
    ]);
    let http = crate::common::http_client();
    let sent = futures_util::future::join_all((0..REQUESTS).map(|n| {
        let http = http.clone();
        let url = format!("http://{addr}/v1/chat/completions");
        async move {
            let res = http
                .post(url)
                .header("x-request-id", format!("burst-{n}"))
                .json(&chat_body(json!([{"role": "user", "content": "hi"}])))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200);
            res.bytes().await.unwrap();
        }
    }));
    sent.await;

    let stderr = stop(running);
    let mut ids: Vec<String> = stderr
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .filter(|l| l["target"] == "codemode::access")
        .map(|l| l["request_id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    let mut want: Vec<String> = (0..REQUESTS).map(|n| format!("burst-{n}")).collect();
    want.sort();
    assert_eq!(ids, want);
}

/// The `tool call denied` lines of request `id` in JSON `stderr`.
fn denial_lines(stderr: &str, id: &str) -> Vec<Value> {
    stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| {
            e["target"] == "codemode::denial"
                && e["span"]["request_id"] == id
                && e.to_string().contains("tool call denied")
        })
        .collect()
}

#[tokio::test]
async fn every_dialect_logs_each_denial_once_as_json_and_as_a_stream() {
    use crate::common::messages_model::{fs_input_schema_tools, text, tool_use, MessagesModel};
    use crate::common::responses_model::{fn_call, fs_function_tools, said, ResponsesModel};
    // Each request: a native call the model may not make in code mode,
    // then, asked again, an answer.
    let responses = ResponsesModel::new([
        vec![fn_call("c1", "bash", "{}")],
        vec![said("done")],
        vec![fn_call("c2", "bash", "{}")],
        vec![said("done")],
    ]);
    let messages = MessagesModel::new([
        vec![tool_use("t1", "Bash", json!({}))],
        vec![text("done")],
        vec![tool_use("t2", "Bash", json!({}))],
        vec![text("done")],
    ]);
    let (r_server, m_server) = (responses.serve().await, messages.serve().await);
    let upstream = format!("{}/v1", r_server.uri());
    let anthropic = format!("{}/v1", m_server.uri());
    let (running, addr) = spawn(&[
        ("CODEMODE_LISTEN", "127.0.0.1:0"),
        ("CODEMODE_UPSTREAM", &upstream),
        ("CODEMODE_ANTHROPIC_UPSTREAM", &anthropic),
        ("CODEMODE_RUNTIME", "embedded"),
        ("CODEMODE_LOG_FORMAT", "json"),
        ("RUST_LOG", "info"),
    ]);
    let http = crate::common::http_client();
    let requests = [
        ("deny-responses-json", "/v1/responses", false),
        ("deny-responses-sse", "/v1/responses", true),
        ("deny-messages-json", "/v1/messages", false),
        ("deny-messages-sse", "/v1/messages", true),
    ];
    for (id, path, stream) in requests {
        let body = if path == "/v1/responses" {
            json!({"model": "m", "stream": stream, "store": false, "tools": fs_function_tools(),
                   "input": [{"role": "user", "content": PROMPT}]})
        } else {
            json!({"model": "m", "stream": stream, "max_tokens": 100, "tools": fs_input_schema_tools(),
                   "messages": [{"role": "user", "content": PROMPT}]})
        };
        let res = http
            .post(format!("http://{addr}{path}"))
            .header("x-request-id", id)
            .header("anthropic-version", "2023-06-01")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{id}");
        let text = res.text().await.unwrap();
        assert!(text.contains("done"), "{id}: the repaired answer: {text}");
    }
    let stderr = stop(running);
    for (id, _, _) in requests {
        let lines = denial_lines(&stderr, id);
        assert_eq!(lines.len(), 1, "{id}: one denial line:\n{stderr}");
        let line = lines[0].to_string();
        assert!(line.contains("UNKNOWN_TOOL"), "{id}: its code: {line}");
    }
}
