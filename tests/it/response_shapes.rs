//! Every shape of a call the model can emit is judged (docs/security.md):
//! legacy `function_call`, custom calls, escaped keys, extra choices,
//! compressed bodies, in whole completions and in streams, and the turn
//! decision is the same on both paths.

use crate::common::agent::fs_tools;
use crate::common::sse_client::reassemble;
use crate::common::*;
use serde_json::{json, Value};
use wiremock::matchers::path;
use wiremock::{Mock, MockServer, ResponseTemplate};

const NATIVE: [&str; 4] = ["read", "write", "bash", "list"];

fn sse(body: impl Into<Vec<u8>>) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body.into(), "text/event-stream")
}

async fn scripted(rounds: Vec<ResponseTemplate>) -> MockServer {
    let p = MockServer::start().await;
    Mock::given(path("/v1/chat/completions"))
        .respond_with(Script::new(rounds))
        .mount(&p)
        .await;
    p
}

fn streamed(mut body: Value) -> Value {
    body["stream"] = json!(true);
    body
}

fn chunk(id: &str, choices: Value) -> String {
    let c = json!({"id": id, "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": choices});
    format!("data: {c}\n\n")
}

fn text_turn(id: &str, text: &str) -> String {
    let mut s = sse_chunk(id, json!({"role": "assistant", "content": text}), None);
    s += &sse_chunk(id, json!({}), Some("stop"));
    s + "data: [DONE]\n\n"
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

fn legacy_completion(name: &str, args: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
           "choices": [{"index": 0, "finish_reason": "function_call",
             "message": {"role": "assistant", "content": null,
                         "function_call": {"name": name, "arguments": args}}}],
           "usage": usage(1, 1)})
}

#[tokio::test]
async fn legacy_function_call_in_a_completion_is_withheld_and_answered_by_a_function_message() {
    let p = provider([
        legacy_completion("bash", r#"{"command":"ls"}"#),
        text_completion("done", usage(1, 1)),
    ])
    .await;
    let proxy = start(&p, &[]).await;
    let got: Value = proxy
        .chat(&user_chat("go"), &[])
        .await
        .json()
        .await
        .unwrap();
    assert_no_native(&lenient_json_names(&got));
    assert_eq!(got["choices"][0]["message"]["content"], "done");
    let sent = received(&p).await;
    assert_eq!(sent.len(), 2, "the model was asked again");
    let msgs = sent[1]["messages"].as_array().unwrap();
    let assistant = &msgs[msgs.len() - 2];
    assert_eq!(assistant["function_call"]["name"], "bash");
    let answer = last_message(&sent[1]);
    assert_eq!(answer["role"], "function");
    assert_eq!(answer["name"], "bash");
    let content = answer["content"].as_str().unwrap();
    assert!(content.starts_with("UNKNOWN_TOOL:") && content.contains("await tools.bash"));
}

#[tokio::test]
async fn legacy_function_call_in_a_stream_is_withheld_and_answered_by_a_function_message() {
    let mut turn = sse_chunk("s1", json!({"role": "assistant", "content": null}), None);
    turn += &sse_chunk(
        "s1",
        json!({"function_call": {"name": "bash", "arguments": ""}}),
        None,
    );
    turn += &sse_chunk(
        "s1",
        json!({"function_call": {"arguments": "{\"command\":\"ls\"}"}}),
        None,
    );
    turn += &sse_chunk("s1", json!({}), Some("function_call"));
    turn += "data: [DONE]\n\n";
    let p = scripted(vec![sse(turn), sse(text_turn("s2", "done"))]).await;
    let proxy = start(&p, &[]).await;
    let bytes = proxy
        .chat(&streamed(user_chat("go")), &[])
        .await
        .bytes()
        .await
        .unwrap();
    assert_no_native(&lenient_stream_names(&bytes));
    assert_eq!(reassemble(&bytes).text, "done");
    let sent = received(&p).await;
    assert_eq!(sent.len(), 2);
    let answer = last_message(&sent[1]);
    assert_eq!(answer["role"], "function");
    assert_eq!(answer["name"], "bash");
    assert!(answer["content"]
        .as_str()
        .unwrap()
        .starts_with("UNKNOWN_TOOL:"));
}

// ---- escaped keys ----

#[tokio::test]
async fn an_escaped_tool_calls_key_is_judged_like_the_plain_one() {
    let mut turn = sse_chunk("e1", json!({"role": "assistant", "content": ""}), None);
    turn += r#"data: {"id":"e1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool\u005fcalls":[{"index":0,"id":"call_e","type":"function","function":{"name":"bash","arguments":"{\"command\":\"id\"}"}}]},"finish_reason":null}]}"#;
    turn += "\n\n";
    turn += &sse_chunk("e1", json!({}), Some("tool_calls"));
    turn += "data: [DONE]\n\n";
    let p = scripted(vec![sse(turn), sse(text_turn("e2", "done"))]).await;
    let proxy = start(&p, &[]).await;
    let bytes = proxy
        .chat(&streamed(user_chat("go")), &[])
        .await
        .bytes()
        .await
        .unwrap();
    assert_no_native(&lenient_stream_names(&bytes));
    assert_eq!(reassemble(&bytes).text, "done");
    let sent = received(&p).await;
    assert_eq!(sent.len(), 2, "the model was asked again");
    assert_eq!(last_message(&sent[1])["tool_call_id"], "call_e");
}

#[tokio::test]
async fn an_escaped_function_call_key_is_judged_too() {
    let mut turn = sse_chunk("e1", json!({"role": "assistant", "content": ""}), None);
    turn += r#"data: {"id":"e1","choices":[{"index":0,"delta":{"\u0066unction_call":{"name":"bash","arguments":"{}"}},"finish_reason":null}]}"#;
    turn += "\n\n";
    turn += &sse_chunk("e1", json!({}), Some("function_call"));
    turn += "data: [DONE]\n\n";
    let p = scripted(vec![sse(turn), sse(text_turn("e2", "done"))]).await;
    let proxy = start(&p, &[]).await;
    let bytes = proxy
        .chat(&streamed(user_chat("go")), &[])
        .await
        .bytes()
        .await
        .unwrap();
    assert_no_native(&lenient_stream_names(&bytes));
    assert_eq!(received(&p).await.len(), 2);
}

// ---- several choices ----

#[tokio::test]
async fn a_second_choice_in_a_chunk_never_reaches_the_client() {
    let mut turn = chunk(
        "c1",
        json!([{"index": 0, "delta": {"role": "assistant", "content": "hi"}, "finish_reason": null},
               {"index": 1, "delta": {"tool_calls": [{"index": 0, "id": "call_x", "type": "function",
                   "function": {"name": "bash", "arguments": "{}"}}]}, "finish_reason": null}]),
    );
    turn += &chunk(
        "c1",
        json!([{"index": 1, "delta": {"tool_calls": [{"index": 0, "function": {"name": "write", "arguments": "{}"}}]}, "finish_reason": null}]),
    );
    turn += &sse_chunk("c1", json!({}), Some("stop"));
    turn += "data: [DONE]\n\n";
    let p = scripted(vec![sse(turn), sse(text_turn("c2", "done"))]).await;
    let proxy = start(&p, &[]).await;
    let bytes = proxy
        .chat(&streamed(user_chat("go")), &[])
        .await
        .bytes()
        .await
        .unwrap();
    assert_no_native(&lenient_stream_names(&bytes));
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
    let p = provider([two]).await;
    let proxy = start(&p, &[]).await;
    let got: Value = proxy
        .chat(&user_chat("go"), &[])
        .await
        .json()
        .await
        .unwrap();
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
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("content-encoding: gzip"),
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

fn custom_call(id: &str, name: &str, input: &str) -> Value {
    json!({"id": id, "type": "custom", "custom": {"name": name, "input": input}})
}

#[tokio::test]
async fn a_custom_call_to_a_hidden_tool_in_a_completion_is_denied() {
    let file = config_file("custom-json", NO_SHELL);
    let p = provider([
        calls_completion(vec![custom_call("c1", "bash", "ls")], usage(1, 1)),
        calls_completion(vec![call("c2", "read", r#"{"path":"a"}"#)], usage(1, 1)),
    ])
    .await;
    let proxy = start(&p, &[("CODEMODE_CONFIG", &file)]).await;
    let got: Value = proxy
        .chat(&user_chat("go"), &[("x-codemode-preset", "no-shell")])
        .await
        .json()
        .await
        .unwrap();
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
    let mut turn = sse_chunk("u1", json!({"role": "assistant", "content": null}), None);
    turn += &sse_chunk(
        "u1",
        json!({"tool_calls": [{"index": 0, "id": "c1", "type": "custom", "custom": {"name": "bash", "input": ""}}]}),
        None,
    );
    turn += &sse_chunk(
        "u1",
        json!({"tool_calls": [{"index": 0, "custom": {"input": "rm -rf /"}}]}),
        None,
    );
    turn += &sse_chunk("u1", json!({}), Some("tool_calls"));
    turn += "data: [DONE]\n\n";
    let p = scripted(vec![sse(turn), sse(text_turn("u2", "done"))]).await;
    let proxy = start(&p, &[("CODEMODE_CONFIG", &file)]).await;
    let bytes = proxy
        .chat(
            &streamed(user_chat("go")),
            &[("x-codemode-preset", "no-shell")],
        )
        .await
        .bytes()
        .await
        .unwrap();
    assert_no_native(&lenient_stream_names(&bytes));
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
    let mut turn = sse_chunk(
        "r1",
        json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "run_code", "arguments": ""}}]}),
        None,
    );
    turn += &sse_chunk(
        "r1",
        json!({"tool_calls": [{"index": 0, "function": {"name": "bash", "arguments": "{}"}}]}),
        None,
    );
    turn += &sse_chunk(
        "r1",
        json!({"tool_calls": [{"index": 0, "type": "custom", "custom": {"name": "bash", "input": ""}}]}),
        None,
    );
    turn += &sse_chunk("r1", json!({}), Some("tool_calls"));
    turn += "data: [DONE]\n\n";
    let p = scripted(vec![sse(turn)]).await;
    let proxy = start(&p, &[]).await;
    let bytes = proxy
        .chat(&streamed(user_chat("go")), &[])
        .await
        .bytes()
        .await
        .unwrap();
    assert_no_native(&lenient_stream_names(&bytes));
    assert_eq!(reassemble(&bytes).call_names(), vec!["run_code"]);
}

#[tokio::test]
async fn a_whole_message_in_a_chunk_does_not_carry_calls_out() {
    let mut turn = sse_chunk("m1", json!({"role": "assistant", "content": "a"}), None);
    turn += &chunk(
        "m1",
        json!([{"index": 0, "delta": {"tool_calls": []}, "finish_reason": null,
                "message": {"role": "assistant", "tool_calls": [call("c1", "bash", "{}")]}}]),
    );
    turn += &sse_chunk("m1", json!({}), Some("stop"));
    turn += "data: [DONE]\n\n";
    let p = scripted(vec![sse(turn)]).await;
    let proxy = start(&p, &[]).await;
    let bytes = proxy
        .chat(&streamed(user_chat("go")), &[])
        .await
        .bytes()
        .await
        .unwrap();
    assert_no_native(&lenient_stream_names(&bytes));
}

#[tokio::test]
async fn nothing_after_an_upstream_error_event_carries_a_call() {
    let mut turn = sse_chunk("x1", json!({"role": "assistant", "content": "a"}), None);
    turn += "event: error\ndata: {\"message\": \"overloaded\"}\n\n";
    turn += &sse_chunk(
        "x1",
        json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}),
        None,
    );
    turn += "data: [DONE]\n\n";
    let p = scripted(vec![sse(turn)]).await;
    let proxy = start(&p, &[]).await;
    let bytes = proxy
        .chat(&streamed(user_chat("go")), &[])
        .await
        .bytes()
        .await
        .unwrap();
    assert_no_native(&lenient_stream_names(&bytes));
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
    let p = scripted(vec![sse(turn)]).await;
    let proxy = start(&p, &[]).await;
    let bytes = proxy
        .chat(&streamed(user_chat("go")), &[])
        .await
        .bytes()
        .await
        .unwrap();
    assert_no_native(&lenient_stream_names(&bytes));
    assert!(String::from_utf8_lossy(&bytes).contains("boom"));
}

#[tokio::test]
async fn a_chunk_only_a_lenient_parser_reads_is_not_forwarded() {
    // Python's json module reads NaN; serde does not.
    let mut turn = sse_chunk("n1", json!({"role": "assistant", "content": "a"}), None);
    turn += r#"data: {"id":"n1","x":NaN,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]},"finish_reason":null}]}"#;
    turn += "\n\n";
    turn += &sse_chunk("n1", json!({}), Some("stop"));
    turn += "data: [DONE]\n\n";
    let p = scripted(vec![sse(turn)]).await;
    let proxy = start(&p, &[]).await;
    let bytes = proxy
        .chat(&streamed(user_chat("go")), &[])
        .await
        .bytes()
        .await
        .unwrap();
    assert!(!String::from_utf8_lossy(&bytes).contains("bash"));
}

// ---- one turn decision, two dialects ----

fn both_mode_turn(order: &[(&str, &str, &str)]) -> (Value, String) {
    let calls: Vec<Value> = order.iter().map(|(id, n, a)| call(id, n, a)).collect();
    let json = calls_completion(calls, usage(10, 5));
    let mut sse = sse_chunk("b1", json!({"role": "assistant", "content": null}), None);
    for (i, (id, name, args)) in order.iter().enumerate() {
        sse += &sse_chunk(
            "b1",
            json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            None,
        );
        sse += &sse_chunk(
            "b1",
            json!({"tool_calls": [{"index": i, "function": {"arguments": args}}]}),
            None,
        );
    }
    sse += &sse_chunk("b1", json!({}), Some("tool_calls"));
    sse += "data: [DONE]\n\n";
    (json, sse)
}

/// The client's turn (calls, finish) and the next upstream request's
/// messages and tools, for one dialect.
async fn both_mode_round_trip(first: ResponseTemplate, stream: bool) -> (Value, Value) {
    let answer = if stream {
        sse(text_turn("b2", "read it"))
    } else {
        ResponseTemplate::new(200).set_body_json(text_completion("read it", usage(1, 1)))
    };
    let p = scripted(vec![first, answer]).await;
    let proxy = start(
        &p,
        &[("CODEMODE_RUNTIME", "embedded"), ("CODEMODE_MODE", "both")],
    )
    .await;
    let mut messages = vec![json!({"role": "user", "content": "go"})];
    let mut body = json!({"model": "m", "messages": messages, "tools": fs_tools()});
    if stream {
        body["stream"] = json!(true);
    }
    let res = proxy.chat(&body, &[]).await;
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
    let mut body = json!({"model": "m", "messages": messages, "tools": fs_tools()});
    if stream {
        body["stream"] = json!(true);
    }
    let res = proxy.chat(&body, &[]).await;
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
        let answer = if stream {
            sse(text_turn("b2", "ok"))
        } else {
            ResponseTemplate::new(200).set_body_json(text_completion("ok", usage(1, 1)))
        };
        let p = scripted(vec![first, answer]).await;
        let proxy = start(&p, &[("CODEMODE_RUNTIME", "embedded")]).await;
        let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "go"}], "tools": fs_tools()});
        if stream {
            body["stream"] = json!(true);
        }
        let res = proxy.chat(&body, &[]).await;
        assert_eq!(res.status(), 200);
        // A stream's repair runs while its body is read.
        res.bytes().await.unwrap();
        let sent = received(&p).await;
        assert_eq!(sent.len(), 2, "a repair round");
        next.push(sent[1]["messages"].clone());
    }
    assert_eq!(next[0], next[1]);
}
