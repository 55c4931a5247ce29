//! Every error a client can see: OpenAI-shaped, and the proxy keeps serving.

use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};
use wiremock::{MockServer, ResponseTemplate};

async fn error_of(res: reqwest::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    let v: Value = res.json().await.expect("errors are JSON");
    for field in ["message", "type", "code"] {
        assert!(v["error"][field].is_string(), "error.{field} in {v}");
    }
    (status, v)
}

#[tokio::test]
async fn invalid_json_is_a_400_and_the_proxy_keeps_serving() {
    let p = provider([text_completion("ok", usage(1, 1))]).await;
    let proxy = start(&p, &[]).await;
    let res = proxy
        .post_raw("/v1/chat/completions", "{not json", &[])
        .await;
    let (status, v) = error_of(res).await;
    assert_eq!(
        (status, v["error"]["code"].as_str().unwrap()),
        (400, "invalid_json")
    );
    let res = proxy.chat(&user_chat("hi"), &[]).await;
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn missing_messages_is_a_400_that_says_so() {
    let p = provider([]).await;
    let proxy = start(&p, &[]).await;
    let (status, v) = error_of(proxy.chat(&json!({"model": "m"}), &[]).await).await;
    assert_eq!(status, 400);
    assert!(error_message(&v).contains("messages"));
}

#[tokio::test]
async fn oversized_bodies_are_a_413() {
    let p = provider([]).await;
    let proxy = start(&p, &[("CODEMODE_MAX_BODY_BYTES", "1000")]).await;
    let big = user_chat(&"x".repeat(5000));
    let (status, v) = error_of(proxy.chat(&big, &[]).await).await;
    assert_eq!(
        (status, v["error"]["code"].as_str().unwrap()),
        (413, "body_too_large")
    );
    // Without a content-length (chunked), the limit still holds.
    let stream =
        futures_util::stream::iter((0..10).map(|_| Ok::<_, std::io::Error>(vec![b' '; 500])));
    let res = proxy
        .post_raw(
            "/v1/chat/completions",
            reqwest::Body::wrap_stream(stream),
            &[],
        )
        .await;
    assert_eq!(error_of(res).await.0, 413);
    assert!(received(&p).await.is_empty());
}

#[tokio::test]
async fn code_mode_without_a_client_run_code_is_a_400_naming_run_code() {
    let p = provider([]).await;
    let proxy = start(&p, &[]).await;
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
        "tools": [tool("read", "Read.", json!({"type": "object"}))]});
    let (status, v) = error_of(proxy.chat(&body, &[]).await).await;
    assert_eq!(
        (status, v["error"]["code"].as_str().unwrap()),
        (400, "run_code_missing")
    );
    assert!(error_message(&v).contains("run_code"));
}

#[tokio::test]
async fn a_stream_request_answered_with_json_is_a_502_not_an_unchecked_relay() {
    let p = scripted::model_server(
        ResponseTemplate::new(200)
            .set_body_json(calls_completion(vec![call("c", "read", "{}")], usage(1, 1))),
    )
    .await;
    let proxy = start(&p, &[]).await;
    let mut body = user_chat("hi");
    body["stream"] = json!(true);
    let (status, v) = error_of(proxy.chat(&body, &[]).await).await;
    assert_eq!(
        (status, v["error"]["code"].as_str().unwrap()),
        (502, "upstream_invalid_response")
    );
}

#[tokio::test]
async fn streaming_in_native_mode_passes_through() {
    let sse = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n";
    let p =
        scripted::model_server(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
            .await;
    let proxy = start(&p, &[("CODEMODE_MODE", "native")]).await;
    let mut body = user_chat("hi");
    body["stream"] = json!(true);
    let res = proxy.chat(&body, &[]).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap(), sse);
}

#[tokio::test]
async fn upstream_errors_reach_the_client_unchanged() {
    let p = MockServer::start().await;
    let body = r#"{"error":{"message":"slow down","type":"rate_limit","code":"rate_limited"}}"#;
    mount(
        &p,
        "POST",
        "/v1/chat/completions",
        ResponseTemplate::new(429)
            .insert_header("retry-after", "7")
            .set_body_raw(body, "application/json"),
    )
    .await;
    let proxy = start(&p, &[]).await;
    for mode in ["code", "native", "both"] {
        let res = proxy
            .chat(&user_chat("hi"), &[("x-codemode-mode", mode)])
            .await;
        assert_eq!(res.status(), 429, "{mode}");
        assert_eq!(res.headers()["retry-after"], "7");
        assert_eq!(res.text().await.unwrap(), body);
    }
}

#[tokio::test]
async fn upstream_5xx_in_a_repair_round_reaches_the_client_unchanged() {
    let p = scripted::model_server(Script::new([
        ResponseTemplate::new(200)
            .set_body_json(calls_completion(vec![call("c", "read", "{}")], usage(1, 1))),
        ResponseTemplate::new(503).set_body_string("overloaded"),
    ]))
    .await;
    let proxy = start(&p, &[]).await;
    let res = proxy.chat(&user_chat("hi"), &[]).await;
    assert_eq!(res.status(), 503);
    assert_eq!(res.text().await.unwrap(), "overloaded");
}

#[tokio::test]
async fn unreachable_upstream_is_a_502() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let proxy = start_with(config(&format!("http://127.0.0.1:{port}/v1"), &[])).await;
    let (status, v) = error_of(proxy.chat(&user_chat("hi"), &[]).await).await;
    assert_eq!(
        (status, v["error"]["code"].as_str().unwrap()),
        (502, "upstream_unreachable")
    );
    assert!(error_message(&v).contains("CODEMODE_UPSTREAM"));
}

#[tokio::test]
async fn slow_upstream_is_a_504() {
    let p =
        scripted::model_server(ResponseTemplate::new(200).set_delay(Duration::from_secs(3))).await;
    let proxy = start(&p, &[("CODEMODE_UPSTREAM_TIMEOUT_SECS", "1")]).await;
    let (status, v) = error_of(proxy.chat(&user_chat("hi"), &[]).await).await;
    assert_eq!(
        (status, v["error"]["code"].as_str().unwrap()),
        (504, "upstream_timeout")
    );
}

#[tokio::test]
async fn upstream_that_answers_non_json_in_code_mode_is_a_502_and_nothing_unchecked_passes() {
    let p =
        scripted::model_server(ResponseTemplate::new(200).set_body_string("<html>gateway</html>"))
            .await;
    let proxy = start(&p, &[]).await;
    let (status, v) = error_of(proxy.chat(&user_chat("hi"), &[]).await).await;
    assert_eq!(
        (status, v["error"]["code"].as_str().unwrap()),
        (502, "upstream_invalid_response")
    );
}

#[tokio::test]
async fn unknown_paths_are_a_404_and_wrong_methods_a_405() {
    let p = provider([]).await;
    let proxy = start(&p, &[]).await;
    let res = proxy.get("/nope", &[]).await;
    assert_eq!(error_of(res).await.0, 404);
    let res = proxy.http.post(proxy.url("/healthz")).send().await.unwrap();
    assert_eq!(error_of(res).await.0, 405);
}
