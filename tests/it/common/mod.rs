//! Shared harness: a wiremock provider, the proxy on port 0, request builders.
#![allow(dead_code)]

pub mod agent;
pub mod agent_driver;
pub mod binary;
pub mod claude;
pub mod codex;
pub mod forward_proxy;
pub mod gemini_cli;
pub mod gemini_model;
pub mod inspector;
pub mod interactions_model;
pub mod messages_model;
pub mod needs;
pub mod raw_provider;
pub mod redis_ha;
pub mod redis_server;
pub mod replica_turns;
pub mod responses_model;
pub mod scripted;
pub mod scripted_api;
pub mod sse_client;

/// One `#[tokio::test]` per case, under the case's own name, awaiting the
/// call that runs it (its family's shared driver with the case's
/// settings): `name: call;` a case.
#[macro_export]
macro_rules! async_cases {
    ($($(#[$meta:meta])* $name:ident: $run:expr;)*) => {$(
        $(#[$meta])*
        #[tokio::test]
        async fn $name() {
            $run.await;
        }
    )*};
}

/// The body of the answer to `req` (sent with a test's own client), as text.
pub async fn text_of(req: reqwest::RequestBuilder) -> String {
    req.send().await.unwrap().text().await.unwrap()
}

/// A client for the tests. reqwest is the one the OTLP exporter uses,
/// whose TLS is rustls with no provider chosen: ring, as the proxy's,
/// is installed as the process default first (whichever test comes first).
pub fn http_client() -> reqwest::Client {
    http_client_builder().build().expect("a reqwest client")
}

/// [`http_client`]'s builder, for a test that sets more.
pub fn http_client_builder() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
}

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Mutex;

use codemode_proxy::{server, Config};
use serde_json::{json, Value};
use tokio::sync::oneshot;
use wiremock::{MockServer, Request, Respond, ResponseTemplate};

/// The proxy, serving in this process until dropped.
pub struct Proxy {
    pub addr: SocketAddr,
    pub http: reqwest::Client,
    _stop: oneshot::Sender<()>,
}

impl Proxy {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The proxy's `/metrics` text.
    pub async fn metrics(&self) -> String {
        self.get("/metrics", &[]).await.text().await.unwrap()
    }

    /// GETs `path` with extra headers.
    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
        send(self.http.get(self.url(path)), headers).await
    }

    /// The JSON the proxy answers a GET of `path` with.
    pub async fn get_json(&self, path: &str) -> Value {
        self.get(path, &[]).await.json().await.unwrap()
    }

    /// The value of the series `name` (with its labels, if any) on `/metrics`.
    pub async fn metric(&self, name: &str) -> f64 {
        let text = self.metrics().await;
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
    }

    /// Waits until the proxy has finished `n` requests on judged or
    /// passed-through routes (their ledgers closed: completed, or dropped
    /// by a client that left), as `codemode_requests_total` counts them.
    /// A request's body, and with it any round it could still start, is
    /// gone by then: what a test checks after this cannot still change.
    pub async fn wait_finished(&self, n: u64) {
        self.wait_metric("finished requests", n, false, |line| {
            line.starts_with("codemode_requests_total{") && !line.contains("route=\"admin\"")
        })
        .await
    }

    /// Waits until the gauge `name` (unlabelled) reads `value`.
    pub async fn wait_gauge(&self, name: &str, value: u64) {
        let prefix = format!("{name} ");
        self.wait_metric(name, value, true, |line| line.starts_with(&prefix))
            .await
    }

    /// Waits until the series `pick` chooses in `/metrics` sum to `n`
    /// (`exact`), or to at least `n`.
    async fn wait_metric(&self, what: &str, n: u64, exact: bool, pick: impl Fn(&str) -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let text = self.metrics().await;
            let seen: u64 = text
                .lines()
                .filter(|l| pick(l))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .map(|v| v as u64)
                .sum();
            if seen == n || (!exact && seen > n) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: {seen}, waited for {n}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// POSTs `body` to /v1/chat/completions with extra headers.
    pub async fn chat(&self, body: &Value, headers: &[(&str, &str)]) -> reqwest::Response {
        self.post("/v1/chat/completions", body, headers).await
    }

    /// The JSON the proxy answers `body` on /v1/chat/completions with.
    pub async fn chat_json(&self, body: &Value, headers: &[(&str, &str)]) -> Value {
        self.chat(body, headers).await.json().await.unwrap()
    }

    /// The bytes of the proxy's answer to `body` on /v1/chat/completions,
    /// a stream read to its end.
    pub async fn chat_bytes(&self, body: &Value, headers: &[(&str, &str)]) -> bytes::Bytes {
        self.chat(body, headers).await.bytes().await.unwrap()
    }

    pub async fn post(
        &self,
        path: &str,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> reqwest::Response {
        send(self.http.post(self.url(path)).json(body), headers).await
    }

    /// POSTs `body` as it is, not as JSON (a test's malformed or
    /// hand-written body), with extra headers and no content type but
    /// theirs.
    pub async fn post_raw(
        &self,
        path: &str,
        body: impl Into<reqwest::Body>,
        headers: &[(&str, &str)],
    ) -> reqwest::Response {
        send(self.http.post(self.url(path)).body(body), headers).await
    }
}

async fn send(mut req: reqwest::RequestBuilder, headers: &[(&str, &str)]) -> reqwest::Response {
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.expect("the proxy answers")
}

pub fn config(upstream: &str, vars: &[(&str, &str)]) -> Config {
    let mut map: HashMap<String, String> = HashMap::new();
    map.insert("CODEMODE_UPSTREAM".into(), upstream.into());
    map.insert("CODEMODE_LISTEN".into(), "127.0.0.1:0".into());
    // These tests drive the client runtime; embedded-runtime tests say so.
    map.insert("CODEMODE_RUNTIME".into(), "client".into());
    // Programs run in sandbox workers started from the proxy's binary; the
    // library inside this test binary cannot find it by itself.
    map.insert(
        "CODEMODE_SANDBOX_WORKER".into(),
        env!("CARGO_BIN_EXE_codemode-proxy").into(),
    );
    for (k, v) in vars {
        map.insert(k.to_string(), v.to_string());
    }
    Config::from_lookup(|k| map.get(k).cloned()).expect("valid test config")
}

/// Starts the proxy in front of `provider` (its `/v1` is the upstream base).
pub async fn start(provider: &MockServer, vars: &[(&str, &str)]) -> Proxy {
    start_with(config(&format!("{}/v1", provider.uri()), vars)).await
}

pub async fn start_with(config: Config) -> Proxy {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = server::stack(config).unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = server::serve(listener, service, async {
            let _ = rx.await;
        })
        .await;
    });
    Proxy {
        addr,
        http: http_client(),
        _stop: tx,
    }
}

/// Answers with the scripted responses in order; a 500 once they run out.
pub struct Script(Mutex<VecDeque<ResponseTemplate>>);

impl Script {
    pub fn new(responses: impl IntoIterator<Item = ResponseTemplate>) -> Script {
        Script(Mutex::new(responses.into_iter().collect()))
    }
}

impl Respond for Script {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        self.0
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| ResponseTemplate::new(500).set_body_string("script exhausted"))
    }
}

/// A provider whose chat completions answer `responses` in order.
pub async fn provider(responses: impl IntoIterator<Item = Value>) -> MockServer {
    let script = Script::new(
        responses
            .into_iter()
            .map(|v| ResponseTemplate::new(200).set_body_json(v)),
    );
    scripted::model_server(script).await
}

/// Every body the provider received, in order, as JSON.
pub async fn all_bodies(provider: &MockServer) -> Vec<Value> {
    provider
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

/// The chat-completions bodies the provider received, in order.
pub async fn received(provider: &MockServer) -> Vec<Value> {
    provider
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.url.path().ends_with("/chat/completions"))
        .map(|r| serde_json::from_slice(&r.body).expect("the proxy sent JSON"))
        .collect()
}

pub fn tool(name: &str, description: &str, parameters: Value) -> Value {
    json!({"type": "function", "function": {"name": name, "description": description, "parameters": parameters}})
}

/// The file tools every test agent has: read and write.
pub fn read_write_tools() -> Vec<Value> {
    vec![
        tool(
            "read",
            "Read a file.",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        ),
        tool(
            "write",
            "Write a file.",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}),
        ),
    ]
}

/// An agent's tools: read, write, bash and the client's run_code transport.
pub fn agent_tools() -> Vec<Value> {
    let mut tools = read_write_tools();
    tools.extend([
        tool(
            "bash",
            "Run a shell command.",
            json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
        ),
        tool(
            "run_code",
            "Run a JavaScript program.",
            json!({"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}),
        ),
    ]);
    tools
}

pub fn chat_body(messages: Value) -> Value {
    json!({"model": "test-model", "messages": messages, "tools": agent_tools()})
}

pub fn user_chat(text: &str) -> Value {
    chat_body(
        json!([{"role": "system", "content": "You are an agent."}, {"role": "user", "content": text}]),
    )
}

pub fn call(id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

pub fn usage(prompt: u64, completion: u64) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

pub fn calls_completion(calls: Vec<Value>, usage_v: Value) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "test-model",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "tool_calls": calls}}],
        "usage": usage_v,
    })
}

pub fn text_completion(text: &str, usage_v: Value) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "test-model",
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": text}}],
        "usage": usage_v,
    })
}

/// Names of the tools a request body carries on the wire.
pub fn wire_tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// `key` of every entry of the array `list` (tools' names, calls' ids):
/// each entry has it as a string.
pub fn strs<'a>(list: &'a Value, key: &str) -> Vec<&'a str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|entry| entry[key].as_str().unwrap())
        .collect()
}

/// Asserts `res` is a 200 whose body is an event stream.
pub fn assert_event_stream(res: &reqwest::Response) {
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
}

/// The message of an error body (`{"error": {"message": ...}}`).
pub fn error_message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap()
}

/// A provider answering POSTs to `path` with `answer`.
pub async fn mounted(path: &str, answer: impl Respond + 'static) -> MockServer {
    let server = MockServer::start().await;
    mount(&server, "POST", path, answer).await;
    server
}

/// Has `server` answer `method` requests to `path` with `answer`.
pub async fn mount(server: &MockServer, method: &str, path: &str, answer: impl Respond + 'static) {
    wiremock::Mock::given(wiremock::matchers::method(method))
        .and(wiremock::matchers::path(path))
        .respond_with(answer)
        .mount(server)
        .await;
}

/// Names of the tool calls in a completion the client received.
pub fn call_names(completion: &Value) -> Vec<String> {
    completion["choices"][0]["message"]["tool_calls"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| c["function"]["name"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// One SSE `data:` chunk of a streamed completion.
pub fn sse_chunk(id: &str, delta: Value, finish: Option<&str>) -> String {
    let c = json!({"id": id, "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

pub fn sse_usage_chunk(id: &str, prompt: u64, completion: u64) -> String {
    let c = json!({"id": id, "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
                   "usage": usage(prompt, completion)});
    format!("data: {c}\n\n")
}

/// A turn that calls `name` with `args`, text first, usage last.
pub fn sse_call_turn(id: &str, text: &str, name: &str, args: &str, prompt: u64) -> String {
    let mut s = sse_chunk(id, json!({"role": "assistant", "content": text}), None);
    s += &sse_chunk(
        id,
        json!({"tool_calls": [{"index": 0, "id": format!("call_{id}"), "type": "function",
                                           "function": {"name": name, "arguments": ""}}]}),
        None,
    );
    s += &sse_chunk(
        id,
        json!({"tool_calls": [{"index": 0, "function": {"arguments": args}}]}),
        None,
    );
    s += &sse_chunk(id, json!({}), Some("tool_calls"));
    s += &sse_usage_chunk(id, prompt, 7);
    s += "data: [DONE]\n\n";
    s
}

/// Writes a config file for one test and returns its path.
pub fn config_file(name: &str, text: &str) -> String {
    // A file per call: tests of one binary run at once, and one test
    // rewriting a shared file let another's proxy read it half written.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("cm-test-{}-{n}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.toml");
    std::fs::write(&file, text).unwrap();
    file.to_string_lossy().into_owned()
}

/// Stops a proxy binary as an orchestrator does (`SIGTERM`) and waits for
/// it: it shuts down gracefully and writes the log lines it still holds.
pub fn terminate(child: &mut std::process::Child) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

/// Whether `id` is in the shape of the call ids the proxy mints
/// (docs/embedded-runtime.md, "Ids"): `call_` (or `toolu_` on Messages)
/// and 24 letters and digits, as the provider's own ids are.
pub fn is_minted_shape(id: &str) -> bool {
    let body = id
        .strip_prefix("call_")
        .or_else(|| id.strip_prefix("toolu_"));
    body.is_some_and(|b| b.len() == 24 && b.bytes().all(|c| c.is_ascii_alphanumeric()))
}

/// The execution a minted call id names: characters 5 to 21 of its body.
pub fn exec_of(call_id: &str) -> &str {
    assert!(is_minted_shape(call_id), "not a minted id: {call_id}");
    let body = &call_id[call_id.len() - 24..];
    &body[5..21]
}

/// Every string in `text` (JSON) in the shape of a minted call id.
pub fn minted_ids_in(text: &str) -> Vec<String> {
    text.split('"')
        .filter(|s| is_minted_shape(s))
        .map(str::to_owned)
        .collect()
}
