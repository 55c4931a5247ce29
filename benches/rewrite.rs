//! Hot paths of the non-streaming core: request rewrite at several sizes,
//! SDK rendering cold and cached, and the classifier.
//!
//! `cargo bench --bench rewrite`

use std::hint::black_box;
use std::time::Duration;

use codemode_proxy::internals::classify::{classify, Visibility};
use codemode_proxy::internals::dialect::Dialect;
use codemode_proxy::internals::plan::{PlanCache, ToolPlan};
use codemode_proxy::internals::preset::Catalog;
use codemode_proxy::internals::responses::request::ResponsesRequest;
use codemode_proxy::internals::rewrite::ChatRequest;
use codemode_proxy::internals::splice::MemorySpliceStore;
use codemode_proxy::Mode;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde_json::{json, Value};

fn tools(n: usize) -> Vec<Value> {
    let mut out: Vec<Value> = (0..n)
        .map(|i| {
            json!({"type": "function", "function": {
                "name": format!("tool_{i}"),
                "description": format!("Tool number {i}: does a useful thing with files and returns text."),
                "parameters": {"type": "object", "properties": {
                    "path": {"type": "string", "description": "Absolute path"},
                    "mode": {"type": "string", "enum": ["a", "b", "c"]},
                    "limit": {"type": "integer", "default": 100}
                }, "required": ["path"]}
            }})
        })
        .collect();
    out.push(json!({"type": "function", "function": {"name": "run_code", "parameters": {"type": "object", "properties": {"code": {"type": "string"}}}}}));
    out
}

/// A request of about `bytes` with `n_tools` tools: a system prompt and a
/// history of user/assistant/tool turns.
fn request(n_tools: usize, bytes: usize) -> Vec<u8> {
    let mut messages =
        vec![json!({"role": "system", "content": "You are a careful coding agent."})];
    let mut i = 0;
    let turn = "lorem ipsum dolor sit amet ".repeat(20);
    loop {
        let body = json!({"model": "m", "messages": messages, "tools": tools(n_tools)});
        let len = body.to_string().len();
        if len >= bytes {
            return serde_json::to_vec(&body).unwrap();
        }
        messages.push(json!({"role": "user", "content": format!("{i}: {turn}")}));
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{i}"), "type": "function", "function": {"name": "run_code", "arguments": "{\"code\":\"return 1\"}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": turn}));
        i += 1;
    }
}

fn rewrite(c: &mut Criterion) {
    let catalog = Catalog::builtin(Mode::Code);
    let preset = catalog.get("code").unwrap().clone();
    let cache = PlanCache::new(64 << 20);
    let splices = codemode_proxy::internals::splice::TenantSplices::new(
        std::sync::Arc::new(MemorySpliceStore::new(Duration::from_secs(60), 1 << 20)),
        codemode_proxy::internals::tenant::Tenant::anonymous("default"),
    );
    let mut group = c.benchmark_group("rewrite");
    for (n_tools, bytes) in [
        (4, 2_000),
        (20, 50_000),
        (100, 250_000),
        (100, 500_000),
        (100, 1_000_000),
    ] {
        let body = request(n_tools, bytes);
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(
            BenchmarkId::new(format!("{n_tools}_tools"), body.len()),
            &body,
            |b, body| {
                b.iter(|| {
                    let mut chat = ChatRequest::parse(black_box(body)).unwrap();
                    let plan = cache
                        .get_or_build(
                            chat.field("tools"),
                            &preset,
                            Mode::Code,
                            codemode_proxy::Runtime::Client,
                        )
                        .unwrap();
                    chat.rewrite(&plan, &splices).unwrap();
                    black_box(chat.to_bytes())
                })
            },
        );
    }
    group.finish();
}

/// Codex's ten tools: functions, a custom `apply_patch`, a namespace of
/// three and web search.
fn codex_tools() -> Vec<Value> {
    let function = |name: &str| {
        json!({"type": "function", "name": name, "strict": false,
               "description": format!("{name}: does a useful thing with the workspace and returns text."),
               "parameters": {"type": "object", "properties": {
                   "cmd": {"type": "string", "description": "What to run"},
                   "workdir": {"type": "string"}, "timeout_ms": {"type": "number"}},
                   "required": ["cmd"], "additionalProperties": false}})
    };
    let mut out: Vec<Value> = [
        "exec_command",
        "write_stdin",
        "update_plan",
        "view_image",
        "list_mcp_resources",
    ]
    .iter()
    .map(|n| function(n))
    .collect();
    out.push(json!({"type": "custom", "name": "apply_patch", "description": "Edit files.",
        "format": {"type": "grammar", "syntax": "lark",
                   "definition": "start: begin_patch hunk+ end_patch\nbegin_patch: \"*** Begin Patch\" LF\n".repeat(8)}}));
    out.push(
        json!({"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.",
        "tools": [function("spawn_agent"), function("send_input"), function("wait")]}),
    );
    out.push(json!({"type": "web_search"}));
    out
}

/// A Codex request of about `bytes`: two developer messages, then turns of
/// user text, reasoning, a `run_code` call and its output.
fn codex_request(bytes: usize) -> Vec<u8> {
    let text = |t: &str| json!([{"type": "input_text", "text": t}]);
    let mut input = vec![
        json!({"type": "message", "role": "developer", "content": text(&"You are Codex. ".repeat(200))}),
        json!({"type": "message", "role": "developer", "content": text("<permissions>sandboxed</permissions>")}),
    ];
    let turn = "lorem ipsum dolor sit amet ".repeat(20);
    let mut i = 0;
    loop {
        let body = json!({"model": "gpt-5-codex", "input": input, "tools": codex_tools(),
            "tool_choice": "auto", "parallel_tool_calls": true, "store": false, "stream": true,
            "include": ["reasoning.encrypted_content"], "prompt_cache_key": "0199-abc"});
        if body.to_string().len() >= bytes {
            return serde_json::to_vec(&body).unwrap();
        }
        input.push(
            json!({"type": "message", "role": "user", "content": text(&format!("{i}: {turn}"))}),
        );
        input.push(json!({"type": "reasoning", "id": format!("rs_{i}"), "summary": [], "encrypted_content": "gAAAAB".repeat(40)}));
        input.push(json!({"type": "function_call", "id": format!("fc_{i}"), "call_id": format!("call_{i}"), "name": "run_code", "arguments": "{\"code\":\"return 1\"}"}));
        input.push(
            json!({"type": "function_call_output", "call_id": format!("call_{i}"), "output": turn}),
        );
        i += 1;
    }
}

/// The rewrite of a Codex-sized request (40 KB, ten tools) on the Responses
/// API, next to a chat request of the same size and tool count.
fn rewrite_codex(c: &mut Criterion) {
    let catalog = Catalog::builtin(Mode::Code);
    let preset = catalog.get("code").unwrap().clone();
    let cache = PlanCache::new(64 << 20);
    let splices = codemode_proxy::internals::splice::TenantSplices::new(
        std::sync::Arc::new(MemorySpliceStore::new(Duration::from_secs(60), 1 << 20)),
        codemode_proxy::internals::tenant::Tenant::anonymous("default"),
    );
    let mut group = c.benchmark_group("rewrite_40k_10_tools");
    let body = codex_request(40_000);
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_with_input(
        BenchmarkId::new("responses", body.len()),
        &body,
        |b, body| {
            b.iter(|| {
                let mut request = ResponsesRequest::parse(black_box(body)).unwrap();
                let plan = cache
                    .get_or_build_for(
                        Dialect::Responses,
                        request.field("tools"),
                        &preset,
                        Mode::Code,
                        codemode_proxy::Runtime::Embedded,
                    )
                    .unwrap();
                request.rewrite(&plan, &splices).unwrap();
                black_box(request.to_bytes())
            })
        },
    );
    let body = request(9, 40_000);
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_with_input(BenchmarkId::new("chat", body.len()), &body, |b, body| {
        b.iter(|| {
            let mut chat = ChatRequest::parse(black_box(body)).unwrap();
            let plan = cache
                .get_or_build(
                    chat.field("tools"),
                    &preset,
                    Mode::Code,
                    codemode_proxy::Runtime::Client,
                )
                .unwrap();
            chat.rewrite(&plan, &splices).unwrap();
            black_box(chat.to_bytes())
        })
    });
    group.finish();
}

fn sdk(c: &mut Criterion) {
    let catalog = Catalog::builtin(Mode::Code);
    let preset = catalog.get("code").unwrap().clone();
    let mut group = c.benchmark_group("plan");
    for n in [4, 20, 100] {
        let raw = serde_json::value::to_raw_value(&tools(n)).unwrap();
        group.bench_with_input(BenchmarkId::new("cold", n), &raw, |b, raw| {
            b.iter(|| {
                black_box(
                    ToolPlan::build(
                        Some(raw),
                        &preset,
                        Mode::Code,
                        codemode_proxy::Runtime::Client,
                    )
                    .unwrap(),
                )
            })
        });
        let cache = PlanCache::new(64 << 20);
        group.bench_with_input(BenchmarkId::new("cached", n), &raw, |b, raw| {
            b.iter(|| {
                black_box(
                    cache
                        .get_or_build(
                            Some(raw),
                            &preset,
                            Mode::Code,
                            codemode_proxy::Runtime::Client,
                        )
                        .unwrap(),
                )
            })
        });
    }
    group.finish();
}

fn classifier(c: &mut Criterion) {
    c.bench_function("classify", |b| {
        b.iter(|| {
            black_box(classify(
                black_box("read"),
                Visibility::Visible,
                black_box(Mode::Code),
            ))
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = rewrite, rewrite_codex, sdk, classifier
}
criterion_main!(benches);
