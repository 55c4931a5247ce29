//! Header handling and the `/v1/*` passthrough.

mod common;

use common::*;
use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn codemode_and_hop_by_hop_headers_are_not_forwarded_and_auth_is() {
    let p = provider([text_completion("ok", usage(1, 1))]).await;
    let proxy = start(&p, &[]).await;
    proxy
        .chat(
            &user_chat("hi"),
            &[
                ("authorization", "Bearer client-key"),
                ("x-codemode-scope", "a"),
                ("x-codemode-mode", "code"),
                ("connection", "keep-alive, x-private-hop"),
                ("x-private-hop", "1"),
                ("keep-alive", "timeout=5"),
                ("openai-organization", "org-1"),
            ],
        )
        .await;
    let reqs = p.received_requests().await.unwrap();
    let h = &reqs[0].headers;
    assert_eq!(h["authorization"], "Bearer client-key");
    assert_eq!(h["openai-organization"], "org-1");
    for gone in [
        "x-codemode-scope",
        "x-codemode-mode",
        "x-private-hop",
        "keep-alive",
    ] {
        assert!(h.get(gone).is_none(), "{gone} was forwarded");
    }
}

#[tokio::test]
async fn the_operator_key_replaces_the_clients() {
    let p = provider([text_completion("ok", usage(1, 1))]).await;
    let proxy = start(&p, &[("CODEMODE_UPSTREAM_API_KEY", "sk-operator")]).await;
    proxy
        .chat(&user_chat("hi"), &[("authorization", "Bearer client-key")])
        .await;
    let reqs = p.received_requests().await.unwrap();
    assert_eq!(reqs[0].headers["authorization"], "Bearer sk-operator");
}

#[tokio::test]
async fn other_v1_endpoints_pass_through_with_query_method_and_body() {
    let p = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(r#"{"data":[{"id":"m"}]}"#, "application/json"),
        )
        .mount(&p)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(r#"{"data":[]}"#, "application/json"))
        .mount(&p)
        .await;
    let proxy = start(&p, &[]).await;
    let res = proxy
        .http
        .get(proxy.url("/v1/models?limit=2"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap(), r#"{"data":[{"id":"m"}]}"#);
    let big = "y".repeat(3 << 20);
    let res = proxy
        .http
        .post(proxy.url("/v1/embeddings"))
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let reqs = p.received_requests().await.unwrap();
    assert_eq!(reqs[0].url.query(), Some("limit=2"));
    assert_eq!(
        reqs[1].body.len(),
        big.len(),
        "passthrough bodies are not size-limited or altered"
    );
}

#[tokio::test]
async fn preset_path_prefix_works_for_passthrough_too() {
    let p = MockServer::start().await;
    Mock::given(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_string("{}"))
        .mount(&p)
        .await;
    let proxy = start(&p, &[]).await;
    let res = proxy
        .http
        .get(proxy.url("/preset/code/v1/models"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = proxy
        .http
        .get(proxy.url("/preset/typo/v1/models"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["error"]["code"], "unknown_preset");
}
