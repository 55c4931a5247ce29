//! Running one scenario in one dialect: the provider, the proxy in front of
//! it, the client's requests, and the checks. Each dialect runs the
//! scenario as JSON and as SSE; both runs must meet the expectation, and
//! the two must leave the client with the same text, calls and usage.

use std::time::Duration;

use serde_json::Value;

use crate::common;
use crate::scenarios::model::{
    is_scripted, ClientView, Dialect, ErrExpect, Expect, ProviderView, Reply, Text,
};
use crate::scenarios::provider::Provider;
use crate::scenarios::wire::parse_events;

/// Where `run_code` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    Embedded,
    Client,
}

/// One client request of a scenario: the results it sends for the calls
/// of the previous answer (none for the first), and what it must get.
pub struct Step {
    pub results: Vec<&'static str>,
    pub expect: Expect,
}

type ProviderCheck = Box<dyn Fn(&[ProviderView]) + Send + Sync>;

/// A dialect-neutral scenario.
pub struct Scenario {
    pub mode: &'static str,
    pub runtime: Runtime,
    pub vars: Vec<(&'static str, &'static str)>,
    pub prompt: &'static str,
    pub replies: Vec<Reply>,
    pub steps: Vec<Step>,
    /// Checks the requests the provider got.
    pub provider: ProviderCheck,
}

impl Scenario {
    pub fn new(mode: &'static str, runtime: Runtime) -> Scenario {
        Scenario {
            mode,
            runtime,
            vars: vec![],
            prompt: "Read a.txt",
            replies: vec![],
            steps: vec![],
            provider: Box::new(|_| {}),
        }
    }

    pub fn var(mut self, key: &'static str, value: &'static str) -> Scenario {
        self.vars.push((key, value));
        self
    }

    pub fn replies(mut self, replies: Vec<Reply>) -> Scenario {
        self.replies = replies;
        self
    }

    /// The first request and what it must get.
    pub fn expect(self, expect: Expect) -> Scenario {
        self.then(vec![], expect)
    }

    /// The client sends `results` for the calls it got; what it must get.
    pub fn then(mut self, results: Vec<&'static str>, expect: Expect) -> Scenario {
        self.steps.push(Step { results, expect });
        self
    }

    pub fn provider(mut self, check: impl Fn(&[ProviderView]) + Send + Sync + 'static) -> Scenario {
        self.provider = Box::new(check);
        self
    }
}

/// Runs `scenario` on `dialect` as JSON and as SSE and checks both runs and
/// their agreement; fails with every broken case at once.
pub async fn check(scenario: fn() -> Scenario, dialect: Dialect) {
    let json = tokio::spawn(run(scenario(), dialect, false));
    let sse = tokio::spawn(run(scenario(), dialect, true));
    let (json, sse) = (outcome(json.await), outcome(sse.await));
    let mut failures = Vec::new();
    if let Err(e) = &json {
        failures.push(format!("{dialect:?} JSON: {e}"));
    }
    if let Err(e) = &sse {
        failures.push(format!("{dialect:?} SSE: {e}"));
    }
    if let (Ok(json), Ok(sse)) = (&json, &sse) {
        for (i, (j, s)) in json.iter().zip(sse).enumerate() {
            if j.comparable() != s.comparable() {
                failures.push(format!(
                    "{dialect:?} JSON != SSE, request {}:\n  JSON {:?}\n  SSE  {:?}",
                    i + 1,
                    j.comparable(),
                    s.comparable()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}\n", failures.join("\n"));
}

fn outcome(
    joined: Result<Result<Vec<ClientView>, String>, tokio::task::JoinError>,
) -> Result<Vec<ClientView>, String> {
    match joined {
        Ok(r) => r,
        Err(e) if e.is_panic() => {
            let p = e.into_panic();
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {msg}"))
        }
        Err(e) => Err(format!("the run was cancelled: {e}")),
    }
}

/// One run: every step's request, its checks, then the provider's check.
async fn run(s: Scenario, d: Dialect, stream: bool) -> Result<Vec<ClientView>, String> {
    let provider = Provider::start(d, s.replies.clone()).await;
    let base = provider.base();
    let host = provider.host();
    let runtime = match s.runtime {
        Runtime::Embedded => "embedded",
        Runtime::Client => "client",
    };
    let mut vars = vec![
        ("CODEMODE_MODE", s.mode),
        ("CODEMODE_RUNTIME", runtime),
        ("CODEMODE_ANTHROPIC_UPSTREAM", base.as_str()),
        ("CODEMODE_GEMINI_UPSTREAM", host.as_str()),
    ];
    vars.extend(s.vars.iter().copied());
    let proxy = common::start_with(common::config(&base, &vars)).await;
    let mut body = d.request(s.prompt, s.runtime == Runtime::Client, stream);
    let mut views: Vec<ClientView> = Vec::new();
    for (i, step) in s.steps.iter().enumerate() {
        if let Some(last) = views.last() {
            body = d.continued(&body, last, &step.results);
        }
        let view = send(&proxy, d, &body, stream)
            .await
            .map_err(|e| format!("request {}: {e}", i + 1))?;
        meets(&step.expect, &view, d, stream)
            .map_err(|e| format!("request {}: {e}\n  the client got: {:?}", i + 1, view.raw))?;
        views.push(view);
    }
    let seen = provider.received().await;
    (s.provider)(&seen);
    Ok(views)
}

const LIMIT: Duration = Duration::from_secs(30);

/// Sends one request; what the client makes of the answer.
async fn send(
    proxy: &common::Proxy,
    d: Dialect,
    body: &Value,
    stream: bool,
) -> Result<ClientView, String> {
    let mut req = proxy.http.post(proxy.url(d.path(stream))).json(body);
    for (k, v) in d.headers() {
        req = req.header(*k, *v);
    }
    let res = tokio::time::timeout(LIMIT, req.send())
        .await
        .map_err(|_| "no answer within 30 s".to_owned())?
        .map_err(|e| format!("the connection was dropped before an answer: {e:?}"))?;
    let status = res.status().as_u16();
    let header = |name: &str| {
        res.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let content_type = header("content-type").unwrap_or_default();
    let retry_after = header("retry-after");
    let bytes = tokio::time::timeout(LIMIT, res.bytes())
        .await
        .map_err(|_| format!("{status}: the body did not end within 30 s"))?
        .map_err(|e| format!("{status}: the body broke off (connection dropped): {e:?}"))?;
    let text = String::from_utf8_lossy(&bytes);
    let raw: String = text.chars().take(1500).collect();
    let mut view = if !(200..300).contains(&status) {
        let mut error = d.http_error(status, &bytes);
        error.retry_after = retry_after;
        ClientView {
            error: Some(error),
            ..ClientView::default()
        }
    } else if content_type.starts_with("text/event-stream") {
        let events = parse_events(&bytes);
        d.check_stream(&events)
            .map_err(|e| format!("the stream is not well formed: {e}\n  stream: {raw}"))?;
        crate::conformance::check_events(d, &events)
            .map_err(|e| format!("the stream is not the provider's shape: {e}\n  stream: {raw}"))?;
        d.reduce_sse(&events)
    } else {
        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if !v.is_object() {
            return Err(format!(
                "a {status} whose body is no JSON object ({content_type}): {raw}"
            ));
        }
        crate::conformance::check_json(d, &v)
            .map_err(|e| format!("the answer is not the provider's shape: {e}\n  body: {raw}"))?;
        d.reduce_json(&v)
    };
    view.status = status;
    view.raw = raw;
    Ok(view)
}

/// Whether `view` is what `e` expects of this wire.
fn meets(e: &Expect, view: &ClientView, d: Dialect, stream: bool) -> Result<(), String> {
    let wanted = if stream { &e.error_sse } else { &e.error_json };
    match (wanted, &view.error) {
        (None, Some(err)) => return Err(format!("unexpected error: {err:?}")),
        (None, None) if view.status != 200 => {
            return Err(format!("status {}, expected 200", view.status))
        }
        (Some(w), None) => {
            return Err(format!(
                "expected the error {w:?}, got status {} without one",
                view.status
            ))
        }
        (Some(w), Some(err)) => error_meets(w, err, d)?,
        (None, None) => {}
    }
    let text_ok = match &e.text {
        Text::Exact(t) => view.text == *t,
        Text::Prefix(p) => view.text.starts_with(p),
    };
    if !text_ok {
        return Err(format!("text {:?}, expected {:?}", view.text, e.text));
    }
    let calls: Vec<(&str, &Value)> = view
        .calls
        .iter()
        .map(|c| (c.name.as_str(), &c.args))
        .collect();
    let expected: Vec<(&str, &Value)> = e.calls.iter().map(|(n, a)| (*n, a)).collect();
    if calls != expected {
        return Err(format!("calls {calls:?}, expected {expected:?}"));
    }
    if e.minted_ids {
        if let Some(c) = view.calls.iter().find(|c| is_scripted(&c.id)) {
            return Err(format!("call id {:?} is the provider's, not minted", c.id));
        }
    }
    if let Some(id) = &view.answer_id {
        if e.minted_ids == is_scripted(id) {
            let whose = if e.minted_ids {
                "minted"
            } else {
                "the provider's"
            };
            return Err(format!("answer id {id:?}, expected {whose}"));
        }
    }
    if view.usage != e.usage {
        return Err(format!("usage {:?}, expected {:?}", view.usage, e.usage));
    }
    Ok(())
}

fn error_meets(
    w: &ErrExpect,
    err: &crate::scenarios::model::ErrorView,
    d: Dialect,
) -> Result<(), String> {
    let fail = |why: &str| Err(format!("{why}: expected {w:?}, got {err:?}"));
    match *w {
        ErrExpect::Relayed {
            status,
            retry_after,
        } => {
            let body: Value = serde_json::from_str(&err.body).unwrap_or(Value::Null);
            if err.in_stream || err.status != status {
                return fail("not the provider's status");
            }
            if body != d.error_body(status) {
                return fail("not the provider's body");
            }
            if err.retry_after.as_deref() != retry_after {
                return fail("not the provider's retry-after");
            }
        }
        ErrExpect::Http { statuses, codes } => {
            if err.in_stream || !statuses.contains(&err.status) {
                return fail("not an error status");
            }
            if !err.shaped {
                return fail("not in the dialect's error shape");
            }
            let code = err.code.as_deref().unwrap_or("");
            if d.anthropic() {
                // Anthropic's shape has no code: its type follows the status.
                if err.kind.as_deref() != Some(anthropic_type(err.status)) {
                    return fail("not the Anthropic type of its status");
                }
            } else if !codes.contains(&code) {
                return fail("another code");
            } else if (d == Dialect::Gemini || d.interactions())
                && err.kind.as_deref() != Some(google_status(err.status))
            {
                return fail("not the google.rpc.Code name of its status");
            }
        }
        ErrExpect::Event { code, mentions } => {
            if !err.in_stream {
                return fail("not an event of the stream");
            }
            if !err.shaped {
                return fail("not in the dialect's stream error shape");
            }
            if d.anthropic() {
                if err.kind.as_deref() != Some(anthropic_stream_type(code)) {
                    return fail("not the Anthropic type of its code");
                }
            } else if err.code.as_deref() != Some(code) {
                return fail("another code");
            } else if d == Dialect::Gemini
                && err.kind.as_deref() != Some(google_status(stream_status(code)))
            {
                return fail("not the google.rpc.Code name of its code's status");
            }
            if !err.message.contains(mentions) {
                return fail("the message does not say it");
            }
        }
    }
    Ok(())
}

/// Anthropic's error type for an HTTP status, as docs/errors.md lists it.
fn anthropic_type(status: u16) -> &'static str {
    match status {
        400 | 405 | 409 | 415 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        504 => "timeout_error",
        _ => "api_error",
    }
}

/// Anthropic's error type for a stream's final error event, by the code
/// the other dialects carry (docs/errors.md): the type its status would have.
fn anthropic_stream_type(code: &str) -> &'static str {
    match code {
        "upstream_stream_idle" | "upstream_timeout" => "timeout_error",
        "runtime_busy" | "store_unavailable" => "overloaded_error",
        _ => "api_error",
    }
}

/// The HTTP status of a stream's final error event, by its code, as
/// docs/errors.md lists the code's status.
fn stream_status(code: &str) -> u16 {
    match code {
        "upstream_stream_idle" | "upstream_timeout" => 504,
        "runtime_busy" | "store_unavailable" => 503,
        _ => 502,
    }
}

/// The `google.rpc.Code` name Google's APIs give an HTTP status.
pub fn google_status(status: u16) -> &'static str {
    match status {
        400 | 405 | 413 | 415 | 422 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

/// For each named scenario function, a module of six tests (`chat`,
/// `responses`, `messages`, `gemini`, `interactions` and
/// `interactions_stored`), each running it as JSON and as SSE.
#[macro_export]
macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            use $crate::scenarios::model::Dialect;

            #[tokio::test]
            async fn chat() {
                $crate::scenarios::harness::check(super::$name, Dialect::Chat).await;
            }

            #[tokio::test]
            async fn responses() {
                $crate::scenarios::harness::check(super::$name, Dialect::Responses).await;
            }

            #[tokio::test]
            async fn messages() {
                $crate::scenarios::harness::check(super::$name, Dialect::Messages).await;
            }

            #[tokio::test]
            async fn gemini() {
                $crate::scenarios::harness::check(super::$name, Dialect::Gemini).await;
            }

            #[tokio::test]
            async fn interactions() {
                $crate::scenarios::harness::check(super::$name, Dialect::Interactions).await;
            }

            #[tokio::test]
            async fn interactions_stored() {
                $crate::scenarios::harness::check(super::$name, Dialect::InteractionsStored)
                    .await;
            }
        }
    )*};
}
