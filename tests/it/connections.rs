//! Client connections in HTTP/1 and in HTTP/2 with prior knowledge, told
//! apart by their first bytes however those arrive (src/server/opening.rs).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::*;

/// Reads an HTTP/1 answer until its head and `body_len` bytes of body.
async fn read_answer(conn: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut buf))
            .await
            .expect("the proxy answers")
            .unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().to_owned())
                })
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if got.len() >= end + 4 + length {
                break;
            }
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test]
async fn http2_with_prior_knowledge_is_served() {
    let provider = provider([text_completion("over h2", usage(1, 1))]).await;
    let proxy = start(&provider, &[]).await;
    let tcp = TcpStream::connect(proxy.addr).await.unwrap();
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .expect("the proxy takes an HTTP/2 connection");
    tokio::spawn(conn);

    let health = send
        .send_request(
            http::Request::get(format!("http://{}/healthz", proxy.addr))
                .body(Full::new(Bytes::new()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(health.version(), http::Version::HTTP_2);

    // A model request on the same connection reaches the provider.
    let body = serde_json::to_vec(&user_chat("hello")).unwrap();
    let answer = send
        .send_request(
            http::Request::post(format!("http://{}/v1/chat/completions", proxy.addr))
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body)))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let bytes = answer.into_body().collect().await.unwrap().to_bytes();
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "over h2");
}

/// A first byte that could begin HTTP/2's preface (`P`) cannot be told
/// apart alone: the connection is read the way hyper-util reads it, and
/// the request is answered whole.
#[tokio::test]
async fn a_request_whose_first_byte_comes_alone_is_answered() {
    let provider = provider([text_completion("slowly", usage(1, 1))]).await;
    let proxy = start(&provider, &[]).await;
    let body = serde_json::to_string(&user_chat("hello")).unwrap();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        proxy.addr,
        body.len()
    );
    let mut conn = TcpStream::connect(proxy.addr).await.unwrap();
    conn.write_all(&request.as_bytes()[..1]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    conn.write_all(&request.as_bytes()[1..]).await.unwrap();
    let answer = read_answer(&mut conn).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("slowly"), "{answer}");
}

/// A request whose head and body arrive apart, on a connection kept alive
/// for a second request.
#[tokio::test]
async fn a_request_sent_in_parts_then_another_on_the_same_connection() {
    let provider = provider([
        text_completion("first", usage(1, 1)),
        text_completion("second", usage(1, 1)),
    ])
    .await;
    let proxy = start(&provider, &[]).await;
    let mut conn = TcpStream::connect(proxy.addr).await.unwrap();
    for expected in ["first", "second"] {
        let body = serde_json::to_string(&user_chat(&"long words ".repeat(3000))).unwrap();
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            proxy.addr,
            body.len()
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        conn.write_all(body.as_bytes()).await.unwrap();
        let answer = read_answer(&mut conn).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.contains(expected), "{answer}");
    }
}
