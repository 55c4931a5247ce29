//! The built executable, started with env vars on port 0.

use std::process::{Command, Stdio};

use crate::common::binary::{spawn_proxy, Running};
use crate::common::*;
use serde_json::Value;

fn spawn(vars: &[(&str, &str)]) -> (Running, String) {
    spawn_proxy(vars, Stdio::piped())
}

#[tokio::test]
async fn the_binary_serves_code_mode_on_port_zero() {
    let p = provider([calls_completion(
        vec![call("c1", "run_code", "{}")],
        usage(1, 1),
    )])
    .await;
    let upstream = format!("{}/v1", p.uri());
    let (_child, addr) = spawn(&[
        ("CODEMODE_LISTEN", "127.0.0.1:0"),
        ("CODEMODE_UPSTREAM", &upstream),
        ("CODEMODE_RUNTIME", "client"),
    ]);
    let http = crate::common::http_client();
    let health = http
        .get(format!("http://{addr}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let res = http
        .post(format!("http://{addr}/v1/chat/completions"))
        .json(&user_chat("hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let got: Value = res.json().await.unwrap();
    assert_eq!(call_names(&got), vec!["run_code"]);
    assert_eq!(wire_tool_names(&received(&p).await[0]), vec!["run_code"]);
}

#[test]
fn bad_configuration_stops_start_up_naming_every_variable() {
    let out = Command::new(env!("CARGO_BIN_EXE_codemode-proxy"))
        .env_clear()
        .env("CODEMODE_LISTEN", "not-an-address")
        .env("CODEMODE_MODE", "turbo")
        .env("CODEMODE_UPSTREAM_API_KEY", "sk-very\u{1}secret")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("CODEMODE_LISTEN"), "{err}");
    assert!(err.contains("CODEMODE_MODE"), "{err}");
    assert!(err.contains("CODEMODE_UPSTREAM_API_KEY"), "{err}");
    assert!(!err.contains("secret"), "secrets are never echoed: {err}");
}

#[test]
fn runtime_none_with_a_code_mode_fails_at_start_up() {
    let out = Command::new(env!("CARGO_BIN_EXE_codemode-proxy"))
        .env_clear()
        .env("CODEMODE_RUNTIME", "none")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("CODEMODE_MODE=code"), "{err}");
    assert!(err.contains("`tool_mode` row"), "{err}");
}

#[test]
fn the_demo_runs_the_task_both_ways_without_an_api_key() {
    let out = Command::new(env!("CARGO_BIN_EXE_codemode-proxy"))
        .arg("demo")
        .env_clear()
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("== code mode ==") && text.contains("== native mode =="),
        "{text}"
    );
    assert!(text.contains("assistant calls run_code"), "{text}");
    assert!(
        text.contains("585 lines"),
        "both modes reach the answer: {text}"
    );
    assert!(text.contains("fewer tokens"), "{text}");
    // The README quotes the demo's figures: they are what it prints.
    let figures = text
        .lines()
        .find_map(|l| l.strip_prefix("Code mode used "))
        .expect("the demo's summary line");
    let numbers: Vec<&str> = figures
        .split(|c: char| !c.is_ascii_digit())
        .filter(|n| !n.is_empty())
        .collect();
    let [code_trips, code_tokens, native_trips, native_tokens, ..] = numbers[..] else {
        panic!("four figures in: {figures}");
    };
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let native_tokens: u64 = native_tokens.parse().unwrap();
    let quoted = format!(
        "code mode takes {code_trips} model round trips and {code_tokens} prompt tokens \
         against {native_trips} and {} in native mode",
        thousands(native_tokens)
    );
    assert!(readme.contains(&quoted), "the README should say: {quoted}");
}

/// `5490` as the README writes it, `5,490`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// At the default log level a program's start, its waits and its end are
/// logged, with counts only: no code, arguments or results.
#[tokio::test]
async fn programs_are_logged_at_the_default_level_without_their_data() {
    let code = "const a = await tools.read({path: 'secret-path.txt'}); return a.length;";
    let p = provider([
        calls_completion(
            vec![call(
                "call_p",
                "run_code",
                &serde_json::json!({ "code": code }).to_string(),
            )],
            usage(1, 1),
        ),
        text_completion("done", usage(1, 1)),
    ])
    .await;
    let upstream = format!("{}/v1", p.uri());
    let (mut child, addr) = spawn(&[
        ("CODEMODE_LISTEN", "127.0.0.1:0"),
        ("CODEMODE_UPSTREAM", upstream.as_str()),
        ("CODEMODE_RUNTIME", "embedded"),
        ("CODEMODE_MODE", "code"),
        // The default level, as a user who sets nothing gets it.
        ("RUST_LOG", "info"),
    ]);
    let http = crate::common::http_client();
    let url = format!("http://{addr}/v1/chat/completions");
    let mut messages = vec![serde_json::json!({"role": "user", "content": "go"})];
    let body = |messages: &Vec<Value>| serde_json::json!({"model": "m", "messages": messages, "tools": agent_tools()});
    let turn: Value = http
        .post(&url)
        .json(&body(&messages))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let message = turn["choices"][0]["message"].clone();
    let id = message["tool_calls"][0]["id"].as_str().unwrap().to_owned();
    messages.push(message);
    messages.push(
        serde_json::json!({"role": "tool", "tool_call_id": id, "content": "top-secret-result"}),
    );
    let end = http.post(&url).json(&body(&messages)).send().await.unwrap();
    assert_eq!(end.status(), 200);
    terminate(&mut child.0);
    let mut log = String::new();
    std::io::Read::read_to_string(&mut child.0.stderr.take().unwrap(), &mut log).unwrap();
    for line in [
        "program started",
        "program waits on tool calls",
        "program ended",
    ] {
        assert!(log.contains(line), "`{line}` is logged:\n{log}");
    }
    for secret in ["secret-path", "top-secret-result", "a.length"] {
        assert!(
            !log.contains(secret),
            "`{secret}` stays out of the log:\n{log}"
        );
    }
}

/// The binary's resident set, in bytes.
#[cfg(target_os = "linux")]
fn resident(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kb << 10
}

/// 290 tools of about 11 KB each (3.2 MB of `tools`), named after `set`
/// so no two sets share a plan.
fn large_tool_set(set: usize) -> Value {
    let long = "x".repeat(10_000);
    let tools: Vec<Value> = (0..290)
        .map(|k| {
            serde_json::json!({"type": "function", "function": {
                "name": format!("t{set}_{k}"),
                "description": format!("{set} {k} {long}"),
                "parameters": {"type": "object", "properties": {
                    "a": {"type": "string", "description": &long[..1000]}}}}})
        })
        .collect();
    Value::Array(tools)
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn distinct_large_tool_sets_keep_memory_within_the_plan_budget_and_a_constant() {
    // docs/operations.md, "Memory": resident memory stays within what the
    // budgets hold plus 64 MiB. Each of these plans weighs about 10 MB, so
    // a 24 MiB cache keeps two; the fifty tool sets are each planned once,
    // back to back, and their working copies (several times the 3.2 MB
    // text) are dropped each time. Before evictions ran at each miss and
    // the allocator was given its pages back after each, resident memory
    // grew by 146 MiB in the first twenty (115 MiB with the evictions
    // alone).
    const BUDGET: u64 = 24 << 20;
    const CONSTANT: u64 = 64 << 20;
    let p = provider((0..50).map(|_| text_completion("ok", usage(1, 1)))).await;
    let upstream = format!("{}/v1", p.uri());
    let (child, addr) = spawn(&[
        ("CODEMODE_LISTEN", "127.0.0.1:0"),
        ("CODEMODE_UPSTREAM", &upstream),
        ("CODEMODE_MAX_BODY_BYTES", "16777216"),
        ("CODEMODE_PLAN_CACHE_MB", "24"),
    ]);
    let pid = child.0.id();
    let http = crate::common::http_client();
    let start = resident(pid);
    let mut most = start;
    for set in 0..50 {
        let body = serde_json::json!({
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": large_tool_set(set),
        });
        let res = http
            .post(format!("http://{addr}/v1/chat/completions"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
        most = most.max(resident(pid));
    }
    let metrics = text_of(http.get(format!("http://{addr}/metrics"))).await;
    let plans: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("codemode_memory_store_bytes{store=\"plans\"} "))
        .and_then(|v| v.trim().parse().ok())
        .expect("the plan cache's gauge");
    assert!(plans > 0 && plans <= BUDGET, "plans weigh {plans}");
    let grown = most - start;
    assert!(
        grown <= BUDGET + CONSTANT,
        "resident memory grew by {} MiB over {} MiB at the start (budget {} MiB + {} MiB)",
        grown >> 20,
        start >> 20,
        BUDGET >> 20,
        CONSTANT >> 20
    );
}
