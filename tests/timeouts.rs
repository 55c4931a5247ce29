//! Nothing hangs (design.md section 9): a provider stream that goes quiet,
//! an oversized provider body, a client that sends its headers slowly or
//! not at all, an idle keep-alive. Each ends after its configured time, with
//! a clear error where a client can still read one.

mod common;

use std::time::{Duration, Instant};

use common::raw_provider::{RawProvider, Step};
use common::*;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn stream_body(text: &str) -> Value {
    let mut body = user_chat(text);
    body["stream"] = json!(true);
    body
}

/// A provider that sends its headers and one chunk, then nothing.
async fn quiet_provider() -> RawProvider {
    RawProvider::start(|_| {
        vec![
            Step::Send(
                sse_chunk(
                    "c",
                    json!({"role": "assistant", "content": "first words"}),
                    None,
                )
                .into_bytes(),
            ),
            Step::HoldUntilClosed,
        ]
    })
    .await
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
        event["error"]["message"]
            .as_str()
            .unwrap()
            .contains("CODEMODE_UPSTREAM_IDLE_SECS"),
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
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(text_completion(&huge, usage(1, 1))))
        .mount(&provider)
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
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("CODEMODE_MAX_UPSTREAM_BODY_BYTES"),
        "{err}"
    );
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
    let res = proxy.http.get(proxy.url("/healthz")).send().await.unwrap();
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
