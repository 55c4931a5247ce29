//! Request ids: the client's (when sane) or a new one, sent upstream on
//! every round and on passthrough, returned on every response.

use crate::common::*;
use serde_json::json;
use wiremock::{MockServer, ResponseTemplate};

/// The `x-request-id` of every request the provider received, in order.
async fn upstream_ids(p: &MockServer) -> Vec<Option<String>> {
    p.received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| {
            r.headers
                .get("x-request-id")
                .map(|v| v.to_str().unwrap().to_owned())
        })
        .collect()
}

fn returned_id(res: &reqwest::Response) -> String {
    res.headers()
        .get("x-request-id")
        .expect("every response carries x-request-id")
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn the_clients_id_is_returned_and_sent_on_every_round_of_a_repair() {
    let p = provider([
        calls_completion(vec![call("c1", "read", r#"{"path":"x"}"#)], usage(1, 1)),
        text_completion("repaired", usage(1, 1)),
    ])
    .await;
    let proxy = start(&p, &[]).await;
    let res = proxy
        .chat(&user_chat("read x"), &[("x-request-id", "client-id-42")])
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(returned_id(&res), "client-id-42");
    assert_eq!(res.headers()["x-codemode-repairs"], "1");
    assert_eq!(
        upstream_ids(&p).await,
        vec![
            Some("client-id-42".to_owned()),
            Some("client-id-42".to_owned())
        ],
        "both rounds of the repair carry the id"
    );
}

#[tokio::test]
async fn a_streamed_repair_sends_the_id_on_the_later_round_too() {
    let first = sse_call_turn("r1", "", "read", r#"{"path":"x"}"#, 5);
    let mut second = sse_chunk("r2", json!({"role": "assistant", "content": "done"}), None);
    second += &sse_chunk("r2", json!({}), Some("stop"));
    second += "data: [DONE]\n\n";
    let p = scripted::streams([first, second]).await;
    let proxy = start(&p, &[]).await;
    let mut body = user_chat("read x");
    body["stream"] = json!(true);
    let res = proxy.chat(&body, &[("x-request-id", "stream-id-7")]).await;
    assert_eq!(returned_id(&res), "stream-id-7");
    let text = res.text().await.unwrap();
    assert!(text.contains("done"), "{text}");
    assert_eq!(
        upstream_ids(&p).await,
        vec![
            Some("stream-id-7".to_owned()),
            Some("stream-id-7".to_owned())
        ]
    );
}

#[tokio::test]
async fn a_missing_id_is_generated_differs_per_request_and_goes_upstream() {
    let p = provider([
        text_completion("one", usage(1, 1)),
        text_completion("two", usage(1, 1)),
    ])
    .await;
    let proxy = start(&p, &[]).await;
    let a = returned_id(&proxy.chat(&user_chat("1"), &[]).await);
    let b = returned_id(&proxy.chat(&user_chat("2"), &[]).await);
    assert_ne!(a, b);
    for id in [&a, &b] {
        assert_eq!(id.len(), 36, "uuid-like: {id}");
        assert!(
            id.bytes().all(|c| c.is_ascii_hexdigit() || c == b'-'),
            "{id}"
        );
    }
    assert_eq!(upstream_ids(&p).await, vec![Some(a), Some(b)]);
}

#[tokio::test]
async fn an_unusable_client_id_is_replaced() {
    let p = provider([text_completion("one", usage(1, 1))]).await;
    let proxy = start(&p, &[]).await;
    let long = "x".repeat(129);
    let res = proxy
        .chat(&user_chat("1"), &[("x-request-id", &long)])
        .await;
    let id = returned_id(&res);
    assert_ne!(id, long);
    assert_eq!(id.len(), 36);
    assert_eq!(upstream_ids(&p).await, vec![Some(id)]);
}

#[tokio::test]
async fn errors_carry_the_id() {
    let p = provider([]).await;
    let proxy = start(&p, &[]).await;
    let bad = proxy
        .post_raw(
            "/v1/chat/completions",
            "{nope",
            &[
                ("x-request-id", "bad-json-1"),
                ("content-type", "application/json"),
            ],
        )
        .await;
    assert_eq!(bad.status(), 400);
    assert_eq!(returned_id(&bad), "bad-json-1");

    let missing = proxy
        .get("/nowhere", &[("x-request-id", "not-found-1")])
        .await;
    assert_eq!(missing.status(), 404);
    assert_eq!(returned_id(&missing), "not-found-1");

    // The provider's own error (its script is empty: a 500) comes back with the id too.
    let upstream = proxy
        .chat(&user_chat("hi"), &[("x-request-id", "upstream-err-1")])
        .await;
    assert_eq!(upstream.status(), 500);
    assert_eq!(returned_id(&upstream), "upstream-err-1");

    let messages = proxy
        .post_raw(
            "/v1/messages",
            "{nope",
            &[
                ("x-request-id", "messages-err-1"),
                ("anthropic-version", "2023-06-01"),
                ("content-type", "application/json"),
            ],
        )
        .await;
    assert_eq!(messages.status(), 400);
    assert_eq!(returned_id(&messages), "messages-err-1");
}

#[tokio::test]
async fn passthrough_sends_and_returns_the_id_and_keeps_the_providers_own() {
    let p = MockServer::start().await;
    mount(
        &p,
        "GET",
        "/v1/models",
        ResponseTemplate::new(200)
            .insert_header("x-request-id", "req_provider_9")
            .set_body_json(json!({"data": []})),
    )
    .await;
    let proxy = start(&p, &[]).await;
    let res = proxy
        .get("/v1/models", &[("x-request-id", "models-1")])
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(returned_id(&res), "models-1");
    assert_eq!(res.headers()["x-upstream-request-id"], "req_provider_9");
    assert_eq!(upstream_ids(&p).await, vec![Some("models-1".to_owned())]);
}
