//! The inspector's API through the proxy (`/codemode/inspector`,
//! `/codemode/api/*`): off without CODEMODE_ADMIN_TOKEN, closed without
//! the token, and a program's code and nested calls listed after an agent
//! ran it, on every dialect; payloads only when asked; no credential
//! anywhere.

use crate::common;
use std::time::Duration;

use crate::common::inspector::*;
use crate::common::*;
use futures_util::StreamExt;
use serde_json::{json, Value};

#[tokio::test]
async fn without_the_admin_token_the_inspector_is_not_there() {
    let p = program_model(Api::Chat).await;
    let proxy = start(&p, &[("CODEMODE_RUNTIME", "embedded")]).await;
    run_program(&proxy, Api::Chat, &[]).await;
    for path in [
        "/codemode/inspector",
        "/codemode/inspector?token=inspector-test-token-0123456789",
        "/codemode/inspector/app.js",
        "/codemode/api/executions",
        "/codemode/api/events",
    ] {
        let (status, body) = get(&proxy, path, Some(TOKEN)).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(body["error"]["code"], "not_found", "{path}");
        assert!(
            error_message(&body).contains("CODEMODE_ADMIN_TOKEN"),
            "the message says how to turn it on: {body}"
        );
    }
}

#[tokio::test]
async fn the_api_refuses_a_missing_or_wrong_token_with_a_401_that_says_what_to_send() {
    let p = program_model(Api::Chat).await;
    let proxy = inspected_proxy(&p, &[]).await;
    for (token, code) in [
        (None, "admin_token_required"),
        (
            Some("inspector-test-token-012345678X"),
            "invalid_admin_token",
        ),
    ] {
        for path in [
            "/codemode/api/executions",
            "/codemode/api/executions/1",
            "/codemode/api/nothing",
        ] {
            let mut req = proxy.http.get(proxy.url(path));
            if let Some(t) = token {
                req = req.bearer_auth(t);
            }
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 401, "{path}");
            assert!(res.headers()["www-authenticate"]
                .to_str()
                .unwrap()
                .starts_with("Bearer"));
            let body: Value = res.json().await.unwrap();
            assert_eq!(body["error"]["code"], code, "{body}");
            assert_eq!(body["error"]["type"], "authentication_error");
            assert!(error_message(&body).contains("Authorization: Bearer"));
        }
    }
    let (status, _) = get(&proxy, "/codemode/api/executions", Some(TOKEN)).await;
    assert_eq!(status, 200);
    // Only GET: the API changes nothing.
    let res = proxy
        .http
        .post(proxy.url("/codemode/api/executions"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 405);
}

#[tokio::test]
async fn a_browser_opens_the_page_once_with_the_token_and_keeps_a_strict_cookie() {
    let p = program_model(Api::Chat).await;
    let proxy = inspected_proxy(&p, &[]).await;
    let http = crate::common::http_client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    // No session: the login form, no data.
    let res = http
        .get(proxy.url("/codemode/inspector"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    assert!(res.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("script-src 'self'"));
    let page = res.text().await.unwrap();
    assert!(
        page.contains("<form") && page.contains("name=\"token\""),
        "{page}"
    );
    assert!(!page.contains("app.js"), "no script without a session");

    // A wrong token: the form again, saying so.
    let res = http
        .get(proxy.url("/codemode/inspector?token=not-the-right-token-at-all"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    assert!(res.text().await.unwrap().contains("not right"));

    // The token once: a cookie and the clean URL.
    let res = http
        .get(proxy.url(&format!("/codemode/inspector?token={TOKEN}")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(res.headers()["location"], "/codemode/inspector");
    let cookie = res.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(
        !cookie.contains(TOKEN),
        "the cookie is not the token: {cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_owned();

    let res = http
        .get(proxy.url("/codemode/inspector"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let csp = res.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("default-src 'none'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert_eq!(res.headers()["cache-control"], "no-store");
    let page = res.text().await.unwrap();
    assert!(page.contains("/codemode/inspector/app.js"));
    assert!(!page.contains("<script>"), "no inline script");

    // The session opens the API too; the form posts the same way.
    let res = http
        .get(proxy.url("/codemode/api/status"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = http
        .post(proxy.url("/codemode/inspector"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    for asset in ["/codemode/inspector/app.js", "/codemode/inspector/app.css"] {
        let res = http.get(proxy.url(asset)).send().await.unwrap();
        assert_eq!(res.status(), 200, "{asset}");
    }
}

/// Wrong tokens are answered later and later (per client, parallel
/// attempts queued), a right one clears that; signing out is a POST, which
/// another site's page cannot send.
#[tokio::test]
async fn wrong_tokens_are_slowed_and_signing_out_is_a_post() {
    let p = program_model(Api::Chat).await;
    let proxy = inspected_proxy(&p, &[]).await;
    let http = crate::common::http_client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let status = |token: &str| {
        http.get(proxy.url("/codemode/api/status"))
            .bearer_auth(token)
            .send()
    };
    // Turns after failures: 100 ms after the first, then 200, then 400.
    let started = std::time::Instant::now();
    for _ in 0..3 {
        assert_eq!(status("not-the-token").await.unwrap().status(), 401);
    }
    assert_eq!(status(TOKEN).await.unwrap().status(), 200);
    let slowed = started.elapsed();
    assert!(
        slowed >= Duration::from_millis(700),
        "three wrong tokens cost their turns: {slowed:?}"
    );
    // The right token cleared the record.
    assert_eq!(status(TOKEN).await.unwrap().status(), 200);

    let res = http
        .post(proxy.url("/codemode/inspector"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={TOKEN}"))
        .send()
        .await
        .unwrap();
    let session = res.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let logout = proxy.url("/codemode/inspector/logout");
    let res = http
        .get(&logout)
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 405, "a link cannot sign the user out");
    assert!(res
        .text()
        .await
        .unwrap()
        .contains("POST /codemode/inspector/logout"));
    let res = http
        .post(&logout)
        .header("cookie", &session)
        .header("origin", "http://evil.example")
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "nor another site's form");
    let res = http
        .post(&logout)
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let cleared = res.headers()["set-cookie"].to_str().unwrap();
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    let page = text_of(
        http.get(proxy.url("/codemode/inspector"))
            .header("cookie", &session),
    )
    .await;
    assert!(
        page.contains("method=\"post\" action=\"/codemode/inspector/logout\""),
        "{page}"
    );
}

async fn program_is_listed(api: Api) {
    let p = program_model(api).await;
    let proxy = inspected_proxy(&p, &[]).await;
    let turns = run_program(&proxy, api, &[("x-codemode-scope", "team-a")]).await;
    assert_eq!(turns, 3, "two nested turns, then the answer");

    let e = newest_execution(&proxy).await;
    assert_eq!(e["state"], "finished", "{e}");
    assert_eq!(e["dialect"], api.as_str());
    assert_eq!(e["scope"], "team-a");
    assert_eq!(e["preset"], "standard");
    assert!(e["model"].as_str().unwrap().ends_with("-test"), "{e}");
    assert!(e["code"]
        .as_str()
        .unwrap()
        .contains("console.log('read two files')"));
    assert!(!e["run_call_id"].as_str().unwrap().is_empty());
    let tool = if api == Api::Messages { "Read" } else { "read" };
    let calls = e["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{e}");
    for (n, c) in calls.iter().enumerate() {
        assert_eq!(c["n"], n);
        assert_eq!(c["tool"], tool);
        assert!(c["args_bytes"].as_u64().unwrap() > 10);
        assert_eq!(c["result_bytes"], 21, "{c}");
        let (handed, back) = (c["handed_at_ms"].as_u64(), c["result_at_ms"].as_u64());
        assert!(handed.is_some() && back >= handed, "{c}");
        assert!(c.get("args").is_none() && c.get("result").is_none(), "{c}");
    }
    assert!(e["started_at_ms"].as_u64() <= e["ended_at_ms"].as_u64());
    assert_eq!(
        e["round_trips_saved"], 2,
        "each batch the agent answered ran the program on without the model"
    );
    assert_eq!(e["console_bytes"], "read two files".len());
    // Two 21-byte results against a longer `run_code` result: nothing saved.
    assert_eq!(e["context_bytes_saved"], 0, "{e}");
    assert!(e["result_bytes"].as_u64().is_some());
    let text = e.to_string();
    assert!(
        !text.contains("alpha-secret"),
        "no payloads unless asked: {text}"
    );

    let (_, totals) = get(&proxy, "/codemode/api/totals", Some(TOKEN)).await;
    assert_eq!(totals["now"]["requests_code"], 3, "{totals}");
    assert_eq!(totals["now"]["round_trips_saved"], 2);
}

#[tokio::test]
async fn a_chat_program_is_listed_with_its_code_and_calls() {
    program_is_listed(Api::Chat).await;
}

#[tokio::test]
async fn a_responses_program_is_listed_with_its_code_and_calls() {
    program_is_listed(Api::Responses).await;
}

#[tokio::test]
async fn a_messages_program_is_listed_with_its_code_and_calls() {
    program_is_listed(Api::Messages).await;
}

#[tokio::test]
async fn payloads_are_shown_only_with_inspector_payloads_on() {
    let p = program_model(Api::Chat).await;
    let proxy = inspected_proxy(&p, &[("CODEMODE_INSPECTOR_PAYLOADS", "on")]).await;
    run_program(&proxy, Api::Chat, &[]).await;
    let e = newest_execution(&proxy).await;
    assert_eq!(e["calls"][0]["args"], r#"{"path":"a.txt"}"#);
    assert_eq!(e["calls"][1]["result"], "bravo-secret-contents");
    assert_eq!(e["console"], "read two files");
    assert!(e["result"]
        .as_str()
        .unwrap()
        .contains("alpha-secret-contents bravo"));
    let (_, status) = get(&proxy, "/codemode/api/status", Some(TOKEN)).await;
    assert_eq!(status["memory"]["payloads"], true);
}

#[tokio::test]
async fn no_credential_or_header_value_reaches_the_inspector() {
    let p = program_model(Api::Chat).await;
    let proxy = inspected_proxy(&p, &[]).await;
    let secrets = [
        ("authorization", "Bearer sk-client-secret-aaaa1111"),
        ("x-api-key", "sk-ant-secret-bbbb2222"),
        ("x-request-id", "request-id-cccc3333"),
        ("x-custom", "custom-header-dddd4444"),
    ];
    // Listening while it runs: the live updates are checked too.
    let events = proxy
        .http
        .get(proxy.url("/codemode/api/events"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    run_program(&proxy, Api::Chat, &secrets).await;
    let mut seen = String::new();
    let mut stream = events.bytes_stream();
    while !seen.contains("\"state\":\"finished\"") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("live updates come")
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    for path in [
        "/codemode/api/executions",
        "/codemode/api/executions/1",
        "/codemode/api/denials",
        "/codemode/api/totals",
        "/codemode/api/status",
    ] {
        let (_, body) = get(&proxy, path, Some(TOKEN)).await;
        seen.push_str(&body.to_string());
    }
    for (name, value) in secrets {
        let needle = value.trim_start_matches("Bearer ");
        assert!(
            !seen.contains(needle),
            "{name} reached the inspector: {seen}"
        );
    }
    assert!(!seen.contains(TOKEN));
}

#[tokio::test]
async fn the_events_stream_shows_a_program_as_it_runs() {
    let p = program_model(Api::Responses).await;
    let proxy = inspected_proxy(&p, &[]).await;
    let events = proxy
        .http
        .get(proxy.url("/codemode/api/events"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(events.headers()["content-type"], "text/event-stream");
    run_program(&proxy, Api::Responses, &[]).await;
    let mut stream = events.bytes_stream();
    let mut text = String::new();
    while !text.contains("\"state\":\"finished\"") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("live updates come")
            .unwrap()
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let states: Vec<String> = text
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("event: execution\ndata: "))
        .map(|d| {
            serde_json::from_str::<Value>(d).unwrap()["state"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        states,
        ["running", "waiting", "running", "waiting", "running", "finished"],
        "{text}"
    );
}

#[tokio::test]
async fn denials_are_listed_with_what_became_of_their_repair() {
    let program = |id: &str| call(id, "run_code", &json!({"code": "return 1"}).to_string());
    let p = provider([
        // A: `read` called directly (code mode: denied), then two programs
        // in one turn (both refused), then one program, then the answer.
        calls_completion(vec![call("c1", "read", r#"{"path":"a.txt"}"#)], usage(1, 1)),
        calls_completion(vec![program("c2"), program("c3")], usage(1, 1)),
        calls_completion(vec![program("c4")], usage(1, 1)),
        text_completion("Done.", usage(1, 1)),
        // B: a program with a direct `read` beside it: the program runs.
        calls_completion(
            vec![program("c5"), call("c6", "read", r#"{"path":"b.txt"}"#)],
            usage(1, 1),
        ),
        text_completion("Done again.", usage(1, 1)),
    ])
    .await;
    let proxy = inspected_proxy(&p, &[("CODEMODE_MAX_REPAIRS", "2")]).await;
    let body = json!({"model": "gpt-test", "messages": [{"role": "user", "content": "Read a.txt"}],
                      "tools": common::agent::fs_tools()});
    for _ in 0..2 {
        let res = proxy.chat(&body, &[("x-codemode-scope", "reviewer")]).await;
        assert_eq!(res.status(), 200);
        res.bytes().await.unwrap();
    }
    let (status, body) = get(&proxy, "/codemode/api/denials", Some(TOKEN)).await;
    assert_eq!(status, 200);
    let listed: Vec<(String, String, String)> = body["denials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            assert_eq!(d["scope"], "reviewer");
            assert_eq!(d["dialect"], "chat");
            assert!(!d["repair_detail"].as_str().unwrap().is_empty());
            (
                d["tool"].as_str().unwrap().to_owned(),
                d["code"].as_str().unwrap().to_owned(),
                d["repair"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let row = |t: &str, c: &str, r: &str| (t.to_owned(), c.to_owned(), r.to_owned());
    assert_eq!(
        listed,
        [
            row("read", "UNKNOWN_TOOL", "not_attempted"),
            row("run_code", "ONE_PROGRAM", "succeeded"),
            row("run_code", "ONE_PROGRAM", "succeeded"),
            row("read", "UNKNOWN_TOOL", "failed"),
        ],
        "newest first: {body}"
    );
    let (_, totals) = get(&proxy, "/codemode/api/totals", Some(TOKEN)).await;
    assert_eq!(totals["now"]["denials_unknown_tool"], 2);
    assert_eq!(totals["now"]["denials_one_program"], 2);
}

#[tokio::test]
async fn an_execution_the_inspector_does_not_keep_is_a_404_that_says_why() {
    let p = program_model(Api::Chat).await;
    let proxy = inspected_proxy(&p, &[]).await;
    let (status, body) = get(&proxy, "/codemode/api/executions/99", Some(TOKEN)).await;
    assert_eq!(status, 404);
    assert!(error_message(&body).contains("CODEMODE_INSPECTOR_MB"));
}

/// The first answer of a program of two reads: the proxy hands out `read a.txt`.
async fn handed_out(proxy: &Proxy) -> (Vec<Value>, Value) {
    let mut history = vec![json!({"role": "user", "content": "Read a.txt and b.txt"})];
    let body =
        json!({"model": "gpt-test", "messages": history, "tools": common::agent::fs_tools()});
    let res = proxy.chat(&body, &[]).await;
    assert_eq!(res.status(), 200);
    let answer: Value = res.json().await.unwrap();
    let turn = answer["choices"][0]["message"].clone();
    history.push(turn.clone());
    (history, turn)
}

#[tokio::test]
async fn a_program_the_agent_moves_away_from_is_interrupted() {
    let p = provider([
        runs_code(usage(1, 1)),
        text_completion("Fine, never mind.", usage(1, 1)),
    ])
    .await;
    let proxy = inspected_proxy(&p, &[]).await;
    let (mut history, turn) = handed_out(&proxy).await;
    assert_eq!(newest_execution(&proxy).await["state"], "waiting");
    // The agent answers the call but the user moves on before the program resumes.
    history.push(
        json!({"role": "tool", "tool_call_id": turn["tool_calls"][0]["id"], "content": "alpha"}),
    );
    history.push(json!({"role": "user", "content": "Never mind, do something else."}));
    let body =
        json!({"model": "gpt-test", "messages": history, "tools": common::agent::fs_tools()});
    let res = proxy.chat(&body, &[]).await;
    assert_eq!(res.status(), 200);
    res.bytes().await.unwrap();
    let e = newest_execution(&proxy).await;
    assert_eq!(e["state"], "interrupted", "{e}");
    assert!(e["ended_at_ms"].as_u64().is_some());
}

#[tokio::test]
async fn a_program_past_its_lifetime_is_expired() {
    let p = provider([
        runs_code(usage(1, 1)),
        text_completion("It took too long.", usage(1, 1)),
    ])
    .await;
    let proxy = inspected_proxy(&p, &[("CODEMODE_RUN_LIFETIME_SECS", "1")]).await;
    let (mut history, turn) = handed_out(&proxy).await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    // Past its lifetime it reads as expired, whether or not the agent comes back.
    assert_eq!(newest_execution(&proxy).await["state"], "expired");
    history.push(
        json!({"role": "tool", "tool_call_id": turn["tool_calls"][0]["id"], "content": "alpha"}),
    );
    let body =
        json!({"model": "gpt-test", "messages": history, "tools": common::agent::fs_tools()});
    let res = proxy.chat(&body, &[]).await;
    assert_eq!(res.status(), 200);
    res.bytes().await.unwrap();
    let e = newest_execution(&proxy).await;
    assert_eq!(e["state"], "expired", "{e}");
    assert!(e["ended_at_ms"].as_u64().is_some(), "{e}");
}
