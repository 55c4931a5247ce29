//! Per-request selection, the preset list and dry-run, through the proxy.

use crate::common::*;
use serde_json::{json, Value};

const CONFIG: &str = r#"
[[preset]]
name = "reviewer"
extends = "standard"
tool_mode = "both"
[[preset.section]]
id = "reviewer:tone"
order = 10
text = "Review carefully."

[[section]]
id = "tool:read"
order = 110
text = "Prefer read over bash cat."

[scopes]
ci-bot = "reviewer"
"#;

#[tokio::test]
async fn mode_header_beats_preset_which_beats_scope_which_beats_default() {
    let cfg = config_file("order", CONFIG);
    let p = provider((0..4).map(|_| text_completion("ok", usage(1, 1)))).await;
    let proxy = start(
        &p,
        &[("CODEMODE_CONFIG", &cfg), ("CODEMODE_MODE", "native")],
    )
    .await;
    let cases: [(&[(&str, &str)], &str); 4] = [
        (&[], "native"),
        (&[("x-codemode-scope", "ci-bot")], "both"),
        (
            &[
                ("x-codemode-scope", "ci-bot"),
                ("x-codemode-preset", "code"),
            ],
            "code",
        ),
        (
            &[("x-codemode-preset", "code"), ("x-codemode-mode", "native")],
            "native",
        ),
    ];
    for (headers, want) in cases {
        let res = proxy.chat(&user_chat("hi"), headers).await;
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["x-codemode-mode"], want, "{headers:?}");
    }
    let sent = received(&p).await;
    assert_eq!(wire_tool_names(&sent[2]), vec!["run_code"]);
    for body in &sent {
        let text = body.to_string();
        assert!(
            !text.contains("x-codemode"),
            "headers are consumed, not forwarded as content"
        );
    }
}

#[tokio::test]
async fn the_preset_path_prefix_selects_a_preset_for_base_url_only_clients() {
    let p = provider([text_completion("ok", usage(1, 1))]).await;
    let proxy = start(&p, &[("CODEMODE_MODE", "native")]).await;
    let res = proxy
        .post("/preset/code/v1/chat/completions", &user_chat("hi"), &[])
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-codemode-preset"], "code");
    assert_eq!(res.headers()["x-codemode-mode"], "code");
    let reqs = p.received_requests().await.unwrap();
    assert_eq!(reqs[0].url.path(), "/v1/chat/completions");
}

#[tokio::test]
async fn scope_binding_sections_render_in_order() {
    let cfg = config_file("sections", CONFIG);
    let p = provider([text_completion("ok", usage(1, 1))]).await;
    let proxy = start(&p, &[("CODEMODE_CONFIG", &cfg)]).await;
    proxy
        .chat(&user_chat("hi"), &[("x-codemode-scope", "ci-bot")])
        .await;
    let sent = received(&p).await;
    let system = sent[0]["messages"][0]["content"].as_str().unwrap();
    let tone = system.find("Review carefully.").unwrap();
    let guidance = system.find("Prefer read over bash cat.").unwrap();
    let sdk = system.find("declare const tools").unwrap();
    assert!(tone < guidance && guidance < sdk, "{system}");
}

#[tokio::test]
async fn unknown_preset_is_a_400_listing_the_known_ones() {
    let p = provider([]).await;
    let proxy = start(&p, &[]).await;
    for res in [
        proxy
            .chat(&user_chat("hi"), &[("x-codemode-preset", "nope")])
            .await,
        proxy
            .post("/preset/nope/v1/chat/completions", &user_chat("hi"), &[])
            .await,
    ] {
        assert_eq!(res.status(), 400);
        let err: Value = res.json().await.unwrap();
        assert_eq!(err["error"]["code"], "unknown_preset");
        assert!(error_message(&err).contains("standard, code"));
    }
    assert!(received(&p).await.is_empty());
}

#[tokio::test]
async fn client_select_deny_makes_selection_a_403_but_scopes_still_bind() {
    let cfg = config_file("deny", CONFIG);
    let p = provider([text_completion("ok", usage(1, 1))]).await;
    let proxy = start(
        &p,
        &[
            ("CODEMODE_CONFIG", &cfg),
            ("CODEMODE_CLIENT_SELECT", "deny"),
        ],
    )
    .await;
    for (path, headers) in [
        ("/v1/chat/completions", vec![("x-codemode-mode", "native")]),
        ("/v1/chat/completions", vec![("x-codemode-preset", "code")]),
        ("/preset/code/v1/chat/completions", vec![]),
    ] {
        let res = proxy.post(path, &user_chat("hi"), &headers).await;
        assert_eq!(res.status(), 403, "{path} {headers:?}");
        let err: Value = res.json().await.unwrap();
        assert_eq!(err["error"]["code"], "client_select_denied");
    }
    let res = proxy
        .chat(&user_chat("hi"), &[("x-codemode-scope", "ci-bot")])
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-codemode-preset"], "reviewer");
}

#[tokio::test]
async fn invalid_mode_header_is_a_400() {
    let p = provider([]).await;
    let proxy = start(&p, &[]).await;
    let res = proxy
        .chat(&user_chat("hi"), &[("x-codemode-mode", "turbo")])
        .await;
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["code"], "invalid_mode");
}

#[tokio::test]
async fn presets_endpoint_lists_presets_in_order_with_effective_modes() {
    let cfg = config_file("list", CONFIG);
    let p = provider([]).await;
    let proxy = start(
        &p,
        &[("CODEMODE_CONFIG", &cfg), ("CODEMODE_MODE", "native")],
    )
    .await;
    let v: Value = proxy.get_json("/codemode/presets").await;
    let list: Vec<(String, String)> = v["presets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().into(),
                p["mode"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        list,
        vec![
            ("standard".into(), "native".into()),
            ("code".into(), "code".into()),
            ("reviewer".into(), "both".into())
        ]
    );
    assert_eq!(v["presets"][0]["mode_inherited"], json!(true));
    assert_eq!(v["presets"][1]["extends"], "standard");
}

#[tokio::test]
async fn dry_run_shows_selection_sections_and_the_rewritten_request_without_calling_upstream() {
    let p = provider([]).await;
    let proxy = start(&p, &[]).await;
    let res = proxy
        .post(
            "/codemode/dry-run",
            &user_chat("hi"),
            &[("x-codemode-scope", "team-a")],
        )
        .await;
    assert_eq!(res.status(), 200);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["scope"], "team-a");
    assert_eq!(v["preset"], "standard");
    assert_eq!(v["mode"], "code");
    let ids: Vec<&str> = strs(&v["sections"], "id");
    assert_eq!(ids, vec!["tools:code-only", "tools:sdk"]);
    assert_eq!(wire_tool_names(&v["request"]), vec!["run_code"]);
    assert!(p.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn healthz_answers() {
    let p = provider([]).await;
    let proxy = start(&p, &[]).await;
    let res = proxy.get("/healthz", &[]).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap(), json!({"status": "ok"}));
}
