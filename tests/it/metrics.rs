//! `GET /metrics` after a known sequence of requests: each series moves by
//! exactly what the sequence did; the savings headers on the turn that
//! ends a program; labels stay bounded.

use crate::common::agent::conversation;
use crate::common::*;
use serde_json::{json, Value};
use wiremock::{MockServer, ResponseTemplate};

/// The metrics text.
pub(crate) async fn scrape(proxy: &Proxy) -> String {
    let res = proxy.get("/metrics", &[]).await;
    assert_eq!(res.status(), 200);
    let content_type = res.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    res.text().await.unwrap()
}

/// The value of the sample `series` (name and labels as written), 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(series)?;
            rest.strip_prefix(' ')?.trim().parse::<f64>().ok()
        })
        .unwrap_or(0.0)
}

/// How much each of `series` moved between two scrapes.
pub(crate) fn moved(before: &str, after: &str, series: &str) -> f64 {
    sample(after, series) - sample(before, series)
}

fn run_code(id: &str, code: &str) -> Value {
    calls_completion(
        vec![call(id, "run_code", &json!({"code": code}).to_string())],
        usage(100, 20),
    )
}

/// Sends `messages`; returns the response's savings headers and the message.
async fn turn(
    proxy: &Proxy,
    messages: &[Value],
    headers: &[(&str, &str)],
) -> (Option<String>, Option<String>, Value) {
    let res = proxy
        .chat(&chat_body(Value::Array(messages.to_vec())), headers)
        .await;
    assert_eq!(res.status(), 200);
    let header = |name: &str| {
        res.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let nested = header("x-codemode-nested-calls");
    let saved = header("x-codemode-context-bytes-saved");
    let body: Value = res.json().await.unwrap();
    (nested, saved, body["choices"][0]["message"].clone())
}

#[tokio::test]
async fn every_series_moves_by_exactly_what_the_sequence_did() {
    let code = "const a = await tools.read({path: 'a'}); const b = await tools.read({path: 'b'}); return a.length + b.length;";
    let p = provider([
        // A native request.
        text_completion("native answer", usage(11, 3)),
        // A denial (a direct call of a tool code mode hides) and its repair.
        calls_completion(vec![call("c1", "read", r#"{"path":"x"}"#)], usage(20, 2)),
        text_completion("repaired", usage(30, 4)),
        // A program with two sequential nested calls.
        run_code("call_prog", code),
        text_completion("The files hold 1500 bytes.", usage(40, 5)),
    ])
    .await;
    let proxy = start(&p, &[("CODEMODE_RUNTIME", "embedded")]).await;
    let scope = [("x-codemode-scope", "scope-marker-7f3a")];
    let before = scrape(&proxy).await;

    let (nested, saved, message) = turn(
        &proxy,
        &conversation("hi"),
        &[("x-codemode-mode", "native"), scope[0]],
    )
    .await;
    assert_eq!(message["content"], "native answer");
    assert_eq!((nested, saved), (None, None), "no program ended");

    let (_, _, message) = turn(&proxy, &conversation("read x"), &scope).await;
    assert_eq!(message["content"], "repaired");

    let mut messages = conversation("count the files");
    let (nested, saved, first) = turn(&proxy, &messages, &scope).await;
    assert_eq!((nested, saved), (None, None), "the program waits");
    let id_a = first["tool_calls"][0]["id"].as_str().unwrap().to_owned();
    messages.push(first);
    messages.push(json!({"role": "tool", "tool_call_id": id_a, "content": "x".repeat(1000)}));
    let (nested, saved, second) = turn(&proxy, &messages, &scope).await;
    assert_eq!((nested, saved), (None, None), "the program waits again");
    let id_b = second["tool_calls"][0]["id"].as_str().unwrap().to_owned();
    messages.push(second);
    messages.push(json!({"role": "tool", "tool_call_id": id_b, "content": "y".repeat(500)}));
    let (nested, saved, last) = turn(&proxy, &messages, &scope).await;
    assert_eq!(last["content"], "The files hold 1500 bytes.");
    // 1500 bytes of results; the model sees `Result: 1500` (12 bytes).
    assert_eq!(nested.as_deref(), Some("2"));
    assert_eq!(saved.as_deref(), Some("1488"));

    let bad = proxy
        .post_raw(
            "/v1/chat/completions",
            "{not json",
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(bad.status(), 400);
    let _ = bad.bytes().await;

    let after = scrape(&proxy).await;
    let expect = [
        (
            r#"codemode_requests_total{route="chat",mode="native",status="200"}"#,
            1.0,
        ),
        (
            r#"codemode_requests_total{route="chat",mode="code",status="200"}"#,
            4.0,
        ),
        (
            r#"codemode_requests_total{route="chat",mode="code",status="400"}"#,
            1.0,
        ),
        (
            r#"codemode_request_duration_seconds_count{route="chat"}"#,
            6.0,
        ),
        ("codemode_upstream_duration_seconds_count", 5.0),
        (r#"codemode_denials_total{code="UNKNOWN_TOOL"}"#, 1.0),
        (r#"codemode_denials_total{code="INVALID_ARGS"}"#, 0.0),
        ("codemode_repairs_total", 1.0),
        (r#"codemode_executions_total{outcome="ok"}"#, 1.0),
        (r#"codemode_executions_total{outcome="error"}"#, 0.0),
        ("codemode_nested_calls_total", 2.0),
        (
            r#"codemode_upstream_tokens_total{type="input"}"#,
            (11 + 20 + 30 + 100 + 40) as f64,
        ),
        (
            r#"codemode_upstream_tokens_total{type="output"}"#,
            (3 + 2 + 4 + 20 + 5) as f64,
        ),
        ("codemode_model_round_trips_saved_total", 2.0),
        ("codemode_context_bytes_saved_total", 1488.0),
    ];
    for (series, by) in expect {
        assert_eq!(moved(&before, &after, series), by, "{series}\n{after}");
    }
    // The earlier scrape is counted too: the proxy's own route.
    assert!(
        sample(
            &after,
            r#"codemode_requests_total{route="admin",mode="none",status="200"}"#
        ) >= 1.0
    );
    for unbounded in ["scope-marker-7f3a", "test-model", "cm_", "call_prog"] {
        assert!(
            !after.contains(unbounded),
            "`{unbounded}` appears in the metrics:\n{after}"
        );
    }
}

#[tokio::test]
async fn tokens_are_counted_on_a_native_streaming_passthrough_and_the_bytes_stay_unchanged() {
    let mut sse = sse_chunk("s1", json!({"role": "assistant", "content": "hel"}), None);
    sse += &sse_chunk("s1", json!({"content": "lo"}), Some("stop"));
    sse += &sse_usage_chunk("s1", 17, 9);
    sse += "data: [DONE]\n\n";
    let p = scripted::model_server(
        ResponseTemplate::new(200).set_body_raw(sse.clone().into_bytes(), "text/event-stream"),
    )
    .await;
    let proxy = start(&p, &[("CODEMODE_MODE", "native")]).await;
    let before = scrape(&proxy).await;
    let mut body = user_chat("hi");
    body["stream"] = json!(true);
    let res = proxy.chat(&body, &[]).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap(), sse, "the bytes pass unchanged");
    let after = scrape(&proxy).await;
    let input = r#"codemode_upstream_tokens_total{type="input"}"#;
    let output = r#"codemode_upstream_tokens_total{type="output"}"#;
    assert_eq!(moved(&before, &after, input), 17.0, "{after}");
    assert_eq!(moved(&before, &after, output), 9.0, "{after}");
}

#[tokio::test]
async fn messages_stream_tokens_take_input_from_message_start_and_output_from_the_last_delta() {
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "content": [], "stop_reason": null, "usage": {"input_tokens": 25, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hello"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 15}}),
        json!({"type": "message_stop"}),
    ];
    let sse: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    let p = MockServer::start().await;
    mount(
        &p,
        "POST",
        "/v1/messages",
        ResponseTemplate::new(200).set_body_raw(sse.clone().into_bytes(), "text/event-stream"),
    )
    .await;
    let anthropic = format!("{}/v1", p.uri());
    let proxy = start(
        &p,
        &[
            ("CODEMODE_MODE", "native"),
            ("CODEMODE_ANTHROPIC_UPSTREAM", &anthropic),
        ],
    )
    .await;
    let before = scrape(&proxy).await;
    let body = json!({"model": "claude", "max_tokens": 100, "stream": true,
                      "messages": [{"role": "user", "content": "hi"}]});
    let res = proxy
        .post(
            "/v1/messages",
            &body,
            &[("anthropic-version", "2023-06-01")],
        )
        .await;
    assert_eq!(res.status(), 200);
    let _ = res.text().await.unwrap();
    let after = scrape(&proxy).await;
    let input = r#"codemode_upstream_tokens_total{type="input"}"#;
    let output = r#"codemode_upstream_tokens_total{type="output"}"#;
    assert_eq!(moved(&before, &after, input), 25.0, "{after}");
    assert_eq!(moved(&before, &after, output), 15.0, "{after}");
    assert_eq!(
        moved(
            &before,
            &after,
            r#"codemode_requests_total{route="messages",mode="native",status="200"}"#
        ),
        1.0
    );
}

#[tokio::test]
async fn a_streamed_repair_counts_one_repair_one_denial_and_both_rounds_tokens() {
    let first = sse_call_turn("r1", "", "read", r#"{"path":"x"}"#, 5);
    let mut second = sse_chunk("r2", json!({"role": "assistant", "content": "done"}), None);
    second += &sse_chunk("r2", json!({}), Some("stop"));
    second += &sse_usage_chunk("r2", 6, 2);
    second += "data: [DONE]\n\n";
    let p = scripted::streams([first, second]).await;
    let proxy = start(&p, &[]).await;
    let before = scrape(&proxy).await;
    let mut body = user_chat("read x");
    body["stream"] = json!(true);
    let res = proxy.chat(&body, &[]).await;
    assert!(res.text().await.unwrap().contains("done"));
    let after = scrape(&proxy).await;
    let expect = [
        ("codemode_repairs_total", 1.0),
        (r#"codemode_denials_total{code="UNKNOWN_TOOL"}"#, 1.0),
        ("codemode_upstream_duration_seconds_count", 2.0),
        (r#"codemode_upstream_tokens_total{type="input"}"#, 11.0),
        (r#"codemode_upstream_tokens_total{type="output"}"#, 9.0),
        (
            r#"codemode_requests_total{route="chat",mode="code",status="200"}"#,
            1.0,
        ),
    ];
    for (series, by) in expect {
        assert_eq!(moved(&before, &after, series), by, "{series}\n{after}");
    }
}
