//! Under the lock only a provider's open routes pass unjudged, and a key
//! reaches only its own provider (docs/security.md, "Routes" and "Whose
//! key goes where").

use serde_json::{json, Value};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::common::{config, error_message, start_with, Proxy};

const LOCKED: &[(&str, &str)] = &[
    ("CODEMODE_MODE", "code"),
    ("CODEMODE_CLIENT_SELECT", "deny"),
    ("CODEMODE_RUNTIME", "embedded"),
];

/// A request's extra headers.
type Headers<'a> = &'a [(&'a str, &'a str)];

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// Three providers answering anything with 200, and a proxy in front of
/// them with `vars`.
struct Providers {
    openai: MockServer,
    anthropic: MockServer,
    google: MockServer,
}

impl Providers {
    async fn start() -> Providers {
        let any = || async {
            let server = MockServer::start().await;
            Mock::given(wiremock::matchers::any())
                .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
                .mount(&server)
                .await;
            server
        };
        Providers {
            openai: any().await,
            anthropic: any().await,
            google: any().await,
        }
    }

    async fn proxy(&self, vars: &[(&str, &str)]) -> Proxy {
        let anthropic = format!("{}/v1", self.anthropic.uri());
        let google = self.google.uri();
        let mut all = vars.to_vec();
        all.push(("CODEMODE_ANTHROPIC_UPSTREAM", &anthropic));
        all.push(("CODEMODE_GEMINI_UPSTREAM", &google));
        start_with(config(&format!("{}/v1", self.openai.uri()), &all)).await
    }

    /// Every request each provider received: (provider, method, path and
    /// query, headers).
    async fn seen(&self) -> Vec<(&'static str, String, String, http::HeaderMap)> {
        let mut out = Vec::new();
        for (name, server) in [
            ("openai", &self.openai),
            ("anthropic", &self.anthropic),
            ("google", &self.google),
        ] {
            for r in server.received_requests().await.unwrap() {
                let at = match r.url.query() {
                    Some(q) => format!("{}?{q}", r.url.path()),
                    None => r.url.path().to_owned(),
                };
                let headers = r
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                out.push((name, r.method.to_string(), at, headers));
            }
        }
        out
    }
}

/// Sends `verb path` with `headers`, and a JSON body declaring a tool when
/// the method takes one.
async fn send(
    proxy: &Proxy,
    verb: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut req = proxy.http.request(verb.parse().unwrap(), proxy.url(path));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if verb != "GET" && verb != "HEAD" {
        // A model request in every shape the routes read, declaring a tool,
        // asking to run in the background.
        req = req.json(&json!({"model": "m", "input": "hi", "background": true,
            "tools": [{"type": "function", "name": "bash", "parameters": {}}]}));
    }
    req.send().await.expect("the proxy answers")
}

/// The credential a client of the API `path` lies under sends.
fn own_headers(path: &str) -> Vec<(&'static str, &'static str)> {
    if ["/v1beta", "/v1alpha", "/upload"]
        .iter()
        .any(|root| path.starts_with(root))
        || path.contains("interactions")
    {
        vec![("x-goog-api-key", "g-key")]
    } else if path.starts_with("/v1/messages") {
        vec![("x-api-key", "a-key"), ("anthropic-version", "2023-06-01")]
    } else {
        vec![("authorization", "Bearer o-key")]
    }
}

/// Asserts `res` is a refusal in the error shape of the API `path` lies
/// under, and returns its message.
async fn refusal(res: reqwest::Response, what: &str) -> String {
    let status = res.status().as_u16();
    assert!(matches!(status, 400 | 403 | 405), "{what}: {status}");
    let err: Value = res.json().await.unwrap();
    let message = &err["error"]["message"];
    assert!(message.is_string(), "{what}: {err}");
    if what.contains("/v1beta") || what.contains("interactions") || what.contains("/v1alpha") {
        assert!(
            err["error"]["status"].is_string(),
            "Google's shape, {what}: {err}"
        );
    } else if what.contains("/v1/messages")
        || (what.contains("anthropic-version") && !what.contains("/v1/chat"))
    {
        assert_eq!(err["type"], "error", "Anthropic's shape, {what}: {err}");
    } else {
        assert!(
            err["error"]["code"].is_string(),
            "OpenAI's shape, {what}: {err}"
        );
    }
    message.as_str().unwrap().to_owned()
}

#[tokio::test]
async fn no_route_off_a_providers_open_list_reaches_it_under_the_lock() {
    let providers = Providers::start().await;
    let locked = providers.proxy(LOCKED).await;
    let made_up = [
        "/v1/foo/bar",
        "/v1/chat/completions2",
        "/v1/completions",
        "/v1/evals",
        "/v1/chatkit/sessions",
        "/v1/interactions/v1_i/cancel",
        "/v1/messages/foo",
        "/v1/models/gpt-5/extra",
        "/v1beta/foo",
        "/v1beta/interactions/v1_i",
        "/v1beta/models/gemini-2.5-pro:batchGenerateContent",
        "/v1beta/models/gemini-2.5-pro:generateAnswer",
        "/v1beta/tunedModels/t:generateContent",
        "/v1beta/corpora/c/documents",
        "/v1alpha/foo",
        "/v1alpha/models/gemini-2.5-pro:bidiGenerateContent",
        "/upload/v1beta/foo",
        "/v1beta/Files/../Models/m:generateMessage",
    ];
    for path in made_up {
        for verb in METHODS {
            let what = format!("{verb} {path}");
            let message = refusal(send(&locked, verb, path, &own_headers(path)).await, &what).await;
            assert!(
                message.contains("native") || message.contains("send"),
                "says what to do, {what}: {message}"
            );
        }
    }
    // With any provider's credential: no unlisted route reaches anyone.
    for path in ["/v1/foo/bar", "/v1beta/foo"] {
        for headers in [
            vec![("authorization", "Bearer k")],
            vec![("x-api-key", "k"), ("anthropic-version", "2023-06-01")],
            vec![("x-goog-api-key", "k")],
        ] {
            let res = send(&locked, "POST", &format!("{path}?key=k"), &headers).await;
            assert!(res.status().is_client_error(), "{path} {headers:?}");
        }
    }
    assert_eq!(providers.seen().await.len(), 0, "no provider heard of them");

    // The same in native mode: every one of them passes, to its provider.
    let native = providers.proxy(&[("CODEMODE_MODE", "native")]).await;
    for path in made_up {
        let res = send(&native, "POST", path, &own_headers(path)).await;
        assert_eq!(res.status(), 200, "native POST {path}");
    }
}

/// The routes docs/security.md's "Routes" table lists as refused, each with
/// the methods it names (every method where it names none).
fn documented_refusals() -> Vec<(Vec<&'static str>, String)> {
    let doc = include_str!("../../docs/security.md");
    let table = doc
        .split("### Routes\n")
        .nth(1)
        .and_then(|t| t.split("\n\n").find(|block| block.starts_with("| route")))
        .expect("docs/security.md has the Routes table");
    let mut out = Vec::new();
    for row in table.lines().skip(2) {
        let cells: Vec<&str> = row.split(" | ").collect();
        if cells.len() < 2 || !cells[1].starts_with("refused") {
            continue;
        }
        let mut row_method: Option<&'static str> = None;
        for (n, quoted) in cells[0].split('`').enumerate() {
            if n % 2 == 0 || !quoted.contains('/') {
                continue;
            }
            let (named, at) = match quoted.split_once(' ') {
                Some((m, at)) if METHODS.contains(&m) => (Some(m), at),
                _ => (None, quoted),
            };
            // A method names the paths after it in the row, until another.
            row_method = named
                .and_then(|m| METHODS.into_iter().find(|x| *x == m))
                .or(row_method);
            let path = at
                .replace("{id}", "x_1")
                .replace("{model}", "gemini-2.5-pro")
                .replace("M:", "gemini-2.5-pro:")
                .replace('*', "x_1");
            // "any path ending in `models/M:generateContent`" is no route.
            if !path.starts_with('/') {
                continue;
            }
            let methods = match row_method {
                Some(m) => vec![m],
                None => METHODS.to_vec(),
            };
            out.push((methods, path));
        }
    }
    out
}

#[tokio::test]
async fn every_route_the_docs_list_as_refused_is_refused_with_every_method() {
    let refused = documented_refusals();
    for path in [
        "/v1beta/cachedContents/x_1",
        "/v1/messages/batches/x_1",
        "/v1/conversations/x_1",
        "/v1/responses/x_1/input_items",
    ] {
        assert!(
            refused.iter().any(|(_, p)| p == path),
            "{path} read from the docs: {refused:?}"
        );
    }
    let providers = Providers::start().await;
    let locked = providers.proxy(LOCKED).await;
    for (methods, path) in &refused {
        for verb in methods {
            let what = format!("{verb} {path}");
            refusal(send(&locked, verb, path, &own_headers(path)).await, &what).await;
        }
    }
    assert_eq!(providers.seen().await.len(), 0);
}

#[tokio::test]
async fn open_routes_pass_under_the_lock_to_their_own_provider_with_its_key() {
    let providers = Providers::start().await;
    let locked = providers.proxy(LOCKED).await;
    let cases: [(&str, &str, Headers, &str, &str); 10] = [
        (
            "GET",
            "/v1/models",
            &[("authorization", "Bearer o")],
            "openai",
            "/v1/models",
        ),
        (
            "POST",
            "/v1/embeddings",
            &[("authorization", "Bearer o")],
            "openai",
            "/v1/embeddings",
        ),
        (
            "DELETE",
            "/v1/files/file-1",
            &[("api-key", "az")],
            "openai",
            "/v1/files/file-1",
        ),
        (
            "GET",
            "/v1/models",
            &[("x-api-key", "a"), ("anthropic-version", "2023-06-01")],
            "anthropic",
            "/v1/models",
        ),
        (
            "GET",
            "/v1beta/models?key=g",
            &[],
            "google",
            "/v1beta/models?key=g",
        ),
        ("GET", "/v1/models?key=g", &[], "google", "/v1/models?key=g"),
        (
            "GET",
            "/v1beta/models",
            &[("x-goog-api-key", "g")],
            "google",
            "/v1beta/models",
        ),
        (
            "POST",
            "/v1beta/models/text-embedding-004:embedContent",
            &[("x-goog-api-key", "g")],
            "google",
            "/v1beta/models/text-embedding-004:embedContent",
        ),
        (
            "POST",
            "/upload/v1beta/files?key=g",
            &[],
            "google",
            "/upload/v1beta/files?key=g",
        ),
        (
            "GET",
            "/v1alpha/models/gemini-2.5-pro",
            &[("authorization", "Bearer oauth")],
            "google",
            "/v1alpha/models/gemini-2.5-pro",
        ),
    ];
    for (n, (verb, path, headers, to, at)) in cases.iter().enumerate() {
        let res = send(&locked, verb, path, headers).await;
        assert_eq!(res.status(), 200, "{verb} {path}");
        let seen = providers.seen().await;
        assert_eq!(seen.len(), n + 1, "{verb} {path}");
        let hit = seen
            .iter()
            .find(|(name, m, p, _)| name == to && m == verb && p == at);
        let (_, _, _, got) = hit.unwrap_or_else(|| panic!("{verb} {path} at {to}: {seen:?}"));
        for (k, v) in headers.iter() {
            assert_eq!(got[*k], *v, "{verb} {path}: its own credential went");
        }
    }
}

#[tokio::test]
async fn a_key_never_reaches_another_provider_in_any_mode() {
    let providers = Providers::start().await;
    let gemini = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let messages = json!({"model": "m", "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi"}]});
    let cases: [(&str, &str, Value, Headers); 8] = [
        ("GET", "/v1beta/models", Value::Null, &[("x-api-key", "a")]),
        (
            "GET",
            "/v1beta/models",
            Value::Null,
            &[("anthropic-version", "2023-06-01")],
        ),
        (
            "GET",
            "/v1/models",
            Value::Null,
            &[("anthropic-version", "2023-06-01"), ("x-goog-api-key", "g")],
        ),
        (
            "POST",
            "/v1/chat/completions",
            chat.clone(),
            &[("x-goog-api-key", "g")],
        ),
        (
            "POST",
            "/v1/chat/completions?key=g",
            chat,
            &[("authorization", "Bearer o")],
        ),
        (
            "POST",
            "/v1/messages",
            messages,
            &[("x-goog-api-key", "g"), ("anthropic-version", "2023-06-01")],
        ),
        (
            "POST",
            "/v1beta/models/gemini-2.5-pro:generateContent",
            gemini.clone(),
            &[("x-api-key", "a")],
        ),
        (
            "POST",
            "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
            gemini,
            &[("api-key", "az")],
        ),
    ];
    for mode in ["native", "code"] {
        let proxy = providers.proxy(&[("CODEMODE_MODE", mode)]).await;
        for (verb, path, body, headers) in &cases {
            let mut req = proxy.http.request(verb.parse().unwrap(), proxy.url(path));
            for (k, v) in headers.iter() {
                req = req.header(*k, *v);
            }
            if !body.is_null() {
                req = req.json(body);
            }
            let res = req.send().await.unwrap();
            let what = format!("{mode}: {verb} {path} {headers:?}");
            assert_eq!(res.status(), 400, "{what}");
            let message = refusal(res, &what).await;
            assert!(
                message.contains("reaches only its own provider"),
                "{what}: {message}"
            );
        }
    }
    assert_eq!(
        providers.seen().await.len(),
        0,
        "no provider heard a foreign key"
    );
}

#[tokio::test]
async fn a_method_override_is_refused_where_it_would_skip_the_judge() {
    let providers = Providers::start().await;
    let locked = providers.proxy(LOCKED).await;
    let native = providers.proxy(&[("CODEMODE_MODE", "native")]).await;
    let tuned = "/v1beta/tunedModels/t:generateContent";
    let override_post = [("x-goog-api-key", "g"), ("x-http-method-override", "POST")];
    for verb in ["PUT", "GET", "PATCH"] {
        let res = send(&locked, verb, tuned, &override_post).await;
        refusal(res, &format!("{verb} {tuned}")).await;
    }
    // On an open route too: the provider would serve another method.
    let res = send(&locked, "GET", "/v1beta/models/m", &override_post).await;
    assert_eq!(res.status(), 400);
    // On a judged route in any mode, with or without a body (`GET` is
    // no method of Gemini's routes: a 405 there).
    let judged = "/v1beta/models/gemini-2.5-pro:generateContent";
    for proxy in [&locked, &native] {
        for (verb, status) in [("HEAD", 400), ("OPTIONS", 400), ("GET", 405)] {
            let res = proxy
                .http
                .request(verb.parse().unwrap(), proxy.url(judged))
                .header("x-goog-api-key", "g")
                .header("x-http-method", "POST")
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), status, "{verb}");
            if verb == "OPTIONS" {
                let message = refusal(res, judged).await;
                assert!(message.contains("x-http-method"), "{message}");
            }
        }
    }
    assert_eq!(providers.seen().await.len(), 0);
    // An override naming the method itself changes nothing.
    let res = send(
        &locked,
        "GET",
        "/v1beta/models",
        &[("x-goog-api-key", "g"), ("x-http-method-override", "get")],
    )
    .await;
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn a_judged_body_with_a_content_encoding_is_a_415_in_its_routes_shape() {
    let providers = Providers::start().await;
    let proxy = providers.proxy(LOCKED).await;
    let plain = br#"{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "contents": [{"role": "user", "parts": [{"text": "hi"}]}], "input": "hi"}"#;
    for (path, headers) in [
        ("/v1/chat/completions", own_headers("/v1/chat/completions")),
        ("/v1/responses", own_headers("/v1/responses")),
        ("/v1/messages", own_headers("/v1/messages")),
        (
            "/v1beta/models/gemini-2.5-pro:generateContent",
            own_headers("/v1beta"),
        ),
    ] {
        for coding in ["gzip", "br", "deflate, gzip"] {
            let mut req = proxy
                .http
                .post(proxy.url(path))
                .header("content-type", "application/json")
                .header("content-encoding", coding)
                .body(plain.to_vec());
            for (k, v) in &headers {
                req = req.header(*k, *v);
            }
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 415, "{path} {coding}");
            let message = refusal_any_status(res, path).await;
            assert!(message.contains("content-encoding"), "{path}: {message}");
        }
    }
    assert_eq!(
        providers.seen().await.len(),
        0,
        "never forwarded with a false label"
    );
}

/// Like [`refusal`] for a status it does not list (415).
async fn refusal_any_status(res: reqwest::Response, what: &str) -> String {
    let err: Value = res.json().await.unwrap();
    if what.contains("/v1beta") {
        assert_eq!(err["error"]["status"], "INVALID_ARGUMENT", "{what}: {err}");
        assert_eq!(
            err["error"]["details"][0]["reason"],
            "unsupported_content_encoding"
        );
    } else if what.contains("/v1/messages") {
        assert_eq!(err["type"], "error", "{what}: {err}");
    } else {
        assert_eq!(
            err["error"]["code"], "unsupported_content_encoding",
            "{what}: {err}"
        );
    }
    error_message(&err).to_owned()
}

/// A Google client whose key rides in `?key=` (no `x-goog-api-key`) reads
/// every refusal in Google's shape, on Google's `/v1` as on `/v1beta`
/// (docs/errors.md): the key names the provider.
#[tokio::test]
async fn a_google_key_in_the_query_gets_googles_shape_on_every_refusal() {
    let providers = Providers::start().await;
    let locked = providers.proxy(LOCKED).await;
    for (verb, path) in [
        ("POST", "/v1/interactions/v1_i/cancel?key=k"),
        ("GET", "/v1/interactions/v1_i?key=k"),
        ("POST", "/v1beta/cachedContents?key=k"),
        ("POST", "/v1/models/gemini-2.5-pro:countTokens/x?key=k"),
        ("GET", "/v1/models/gemini-2.5-pro:countTokens?key=k"),
        ("DELETE", "/v1/models/gemini-2.5-pro:generateContent?key=k"),
        ("POST", "/v1/tunedModels/t:generateContent?key=k"),
    ] {
        let res = send(&locked, verb, path, &[]).await;
        let status = res.status().as_u16();
        assert!(matches!(status, 403 | 405), "{verb} {path}: {status}");
        let err: Value = res.json().await.unwrap();
        assert_eq!(err["error"]["code"], status, "{verb} {path}: {err}");
        assert!(
            err["error"]["status"].is_string(),
            "Google's shape, {verb} {path}: {err}"
        );
    }
    assert_eq!(providers.seen().await.len(), 0);
}
