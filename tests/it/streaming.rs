//! Streaming through the proxy as a client sees it.

use crate::common;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::raw_provider::{quiet_provider, RawProvider, Step};
use crate::common::sse_client::reassemble;
use crate::common::*;
use futures_util::StreamExt;
use serde_json::{json, Value};
use wiremock::{MockServer, ResponseTemplate};

fn sse(body: impl Into<Vec<u8>>) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body.into(), "text/event-stream")
}

fn stream_body(text: &str) -> Value {
    let mut body = user_chat(text);
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    body
}

/// What a streaming client makes of the proxy's answer to `body`.
async fn stream_view(proxy: &Proxy, body: &Value) -> common::sse_client::ClientView {
    reassemble(&proxy.chat_bytes(body, &[]).await)
}

async fn scripted(rounds: Vec<Vec<u8>>) -> MockServer {
    scripted::streams(rounds).await
}

#[tokio::test]
async fn repair_happens_inside_one_continuous_stream() {
    let p = scripted(vec![
        sse_call_turn("r1", "Reading. ", "read", r#"{"path":"a.txt"}"#, 100).into_bytes(),
        sse_call_turn(
            "r2",
            "Via code. ",
            "run_code",
            r#"{"code":"return 1"}"#,
            150,
        )
        .into_bytes(),
    ])
    .await;
    let proxy = start(&p, &[]).await;
    let res = proxy.chat(&stream_body("go"), &[]).await;
    assert_event_stream(&res);
    let bytes = res.bytes().await.unwrap();
    let view = reassemble(&bytes);
    assert_eq!(view.call_names(), vec!["run_code"]);
    assert_eq!(view.calls[0].arguments, r#"{"code":"return 1"}"#);
    assert_eq!(
        view.text, "Reading. Via code. ",
        "text already sent stays sent"
    );
    assert_eq!(view.ids, vec!["r1"], "one completion id across rounds");
    assert_eq!(view.finish_reasons, vec!["tool_calls"]);
    assert_eq!(view.done, 1);
    assert_eq!(
        view.usage,
        vec![json!({"prompt_tokens": 250, "completion_tokens": 14, "total_tokens": 264})]
    );

    let sent = received(&p).await;
    assert_eq!(sent.len(), 2);
    let m = sent[1]["messages"].as_array().unwrap();
    assert_eq!(m[m.len() - 2]["content"], "Reading. ");
    assert_eq!(m[m.len() - 2]["tool_calls"][0]["function"]["name"], "read");
    let denial = m[m.len() - 1]["content"].as_str().unwrap();
    assert!(
        denial.starts_with("UNKNOWN_TOOL:")
            && denial.contains(r#"await tools.read({"path": "a.txt"})"#),
        "{denial}"
    );
}

#[tokio::test]
async fn the_repair_bound_ends_the_stream_without_a_denied_call() {
    let turn = || sse_call_turn("x", "", "bash", r#"{"command":"ls"}"#, 10).into_bytes();
    let p = scripted(vec![turn(), turn(), turn(), turn()]).await;
    let proxy = start(&p, &[("CODEMODE_MAX_REPAIRS", "1")]).await;
    let bytes = proxy.chat_bytes(&stream_body("go"), &[]).await;
    let view = reassemble(&bytes);
    assert!(view.calls.is_empty(), "{:?}", view.calls);
    assert_eq!(view.finish_reasons, vec!["stop"]);
    assert!(view.text.contains("CODEMODE_MAX_REPAIRS"), "{}", view.text);
    assert_eq!(view.done, 1);
    assert_eq!(view.usage.len(), 1);
    assert_eq!(view.usage[0]["prompt_tokens"], 20);
    assert_eq!(received(&p).await.len(), 2);
}

#[tokio::test]
async fn a_mixed_streamed_turn_splices_its_denials_into_the_next_request() {
    let id = "mx";
    let mut turn = sse_chunk(id, json!({"role": "assistant", "content": null}), None);
    turn += &sse_chunk(
        id,
        json!({"tool_calls": [{"index": 0, "id": "keep", "type": "function", "function": {"name": "run_code", "arguments": "{}"}}]}),
        None,
    );
    turn += &sse_chunk(
        id,
        json!({"tool_calls": [{"index": 1, "id": "drop", "type": "function", "function": {"name": "write", "arguments": "{\"path\":\"x\"}"}}]}),
        None,
    );
    turn += &sse_chunk(id, json!({}), Some("tool_calls"));
    turn += "data: [DONE]\n\n";
    let p = scripted(vec![
        turn.into_bytes(),
        sse_chunk("n", json!({"content": "ok"}), Some("stop")).into_bytes(),
    ])
    .await;
    let proxy = start(&p, &[]).await;
    let view = stream_view(&proxy, &stream_body("go")).await;
    assert_eq!(view.call_names(), vec!["run_code"]);
    assert_eq!(view.finish_reasons, vec!["tool_calls"]);

    let mut next = chat_body(json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "keep", "type": "function", "function": {"name": "run_code", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "keep", "content": "done"}
    ]));
    next["stream"] = json!(true);
    proxy.chat_bytes(&next, &[]).await;
    let sent = received(&p).await;
    let m = sent[1]["messages"].as_array().unwrap();
    let ids: Vec<&str> = strs(&m[2]["tool_calls"], "id");
    assert_eq!(ids, vec!["keep", "drop"]);
    assert_eq!(m[4]["tool_call_id"], "drop");
}

fn fixtures() -> Vec<(String, Vec<u8>, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/streams");
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sse"))
        .map(|p| {
            let meta =
                serde_json::from_str(&std::fs::read_to_string(p.with_extension("json")).unwrap())
                    .unwrap();
            (
                p.file_stem().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
                meta,
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[tokio::test]
async fn every_fixture_through_the_proxy_in_code_mode_never_shows_a_native_call() {
    for (name, bytes, meta) in fixtures() {
        let repair = sse_call_turn("fix", "", "run_code", r#"{"code":"1"}"#, 1).into_bytes();
        let p = scripted(vec![bytes.clone(), repair]).await;
        let proxy = start(&p, &[]).await;
        let res = proxy.chat(&stream_body("go"), &[]).await;
        assert_eq!(res.status(), 200, "{name}");
        let view = reassemble(&res.bytes().await.unwrap());
        assert!(
            view.call_names().iter().all(|n| *n == "run_code"),
            "{name}: {:?}",
            view.call_names()
        );
        let rounds = received(&p).await.len();
        match meta["expect"]["outcome"].as_str().unwrap() {
            "repair" => assert_eq!((rounds, view.call_names()), (2, vec!["run_code"]), "{name}"),
            "error" => {
                assert_eq!(rounds, 1, "{name}: no repair after an upstream error");
                assert_eq!(view.errors.len(), 1, "{name}");
            }
            _ => assert_eq!(rounds, 1, "{name}"),
        }
    }
}

#[tokio::test]
async fn every_fixture_passes_through_native_mode_byte_for_byte() {
    for (name, bytes, _) in fixtures() {
        let p = scripted(vec![bytes.clone()]).await;
        let proxy = start(&p, &[("CODEMODE_MODE", "native")]).await;
        let got = proxy.chat_bytes(&stream_body("go"), &[]).await;
        assert_eq!(got.to_vec(), bytes, "{name}");
    }
}

#[tokio::test]
async fn text_is_forwarded_as_it_arrives_and_a_client_that_leaves_cancels_the_upstream() {
    let mut provider = quiet_provider().await;
    let proxy = start_with(config(&provider.base(), &[])).await;
    let res = proxy.chat(&stream_body("go"), &[]).await;
    let mut body = res.bytes_stream();
    let first = tokio::time::timeout(Duration::from_secs(5), body.next())
        .await
        .expect("text arrives while the upstream is still open")
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&first).contains("first words"));
    drop(body);
    assert!(
        provider.wait_closed(Duration::from_secs(5)).await,
        "the upstream saw the disconnect"
    );
    proxy.wait_finished(1).await;
    assert_eq!(
        provider.requests.load(Ordering::SeqCst),
        1,
        "nothing more was dispatched"
    );
}

#[tokio::test]
async fn a_client_that_leaves_during_a_denied_turn_gets_no_repair_round() {
    let mut provider = RawProvider::start(|_| {
        vec![
            Step::Send(sse_chunk("c", json!({"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}), None).into_bytes()),
            Step::Send(sse_chunk("c", json!({"content": "thinking"}), None).into_bytes()),
            Step::HoldUntilClosed,
        ]
    })
    .await;
    let proxy = start_with(config(&provider.base(), &[])).await;
    let mut body = proxy.chat(&stream_body("go"), &[]).await.bytes_stream();
    let _ = tokio::time::timeout(Duration::from_secs(5), body.next()).await;
    drop(body);
    assert!(provider.wait_closed(Duration::from_secs(5)).await);
    proxy.wait_finished(1).await;
    assert_eq!(provider.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_broken_upstream_connection_ends_the_stream_with_an_error_event() {
    let provider = RawProvider::start(|_| {
        vec![
            Step::Send(sse_chunk("c", json!({"content": "partial"}), None).into_bytes()),
            Step::Send(b"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"q\",\"function\":{\"name\":\"run_code\",\"arguments\":\"{\\\"co".to_vec()),
            Step::Break,
        ]
    })
    .await;
    let proxy = start_with(config(&provider.base(), &[])).await;
    let res = proxy.chat(&stream_body("go"), &[]).await;
    let bytes = res
        .bytes()
        .await
        .expect("the client stream ends cleanly, with an error event");
    let view = reassemble(&bytes);
    assert_eq!(view.text, "partial");
    assert_eq!(view.errors.len(), 1, "{}", String::from_utf8_lossy(&bytes));
    assert_eq!(view.errors[0]["code"], "upstream_stream_broken");
    assert_eq!(view.done, 0);
}

#[tokio::test]
async fn a_slow_client_slows_the_upstream_read() {
    let total = 64 << 20;
    let provider = RawProvider::start(move |_| vec![Step::Flood { total }]).await;
    let proxy = start_with(config(&provider.base(), &[])).await;
    let res = proxy.chat(&stream_body("go"), &[]).await;
    assert_eq!(res.status(), 200);
    // The client reads nothing for a while.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let written = provider.bytes_written.load(Ordering::SeqCst);
    assert!(
        written < total / 2,
        "the proxy buffered {written} bytes for a client that reads nothing"
    );
    drop(res);
}

#[tokio::test]
async fn an_upstream_error_answer_to_a_stream_request_reaches_the_client_unchanged() {
    let p = scripted::model_server(
        ResponseTemplate::new(429)
            .insert_header("retry-after", "3")
            .set_body_string("{\"error\":{\"message\":\"slow\"}}"),
    )
    .await;
    let proxy = start(&p, &[]).await;
    let res = proxy.chat(&stream_body("go"), &[]).await;
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()["retry-after"], "3");
    assert_eq!(
        res.text().await.unwrap(),
        "{\"error\":{\"message\":\"slow\"}}"
    );
}

#[tokio::test]
async fn a_repair_round_the_upstream_refuses_ends_the_stream_with_its_error() {
    let p = scripted::model_server(Script::new([
        sse(sse_call_turn("a", "", "read", "{}", 1)),
        ResponseTemplate::new(503).set_body_string("overloaded"),
    ]))
    .await;
    let proxy = start(&p, &[]).await;
    let view = stream_view(&proxy, &stream_body("go")).await;
    assert!(view.calls.is_empty());
    assert_eq!(view.errors.len(), 1);
    assert_eq!(view.errors[0]["code"], "upstream_repair_rejected");
    assert!(view.errors[0]["message"].as_str().unwrap().contains("503"));
}

/// A stream relayed untouched (native mode, nothing to hide) that breaks
/// off ends with an error event in the shape its own API's clients read:
/// chat's `data: {"error": ...}`, a Responses `error` event, Anthropic's
/// `event: error` typed as the failure would be.
#[tokio::test]
async fn a_relayed_stream_that_breaks_ends_with_its_apis_error_event() {
    for route in ["/v1/chat/completions", "/v1/responses", "/v1/messages"] {
        let provider = RawProvider::start(|_| {
            vec![Step::Send(b"data: {\"partial\":tr".to_vec()), Step::Break]
        })
        .await;
        let base = provider.base();
        let proxy = start_with(config(
            &base,
            &[
                ("CODEMODE_MODE", "native"),
                ("CODEMODE_ANTHROPIC_UPSTREAM", base.as_str()),
            ],
        ))
        .await;
        let body = json!({"model": "m", "stream": true, "max_tokens": 10, "input": "go",
                          "messages": [{"role": "user", "content": "go"}]});
        let res = proxy.post(route, &body, &[]).await;
        assert_eq!(res.status(), 200, "{route}");
        let bytes = res.bytes().await.expect("the stream ends cleanly");
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let last = text
            .split("\n\n")
            .filter(|e| !e.trim().is_empty())
            .last()
            .unwrap_or_default()
            .to_owned();
        let data: Value = serde_json::from_str(
            last.lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or_else(|| panic!("{route}: no data line in {last:?}")),
        )
        .unwrap();
        match route {
            "/v1/chat/completions" => {
                assert_eq!(data["error"]["code"], "upstream_stream_broken", "{text}");
                assert!(!last.contains("event:"), "{text}");
            }
            "/v1/responses" => {
                assert!(last.starts_with("event: error\n"), "{text}");
                assert_eq!(data["type"], "error", "{text}");
                assert_eq!(data["code"], "upstream_stream_broken", "{text}");
            }
            _ => {
                assert!(last.starts_with("event: error\n"), "{text}");
                assert_eq!(data["type"], "error", "{text}");
                assert_eq!(data["error"]["type"], "api_error", "{text}");
                assert!(error_message(&data).contains("broke off"), "{text}");
            }
        }
    }
}
