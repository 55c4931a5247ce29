//! Nothing hangs (docs/security.md): a provider stream that goes quiet,
//! an oversized provider body, a client that sends its headers slowly or
//! not at all, an idle keep-alive. Each ends after its configured time, with
//! a clear error where a client can still read one.

use std::time::{Duration, Instant};

use crate::common::raw_provider::{quiet_provider, RawProvider, Step};
use crate::common::*;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wiremock::{MockServer, ResponseTemplate};

fn stream_body(text: &str) -> Value {
    let mut body = user_chat(text);
    body["stream"] = json!(true);
    body
}

async fn quiet_stream_ends_with_an_idle_error(mode: &str) {
    let mut provider = quiet_provider().await;
    let proxy = start_with(config(
        &provider.base(),
        &[
            ("CODEMODE_UPSTREAM_IDLE_SECS", "1"),
            ("CODEMODE_MODE", mode),
        ],
    ))
    .await;
    let mut body = stream_body("go");
    body["tools"] = json!(agent_tools());
    let res = proxy.chat(&body, &[]).await;
    assert_eq!(res.status(), 200);
    let bytes = tokio::time::timeout(Duration::from_secs(20), res.bytes())
        .await
        .expect("the stream ends instead of hanging")
        .expect("the stream ends cleanly, with an error event");
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("first words"), "{text}");
    let last = text
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .last()
        .unwrap_or("");
    let event: Value = serde_json::from_str(last.trim().trim_start_matches("data:").trim())
        .unwrap_or_else(|e| panic!("the last event is JSON ({e}): {last}"));
    assert_eq!(event["error"]["code"], "upstream_stream_idle", "{text}");
    assert!(
        error_message(&event).contains("CODEMODE_UPSTREAM_IDLE_SECS"),
        "{event}"
    );
    assert!(
        provider.wait_closed(Duration::from_secs(5)).await,
        "the proxy lets go of the silent provider"
    );
}

#[tokio::test]
async fn a_quiet_provider_stream_ends_with_an_idle_error_in_native_mode() {
    quiet_stream_ends_with_an_idle_error("native").await;
}

#[tokio::test]
async fn a_quiet_provider_stream_ends_with_an_idle_error_in_code_mode() {
    quiet_stream_ends_with_an_idle_error("code").await;
}

#[tokio::test]
async fn a_slow_but_live_provider_stream_is_never_cut() {
    let provider = RawProvider::start(|_| {
        let mut steps = Vec::new();
        for i in 0..5 {
            steps.push(Step::Sleep(Duration::from_millis(600)));
            steps.push(Step::Send(
                sse_chunk("c", json!({"content": format!("part{i} ")}), None).into_bytes(),
            ));
        }
        steps.push(Step::Send(
            sse_chunk("c", json!({}), Some("stop")).into_bytes(),
        ));
        steps.push(Step::Send(b"data: [DONE]\n\n".to_vec()));
        steps
    })
    .await;
    let proxy = start_with(config(
        &provider.base(),
        &[
            ("CODEMODE_UPSTREAM_IDLE_SECS", "1"),
            ("CODEMODE_HEADER_READ_TIMEOUT_SECS", "1"),
            ("CODEMODE_KEEPALIVE_TIMEOUT_SECS", "1"),
        ],
    ))
    .await;
    let bytes = proxy.chat(&stream_body("go"), &[]).await.bytes().await;
    let text = String::from_utf8_lossy(&bytes.expect("the whole stream arrives")).into_owned();
    for i in 0..5 {
        assert!(text.contains(&format!("part{i}")), "{text}");
    }
    assert!(text.contains("[DONE]"), "{text}");
    assert!(!text.contains("\"error\""), "{text}");
}

#[tokio::test]
async fn an_upstream_body_over_the_cap_is_a_502_not_a_buffer() {
    let provider = MockServer::start().await;
    let huge = "x".repeat(300_000);
    mount(
        &provider,
        "POST",
        "/v1/chat/completions",
        ResponseTemplate::new(200).set_body_json(text_completion(&huge, usage(1, 1))),
    )
    .await;
    let proxy = start(
        &provider,
        &[
            ("CODEMODE_MAX_UPSTREAM_BODY_BYTES", "100000"),
            ("CODEMODE_RUNTIME", "embedded"),
        ],
    )
    .await;
    let mut body = user_chat("go");
    body["tools"] = json!(agent_tools());
    let res = proxy.chat(&body, &[]).await;
    assert_eq!(res.status(), 502);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["code"], "upstream_invalid_response");
    assert!(
        error_message(&err).contains("CODEMODE_MAX_UPSTREAM_BODY_BYTES"),
        "{err}"
    );
}

/// A judged stream whose content outgrows `CODEMODE_MAX_STREAM_STATE_BYTES`
/// ends with an error event in its dialect's shape, before the judge holds
/// more; the proxy keeps serving.
#[tokio::test]
async fn a_judged_stream_over_the_state_cap_ends_with_an_error_event() {
    let piece = "y".repeat(10_000);
    let chunk = |text: &str| sse_chunk("c", json!({"content": text}), None);
    let mut chat_stream = String::new();
    for _ in 0..40 {
        chat_stream.push_str(&chunk(&piece));
    }
    chat_stream.push_str("data: [DONE]\n\n");
    let delta = |text: &str| {
        format!(
            "event: response.output_text.delta\ndata: {}\n\n",
            json!({"type": "response.output_text.delta", "item_id": "m", "output_index": 0,
                   "content_index": 0, "delta": text})
        )
    };
    let mut responses_stream = format!(
        "event: response.created\ndata: {}\n\n",
        json!({"type": "response.created", "response": {"id": "resp_1", "object": "response", "output": []}})
    );
    responses_stream.push_str(&format!(
        "event: response.output_item.added\ndata: {}\n\n",
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": {"type": "message", "id": "m", "role": "assistant", "content": []}})
    ));
    for _ in 0..40 {
        responses_stream.push_str(&delta(&piece));
    }
    let block = |text: &str| {
        format!(
            "event: content_block_delta\ndata: {}\n\n",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})
        )
    };
    let mut messages_stream = format!(
        "event: message_start\ndata: {}\n\nevent: content_block_start\ndata: {}\n\n",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
               "content": [], "usage": {"input_tokens": 1, "output_tokens": 0}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    );
    for _ in 0..40 {
        messages_stream.push_str(&block(&piece));
    }
    let cases = [
        (
            "/v1/chat/completions",
            chat_stream,
            "\"code\":\"stream_state_too_large\"",
        ),
        (
            "/v1/responses",
            responses_stream,
            "\"code\":\"stream_state_too_large\"",
        ),
        ("/v1/messages", messages_stream, "\"type\":\"error\""),
    ];
    for (route, stream, error) in cases {
        let provider = MockServer::start().await;
        mount(
            &provider,
            "POST",
            route,
            ResponseTemplate::new(200).set_body_raw(stream.into_bytes(), "text/event-stream"),
        )
        .await;
        let proxy = start(
            &provider,
            &[
                ("CODEMODE_MAX_STREAM_STATE_BYTES", "100000"),
                ("CODEMODE_RUNTIME", "embedded"),
                (
                    "CODEMODE_ANTHROPIC_UPSTREAM",
                    &format!("{}/v1", provider.uri()),
                ),
            ],
        )
        .await;
        let tools = match route {
            "/v1/chat/completions" => json!(agent_tools()),
            "/v1/responses" => {
                json!([{"type": "function", "name": "read", "parameters": {"type": "object"}}])
            }
            _ => json!([{"name": "read", "input_schema": {"type": "object"}}]),
        };
        let body = match route {
            "/v1/chat/completions" => json!({"model": "m", "stream": true, "tools": tools,
                                              "messages": [{"role": "user", "content": "go"}]}),
            "/v1/responses" => json!({"model": "m", "stream": true, "tools": tools, "input": "go"}),
            _ => json!({"model": "m", "stream": true, "max_tokens": 10, "tools": tools,
                        "messages": [{"role": "user", "content": "go"}]}),
        };
        let headers: &[(&str, &str)] = if route == "/v1/messages" {
            &[("anthropic-version", "2023-06-01")]
        } else {
            &[]
        };
        let res = proxy.post(route, &body, headers).await;
        let status = res.status();
        let bytes = tokio::time::timeout(Duration::from_secs(20), res.bytes())
            .await
            .expect("the stream ends instead of growing")
            .expect("the stream ends cleanly, with an error event");
        assert_eq!(status, 200, "{route}: {}", String::from_utf8_lossy(&bytes));
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains(error), "{route}: {text}");
        assert!(
            text.contains("CODEMODE_MAX_STREAM_STATE_BYTES"),
            "{route}: {text}"
        );
        assert!(
            bytes.len() < 200_000,
            "{route}: the judge stopped at the cap"
        );
        // The proxy keeps serving.
        let health = crate::common::http_client()
            .get(proxy.url("/healthz"))
            .send()
            .await
            .unwrap();
        assert_eq!(health.status(), 200);
    }
}

async fn short_timeouts_proxy() -> (MockServer, Proxy) {
    let provider = provider([]).await;
    let proxy = start(
        &provider,
        &[
            ("CODEMODE_HEADER_READ_TIMEOUT_SECS", "1"),
            ("CODEMODE_KEEPALIVE_TIMEOUT_SECS", "2"),
        ],
    )
    .await;
    (provider, proxy)
}

/// Waits until the server closes `conn` (a read of 0 bytes or a reset).
async fn closed_within(conn: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, conn.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

#[tokio::test]
async fn half_sent_headers_are_closed_after_the_header_read_time() {
    let (_provider, proxy) = short_timeouts_proxy().await;
    let mut conns = Vec::new();
    for _ in 0..100 {
        let mut c = TcpStream::connect(proxy.addr).await.unwrap();
        c.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
            .await
            .unwrap();
        conns.push(c);
    }
    for c in &mut conns {
        assert!(
            closed_within(c, Duration::from_secs(10)).await,
            "a connection with half-sent headers is closed"
        );
    }
    // The proxy still serves.
    let res = proxy.get("/healthz", &[]).await;
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn headers_sent_a_byte_at_a_time_are_cut_off() {
    let (_provider, proxy) = short_timeouts_proxy().await;
    let mut c = TcpStream::connect(proxy.addr).await.unwrap();
    let started = Instant::now();
    let head = b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let mut closed = false;
    for b in head {
        if c.write_all(&[*b]).await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        if started.elapsed() > Duration::from_secs(10) {
            break;
        }
    }
    assert!(
        closed || closed_within(&mut c, Duration::from_secs(1)).await,
        "a slow sender is closed before it finishes its headers"
    );
}

#[tokio::test]
async fn idle_keepalive_connections_are_closed() {
    let (_provider, proxy) = short_timeouts_proxy().await;
    let mut idle = TcpStream::connect(proxy.addr).await.unwrap();
    let mut after_request = TcpStream::connect(proxy.addr).await.unwrap();
    after_request
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = after_request.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    assert!(
        closed_within(&mut idle, Duration::from_secs(10)).await,
        "a connection that never sent anything is closed"
    );
    assert!(
        closed_within(&mut after_request, Duration::from_secs(10)).await,
        "a kept-alive connection left idle is closed"
    );
}

#[tokio::test]
async fn a_busy_keepalive_connection_serves_request_after_request() {
    let (_provider, proxy) = short_timeouts_proxy().await;
    let mut c = TcpStream::connect(proxy.addr).await.unwrap();
    let mut buf = [0u8; 1024];
    for _ in 0..4 {
        c.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let n = c.read(&mut buf).await.unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
}

/// A provider that sends its head and part of a JSON answer, then goes
/// silent past `CODEMODE_UPSTREAM_IDLE_SECS`, is a timeout, not a broken
/// answer: 504 `upstream_timeout` in every dialect's error shape.
#[tokio::test]
async fn a_json_answer_that_stalls_is_a_504_timeout_in_every_dialect() {
    for route in ["/v1/chat/completions", "/v1/responses", "/v1/messages"] {
        let mut provider = RawProvider::start(|_| {
            vec![
                Step::Send(br#"{"id": "partial", "object": "#.to_vec()),
                Step::HoldUntilClosed,
            ]
        })
        .await;
        let base = provider.base();
        let proxy = start_with(config(
            &base,
            &[
                ("CODEMODE_UPSTREAM_IDLE_SECS", "1"),
                ("CODEMODE_RUNTIME", "embedded"),
                ("CODEMODE_ANTHROPIC_UPSTREAM", &base),
            ],
        ))
        .await;
        let (body, headers): (Value, &[(&str, &str)]) = match route {
            "/v1/chat/completions" => (
                json!({"model": "m", "tools": agent_tools(),
                "messages": [{"role": "user", "content": "go"}]}),
                &[],
            ),
            "/v1/responses" => (
                json!({"model": "m", "input": "go",
                "tools": [{"type": "function", "name": "read", "parameters": {"type": "object"}}]}),
                &[],
            ),
            _ => (
                json!({"model": "m", "max_tokens": 10,
                "tools": [{"name": "read", "input_schema": {"type": "object"}}],
                "messages": [{"role": "user", "content": "go"}]}),
                &[("anthropic-version", "2023-06-01")],
            ),
        };
        let res = tokio::time::timeout(Duration::from_secs(20), proxy.post(route, &body, headers))
            .await
            .expect("the stalled answer ends instead of hanging");
        assert_eq!(res.status(), 504, "{route}");
        let err: Value = res.json().await.unwrap();
        let message = err["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("CODEMODE_UPSTREAM_IDLE_SECS"),
            "{route}: {err}"
        );
        if route == "/v1/messages" {
            assert_eq!(err["type"], "error", "{err}");
            assert_eq!(err["error"]["type"], "timeout_error", "{err}");
        } else {
            assert_eq!(err["error"]["code"], "upstream_timeout", "{route}: {err}");
        }
        assert!(
            provider.wait_closed(Duration::from_secs(5)).await,
            "{route}: the proxy lets go of the silent provider"
        );
    }
}
