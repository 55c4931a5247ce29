//! One reading of a request (docs/security.md): a body or a path the
//! proxy and the provider could read differently is refused before anything
//! reaches the provider; unbound scopes and every field that names a tool
//! stay inside the operator's binding.

use crate::common::*;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wiremock::MockServer;

/// Denies `bash`; the `default` scope is bound to it.
const SAFE: &str = r#"
[[preset]]
name = "safe"
deny = ["bash"]

[scopes]
default = "safe"
ci = "code"
"#;

/// Everything the provider received, on any path.
async fn all_received(p: &MockServer) -> Vec<wiremock::Request> {
    p.received_requests().await.unwrap_or_default()
}

/// A response read off a raw socket.
struct RawResponse {
    status: u16,
    head: String,
    body: Value,
}

/// Sends a request byte for byte (no client-side path normalisation).
async fn raw(
    proxy: &Proxy,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> RawResponse {
    let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).await.unwrap();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").expect("a whole response");
    let status = head[9..12].parse().unwrap();
    let head = head.to_ascii_lowercase();
    let rest = if head.contains("transfer-encoding: chunked") {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    RawResponse {
        status,
        head,
        body: serde_json::from_str(&rest).unwrap_or(Value::Null),
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

/// The error of a refused request: its code and message.
fn refused(res: &RawResponse, status: u16, code: &str) -> String {
    assert_eq!(res.status, status, "{}", res.body);
    assert_eq!(res.body["error"]["code"], code, "{}", res.body);
    assert!(res.body["error"]["type"].is_string(), "{}", res.body);
    res.body["error"]["message"].as_str().unwrap().to_owned()
}

fn body_text(extra: &str) -> String {
    let tools = serde_json::to_string(&agent_tools()).unwrap();
    format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"tools":{tools}{extra}}}"#
    )
}

// ---- duplicate keys ------------------------------------------------------

#[tokio::test]
async fn every_duplicate_top_level_key_is_refused_by_name_and_nothing_is_sent() {
    let cfg = config_file("dup", SAFE);
    let p = provider([]).await;
    let proxy = start(&p, &[("CODEMODE_CONFIG", &cfg), ("CODEMODE_MODE", "code")]).await;
    let bash = serde_json::to_string(&[&agent_tools()[2]]).unwrap();
    let cases: [(&str, String, &str); 5] = [
        // Code mode: a second `tools` would show the model `bash`.
        ("code", body_text(&format!(r#","tools":{bash}"#)), "tools"),
        // Native under `safe`: a second `tool_choice` would force the hidden tool.
        (
            "safe",
            body_text(
                r#","tool_choice":"auto","tool_choice":{"type":"function","function":{"name":"bash"}}"#,
            ),
            "tool_choice",
        ),
        // A second `n` would slip past the n > 1 refusal.
        ("code", body_text(r#","n":1,"n":3"#), "n"),
        // `functions: null` first would slip past the legacy refusal.
        (
            "code",
            body_text(r#","functions":null,"functions":[{"name":"bash"}]"#),
            "functions",
        ),
        // An escaped spelling of the same key is the same key.
        (
            "code",
            body_text(r#","stream":false,"str\u0065am":true"#),
            "stream",
        ),
    ];
    for (preset, body, key) in cases {
        let res = raw(
            &proxy,
            "POST",
            "/v1/chat/completions",
            &[("x-codemode-preset", preset)],
            &body,
        )
        .await;
        let message = refused(&res, 400, "duplicate_key");
        assert!(message.contains(&format!("`{key}`")), "{message}");
        assert!(message.contains("once"), "says what to do: {message}");
    }
    assert!(all_received(&p).await.is_empty());
}

#[tokio::test]
async fn dry_run_refuses_duplicate_keys_too() {
    let p = provider([]).await;
    let proxy = start(&p, &[("CODEMODE_MODE", "code")]).await;
    let bash = serde_json::to_string(&[&agent_tools()[2]]).unwrap();
    let body = body_text(&format!(r#","tools":{bash}"#));
    let res = raw(&proxy, "POST", "/codemode/dry-run", &[], &body).await;
    let message = refused(&res, 400, "duplicate_key");
    assert!(message.contains("`tools`"), "{message}");
    // One copy of each key is still fine.
    let res = raw(&proxy, "POST", "/codemode/dry-run", &[], &body_text("")).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert!(all_received(&p).await.is_empty());
}

// ---- repeated keys below the top level ---------------------------------------

/// Code mode under `CODEMODE_CLIENT_SELECT=deny`, every dialect's upstream
/// the same fake provider, which nothing may reach.
async fn locked(p: &MockServer) -> Proxy {
    let anthropic = format!("{}/v1", p.uri());
    let gemini = p.uri();
    start(
        p,
        &[
            ("CODEMODE_MODE", "code"),
            ("CODEMODE_CLIENT_SELECT", "deny"),
            ("CODEMODE_RUNTIME", "embedded"),
            ("CODEMODE_ANTHROPIC_UPSTREAM", anthropic.as_str()),
            ("CODEMODE_GEMINI_UPSTREAM", gemini.as_str()),
        ],
    )
    .await
}

const GENERATE: &str = "/v1beta/models/gemini-2.5-pro:generateContent";
const GOOGLE_KEY: &[(&str, &str)] = &[("x-goog-api-key", "k")];
const ANTHROPIC: &[(&str, &str)] = &[("anthropic-version", "2023-06-01"), ("x-api-key", "k")];

fn gemini_body(extra: &str) -> String {
    format!(
        r#"{{"contents":[{{"role":"user","parts":[{{"text":"hi"}}]}}],"tools":[{{"functionDeclarations":[{{"name":"read_file","parametersJsonSchema":{{"type":"object"}}}},{{"name":"bash","parametersJsonSchema":{{"type":"object"}}}}]}}]{extra}}}"#
    )
}

/// Google's error shape, with the proxy's code as the reason: the message.
fn refused_by_google(res: &RawResponse, reason: &str) -> String {
    assert_eq!(res.status, 400, "{}", res.body);
    assert_eq!(res.body["error"]["code"], 400, "{}", res.body);
    assert_eq!(
        res.body["error"]["status"], "INVALID_ARGUMENT",
        "{}",
        res.body
    );
    assert_eq!(
        res.body["error"]["details"][0]["reason"], reason,
        "{}",
        res.body
    );
    res.body["error"]["message"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_repeated_key_or_double_spelling_inside_a_gemini_request_is_refused_by_path() {
    let p = MockServer::start().await;
    let proxy = locked(&p).await;
    let cases = [
        // A first-key reader sees `allowedFunctionNames: ["bash"]`.
        (
            r#","toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["bash"]},"functionCallingConfig":{"mode":"AUTO"}}"#,
            ["`toolConfig.functionCallingConfig`", ""],
        ),
        // Proto JSON reads both spellings as one field, at every depth.
        (
            r#","generationConfig":{"temperature":0.5},"generation_config":{"candidateCount":2}"#,
            ["`generationConfig`", "`generation_config`"],
        ),
        (
            r#","toolConfig":{"functionCallingConfig":{"mode":"ANY","allowed_function_names":["bash"],"allowedFunctionNames":["read_file"]}}"#,
            [
                "`toolConfig.functionCallingConfig.allowed_function_names`",
                "`toolConfig.functionCallingConfig.allowedFunctionNames`",
            ],
        ),
        (
            r#","generationConfig":{"candidateCount":1,"candidate_count":2}"#,
            [
                "`generationConfig.candidateCount`",
                "`generationConfig.candidate_count`",
            ],
        ),
        (
            r#","systemInstruction":{"parts":[{"text":"a","text":"b"}]}"#,
            ["`systemInstruction.parts[0].text`", ""],
        ),
    ];
    for (extra, named) in cases {
        let res = raw(&proxy, "POST", GENERATE, GOOGLE_KEY, &gemini_body(extra)).await;
        let message = refused_by_google(&res, "duplicate_key");
        for path in named.iter().filter(|n| !n.is_empty()) {
            assert!(message.contains(path), "{extra}: {message}");
        }
        assert!(message.contains("once"), "says what to do: {message}");
    }
    assert!(all_received(&p).await.is_empty());
}

#[tokio::test]
async fn a_candidate_count_written_as_a_string_or_a_float_is_refused_as_the_number_is() {
    let p = MockServer::start().await;
    let proxy = locked(&p).await;
    for count in ["2", r#""2""#, "2.0", r#""2.0""#, "2e0"] {
        let extra = format!(r#","generationConfig":{{"candidateCount":{count}}}"#);
        let res = raw(&proxy, "POST", GENERATE, GOOGLE_KEY, &gemini_body(&extra)).await;
        let message = refused_by_google(&res, "invalid_request");
        assert!(message.contains("candidateCount"), "{count}: {message}");
    }
    assert!(all_received(&p).await.is_empty());
}

#[tokio::test]
async fn a_repeated_key_inside_tools_tool_choice_or_system_is_refused_on_every_dialect() {
    let p = MockServer::start().await;
    let proxy = locked(&p).await;
    // Responses: a choice forcing one tool to one reader, another to the other.
    let responses = r#"{"model":"m","input":"hi","tools":[{"type":"function","name":"read","parameters":{"type":"object"}},{"type":"function","name":"bash","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"read","name":"bash"}}"#;
    let res = raw(&proxy, "POST", "/v1/responses", &[], responses).await;
    let message = refused(&res, 400, "duplicate_key");
    assert!(message.contains("`tool_choice.name`"), "{message}");
    // Messages: a system block with two texts, in Anthropic's shape.
    let messages = r#"{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"read","input_schema":{"type":"object"}}],"system":[{"type":"text","text":"a","text":"b"}]}"#;
    let res = raw(&proxy, "POST", "/v1/messages", ANTHROPIC, messages).await;
    assert_eq!(res.status, 400, "{}", res.body);
    assert_eq!(res.body["type"], "error", "{}", res.body);
    assert_eq!(
        res.body["error"]["type"], "invalid_request_error",
        "{}",
        res.body
    );
    let message = res.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("`system[0].text`"), "{message}");
    assert!(message.contains("once"), "{message}");
    // Chat: a first-key reader declares `read`, the proxy read `bash`.
    let chat = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"read","name":"bash","parameters":{"type":"object"}}}]}"#;
    let res = raw(&proxy, "POST", "/v1/chat/completions", &[], chat).await;
    let message = refused(&res, 400, "duplicate_key");
    assert!(message.contains("`tools[0].function.name`"), "{message}");
    assert!(message.contains("once"), "{message}");
    assert!(all_received(&p).await.is_empty());
}

#[tokio::test]
async fn chat_n_written_as_a_string_or_a_float_is_refused_as_the_number_is() {
    let p = MockServer::start().await;
    let proxy = locked(&p).await;
    for n in ["2", r#""2""#, "2.0"] {
        let body = body_text(&format!(r#","n":{n}"#));
        let res = raw(&proxy, "POST", "/v1/chat/completions", &[], &body).await;
        refused(&res, 400, "unsupported_n");
    }
    assert!(all_received(&p).await.is_empty());
}

// ---- paths -----------------------------------------------------------------

const CHAT_VARIANTS: [&str; 9] = [
    "/v1/chat/completions/",
    "/v1//chat/completions",
    "/v1/chat//completions",
    "/v1/chat/%63ompletions",
    "/v1/./chat/completions",
    "/v1/chat/completions;x=1",
    "/V1/Chat/Completions",
    "/v1/CHAT/completions",
    "/v1/x/../chat/completions",
];

#[tokio::test]
async fn other_spellings_of_the_chat_route_are_a_400_that_names_the_canonical_path() {
    let p = provider([]).await;
    let proxy = start(&p, &[("CODEMODE_MODE", "code")]).await;
    let body = body_text("");
    for variant in CHAT_VARIANTS {
        for path in [variant.to_owned(), format!("/preset/code{variant}")] {
            for method in ["POST", "PUT", "GET"] {
                let res = raw(&proxy, method, &path, &[], &body).await;
                let message = refused(&res, 400, "non_canonical_path");
                assert!(
                    message.contains("send the request to /v1/chat/completions"),
                    "{method} {path}: {message}"
                );
            }
        }
    }
    for path in [
        "/preset/code//v1/chat/completions",
        "/preset/co%64e/v1/chat/completions",
        "/preset/code;x/v1/chat/completions",
        "/preset/./v1/chat/completions",
        "/Preset/code/v1/chat/completions",
    ] {
        let res = raw(&proxy, "POST", path, &[], &body).await;
        refused(&res, 400, "non_canonical_path");
    }
    assert!(all_received(&p).await.is_empty());
}

#[tokio::test]
async fn other_methods_on_the_chat_route_are_a_405_with_allow() {
    let p = provider([]).await;
    let proxy = start(&p, &[("CODEMODE_MODE", "code")]).await;
    for path in ["/v1/chat/completions", "/preset/code/v1/chat/completions"] {
        for method in ["PUT", "PATCH", "DELETE"] {
            let res = raw(&proxy, method, path, &[], &body_text("")).await;
            let message = refused(&res, 405, "method_not_allowed");
            assert!(
                message.contains("send POST /v1/chat/completions"),
                "{message}"
            );
            assert!(
                res.head.contains("allow: post, get, head, options"),
                "{}",
                res.head
            );
        }
    }
    assert!(all_received(&p).await.is_empty());
}

#[tokio::test]
async fn dialect_routes_refuse_other_spellings_and_serve_the_canonical_one() {
    let p = MockServer::start().await;
    let anthropic = format!("{}/v1", p.uri());
    let proxy = start(
        &p,
        &[
            ("CODEMODE_MODE", "code"),
            ("CODEMODE_ANTHROPIC_UPSTREAM", anthropic.as_str()),
        ],
    )
    .await;
    for canonical in ["/v1/responses", "/v1/messages", "/v1/messages/count_tokens"] {
        for variant in [
            format!("{canonical}/"),
            canonical.replacen("/v1/", "/v1//", 1),
            canonical.to_ascii_uppercase(),
            format!("{canonical};x=1"),
            format!("/preset/code{canonical}/"),
        ] {
            let res = raw(&proxy, "POST", &variant, &[], "{}").await;
            let message = if canonical.contains("messages") && res.body["type"] == "error" {
                // The Messages routes answer in Anthropic's shape.
                assert_eq!(res.status, 400, "{}", res.body);
                assert_eq!(res.body["error"]["type"], "invalid_request_error");
                res.body["error"]["message"].as_str().unwrap().to_owned()
            } else {
                refused(&res, 400, "non_canonical_path")
            };
            assert!(message.contains(canonical), "{variant}: {message}");
        }
    }
    assert!(all_received(&p).await.is_empty());
    for canonical in ["/v1/responses", "/v1/messages", "/v1/messages/count_tokens"] {
        raw(&proxy, "POST", canonical, &[], "{}").await;
    }
    let paths: Vec<String> = all_received(&p)
        .await
        .iter()
        .map(|r| r.url.path().to_owned())
        .collect();
    assert_eq!(
        paths,
        vec!["/v1/responses", "/v1/messages", "/v1/messages/count_tokens"]
    );
}

#[tokio::test]
async fn the_canonical_route_is_still_judged_and_reads_pass_in_native_mode() {
    let p = provider((0..2).map(|_| text_completion("ok", usage(1, 1)))).await;
    let proxy = start(&p, &[("CODEMODE_MODE", "code")]).await;
    for path in ["/v1/chat/completions", "/preset/code/v1/chat/completions"] {
        let res = raw(&proxy, "POST", path, &[], &body_text("")).await;
        assert_eq!(res.status, 200, "{path}: {}", res.body);
    }
    // Stored completions hold the model's calls unjudged: refused under
    // the lock (docs/security.md, "Routes"), passed in native mode.
    for path in [
        "/v1/chat/completions?limit=1",
        "/v1/chat/completions/chatcmpl-1",
    ] {
        let res = raw(&proxy, "GET", path, &[], "").await;
        assert_eq!(res.status, 403, "{path}: {}", res.body);
    }
    let native = start(&p, &[("CODEMODE_MODE", "native")]).await;
    raw(&native, "GET", "/v1/chat/completions?limit=1", &[], "").await;
    raw(&native, "GET", "/v1/chat/completions/chatcmpl-1", &[], "").await;
    let got = all_received(&p).await;
    let sent: Vec<(String, String)> = got
        .iter()
        .map(|r| (r.method.to_string(), r.url.path().to_owned()))
        .collect();
    assert_eq!(
        sent,
        vec![
            ("POST".into(), "/v1/chat/completions".into()),
            ("POST".into(), "/v1/chat/completions".into()),
            ("GET".into(), "/v1/chat/completions".into()),
            ("GET".into(), "/v1/chat/completions/chatcmpl-1".into()),
        ]
    );
    for r in &got[..2] {
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(wire_tool_names(&body), vec!["run_code"]);
    }
}

// ---- scopes ------------------------------------------------------------------

#[tokio::test]
async fn an_unbound_scope_gets_the_default_scopes_binding_under_deny_and_allow() {
    let cfg = config_file("unbound", SAFE);
    for policy in ["deny", "allow"] {
        let p = provider((0..3).map(|_| text_completion("ok", usage(1, 1)))).await;
        let proxy = start(
            &p,
            &[
                ("CODEMODE_CONFIG", &cfg),
                ("CODEMODE_CLIENT_SELECT", policy),
                ("CODEMODE_MODE", "native"),
            ],
        )
        .await;
        for scope in ["anything-else", "default", "ci"] {
            let res = proxy
                .chat(&user_chat("hi"), &[("x-codemode-scope", scope)])
                .await;
            assert_eq!(res.status(), 200);
            let want = if scope == "ci" { "code" } else { "safe" };
            assert_eq!(res.headers()["x-codemode-preset"], want, "{policy} {scope}");
        }
        let sent = received(&p).await;
        for body in &sent[..2] {
            assert_eq!(
                wire_tool_names(body),
                vec!["read", "write", "run_code"],
                "{policy}"
            );
        }
        assert_eq!(wire_tool_names(&sent[2]), vec!["run_code"]);
    }
}

// ---- fields that name tools --------------------------------------------------

fn allowed_tools(mode: &str, names: &[&str]) -> Value {
    let tools: Vec<Value> = names
        .iter()
        .map(|n| json!({"type": "function", "function": {"name": n}}))
        .collect();
    json!({"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": tools}})
}

#[tokio::test]
async fn allowed_tools_naming_native_tools_become_run_code_in_code_mode() {
    let p = provider([text_completion("ok", usage(1, 1))]).await;
    let proxy = start(&p, &[("CODEMODE_MODE", "code")]).await;
    let mut body = user_chat("hi");
    body["tool_choice"] = allowed_tools("required", &["read", "bash"]);
    let res = proxy.chat(&body, &[]).await;
    assert_eq!(res.status(), 200);
    let sent = received(&p).await;
    assert_eq!(
        sent[0]["tool_choice"],
        json!({"type": "allowed_tools", "allowed_tools": {"mode": "required",
            "tools": [{"type": "function", "function": {"name": "run_code"}}]}})
    );
}

#[tokio::test]
async fn allowed_tools_lose_hidden_tools_in_native_mode() {
    let cfg = config_file("allowed", SAFE);
    let p = provider((0..2).map(|_| text_completion("ok", usage(1, 1)))).await;
    let proxy = start(
        &p,
        &[("CODEMODE_CONFIG", &cfg), ("CODEMODE_MODE", "native")],
    )
    .await;
    let mut body = user_chat("hi");
    body["tool_choice"] = allowed_tools("auto", &["read", "bash"]);
    proxy.chat(&body, &[]).await;
    body["tool_choice"] = allowed_tools("required", &["bash"]);
    proxy.chat(&body, &[]).await;
    let sent = received(&p).await;
    assert_eq!(
        sent[0]["tool_choice"]["allowed_tools"]["tools"],
        json!([{"type": "function", "function": {"name": "read"}}])
    );
    assert_eq!(sent[1]["tool_choice"], "required");
}

#[tokio::test]
async fn legacy_functions_are_filtered_by_the_preset_in_native_mode() {
    let cfg = config_file("functions", SAFE);
    let p = provider([text_completion("ok", usage(1, 1))]).await;
    let proxy = start(
        &p,
        &[("CODEMODE_CONFIG", &cfg), ("CODEMODE_MODE", "native")],
    )
    .await;
    let body = json!({
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "functions": [{"name": "read", "parameters": {"type": "object"}},
                      {"name": "bash", "parameters": {"type": "object"}}],
        "function_call": {"name": "bash"},
    });
    let res = proxy.chat(&body, &[]).await;
    assert_eq!(res.status(), 200);
    let sent = received(&p).await;
    assert_eq!(
        sent[0]["functions"],
        json!([{"name": "read", "parameters": {"type": "object"}}])
    );
    assert_eq!(sent[0]["function_call"], "auto");
}

// ---- who may call --------------------------------------------------------------

/// A web page's request: `body` posted with `headers`, as a browser would.
async fn browser_post(proxy: &Proxy, headers: &[(&str, &str)], content_type: &str) -> (u16, Value) {
    let mut req = proxy
        .http
        .post(proxy.url("/v1/chat/completions"))
        .header("content-type", content_type)
        .body(body_text(""));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_web_page_and_a_rebound_name_cannot_spend_the_operators_key() {
    let p = provider((0..2).map(|_| text_completion("ok", usage(1, 1)))).await;
    let proxy = start(
        &p,
        &[
            ("CODEMODE_UPSTREAM_API_KEY", "sk-operator"),
            ("CODEMODE_ALLOWED_ORIGINS", "https://app.example"),
        ],
    )
    .await;
    let refused = [
        // A "simple" cross-site request: no pre-flight, no credential.
        (
            vec![
                ("origin", "http://evil.example"),
                ("sec-fetch-site", "cross-site"),
            ],
            "text/plain",
            403,
            "CODEMODE_ALLOWED_ORIGINS",
        ),
        (
            vec![("origin", "http://evil.example")],
            "application/json",
            403,
            "CODEMODE_ALLOWED_ORIGINS",
        ),
        // DNS rebinding: the page's own name, resolved to loopback.
        (
            vec![("host", "rebind.attacker.example:8080")],
            "application/json",
            403,
            "CODEMODE_ALLOWED_HOSTS",
        ),
        // Same origin, but a body a form could send.
        (vec![], "text/plain", 415, "application/json"),
    ];
    for (headers, content_type, status, names) in refused {
        let (got, err) = browser_post(&proxy, &headers, content_type).await;
        assert_eq!(got, status, "{headers:?} {content_type}: {err}");
        let message = err["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(names), "{message}");
    }
    assert!(
        all_received(&p).await.is_empty(),
        "nothing refused reached the provider"
    );
    let origin = format!("http://{}", proxy.addr);
    for headers in [
        vec![
            ("origin", origin.as_str()),
            ("sec-fetch-site", "same-origin"),
        ],
        vec![
            ("origin", "https://app.example"),
            ("sec-fetch-site", "cross-site"),
        ],
    ] {
        let (got, body) = browser_post(&proxy, &headers, "application/json").await;
        assert_eq!(got, 200, "{headers:?}: {body}");
    }
    let health = proxy.get("/healthz", &[("host", "pod-name:8080")]).await;
    assert_eq!(health.status(), 200, "probes reach liveness by any name");
}
