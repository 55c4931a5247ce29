//! Every shape of a call the model can emit is judged (docs/security.md):
//! legacy `function_call`, custom calls, escaped keys, extra choices,
//! compressed bodies, in whole completions and in streams, and the turn
//! decision is the same on both paths.

use crate::common::agent::fs_tools;
use crate::common::sse_client::reassemble;
use crate::common::*;
use serde_json::{json, Value};
use wiremock::{MockServer, ResponseTemplate};

const NATIVE: [&str; 4] = ["read", "write", "bash", "list"];

fn sse(body: impl Into<Vec<u8>>) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body.into(), "text/event-stream")
}

async fn scripted(rounds: Vec<ResponseTemplate>) -> MockServer {
    scripted::model_server(Script::new(rounds)).await
}

/// The proxy (with `vars`) in front of a provider streaming `rounds`,
/// asked for a stream of `user_chat("go")` with `headers`: the provider,
/// and every byte the client received.
async fn stream_go(
    rounds: Vec<ResponseTemplate>,
    vars: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> (MockServer, bytes::Bytes) {
    let p = scripted(rounds).await;
    let proxy = start(&p, vars).await;
    let bytes = proxy.chat_bytes(&streamed(user_chat("go")), headers).await;
    (p, bytes)
}

/// [`stream_go`], where no byte the client received could be read as a
/// call to a native tool: the provider, and those bytes.
async fn stream_judged(
    rounds: Vec<ResponseTemplate>,
    vars: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> (MockServer, bytes::Bytes) {
    let (p, bytes) = stream_go(rounds, vars, headers).await;
    assert_no_native(&lenient_stream_names(&bytes));
    (p, bytes)
}

/// [`stream_go`] with whole `completions`: the provider, and the completion
/// the client received.
async fn ask_go(
    completions: Vec<Value>,
    vars: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> (MockServer, Value) {
    let p = provider(completions).await;
    let proxy = start(&p, vars).await;
    let got = proxy.chat_json(&user_chat("go"), headers).await;
    (p, got)
}

fn streamed(mut body: Value) -> Value {
    body["stream"] = json!(true);
    body
}

fn chunk(id: &str, choices: Value) -> String {
    let c = json!({"id": id, "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": choices});
    format!("data: {c}\n\n")
}

/// A chunk of stream `id` carrying `delta`.
fn delta(id: &str, delta: Value) -> String {
    sse_chunk(id, delta, None)
}

/// The chunk opening the assistant's message, with `content`.
fn opening(id: &str, content: Value) -> String {
    delta(id, json!({"role": "assistant", "content": content}))
}

/// A line written by hand (one no serializer writes), as an event.
fn raw(line: &str) -> String {
    format!("{line}\n\n")
}

/// A streamed turn: `events`, the chunk finishing it with `finish`, `[DONE]`.
fn turn(id: &str, events: Vec<String>, finish: &str) -> String {
    let mut s = events.concat();
    s += &sse_chunk(id, json!({}), Some(finish));
    s + "data: [DONE]\n\n"
}

fn text_turn(id: &str, text: &str) -> String {
    turn(id, vec![opening(id, json!(text))], "stop")
}

/// Every tool name a lenient client could read out of the bytes of a
/// stream: escapes decoded, every choice, `tool_calls` by `function` or
/// `custom`, legacy `function_call`; fragments and their concatenations.
fn lenient_stream_names(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes).replace("\r\n", "\n");
    let mut joined: std::collections::BTreeMap<(i64, String), String> = Default::default();
    let mut names = Vec::new();
    for block in text.split("\n\n") {
        let data: Vec<&str> = block
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.trim_start())
            .collect();
        let Ok(chunk) = serde_json::from_str::<Value>(&data.join("\n")) else {
            continue;
        };
        for choice in chunk["choices"].as_array().into_iter().flatten() {
            let ci = choice["index"].as_i64().unwrap_or(0);
            for part in ["delta", "message"] {
                let d = &choice[part];
                for (k, call) in d["tool_calls"].as_array().into_iter().flatten().enumerate() {
                    let key = call["index"]
                        .as_i64()
                        .map_or(k.to_string(), |i| i.to_string());
                    for body in ["function", "custom"] {
                        if let Some(n) = call[body]["name"].as_str() {
                            names.push(n.to_owned());
                            joined.entry((ci, key.clone())).or_default().push_str(n);
                        }
                    }
                }
                if let Some(n) = d["function_call"]["name"].as_str() {
                    names.push(n.to_owned());
                    joined.entry((ci, "legacy".into())).or_default().push_str(n);
                }
            }
        }
    }
    names.extend(joined.into_values());
    names
}

/// The same for a whole completion.
fn lenient_json_names(completion: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for choice in completion["choices"].as_array().into_iter().flatten() {
        let m = &choice["message"];
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            for body in ["function", "custom"] {
                if let Some(n) = call[body]["name"].as_str() {
                    names.push(n.to_owned());
                }
            }
        }
        if let Some(n) = m["function_call"]["name"].as_str() {
            names.push(n.to_owned());
        }
    }
    names
}

fn assert_no_native(names: &[String]) {
    for n in names {
        assert!(
            !NATIVE.contains(&n.as_str()),
            "the client could read a call to {n}: {names:?}"
        );
    }
}

/// The last message the model was re-asked with.
fn last_message(body: &Value) -> Value {
    body["messages"].as_array().unwrap().last().unwrap().clone()
}

// ---- legacy function_call ----

/// The content of the last message the model was re-asked with, which
/// answers the legacy call to bash as a function message.
fn function_answer(body: &Value) -> String {
    let answer = last_message(body);
    assert_eq!(answer["role"], "function");
    assert_eq!(answer["name"], "bash");
    answer["content"].as_str().unwrap().to_owned()
}

fn legacy_completion(name: &str, args: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
           "choices": [{"index": 0, "finish_reason": "function_call",
             "message": {"role": "assistant", "content": null,
                         "function_call": {"name": name, "arguments": args}}}],
           "usage": usage(1, 1)})
}

#[tokio::test]
async fn legacy_function_call_in_a_completion_is_withheld_and_answered_by_a_function_message() {
    let (p, got) = ask_go(
        vec![
            legacy_completion("bash", r#"{"command":"ls"}"#),
            text_completion("done", usage(1, 1)),
        ],
        &[],
        &[],
    )
    .await;
    assert_no_native(&lenient_json_names(&got));
    assert_eq!(got["choices"][0]["message"]["content"], "done");
    let sent = received(&p).await;
    assert_eq!(sent.len(), 2, "the model was asked again");
    let msgs = sent[1]["messages"].as_array().unwrap();
    let assistant = &msgs[msgs.len() - 2];
    assert_eq!(assistant["function_call"]["name"], "bash");
    let content = function_answer(&sent[1]);
    assert!(content.starts_with("UNKNOWN_TOOL:") && content.contains("await tools.bash"));
}

#[tokio::test]
async fn legacy_function_call_in_a_stream_is_withheld_and_answered_by_a_function_message() {
    let turn = turn(
        "s1",
        vec![
            opening("s1", json!(null)),
            delta(
                "s1",
                json!({"function_call": {"name": "bash", "arguments": ""}}),
            ),
            delta(
                "s1",
                json!({"function_call": {"arguments": "{\"command\":\"ls\"}"}}),
            ),
        ],
        "function_call",
    );
    let (p, bytes) = stream_judged(vec![sse(turn), sse(text_turn("s2", "done"))], &[], &[]).await;
    assert_eq!(reassemble(&bytes).text, "done");
    let sent = received(&p).await;
    assert_eq!(sent.len(), 2);
    assert!(function_answer(&sent[1]).starts_with("UNKNOWN_TOOL:"));
}

// ---- escaped keys ----

#[tokio::test]
async fn an_escaped_tool_calls_key_is_judged_like_the_plain_one() {
    let turn = turn(
        "e1",
        vec![
            opening("e1", json!("")),
            raw(
                r#"data: {"id":"e1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool\u005fcalls":[{"index":0,"id":"call_e","type":"function","function":{"name":"bash","arguments":"{\"command\":\"id\"}"}}]},"finish_reason":null}]}"#,
            ),
        ],
        "tool_calls",
    );
    let (p, bytes) = stream_judged(vec![sse(turn), sse(text_turn("e2", "done"))], &[], &[]).await;
    assert_eq!(reassemble(&bytes).text, "done");
    let sent = received(&p).await;
    assert_eq!(sent.len(), 2, "the model was asked again");
    assert_eq!(last_message(&sent[1])["tool_call_id"], "call_e");
}

#[tokio::test]
async fn an_escaped_function_call_key_is_judged_too() {
    let turn = turn(
        "e1",
        vec![
            opening("e1", json!("")),
            raw(
                r#"data: {"id":"e1","choices":[{"index":0,"delta":{"\u0066unction_call":{"name":"bash","arguments":"{}"}},"finish_reason":null}]}"#,
            ),
        ],
        "function_call",
    );
    let (p, _) = stream_judged(vec![sse(turn), sse(text_turn("e2", "done"))], &[], &[]).await;
    assert_eq!(received(&p).await.len(), 2);
}

// ---- several choices ----

#[tokio::test]
async fn a_second_choice_in_a_chunk_never_reaches_the_client() {
    let turn = turn(
        "c1",
        vec![
            chunk(
                "c1",
                json!([{"index": 0, "delta": {"role": "assistant", "content": "hi"}, "finish_reason": null},
                       {"index": 1, "delta": {"tool_calls": [{"index": 0, "id": "call_x", "type": "function",
                           "function": {"name": "bash", "arguments": "{}"}}]}, "finish_reason": null}]),
            ),
            chunk(
                "c1",
                json!([{"index": 1, "delta": {"tool_calls": [{"index": 0, "function": {"name": "write", "arguments": "{}"}}]}, "finish_reason": null}]),
            ),
        ],
        "stop",
    );
    let (_, bytes) = stream_judged(vec![sse(turn), sse(text_turn("c2", "done"))], &[], &[]).await;
    assert!(reassemble(&bytes).text.starts_with("hi"));
}

#[tokio::test]
async fn a_second_choice_in_a_completion_never_reaches_the_client() {
    let mut two = text_completion("hi", usage(1, 1));
    two["choices"]
        .as_array_mut()
        .unwrap()
        .push(json!({"index": 1, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null,
                    "tool_calls": [call("call_x", "bash", "{}")]}}));
    let (_, got) = ask_go(vec![two], &[], &[]).await;
    assert_no_native(&lenient_json_names(&got));
    assert_eq!(got["choices"].as_array().unwrap().len(), 1);
    assert_eq!(got["choices"][0]["message"]["content"], "hi");
}

// ---- compressed bodies ----

/// A gzip member holding `data` in stored (uncompressed) deflate blocks.
fn gzip(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let blocks: Vec<&[u8]> = data.chunks(65535).collect();
    for (i, block) in blocks.iter().enumerate() {
        out.push(u8::from(i + 1 == blocks.len()));
        let len = block.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    let mut crc = 0xffff_ffffu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    out.extend_from_slice(&(!crc).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

async fn assert_refused_as_compressed(res: reqwest::Response) {
    assert_eq!(res.status(), 502);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["code"], "upstream_invalid_response");
    assert!(
        error_message(&err).contains("content-encoding: gzip"),
        "{err}"
    );
}

#[tokio::test]
async fn a_gzip_stream_is_refused_not_forwarded_unjudged() {
    let body = gzip(sse_call_turn("g1", "", "bash", r#"{"command":"id"}"#, 1).as_bytes());
    let p = scripted(vec![sse(body).insert_header("content-encoding", "gzip")]).await;
    let proxy = start(&p, &[]).await;
    let res = proxy
        .chat(&streamed(user_chat("go")), &[("accept-encoding", "gzip")])
        .await;
    assert_refused_as_compressed(res).await;
    let reqs = p.received_requests().await.unwrap();
    assert_eq!(reqs[0].headers["accept-encoding"], "identity");
}

#[tokio::test]
async fn a_gzip_completion_is_refused_and_identity_is_asked_for() {
    let completion = calls_completion(vec![call("c1", "bash", "{}")], usage(1, 1));
    let body = gzip(completion.to_string().as_bytes());
    let p = scripted(vec![ResponseTemplate::new(200)
        .set_body_raw(body, "application/json")
        .insert_header("content-encoding", "gzip")])
    .await;
    let proxy = start(&p, &[]).await;
    let res = proxy
        .chat(&user_chat("go"), &[("accept-encoding", "gzip")])
        .await;
    assert_refused_as_compressed(res).await;
    let reqs = p.received_requests().await.unwrap();
    assert_eq!(reqs[0].headers["accept-encoding"], "identity");
}

// ---- custom calls ----

const NO_SHELL: &str =
    "[[preset]]\nname = \"no-shell\"\ntool_mode = \"native\"\ndeny = [\"bash\"]\n";

/// The header choosing [`NO_SHELL`]'s preset.
const NO_SHELL_PRESET: &[(&str, &str)] = &[("x-codemode-preset", "no-shell")];

fn custom_call(id: &str, name: &str, input: &str) -> Value {
    json!({"id": id, "type": "custom", "custom": {"name": name, "input": input}})
}

#[tokio::test]
async fn a_custom_call_to_a_hidden_tool_in_a_completion_is_denied() {
    let file = config_file("custom-json", NO_SHELL);
    let (p, got) = ask_go(
        vec![
            calls_completion(vec![custom_call("c1", "bash", "ls")], usage(1, 1)),
            calls_completion(vec![call("c2", "read", r#"{"path":"a"}"#)], usage(1, 1)),
        ],
        &[("CODEMODE_CONFIG", &file)],
        NO_SHELL_PRESET,
    )
    .await;
    assert_eq!(lenient_json_names(&got), vec!["read"]);
    let sent = received(&p).await;
    let answer = last_message(&sent[1]);
    assert_eq!(answer["tool_call_id"], "c1");
    assert!(answer["content"]
        .as_str()
        .unwrap()
        .starts_with("UNKNOWN_TOOL:"));
}

#[tokio::test]
async fn a_custom_call_to_a_hidden_tool_in_a_stream_is_denied() {
    let file = config_file("custom-sse", NO_SHELL);
    let turn = turn(
        "u1",
        vec![
            opening("u1", json!(null)),
            delta(
                "u1",
                json!({"tool_calls": [{"index": 0, "id": "c1", "type": "custom", "custom": {"name": "bash", "input": ""}}]}),
            ),
            delta(
                "u1",
                json!({"tool_calls": [{"index": 0, "custom": {"input": "rm -rf /"}}]}),
            ),
        ],
        "tool_calls",
    );
    let (p, bytes) = stream_judged(
        vec![sse(turn), sse(text_turn("u2", "done"))],
        &[("CODEMODE_CONFIG", &file)],
        NO_SHELL_PRESET,
    )
    .await;
    assert!(!String::from_utf8_lossy(&bytes).contains("rm -rf"));
    let sent = received(&p).await;
    assert_eq!(sent.len(), 2);
    let msgs = sent[1]["messages"].as_array().unwrap();
    assert_eq!(
        msgs[msgs.len() - 2]["tool_calls"][0]["custom"]["input"],
        "rm -rf /"
    );
    assert_eq!(last_message(&sent[1])["tool_call_id"], "c1");
}

// ---- what the judge does not read must not go out ----

#[tokio::test]
async fn a_later_delta_cannot_rename_an_allowed_call() {
    let turn = turn(
        "r1",
        vec![
            delta(
                "r1",
                json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "run_code", "arguments": ""}}]}),
            ),
            delta(
                "r1",
                json!({"tool_calls": [{"index": 0, "function": {"name": "bash", "arguments": "{}"}}]}),
            ),
            delta(
                "r1",
                json!({"tool_calls": [{"index": 0, "type": "custom", "custom": {"name": "bash", "input": ""}}]}),
            ),
        ],
        "tool_calls",
    );
    let (_, bytes) = stream_judged(vec![sse(turn)], &[], &[]).await;
    assert_eq!(reassemble(&bytes).call_names(), vec!["run_code"]);
}

#[tokio::test]
async fn a_whole_message_in_a_chunk_does_not_carry_calls_out() {
    let turn = turn(
        "m1",
        vec![
            opening("m1", json!("a")),
            chunk(
                "m1",
                json!([{"index": 0, "delta": {"tool_calls": []}, "finish_reason": null,
                        "message": {"role": "assistant", "tool_calls": [call("c1", "bash", "{}")]}}]),
            ),
        ],
        "stop",
    );
    stream_judged(vec![sse(turn)], &[], &[]).await;
}

#[tokio::test]
async fn nothing_after_an_upstream_error_event_carries_a_call() {
    // No chunk finishes this turn: the stream ends at [DONE].
    let turn = [
        opening("x1", json!("a")),
        raw("event: error\ndata: {\"message\": \"overloaded\"}"),
        delta(
            "x1",
            json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}),
        ),
    ]
    .concat()
        + "data: [DONE]\n\n";
    let (_, bytes) = stream_judged(vec![sse(turn)], &[], &[]).await;
    assert!(String::from_utf8_lossy(&bytes).contains("overloaded"));
}

#[tokio::test]
async fn an_error_chunk_loses_the_choices_it_carries() {
    let turn = chunk(
        "x1",
        json!([{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                "function": {"name": "bash", "arguments": "{}"}}]}, "finish_reason": null}]),
    )
    .replacen("{\"id\"", "{\"error\":{\"message\":\"boom\"},\"id\"", 1)
        + "data: [DONE]\n\n";
    let (_, bytes) = stream_judged(vec![sse(turn)], &[], &[]).await;
    assert!(String::from_utf8_lossy(&bytes).contains("boom"));
}

#[tokio::test]
async fn a_chunk_only_a_lenient_parser_reads_is_not_forwarded() {
    // Python's json module reads NaN; serde does not.
    let turn = turn(
        "n1",
        vec![
            opening("n1", json!("a")),
            raw(
                r#"data: {"id":"n1","x":NaN,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]},"finish_reason":null}]}"#,
            ),
        ],
        "stop",
    );
    let (_, bytes) = stream_go(vec![sse(turn)], &[], &[]).await;
    assert!(!String::from_utf8_lossy(&bytes).contains("bash"));
}

// ---- one turn decision, two dialects ----

fn both_mode_turn(order: &[(&str, &str, &str)]) -> (Value, String) {
    let calls: Vec<Value> = order.iter().map(|(id, n, a)| call(id, n, a)).collect();
    let json = calls_completion(calls, usage(10, 5));
    let mut events = vec![opening("b1", json!(null))];
    for (i, (id, name, args)) in order.iter().enumerate() {
        events.push(delta(
            "b1",
            json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
        ));
        events.push(delta(
            "b1",
            json!({"tool_calls": [{"index": i, "function": {"arguments": args}}]}),
        ));
    }
    (json, turn("b1", events, "tool_calls"))
}

/// A provider answering `first`, then `text` in the same dialect: a
/// stream's turn, or a whole completion.
async fn first_then_text(first: ResponseTemplate, stream: bool, text: &str) -> MockServer {
    let answer = if stream {
        sse(text_turn("b2", text))
    } else {
        ResponseTemplate::new(200).set_body_json(text_completion(text, usage(1, 1)))
    };
    scripted(vec![first, answer]).await
}

/// A body of `messages` with the file tools, asking for a stream if `stream`.
fn fs_chat(messages: &[Value], stream: bool) -> Value {
    let mut body = json!({"model": "m", "messages": messages, "tools": fs_tools()});
    if stream {
        body["stream"] = json!(true);
    }
    body
}

/// The client's turn (calls, finish) and the next upstream request's
/// messages and tools, for one dialect.
async fn both_mode_round_trip(first: ResponseTemplate, stream: bool) -> (Value, Value) {
    let p = first_then_text(first, stream, "read it").await;
    let proxy = start(
        &p,
        &[("CODEMODE_RUNTIME", "embedded"), ("CODEMODE_MODE", "both")],
    )
    .await;
    let mut messages = vec![json!({"role": "user", "content": "go"})];
    let res = proxy.chat(&fs_chat(&messages, stream), &[]).await;
    assert_eq!(res.status(), 200);
    let (calls, finish) = if stream {
        let bytes = res.bytes().await.unwrap();
        let view = reassemble(&bytes);
        let calls: Vec<Value> = view
            .calls
            .iter()
            .map(|c| call(&c.id, &c.name, &c.arguments))
            .collect();
        (calls, json!(view.finish_reasons.last()))
    } else {
        let v: Value = res.json().await.unwrap();
        let m = &v["choices"][0]["message"];
        (
            m["tool_calls"].as_array().cloned().unwrap_or_default(),
            v["choices"][0]["finish_reason"].clone(),
        )
    };
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": calls}));
    for c in &calls {
        messages.push(json!({"role": "tool", "tool_call_id": c["id"], "content": "file text"}));
    }
    let res = proxy.chat(&fs_chat(&messages, stream), &[]).await;
    assert_eq!(res.status(), 200);
    res.bytes().await.unwrap();
    let sent = received(&p).await;
    assert_eq!(sent.len(), 2, "no repair round: the client's call went out");
    let next = json!({"messages": sent[1]["messages"], "tools": sent[1]["tools"]});
    (json!({"calls": calls, "finish": finish}), next)
}

#[tokio::test]
async fn run_code_beside_a_native_call_in_both_mode_is_decided_alike_in_json_and_sse() {
    let read = ("call_r", "read", r#"{"path":"a.txt"}"#);
    let prog = ("call_p", "run_code", r#"{"code":"return 1"}"#);
    for order in [[read, prog], [prog, read]] {
        let (json_turn, sse_turn) = both_mode_turn(&order);
        let (client_json, next_json) =
            both_mode_round_trip(ResponseTemplate::new(200).set_body_json(json_turn), false).await;
        let (client_sse, next_sse) = both_mode_round_trip(sse(sse_turn), true).await;
        assert_eq!(client_json, client_sse, "the client sees the same turn");
        assert_eq!(
            next_json, next_sse,
            "the model is asked the same thing next"
        );
        // The native call went out; the program was not run, and the model learns why.
        assert_eq!(client_json["calls"][0]["function"]["name"], "read");
        assert_eq!(client_json["calls"].as_array().unwrap().len(), 1);
        let msgs = next_json["messages"].as_array().unwrap();
        let skipped = msgs
            .iter()
            .find(|m| m["tool_call_id"] == "call_p")
            .expect("the program's answer is spliced in");
        assert!(skipped["content"]
            .as_str()
            .unwrap()
            .starts_with("ONE_PROGRAM:"));
        let assistant = msgs.iter().find(|m| m["role"] == "assistant").unwrap();
        let names: Vec<&str> = assistant["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["function"]["name"].as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"run_code") && names.contains(&"read"),
            "{names:?}"
        );
    }
}

#[tokio::test]
async fn two_programs_in_one_turn_are_refused_alike_in_json_and_sse() {
    let a = ("call_a", "run_code", r#"{"code":"return 1"}"#);
    let b = ("call_b", "run_code", r#"{"code":"return 2"}"#);
    let (json_turn, sse_turn) = both_mode_turn(&[a, b]);
    let mut next = Vec::new();
    for (first, stream) in [
        (ResponseTemplate::new(200).set_body_json(json_turn), false),
        (sse(sse_turn), true),
    ] {
        let p = first_then_text(first, stream, "ok").await;
        let proxy = start(&p, &[("CODEMODE_RUNTIME", "embedded")]).await;
        let go = [json!({"role": "user", "content": "go"})];
        let res = proxy.chat(&fs_chat(&go, stream), &[]).await;
        assert_eq!(res.status(), 200);
        // A stream's repair runs while its body is read.
        res.bytes().await.unwrap();
        let sent = received(&p).await;
        assert_eq!(sent.len(), 2, "a repair round");
        next.push(sent[1]["messages"].clone());
    }
    assert_eq!(next[0], next[1]);
}
