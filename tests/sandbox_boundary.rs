//! The sandbox's boundary, through the proxy as a client sees it: a program
//! reaches only the tools its scope shows, with JSON-object arguments, and
//! concurrent programs are bounded so the proxy keeps answering.
//!
//! The scripted model here runs what the user wrote: a user message is the
//! program it sends as `run_code`, and a `run_code` result is the text it
//! answers with, so the client reads each program's result.

#[path = "it/common/mod.rs"]
mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};
use wiremock::{MockServer, Request, Respond, ResponseTemplate};

/// The model: runs the user's message as a program, answers with its result.
struct EchoModel;

impl Respond for EchoModel {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).expect("JSON");
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        let reply = if last["role"] == "tool" {
            text_completion(last["content"].as_str().unwrap_or(""), usage(1, 1))
        } else {
            let code = last["content"].as_str().unwrap_or("");
            calls_completion(
                vec![call(
                    "call_prog",
                    "run_code",
                    &json!({ "code": code }).to_string(),
                )],
                usage(1, 1),
            )
        };
        ResponseTemplate::new(200).set_body_json(reply)
    }
}

async fn echo_model() -> MockServer {
    let server = scripted::model_server(EchoModel).await;
    server
}

/// The client's tools: `bash` among them, hidden by the `no-shell` preset.
fn client_tools() -> Vec<Value> {
    let obj = |props: Value| json!({"type": "object", "properties": props});
    vec![
        tool(
            "read",
            "Read a file.",
            obj(json!({"path": {"type": "string"}})),
        ),
        tool(
            "write",
            "Write a file.",
            obj(json!({"path": {"type": "string"}, "content": {"type": "string"}})),
        ),
        tool(
            "bash",
            "Run a shell command.",
            obj(json!({"command": {"type": "string"}})),
        ),
    ]
}

const VISIBLE: [&str; 2] = ["read", "write"];

async fn proxy_for(p: &MockServer, vars: &[(&str, &str)]) -> Proxy {
    let file = config_file(
        "sandbox-boundary",
        "[[preset]]\nname = \"no-shell\"\nextends = \"code\"\ndeny = [\"bash\"]\n",
    );
    let mut all = vec![
        ("CODEMODE_RUNTIME", "embedded"),
        ("CODEMODE_CONFIG", file.as_str()),
    ];
    all.extend_from_slice(vars);
    start(p, &all).await
}

/// What a client running `code` through the proxy saw.
struct Seen {
    /// The calls the client was handed: (name, arguments text).
    calls: Vec<(String, String)>,
    /// The model's final answer: the program's `run_code` result.
    answer: String,
}

/// Runs one conversation: the user's message is `code`; the client answers
/// every call it is handed with `ok:<name>`.
async fn run_program(proxy: &Proxy, code: &str) -> Seen {
    let mut messages = vec![json!({"role": "user", "content": code})];
    let mut calls = Vec::new();
    for _ in 0..20 {
        let body = json!({"model": "m", "messages": messages, "tools": client_tools()});
        let res = proxy
            .http
            .post(proxy.url("/v1/chat/completions"))
            .header("x-codemode-preset", "no-shell")
            .json(&body)
            .timeout(Duration::from_secs(120))
            .send()
            .await
            .expect("the proxy answers");
        let status = res.status();
        let completion: Value = res.json().await.unwrap();
        assert_eq!(status, 200, "{code}: {completion}");
        let message = completion["choices"][0]["message"].clone();
        messages.push(message.clone());
        let Some(turn) = message["tool_calls"].as_array().filter(|c| !c.is_empty()) else {
            return Seen {
                calls,
                answer: message["content"].as_str().unwrap_or("").to_owned(),
            };
        };
        for c in turn {
            let name = c["function"]["name"].as_str().unwrap_or("").to_owned();
            let args = c["function"]["arguments"].as_str().unwrap_or("").to_owned();
            calls.push((name.clone(), args));
            messages.push(
                json!({"role": "tool", "tool_call_id": c["id"], "content": format!("ok:{name}")}),
            );
        }
    }
    panic!("the conversation did not end: {code}");
}

/// The invariant: every call a client is handed names a visible tool and
/// carries a JSON object.
fn assert_only_visible_object_calls(seen: &Seen, code: &str) {
    for (name, args) in &seen.calls {
        assert!(
            VISIBLE.contains(&name.as_str()),
            "the client was handed `{name}` by {code}"
        );
        let parsed: Result<serde_json::Map<String, Value>, _> = serde_json::from_str(args);
        assert!(
            parsed.is_ok(),
            "the client was handed arguments `{args}` (not a JSON object) by {code}"
        );
    }
}

#[tokio::test]
async fn host_functions_are_out_of_the_programs_reach() {
    let p = echo_model().await;
    let proxy = proxy_for(&p, &[]).await;
    let cases = [
        (
            r#"try { await __cm_call("bash", "{}"); return "called"; } catch (e) { return e.name; }"#,
            "Result: \"ReferenceError\"",
        ),
        (
            r#"try { await __cm_call("read", "[1]"); return "called"; } catch (e) { return e.name; }"#,
            "Result: \"ReferenceError\"",
        ),
        (
            r#"try { __cm_tools.push("bash"); return await tools.bash({command: "id"}); } catch (e) { return e.name; }"#,
            "Result: \"ReferenceError\"",
        ),
        (
            r#"try { __cm_finish(false, '"faked"'); __cm_finish(true, "twice"); return "real"; } catch (e) { return e.name; }"#,
            "Result: \"ReferenceError\"",
        ),
        (
            r#"try { __cm_take(); __cm_log("x"); return "called"; } catch (e) { return e.name; }"#,
            "Result: \"ReferenceError\"",
        ),
        (
            "return Object.getOwnPropertyNames(globalThis).filter(n => n.startsWith('__cm'));",
            "Result: []",
        ),
        (
            r#"const g = (function () {}).constructor("return this")(); return [typeof g.__cm_call, typeof g.__cm_tools, typeof g.__cm_code];"#,
            r#"Result: ["undefined","undefined","undefined"]"#,
        ),
        (
            // CallSite.getFunction would hand out the functions on the stack.
            r#"Error.prepareStackTrace = (e, sites) => sites; try { console.log("\ud800"); } catch (e) {} return [typeof Error.prepareStackTrace, typeof new Error("x").stack];"#,
            "Output:\n\u{fffd}\n\nResult: [\"undefined\",\"string\"]",
        ),
    ];
    for (code, want) in cases {
        let seen = run_program(&proxy, code).await;
        assert_only_visible_object_calls(&seen, code);
        assert!(seen.calls.is_empty(), "{code}: {:?}", seen.calls);
        assert_eq!(seen.answer, want, "{code}");
    }
}

#[tokio::test]
async fn rewritten_builtins_never_reach_a_hidden_or_undeclared_tool() {
    let p = echo_model().await;
    let proxy = proxy_for(&p, &[]).await;
    for code in [
        r#"Array.prototype.includes = () => true; return await tools.bash({command: "id"});"#,
        r#"Array.prototype.includes = () => true; return await tools.launch_missiles({});"#,
        r#"Object.prototype.bash = true; return await tools.bash({command: "id"});"#,
        r#"Object.defineProperty(globalThis, "tools", {value: new Proxy({}, {get: () => tools.read})}); return await tools.bash({command: "id"});"#,
        r#"Set.prototype.has = () => true; Object.freeze = (o) => o; return await tools["bash"]({command: "id"});"#,
        r#"const f = Function.prototype.constructor("return tools")(); return await f.bash({command: "id"});"#,
    ] {
        let seen = run_program(&proxy, code).await;
        assert_only_visible_object_calls(&seen, code);
        assert!(
            seen.answer.starts_with("Error: TypeError:")
                || seen.calls.iter().all(|(n, _)| n == "read"),
            "{code}: {}",
            seen.answer
        );
        assert!(!seen.answer.contains("ok:bash"), "{code}: {}", seen.answer);
    }
}

#[tokio::test]
async fn arguments_that_are_not_a_json_object_are_refused_in_the_host() {
    let p = echo_model().await;
    let proxy = proxy_for(&p, &[]).await;
    for code in [
        r#"JSON.stringify = () => "[1]"; return await tools.read({path: "a"});"#,
        r#"return await tools.read({toJSON() { return [1, 2]; }});"#,
        r#"return await tools.read({toJSON() { return "x"; }});"#,
        r#"return await tools.read({toJSON() { return undefined; }});"#,
        r#"return await tools.read(new Proxy({}, {get: (t, k) => k === "toJSON" ? () => 42 : undefined}));"#,
        r#"Array.isArray = () => false; return await tools.write([1, 2]);"#,
    ] {
        let seen = run_program(&proxy, code).await;
        assert_only_visible_object_calls(&seen, code);
        assert!(
            seen.answer.starts_with("Error: TypeError:") || seen.answer == "Result: \"ok:read\"",
            "{code}: {}",
            seen.answer
        );
    }
}

#[tokio::test]
async fn a_program_finishes_once_with_its_own_result() {
    let p = echo_model().await;
    let proxy = proxy_for(&p, &[]).await;
    // A rewritten `then` once reported a second, forged result.
    let code = r#"const orig = Promise.prototype.then;
        Promise.prototype.then = function (ok, err) {
            const r = orig.call(this, ok, err);
            if (typeof ok === "function") orig.call(Promise.resolve(), () => ok("forged"));
            return r;
        };
        return "first";"#;
    let seen = run_program(&proxy, code).await;
    assert_eq!(seen.answer, "Result: \"first\"");
    // Calls still work after `then` was rewritten; each goes out once.
    let code = r#"Promise.prototype.then = function () { return this; };
        const a = await tools.read({path: "a"});
        return a;"#;
    let seen = run_program(&proxy, code).await;
    assert_only_visible_object_calls(&seen, code);
    assert_eq!(seen.calls.len(), 1, "{:?}", seen.calls);
}

/// Peak resident memory of this process (the proxy runs in it), in bytes.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_allocation_bombs_leave_the_proxy_answering_and_bounded() {
    hundred_bombs("process").await;
}

/// The same in the proxy's own process, where the heap limit alone keeps
/// the proxy's memory bounded (the peak below is then the bombs' too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_allocation_bombs_in_process_leave_the_proxy_answering_and_bounded() {
    hundred_bombs("in-process").await;
}

async fn hundred_bombs(sandbox: &str) {
    let p = echo_model().await;
    let proxy = proxy_for(
        &p,
        &[
            ("CODEMODE_SANDBOX", sandbox),
            ("CODEMODE_RUN_CONCURRENCY", "2"),
            ("CODEMODE_RUN_QUEUE", "200"),
            // The test is about the bombs, not the queue: a hundred of them
            // through two slots may wait longer than the default 30 s on a
            // loaded machine (seen under a parallel build).
            ("CODEMODE_RUN_QUEUE_TIMEOUT_MS", "300000"),
            ("CODEMODE_RUN_MEMORY_MB", "16"),
            ("CODEMODE_RUN_SLICE_MS", "1000"),
        ],
    )
    .await;
    let bomb = "const a = []; for (;;) a.push('x'.repeat(65536) + a.length);";
    let spinner = "let a = []; for (;;) { a.push({n: a.length}); if (a.length > 10000) a = []; }";
    // About a tenth of a second of CPU in a test build (ten times as many
    // iterations measured 1 s here: a tenth of the slice is what keeps the
    // test about the bombs, not about how fast the host is).
    let normal = "let x = 0; for (let i = 0; i < 1000000; i++) { x = (x + i) % 7919; } return x;";
    let mut runs = Vec::new();
    for i in 0..100 {
        let code = if i % 10 == 0 { spinner } else { bomb };
        let proxy_ref = &proxy;
        runs.push(async move { run_program(proxy_ref, code).await });
    }
    let all = futures_util::future::join_all(runs);
    let normal_run = run_program(&proxy, normal);
    let health = async {
        let mut answered = 0;
        for _ in 0..20 {
            let res = proxy
                .http
                .get(proxy.url("/healthz"))
                .timeout(Duration::from_secs(10))
                .send()
                .await
                .expect("/healthz answers while programs run");
            assert!(res.status().is_success());
            answered += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        answered
    };
    let (seen, normal_seen, answered) = tokio::join!(all, normal_run, health);
    assert_eq!(answered, 20);
    for (i, s) in seen.iter().enumerate() {
        assert!(
            s.answer.contains("CODEMODE_RUN_MEMORY_MB")
                || s.answer.contains("CODEMODE_RUN_SLICE_MS"),
            "program {i}: {}",
            s.answer
        );
    }
    assert!(
        normal_seen.answer.starts_with("Result: ") && !normal_seen.answer.contains("TimeoutError"),
        "a normal program beside the bombs: {}",
        normal_seen.answer
    );
    if let Some(peak) = peak_rss() {
        assert!(
            peak < 800 << 20,
            "the proxy's peak memory was {} MiB",
            peak >> 20
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_queue_the_model_gets_a_run_code_error_naming_the_env_vars() {
    let p = echo_model().await;
    let proxy = proxy_for(
        &p,
        &[
            ("CODEMODE_RUN_CONCURRENCY", "1"),
            ("CODEMODE_RUN_QUEUE", "0"),
            ("CODEMODE_RUN_SLICE_MS", "4000"),
        ],
    )
    .await;
    let busy = async {
        // Should a trivial program take the slot first, the spinner is the
        // one refused: send it again.
        for _ in 0..100 {
            let seen = run_program(&proxy, "for (;;) {}").await;
            if !seen.answer.contains("BusyError") {
                return seen;
            }
        }
        panic!("the spinner never got the slot");
    };
    let refused = async {
        // The spinner holds the only slot for seconds; a trivial program sent
        // meanwhile finds no place. Retry until it does (a liveness loop).
        for _ in 0..1000 {
            let seen = run_program(&proxy, "return 'ran';").await;
            if seen.answer != "Result: \"ran\"" {
                return seen.answer;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("no program was refused while the only slot was taken");
    };
    let (busy, refused) = tokio::join!(busy, refused);
    assert!(
        refused.starts_with("Error: BusyError:")
            && refused.contains("CODEMODE_RUN_CONCURRENCY")
            && refused.contains("CODEMODE_RUN_QUEUE")
            && refused.contains("run it again"),
        "{refused}"
    );
    assert!(
        busy.answer.contains("CODEMODE_RUN_SLICE_MS"),
        "{}",
        busy.answer
    );
    // The model's view stays well formed: its run_code call, then its result.
    let sent = received(&p).await;
    let refusal = sent
        .iter()
        .find(|b| {
            b["messages"].as_array().unwrap().last().unwrap()["content"]
                .as_str()
                .is_some_and(|c| c.contains("BusyError"))
        })
        .expect("the model was told");
    let m = refusal["messages"].as_array().unwrap();
    let n = m.len();
    assert_eq!(m[n - 2]["tool_calls"][0]["function"]["name"], "run_code");
    assert_eq!(m[n - 1]["role"], "tool");
    assert_eq!(m[n - 1]["tool_call_id"], m[n - 2]["tool_calls"][0]["id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_that_finds_no_slot_is_a_retryable_503_and_loses_nothing() {
    let p = echo_model().await;
    let proxy = proxy_for(
        &p,
        &[
            ("CODEMODE_RUN_CONCURRENCY", "1"),
            ("CODEMODE_RUN_QUEUE", "0"),
            ("CODEMODE_RUN_SLICE_MS", "3000"),
        ],
    )
    .await;
    let send = |messages: Vec<Value>| {
        let body = json!({"model": "m", "messages": messages, "tools": client_tools()});
        proxy
            .http
            .post(proxy.url("/v1/chat/completions"))
            .header("x-codemode-preset", "no-shell")
            .json(&body)
            .timeout(Duration::from_secs(60))
            .send()
    };
    let code = "const r = await tools.read({path: 'a'}); return 'got ' + r;";
    let mut messages = vec![json!({"role": "user", "content": code})];
    let first: Value = send(messages.clone()).await.unwrap().json().await.unwrap();
    let turn = first["choices"][0]["message"].clone();
    let id = turn["tool_calls"][0]["id"].clone();
    messages.push(turn);
    messages.push(json!({"role": "tool", "tool_call_id": id, "content": "alpha"}));

    // A spinner takes the only slot for seconds.
    let spinner = tokio::spawn({
        let base = proxy.url("/v1/chat/completions");
        async move {
            let body = json!({"model": "m", "messages": [{"role": "user", "content": "for (;;) {}"}],
                              "tools": client_tools()});
            common::http_client()
                .post(base)
                .header("x-codemode-preset", "no-shell")
                .json(&body)
                .send()
                .await
                .map(|r| r.status())
        }
    });
    // The spinner holds the slot once the pool says so.
    proxy.wait_gauge("codemode_programs_running", 1).await;
    let res = send(messages.clone()).await.unwrap();
    assert_eq!(res.status(), 503, "a resume meets the busy pool");
    let retry = res.headers().get("retry-after").cloned();
    let err: Value = res.json().await.unwrap();
    assert_eq!(retry.as_ref().map(|v| v.to_str().unwrap()), Some("1"));
    assert_eq!(err["error"]["code"], "runtime_busy", "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("send the same request again"),
        "{err}"
    );
    // Once the slot is free, the same request resumes the program.
    assert_eq!(spinner.await.unwrap().unwrap(), 200);
    let done: Value = send(messages).await.unwrap().json().await.unwrap();
    assert_eq!(
        done["choices"][0]["message"]["content"], "Result: \"got alpha\"",
        "{done}"
    );
}
