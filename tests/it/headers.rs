//! Header handling and the `/v1/*` passthrough.

use crate::common::*;
use serde_json::Value;
use wiremock::matchers::path;
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

/// The operator's key is spent only on what the proxy judges (and on the
/// model list): every other route passed through goes with the caller's own
/// credential, and without one is a 401 that says so, before the provider
/// hears of it.
#[tokio::test]
async fn the_operator_key_is_spent_only_on_what_the_proxy_judges() {
    let p = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(200).set_body_raw(r#"{"data":[]}"#, "application/json"))
        .mount(&p)
        .await;
    let vars = [
        ("CODEMODE_UPSTREAM_API_KEY", "sk-operator"),
        ("CODEMODE_ANTHROPIC_API_KEY", "sk-ant-operator"),
        ("CODEMODE_ANTHROPIC_UPSTREAM", &format!("{}/v1", p.uri())),
    ];
    let proxy = start(&p, &vars).await;
    let send = |m: reqwest::Method, route: &str, headers: &[(&str, &str)]| {
        let mut req = proxy.http.request(m.clone(), proxy.url(route));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if m == reqwest::Method::POST {
            req = req.header("content-type", "application/json").body("{}");
        }
        req.send()
    };
    let last_seen = || async {
        let reqs = p.received_requests().await.unwrap();
        reqs.last()
            .map(|r| (r.url.path().to_owned(), r.headers.clone()))
    };

    // The model list: the operator's key, as for a model request.
    let res = send(reqwest::Method::GET, "/v1/models", &[]).await.unwrap();
    assert_eq!(res.status(), 200);
    let (at, h) = last_seen().await.unwrap();
    assert_eq!(at, "/v1/models");
    assert_eq!(h["authorization"], "Bearer sk-operator");

    // Files, batches, stored completions: the caller's own key goes.
    let own = [("authorization", "Bearer sk-client")];
    for (m, route) in [
        (reqwest::Method::POST, "/v1/files"),
        (reqwest::Method::DELETE, "/v1/files/file-1"),
        (reqwest::Method::POST, "/v1/fine_tuning/jobs"),
        (reqwest::Method::POST, "/v1/embeddings"),
    ] {
        let res = send(m.clone(), route, &own).await.unwrap();
        assert_eq!(res.status(), 200, "{m} {route}");
        let (at, h) = last_seen().await.unwrap();
        assert_eq!(at, route);
        assert_eq!(h["authorization"], "Bearer sk-client", "{m} {route}");
    }
    // Without a credential of its own: refused, and the provider never asked.
    let before = p.received_requests().await.unwrap().len();
    for (m, route) in [
        (reqwest::Method::POST, "/v1/files"),
        (reqwest::Method::GET, "/v1/chat/completions"),
        (reqwest::Method::DELETE, "/v1/files/file-1"),
        (reqwest::Method::GET, "/preset/standard/v1/files"),
    ] {
        let res = send(m.clone(), route, &[("x-codemode-mode", "native")])
            .await
            .unwrap();
        assert_eq!(res.status(), 401, "{m} {route}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["code"], "own_credential_required", "{body}");
        let message = error_message(&body);
        assert!(
            message.contains("CODEMODE_UPSTREAM_API_KEY") && message.contains("your own"),
            "{message}"
        );
    }
    assert_eq!(p.received_requests().await.unwrap().len(), before);

    // Anthropic's pass-through routes alike, in Anthropic's shape.
    let anthropic = [
        ("anthropic-version", "2023-06-01"),
        ("x-api-key", "sk-ant-client"),
    ];
    let res = send(reqwest::Method::POST, "/v1/files", &anthropic)
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let (_, h) = last_seen().await.unwrap();
    assert_eq!(h["x-api-key"], "sk-ant-client");
    let res = send(
        reqwest::Method::POST,
        "/v1/files",
        &[("anthropic-version", "2023-06-01")],
    )
    .await
    .unwrap();
    assert_eq!(res.status(), 401);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["type"], "authentication_error");
    assert!(error_message(&body).contains("CODEMODE_ANTHROPIC_API_KEY"));
}

#[tokio::test]
async fn other_v1_endpoints_pass_through_with_query_method_and_body() {
    let p = MockServer::start().await;
    mount(
        &p,
        "GET",
        "/v1/models",
        ResponseTemplate::new(200).set_body_raw(r#"{"data":[{"id":"m"}]}"#, "application/json"),
    )
    .await;
    mount(
        &p,
        "POST",
        "/v1/embeddings",
        ResponseTemplate::new(200).set_body_raw(r#"{"data":[]}"#, "application/json"),
    )
    .await;
    let proxy = start(&p, &[]).await;
    let res = proxy.get("/v1/models?limit=2", &[]).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap(), r#"{"data":[{"id":"m"}]}"#);
    let big = "y".repeat(3 << 20);
    let res = proxy.post_raw("/v1/embeddings", big.clone(), &[]).await;
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
    let res = proxy.get("/preset/code/v1/models", &[]).await;
    assert_eq!(res.status(), 200);
    let res = proxy.get("/preset/typo/v1/models", &[]).await;
    assert_eq!(res.status(), 400);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["error"]["code"], "unknown_preset");
}
