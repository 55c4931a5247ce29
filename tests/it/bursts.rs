//! Bursts and noisy neighbours, through the proxy as clients see them: a
//! burst of programs waits for the sandbox's slots instead of failing, a
//! tenant that floods the proxy does not starve another, a streamed
//! request that waits is kept alive, and a wait that runs out says so.
//!
//! The scripted model runs what the user wrote: a user message is the
//! program it sends as `run_code`, and a `run_code` result is the text it
//! answers with, so each client reads its own program's result.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::scripted::{model_server, serve};
use crate::common::sse_client::reassemble;
use crate::common::*;
use serde_json::{json, Value};
use wiremock::{MockServer, Request, Respond, ResponseTemplate};

struct EchoModel;

impl Respond for EchoModel {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).expect("JSON");
        let last = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .cloned()
            .unwrap_or(Value::Null);
        let message = if last["role"] == "tool" {
            json!({"role": "assistant", "content": last["content"]})
        } else {
            let code = last["content"].as_str().unwrap_or("");
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_prog", "type": "function",
                "function": {"name": "run_code", "arguments": json!({"code": code}).to_string()}
            }]})
        };
        serve(&body, message)
    }
}

async fn proxy_for(p: &MockServer, vars: &[(&str, &str)]) -> Proxy {
    let mut all = vec![("CODEMODE_RUNTIME", "embedded")];
    all.extend_from_slice(vars);
    start(p, &all).await
}

/// What one client's conversation came to.
struct Seen {
    /// The model's final answer: its program's `run_code` result.
    answer: String,
    /// Every body the client read, streams included, as text.
    bodies: String,
}

/// One client: sends `code` as its prompt as `tenant`, answers each call it
/// is handed with `ok:<name>`, until the model answers with text.
async fn converse(proxy: &Proxy, tenant: &str, code: &str, stream: bool) -> Seen {
    let tools = vec![tool(
        "read",
        "Read a file.",
        json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    )];
    let mut messages = vec![json!({"role": "user", "content": code})];
    let mut bodies = String::new();
    for _ in 0..20 {
        let body = json!({"model": "m", "messages": messages, "tools": tools, "stream": stream});
        let res = proxy
            .http
            .post(proxy.url("/v1/chat/completions"))
            .bearer_auth(tenant)
            .json(&body)
            .timeout(Duration::from_secs(300))
            .send()
            .await
            .expect("the proxy answers");
        let status = res.status();
        let bytes = res.bytes().await.expect("the whole body");
        bodies.push_str(&String::from_utf8_lossy(&bytes));
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
        let message = if stream {
            reassemble(&bytes).message()
        } else {
            let completion: Value = serde_json::from_slice(&bytes).unwrap();
            completion["choices"][0]["message"].clone()
        };
        messages.push(message.clone());
        let Some(calls) = message["tool_calls"].as_array().filter(|c| !c.is_empty()) else {
            return Seen {
                answer: message["content"].as_str().unwrap_or("").to_owned(),
                bodies,
            };
        };
        for c in calls {
            let name = c["function"]["name"].as_str().unwrap_or("");
            messages.push(
                json!({"role": "tool", "tool_call_id": c["id"], "content": format!("ok:{name}")}),
            );
        }
    }
    panic!("the conversation did not end: {code}");
}

/// A count from the environment, for running the tests larger by hand.
fn scaled(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_programs_waits_for_slots_and_every_one_is_answered() {
    let n = scaled("CODEMODE_TEST_BURST", 200);
    let p = model_server(EchoModel).await;
    // Two slots and the default queue: more programs than slots at once.
    let proxy = proxy_for(&p, &[("CODEMODE_RUN_CONCURRENCY", "2")]).await;
    let code = "let s = ''; for (let i = 0; i < 5; i++) { s += await tools.read({path: 'f' + i}); } return s.length;";
    let runs = (0..n).map(|i| {
        let proxy = &proxy;
        async move { converse(proxy, "burst", code, i % 2 == 1).await }
    });
    let seen = futures_util::future::join_all(runs).await;
    for (i, s) in seen.iter().enumerate() {
        // Five results of "ok:read" (7 bytes each).
        assert_eq!(s.answer, "Result: 35", "program {i}");
    }
    assert_eq!(proxy.metric("codemode_programs_waiting").await, 0.0);
    assert_eq!(proxy.metric("codemode_programs_running").await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_program_finishes_while_one_tenant_floods() {
    let flood = scaled("CODEMODE_TEST_FLOOD", 16);
    let p = model_server(EchoModel).await;
    let proxy = proxy_for(
        &p,
        &[
            ("CODEMODE_RUN_CONCURRENCY", "1"),
            ("CODEMODE_RUN_SLICE_MS", "250"),
        ],
    )
    .await;
    let finished = Arc::new(AtomicUsize::new(0));
    let noisy = (0..flood).map(|_| {
        let (proxy, finished) = (&proxy, finished.clone());
        async move {
            let seen = converse(proxy, "noisy", "for (;;) {}", false).await;
            finished.fetch_add(1, Ordering::SeqCst);
            seen
        }
    });
    let noisy = futures_util::future::join_all(noisy);
    let quiet = async {
        // Every flooding program has taken a slot or a place in the queue.
        while proxy.metric("codemode_programs_waiting").await + 1.0 < flood as f64 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let seen = converse(&proxy, "quiet", "return 'quiet ran';", false).await;
        (seen, finished.load(Ordering::SeqCst))
    };
    let (noisy, (quiet, noisy_done_before)) = tokio::join!(noisy, quiet);
    assert_eq!(quiet.answer, "Result: \"quiet ran\"");
    // Served in turn: the quiet tenant waited for the running program and
    // at most the one noisy program whose turn came first, not the flood.
    assert!(
        noisy_done_before <= 2,
        "{noisy_done_before} of {flood} flooding programs ended before the quiet tenant's one"
    );
    for s in noisy {
        assert!(s.answer.contains("CODEMODE_RUN_SLICE_MS"), "{}", s.answer);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_program_that_waits_for_a_slot_keeps_its_client_informed() {
    let p = model_server(EchoModel).await;
    let proxy = proxy_for(
        &p,
        &[
            ("CODEMODE_RUN_CONCURRENCY", "1"),
            ("CODEMODE_RUN_SLICE_MS", "1500"),
            ("CODEMODE_STREAM_KEEPALIVE_MS", "100"),
        ],
    )
    .await;
    let spinner = converse(&proxy, "spinner", "for (;;) {}", false);
    let waiting = async {
        while proxy.metric("codemode_programs_running").await < 1.0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        converse(&proxy, "waiter", "return 'after the wait';", true).await
    };
    let (spun, waited) = tokio::join!(spinner, waiting);
    assert!(
        spun.answer.contains("CODEMODE_RUN_SLICE_MS"),
        "{}",
        spun.answer
    );
    assert_eq!(waited.answer, "Result: \"after the wait\"");
    assert!(
        waited
            .bodies
            .contains(": codemode-proxy is working on this answer\n\n"),
        "the waiting stream carried SSE comments: {}",
        waited.bodies
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_whose_wait_runs_out_tells_the_model_to_run_it_again() {
    let p = model_server(EchoModel).await;
    let proxy = proxy_for(
        &p,
        &[
            ("CODEMODE_RUN_CONCURRENCY", "1"),
            ("CODEMODE_RUN_SLICE_MS", "3000"),
            ("CODEMODE_RUN_QUEUE_TIMEOUT_MS", "200"),
        ],
    )
    .await;
    let spinner = converse(&proxy, "spinner", "for (;;) {}", false);
    let refused = async {
        while proxy.metric("codemode_programs_running").await < 1.0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        converse(&proxy, "other", "return 'never';", false).await
    };
    let (_, refused) = tokio::join!(spinner, refused);
    assert!(
        refused.answer.starts_with("Error: BusyError:")
            && refused.answer.contains("CODEMODE_RUN_QUEUE_TIMEOUT_MS")
            && refused.answer.contains("run it again"),
        "{}",
        refused.answer
    );
    assert_eq!(proxy.metric("codemode_programs_waiting").await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distinct_large_tool_sets_keep_the_plan_cache_within_its_budget() {
    let sets = scaled("CODEMODE_TEST_TOOL_SETS", 25);
    let p = model_server(EchoModel).await;
    let budget_mb = 16;
    let proxy = proxy_for(&p, &[("CODEMODE_PLAN_CACHE_MB", "16")]).await;
    for i in 0..sets {
        // About 3 MB of schema text, different in every request.
        let tools: Vec<Value> = (0..30)
            .map(|t| {
                tool(
                    &format!("tool_{i}_{t}"),
                    &format!("set {i}: {}", "d".repeat(100_000)),
                    json!({"type": "object", "properties": {"path": {"type": "string"}}}),
                )
            })
            .collect();
        let body = json!({"model": "m", "tools": tools,
                          "messages": [{"role": "tool", "tool_call_id": "x", "content": "hi"}]});
        let res = proxy.chat(&body, &[]).await;
        assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    }
    let held = proxy
        .metric("codemode_memory_store_bytes{store=\"plans\"}")
        .await;
    assert!(held > 0.0, "the plans are weighed");
    assert!(
        held <= (budget_mb << 20) as f64,
        "the plan cache holds {held} bytes, over its {budget_mb} MiB budget"
    );
}
