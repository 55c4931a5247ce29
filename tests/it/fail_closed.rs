//! Fail closed (docs/security.md): with the mode locked to `code`, the rule
//! holds wherever a request declares tools and wherever a model calls one.
//! Each test speaks HTTP to the proxy in front of a scripted provider and
//! checks what the provider got and what the client got, JSON and SSE.

use crate::common;
use crate::common::messages_model::{self, anthropic_proxy, messages_provider};
use crate::common::responses_model::{
    fn_call, fs_function_tools, response, response_events, responses_usage, said,
};
use crate::common::sse_client::payloads;
use crate::common::{error_message, mount, start, Proxy, Script};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const LOCKED: &[(&str, &str)] = &[
    ("CODEMODE_MODE", "code"),
    ("CODEMODE_CLIENT_SELECT", "deny"),
    ("CODEMODE_RUNTIME", "embedded"),
];

/// A provider answering `POST /v1/responses` with `outputs` in order, as
/// JSON or as events (whichever each request asks for).
async fn responses_provider(outputs: Vec<Vec<Value>>) -> MockServer {
    let server = MockServer::start().await;
    let answers: Vec<Value> = outputs
        .iter()
        .enumerate()
        .map(|(i, o)| response(&format!("resp_{i}"), o, responses_usage(10, 2)))
        .collect();
    let json = Script::new(
        answers
            .iter()
            .map(|r| ResponseTemplate::new(200).set_body_json(r.clone())),
    );
    let sse = Script::new(answers.iter().map(|r| {
        ResponseTemplate::new(200)
            .set_body_raw(response_events(r).into_bytes(), "text/event-stream")
    }));
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(StreamFlag(false))
        .respond_with(json)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(StreamFlag(true))
        .respond_with(sse)
        .mount(&server)
        .await;
    server
}

/// Matches a request whose body asks for a stream (or not).
struct StreamFlag(bool);

impl wiremock::Match for StreamFlag {
    fn matches(&self, req: &wiremock::Request) -> bool {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        (body["stream"] == true) == self.0
    }
}

/// The bodies the provider got on `path`.
async fn bodies(server: &MockServer, at: &str) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.url.path() == at)
        .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
        .collect()
}

/// The response a Responses client reads, from JSON or from its events.
async fn responses_answer(proxy: &Proxy, body: &Value) -> Value {
    let res = proxy.post("/v1/responses", body, &[]).await;
    let status = res.status();
    let bytes = res.bytes().await.unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    if body["stream"] != true {
        return serde_json::from_slice(&bytes).unwrap();
    }
    let events: Vec<Value> = payloads(&bytes)
        .into_iter()
        .filter_map(|p| serde_json::from_str(&p).ok())
        .collect();
    let mut completed = events
        .iter()
        .find(|e| e["type"] == "response.completed")
        .expect("a response.completed")["response"]
        .clone();
    // What a client assembles from the items the events hand it.
    completed["streamed"] = Value::Array(
        events
            .iter()
            .filter(|e| e["type"] == "response.output_item.added")
            .map(|e| e["item"].clone())
            .collect(),
    );
    completed
}

/// Every item type and name a client was handed, streamed or whole.
fn handed(answer: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for list in [&answer["output"], &answer["streamed"]] {
        for item in list.as_array().into_iter().flatten() {
            out.push(format!(
                "{}:{}",
                item["type"].as_str().unwrap_or(""),
                item["name"].as_str().unwrap_or("")
            ));
        }
    }
    out
}

fn wire_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            t["name"]
                .as_str()
                .or(t["type"].as_str())
                .unwrap_or("?")
                .to_owned()
        })
        .collect()
}

fn additional_tools(tools: Value) -> Value {
    json!({"type": "additional_tools", "role": "developer", "tools": tools})
}

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

// ----- declaration sites -----

#[tokio::test]
async fn additional_tools_are_collapsed_wherever_they_stand_and_their_direct_calls_repaired() {
    let namespaced = json!([{"type": "namespace", "name": "fs", "description": "Files.",
        "tools": [{"type": "function", "name": "stat", "parameters": {"type": "object"}}]}]);
    let plain = json!([{"type": "function", "name": "grep", "description": "Search files.",
        "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}}}]);
    for stream in [false, true] {
        // The model calls a tool only an additional_tools item declared,
        // then gives up calling and answers.
        let server = responses_provider(vec![
            vec![fn_call("c1", "grep", r#"{"pattern":"x"}"#)],
            vec![said("done")],
        ])
        .await;
        let proxy = start(&server, LOCKED).await;
        let input = vec![
            additional_tools(plain.clone()),
            user("find x"),
            additional_tools(namespaced.clone()),
        ];
        let body = json!({"model": "m", "input": input, "tools": fs_function_tools(),
                          "stream": stream, "store": false});
        let answer = responses_answer(&proxy, &body).await;
        assert_eq!(
            handed(&answer)
                .iter()
                .filter(|h| h.contains("grep"))
                .count(),
            0,
            "stream {stream}: {answer}"
        );
        let seen = bodies(&server, "/v1/responses").await;
        assert_eq!(seen.len(), 2, "stream {stream}: a repair round");
        for body in &seen {
            assert_eq!(wire_names(body), ["run_code"], "stream {stream}");
            let items = body["input"].as_array().unwrap();
            assert!(
                items.iter().all(|i| i["type"] != "additional_tools"),
                "stream {stream}: no additional_tools item reaches the provider: {body}"
            );
            let sdk = body["instructions"].as_str().unwrap_or("");
            for name in ["grep", "read", "write", "stat", "Search files."] {
                assert!(sdk.contains(name), "stream {stream}: the SDK shows {name}");
            }
        }
        let repair = seen[1]["input"].as_array().unwrap();
        let denial = repair
            .iter()
            .find(|i| i["type"] == "function_call_output" && i["call_id"] == "c1")
            .expect("the denied call is answered");
        let text = denial["output"].as_str().unwrap();
        assert!(
            text.starts_with("UNKNOWN_TOOL") && text.contains("run_code"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn a_malformed_additional_tools_item_is_refused_naming_the_field() {
    let server = responses_provider(vec![]).await;
    let proxy = start(&server, LOCKED).await;
    for bad in [
        json!({"type": "additional_tools", "role": "developer"}),
        json!({"type": "additional_tools", "tools": {"type": "function"}}),
    ] {
        let body = json!({"model": "m", "input": [user("hi"), bad]});
        let res = proxy.post("/v1/responses", &body, &[]).await;
        assert_eq!(res.status(), 400);
        let err: Value = res.json().await.unwrap();
        let message = error_message(&err);
        assert!(message.contains("`input[1]"), "{message}");
    }
    assert!(bodies(&server, "/v1/responses").await.is_empty());
}

#[tokio::test]
async fn a_tool_type_the_proxy_does_not_know_is_refused_in_code_mode_and_kept_in_native() {
    let tools = json!([{"type": "hologram", "name": "h"}, {"type": "web_search"}]);
    let server = responses_provider(vec![vec![said("ok")]]).await;
    let locked = start(&server, LOCKED).await;
    let body = json!({"model": "m", "input": "hi", "tools": tools});
    let res = locked.post("/v1/responses", &body, &[]).await;
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert!(error_message(&err).contains("`hologram`"), "{err}");
    let native = start(&server, &[("CODEMODE_MODE", "native")]).await;
    let res = native.post("/v1/responses", &body, &[]).await;
    assert_eq!(res.status(), 200);
    let seen = bodies(&server, "/v1/responses").await;
    assert_eq!(
        seen.len(),
        1,
        "only the native request reached the provider"
    );
    assert_eq!(seen[0]["tools"], tools);
}

// ----- what the model answers with -----

#[tokio::test]
async fn a_computer_call_is_denied_and_computer_use_is_off_the_wire() {
    for stream in [false, true] {
        let computer = json!({"type": "computer_call", "id": "cu_1", "call_id": "c1",
            "action": {"type": "screenshot"}, "pending_safety_checks": [], "status": "completed"});
        let server = responses_provider(vec![vec![computer], vec![said("done")]]).await;
        let proxy = start(&server, LOCKED).await;
        let body = json!({"model": "m", "input": "look", "stream": stream,
            "tools": [{"type": "computer_use_preview", "display_width": 1024,
                       "display_height": 768, "environment": "browser"}]});
        let answer = responses_answer(&proxy, &body).await;
        assert!(
            handed(&answer)
                .iter()
                .all(|h| !h.starts_with("computer_call")),
            "stream {stream}: {answer}"
        );
        let seen = bodies(&server, "/v1/responses").await;
        assert_eq!(wire_names(&seen[0]), ["run_code"]);
        assert!(seen[0]["instructions"]
            .as_str()
            .unwrap()
            .contains("computer"));
        let repair = seen[1]["input"].as_array().unwrap();
        let denial = repair
            .iter()
            .find(|i| i["type"] == "computer_call_output")
            .expect("answered with its own output type");
        assert!(denial["output"]
            .as_str()
            .unwrap()
            .starts_with("UNKNOWN_TOOL"));
    }
}

#[tokio::test]
async fn an_item_type_the_judge_does_not_know_is_withheld_and_answered() {
    for stream in [false, true] {
        let odd = json!({"type": "hologram_call", "id": "h_1", "call_id": "c9",
                         "projection": {"room": "lab"}});
        let server = responses_provider(vec![
            vec![said("projecting"), odd.clone()],
            vec![said("done")],
        ])
        .await;
        let proxy = start(&server, LOCKED).await;
        let body = json!({"model": "m", "input": "go", "stream": stream,
                          "tools": fs_function_tools()});
        let answer = responses_answer(&proxy, &body).await;
        assert!(
            handed(&answer).iter().all(|h| !h.starts_with("hologram")),
            "stream {stream}: {answer}"
        );
        let seen = bodies(&server, "/v1/responses").await;
        assert_eq!(seen.len(), 2, "stream {stream}: repaired");
        let repair = seen[1]["input"].as_array().unwrap();
        assert!(
            repair.contains(&odd),
            "the model's item is replayed as it was"
        );
        let answer_item = repair
            .iter()
            .find(|i| i["type"] == "hologram_call_output")
            .expect("answered as <type>_output");
        assert_eq!(answer_item["call_id"], "c9");
    }
}

async fn messages_proxy(server: &MockServer) -> Proxy {
    anthropic_proxy(server, LOCKED).await
}

/// Every block type and name a Messages client was handed.
async fn messages_answer(proxy: &Proxy, body: &Value) -> Vec<String> {
    messages_model::handed(proxy, body)
        .await
        .iter()
        .map(|b| {
            format!(
                "{}:{}",
                b["type"].as_str().unwrap_or(""),
                b["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test]
async fn messages_computer_use_and_unknown_blocks_are_judged_as_calls() {
    for stream in [false, true] {
        let server = messages_provider(
            vec![
                (
                    vec![
                        json!({"type": "text", "text": "looking"}),
                        json!({"type": "tool_use", "id": "toolu_1", "name": "computer",
                               "input": {"action": "screenshot"}}),
                        json!({"type": "hologram_use", "id": "holo_1", "room": "lab"}),
                    ],
                    "tool_use",
                ),
                (vec![json!({"type": "text", "text": "done"})], "end_turn"),
            ],
            stream,
        )
        .await;
        let proxy = messages_proxy(&server).await;
        let body = json!({"model": "claude-test", "max_tokens": 100, "stream": stream,
            "messages": [{"role": "user", "content": "look"}],
            "tools": [{"type": "computer_20250124", "name": "computer",
                       "display_width_px": 1024, "display_height_px": 768}]});
        let handed = messages_answer(&proxy, &body).await;
        assert!(
            handed
                .iter()
                .all(|h| h.starts_with("text:") || h.starts_with("tool_use:run_code")),
            "stream {stream}: {handed:?}"
        );
        let seen = bodies(&server, "/v1/messages").await;
        assert_eq!(seen.len(), 2, "stream {stream}: repaired");
        assert_eq!(wire_names(&seen[0]), ["run_code"], "stream {stream}");
        let answers = seen[1]["messages"][2]["content"].as_array().unwrap();
        let ids: Vec<&str> = answers
            .iter()
            .filter_map(|b| b["tool_use_id"].as_str())
            .collect();
        assert_eq!(ids, ["toolu_1", "holo_1"], "stream {stream}");
    }
}

#[tokio::test]
async fn chat_tool_calls_of_an_unknown_type_are_denied() {
    let odd = json!({"id": "c1", "type": "hologram", "hologram": {"room": "lab"}});
    let server = common::provider([
        common::calls_completion(vec![odd], common::usage(5, 1)),
        common::text_completion("done", common::usage(5, 1)),
    ])
    .await;
    let proxy = start(&server, LOCKED).await;
    let body = common::chat_body(json!([{"role": "user", "content": "go"}]));
    let res = proxy.chat(&body, &[]).await;
    assert_eq!(res.status(), 200);
    let answer: Value = res.json().await.unwrap();
    assert!(
        answer["choices"][0]["message"].get("tool_calls").is_none(),
        "{answer}"
    );
    assert_eq!(common::received(&server).await.len(), 2, "repaired");
}

// ----- routes -----

#[tokio::test]
async fn background_responses_are_refused_under_the_lock_and_pass_in_native_mode() {
    let server = responses_provider(vec![vec![said("queued")]]).await;
    let locked = start(&server, LOCKED).await;
    let body = json!({"model": "m", "input": "hi", "background": true,
                      "tools": fs_function_tools()});
    let res = locked.post("/v1/responses", &body, &[]).await;
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert!(error_message(&err).contains("background"));
    let res = locked.get("/v1/responses/resp_1", &[]).await;
    assert_eq!(res.status(), 403, "retrieval is refused too");
    let native = start(&server, &[("CODEMODE_MODE", "native")]).await;
    assert_eq!(native.post("/v1/responses", &body, &[]).await.status(), 200);
    assert_eq!(bodies(&server, "/v1/responses").await.len(), 1);
}

#[tokio::test]
async fn side_apis_are_refused_under_the_lock_in_their_own_shape_and_pass_in_native_mode() {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
        .mount(&server)
        .await;
    let upstream = format!("{}/v1", server.uri());
    let mut locked_vars = LOCKED.to_vec();
    locked_vars.push(("CODEMODE_ANTHROPIC_UPSTREAM", upstream.as_str()));
    let locked = start(&server, &locked_vars).await;
    let native = start(
        &server,
        &[
            ("CODEMODE_MODE", "native"),
            ("CODEMODE_ANTHROPIC_UPSTREAM", upstream.as_str()),
        ],
    )
    .await;
    let routes = [
        ("POST", "/v1/batches", false),
        ("POST", "/v1/messages/batches", true),
        ("GET", "/v1/messages/batches/msgbatch_1/results", true),
        ("POST", "/v1/realtime/client_secrets", false),
        ("POST", "/v1/realtime/sessions", false),
        ("POST", "/v1/assistants", false),
        ("POST", "/v1/threads/thread_1/runs", false),
        ("GET", "/v1/chat/completions/chatcmpl_1", false),
        ("GET", "/v1/chat/completions", false),
    ];
    let body = json!({"params": {"tools": [{"name": "Bash", "input_schema": {}}]}});
    for (verb, at, anthropic) in routes {
        let send = |proxy: &Proxy| {
            let req = proxy.http.request(verb.parse().unwrap(), proxy.url(at));
            let req = if anthropic {
                req.header("anthropic-version", "2023-06-01")
            } else {
                req
            };
            if verb == "POST" {
                req.json(&body)
            } else {
                req
            }
        };
        let res = send(&locked).send().await.unwrap();
        assert_eq!(res.status(), 403, "{verb} {at}");
        let err: Value = res.json().await.unwrap();
        let message = if anthropic {
            assert_eq!(err["type"], "error", "{verb} {at}: {err}");
            assert_eq!(err["error"]["type"], "permission_error");
            error_message(&err).to_owned()
        } else {
            assert_eq!(err["error"]["code"], "route_locked", "{verb} {at}: {err}");
            error_message(&err).to_owned()
        };
        assert!(
            message.contains("tool mode `code`") && message.contains("native"),
            "{message}"
        );
        let res = send(&native).send().await.unwrap();
        assert_eq!(res.status(), 200, "native mode passes {verb} {at}");
    }
    let reached = server.received_requests().await.unwrap().len();
    assert_eq!(reached, routes.len(), "only the native requests reached it");
}

#[tokio::test]
async fn input_tokens_are_counted_on_the_request_as_it_would_be_sent() {
    let server = MockServer::start().await;
    mount(
        &server,
        "POST",
        "/v1/responses/input_tokens",
        ResponseTemplate::new(200)
            .set_body_json(json!({"object": "response.input_tokens", "input_tokens": 42})),
    )
    .await;
    let proxy = start(&server, LOCKED).await;
    let body = json!({"model": "m", "input": [user("hi"), additional_tools(json!([
        {"type": "function", "name": "grep", "parameters": {"type": "object"}}]))],
        "tools": fs_function_tools()});
    let res = proxy.post("/v1/responses/input_tokens", &body, &[]).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap()["input_tokens"], 42);
    let seen = bodies(&server, "/v1/responses/input_tokens").await;
    assert_eq!(wire_names(&seen[0]), ["run_code"]);
    assert!(seen[0]["instructions"].as_str().unwrap().contains("grep"));
    assert!(seen[0]["input"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["type"] != "additional_tools"));
}

#[tokio::test]
async fn reads_on_a_judged_route_carry_no_body() {
    let server = MockServer::start().await;
    let proxy = start(&server, &[("CODEMODE_MODE", "native")]).await;
    let body = common::chat_body(json!([{"role": "user", "content": "hi"}]));
    for verb in ["GET", "OPTIONS"] {
        let res = proxy
            .http
            .request(verb.parse().unwrap(), proxy.url("/v1/chat/completions"))
            .header("x-http-method-override", "POST")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400, "{verb}");
        let err: Value = res.json().await.unwrap();
        assert!(error_message(&err).contains("takes no body"));
    }
    assert!(server.received_requests().await.unwrap().is_empty());
}

// ----- framing -----

#[tokio::test]
async fn a_bom_before_a_chat_stream_is_dropped_and_the_stream_judged() {
    let first = common::sse_call_turn("c1", "", "read", r#"{"path":"a"}"#, 5);
    let second = format!(
        "{}{}data: [DONE]\n\n",
        common::sse_chunk("c2", json!({"role": "assistant", "content": "done"}), None),
        common::sse_chunk("c2", json!({}), Some("stop"))
    );
    let server = common::scripted::model_server(Script::new([
        ResponseTemplate::new(200).set_body_raw(
            [b"\xEF\xBB\xBF".to_vec(), first.into_bytes()].concat(),
            "text/event-stream",
        ),
        ResponseTemplate::new(200).set_body_raw(second.into_bytes(), "text/event-stream"),
    ]))
    .await;
    let proxy = start(&server, LOCKED).await;
    let mut body = common::chat_body(json!([{"role": "user", "content": "go"}]));
    body["stream"] = json!(true);
    let res = proxy.chat(&body, &[]).await;
    let bytes = res.bytes().await.unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(!bytes.starts_with(b"\xEF\xBB\xBF"));
    assert!(!text.contains("\"read\""), "{text}");
    assert!(text.contains("done"), "{text}");
    assert_eq!(common::received(&server).await.len(), 2, "repaired");
}

/// A provider on a raw socket answering every request with `head` and one
/// chunk of `body`.
async fn raw_answer(head: &'static str, body: &'static str) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                // The head, then as much body as it announces.
                loop {
                    let Ok(n) = stream.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&seen).to_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if seen.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let chunk = format!("{head}{:x}\r\n{body}\r\n0\r\n\r\n", body.len());
                let _ = stream.write_all(chunk.as_bytes()).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn a_transfer_coding_other_than_chunked_is_a_clean_502() {
    let addr = raw_answer(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: gzip, chunked\r\n\r\n",
        "\x1f\x08\x00not really gzip",
    )
    .await;
    let mut vars = LOCKED.to_vec();
    let upstream = format!("http://{addr}/v1");
    vars.push(("CODEMODE_UPSTREAM", upstream.as_str()));
    let proxy = common::start_with(common::config(&upstream, &vars)).await;
    let mut body = common::chat_body(json!([{"role": "user", "content": "go"}]));
    for stream in [false, true] {
        body["stream"] = json!(stream);
        let res = proxy.chat(&body, &[]).await;
        assert_eq!(res.status(), 502, "stream {stream}");
        let err: Value = res.json().await.unwrap();
        assert_eq!(err["error"]["code"], "upstream_invalid_response");
        assert!(error_message(&err).contains("transfer-encoding"));
    }
}

// ----- a client's own code mode -----

/// Tools as Codex declares them on its default model: an `additional_tools`
/// item whose `functions` namespace holds `exec` (freeform) and `wait`.
fn codex_code_mode_tools() -> Value {
    additional_tools(json!([
        {"type": "namespace", "name": "functions", "description": "", "tools": [
            {"type": "custom", "name": "exec", "description": "Run JavaScript code.",
             "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
            {"type": "function", "name": "wait", "strict": false,
             "parameters": {"type": "object", "properties": {"cell_id": {"type": "string"}},
                            "required": ["cell_id"]}}]},
        {"type": "namespace", "name": "clock", "description": "Time.", "tools": [
            {"type": "function", "name": "sleep", "parameters": {"type": "object"}}]}
    ]))
}

#[tokio::test]
async fn a_clients_own_code_mode_is_presented_as_sent_and_held_to_what_it_announced() {
    for stream in [false, true] {
        let exec = json!({"type": "custom_tool_call", "id": "ctc_1", "status": "completed",
            "call_id": "call_exec", "name": "exec", "namespace": "functions",
            "input": "const r = await tools.exec_command({cmd: 'ls'}); text(r.output);"});
        let sleep = json!({"type": "function_call", "id": "fc_2", "status": "completed",
            "call_id": "call_sleep", "name": "sleep", "namespace": "clock", "arguments": "{}"});
        let server = responses_provider(vec![
            // A direct call to a tool only exec's description names: denied.
            vec![fn_call("call_direct", "exec_command", r#"{"cmd":"ls"}"#)],
            vec![exec.clone(), sleep.clone()],
        ])
        .await;
        let proxy = start(&server, LOCKED).await;
        let input = vec![codex_code_mode_tools(), user("list the files")];
        let body = json!({"model": "gpt-6.2-sol", "input": input, "stream": stream,
                          "store": false});
        let answer = responses_answer(&proxy, &body).await;
        let got = handed(&answer);
        assert!(
            got.contains(&"custom_tool_call:exec".to_owned())
                && got.contains(&"function_call:sleep".to_owned()),
            "stream {stream}: the client's code mode reaches it: {got:?}"
        );
        assert!(
            !got.iter().any(|h| h.contains("exec_command")),
            "stream {stream}: {got:?}"
        );
        let seen = bodies(&server, "/v1/responses").await;
        assert_eq!(
            seen.len(),
            2,
            "stream {stream}: the direct call was repaired"
        );
        assert_eq!(
            seen[0]["input"][0],
            codex_code_mode_tools(),
            "presented as sent"
        );
        assert!(seen[0].get("tools").is_none() && seen[0].get("instructions").is_none());
        let repair = seen[1]["input"].as_array().unwrap();
        let denial = repair
            .iter()
            .find(|i| i["call_id"] == "call_direct" && i["type"] == "function_call_output")
            .expect("the direct call is answered");
        assert!(denial["output"]
            .as_str()
            .unwrap()
            .starts_with("UNKNOWN_TOOL"));
    }
}

#[tokio::test]
async fn tools_a_client_search_loaded_are_collapsed_into_the_sdk() {
    let server = responses_provider(vec![vec![said("ok")]]).await;
    let proxy = start(&server, LOCKED).await;
    let input = json!([
        user("weather?"),
        {"type": "tool_search_call", "id": "tsc_1", "call_id": "ts1", "execution": "client",
         "status": "completed", "arguments": {"query": "weather"}},
        {"type": "tool_search_output", "id": "tso_1", "call_id": "ts1", "status": "completed",
         "execution": "client", "tools": [{"type": "namespace", "name": "mcp__demo",
            "description": "Demo.", "tools": [{"type": "function", "name": "get_weather",
            "description": "The weather in a city.", "defer_loading": true,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]}]}
    ]);
    let body = json!({"model": "m", "input": input, "tools": [
        {"type": "tool_search", "execution": "client", "description": "Find tools.",
         "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}]});
    let res = proxy.post("/v1/responses", &body, &[]).await;
    assert_eq!(res.status(), 200);
    let seen = bodies(&server, "/v1/responses").await;
    assert_eq!(wire_names(&seen[0]), ["run_code"]);
    let sdk = seen[0]["instructions"].as_str().unwrap();
    assert!(
        sdk.contains("get_weather") && sdk.contains("tool_search"),
        "{sdk}"
    );
    let output = &seen[0]["input"][2];
    assert_eq!(output["type"], "tool_search_output");
    assert_eq!(output["tools"], json!([]), "declared nowhere natively");
}
