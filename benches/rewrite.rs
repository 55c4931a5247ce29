//! Hot paths of the non-streaming core: request rewrite at several sizes,
//! SDK rendering cold and cached, and the classifier.
//!
//! `cargo bench --features bench-internals --bench rewrite`

use std::hint::black_box;
use std::time::Duration;

use codemode_proxy::internals::classify::{classify, Visibility};
use codemode_proxy::internals::messages::request::MessagesRequest;
use codemode_proxy::internals::plan::{PlanCache, ToolPlan};
use codemode_proxy::internals::preset::Catalog;
use codemode_proxy::internals::responses::request::ResponsesRequest;
use codemode_proxy::internals::rewrite::{ChatRequest, WireRequest};
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
                        &codemode_proxy::internals::responses::TOOLS,
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

/// Claude Code's two dozen tools: long prose descriptions and JSON schemas
/// (about 60 KB in all, as Claude Code sends), MCP tools among them, the
/// provider's web search, a cache breakpoint on the last tool.
fn claude_code_tools() -> Vec<Value> {
    let prose = "Use this tool when the task calls for it. It reads and writes the \
                 workspace, reports errors plainly, and never runs anything destructive \
                 without asking. Prefer it over shell commands for this purpose. ";
    let names = [
        "Task",
        "Bash",
        "Glob",
        "Grep",
        "ExitPlanMode",
        "Read",
        "Edit",
        "Write",
        "NotebookEdit",
        "WebFetch",
        "TodoWrite",
        "BashOutput",
        "KillShell",
        "SlashCommand",
        "Skill",
        "AskUserQuestion",
        "mcp__ide__getDiagnostics",
        "mcp__ide__executeCode",
        "mcp__github__create_issue",
        "mcp__github__list_pull_requests",
        "mcp__github__get_file_contents",
        "mcp__linear__create_issue",
        "mcp__linear__search_issues",
        "mcp__sentry__get_issue",
    ];
    let mut out: Vec<Value> = names
        .iter()
        .map(|name| {
            let property = |d: &str| json!({"type": "string", "description": format!("{d}. {}", &prose[..120])});
            json!({"name": name, "description": format!("{name}: {}", prose.repeat(9)),
                   "input_schema": {"$schema": "http://json-schema.org/draft-07/schema#",
                       "type": "object", "additionalProperties": false,
                       "properties": {"path": property("The absolute path"), "query": property("What to look for"),
                           "mode": {"type": "string", "enum": ["content", "files_with_matches", "count"]},
                           "limit": {"type": "integer", "minimum": 1, "description": "At most this many"},
                           "options": {"type": "object", "properties": {"recursive": {"type": "boolean"},
                               "timeout_ms": {"type": "number"}}}},
                       "required": ["path"]}})
        })
        .collect();
    out.insert(
        16,
        json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 8}),
    );
    out.last_mut().unwrap()["cache_control"] = json!({"type": "ephemeral"});
    out
}

/// A Claude Code request of about `bytes`: three system blocks (two
/// cached), thinking on, then turns of user text, a signed thinking block
/// with a `run_code` call, and its `tool_result`.
fn claude_code_request(bytes: usize) -> Vec<u8> {
    let system = json!([
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.0.50"},
        {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.",
         "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "You are an interactive CLI tool. ".repeat(150),
         "cache_control": {"type": "ephemeral"}}
    ]);
    let turn = "lorem ipsum dolor sit amet ".repeat(20);
    let mut messages = vec![json!({"role": "user", "content": "Fix the failing test."})];
    let mut i = 0;
    loop {
        let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": true,
            "system": system, "tools": claude_code_tools(), "messages": messages,
            "thinking": {"type": "enabled", "budget_tokens": 31999},
            "metadata": {"user_id": "user_abc_account__session_1"}});
        if body.to_string().len() >= bytes {
            return serde_json::to_vec(&body).unwrap();
        }
        messages.push(json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": turn, "signature": "EqQBCkYIBxgCKkD".repeat(20)},
            {"type": "tool_use", "id": format!("toolu_{i}"), "name": "run_code",
             "input": {"code": "return await tools.Read({path: 'a.txt'})"}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{i}"), "content": turn}]}));
        i += 1;
    }
}

/// The rewrite of a Claude Code-sized request (80 KB, 24 tools) on the
/// Messages API, and what the model is sent before and after it.
fn rewrite_claude_code(c: &mut Criterion) {
    let catalog = Catalog::builtin(Mode::Code);
    let preset = catalog.get("code").unwrap().clone();
    let cache = PlanCache::new(64 << 20);
    let splices = codemode_proxy::internals::splice::TenantSplices::new(
        std::sync::Arc::new(MemorySpliceStore::new(Duration::from_secs(60), 1 << 20)),
        codemode_proxy::internals::tenant::Tenant::anonymous("default"),
    );
    let body = claude_code_request(80_000);
    let rewrite = |body: &[u8]| {
        let mut request = MessagesRequest::parse(body).unwrap();
        let plan = cache
            .get_or_build_for(
                &codemode_proxy::internals::messages::TOOLS,
                request.field("tools"),
                &preset,
                Mode::Code,
                codemode_proxy::Runtime::Embedded,
            )
            .unwrap();
        request.rewrite(&plan, &splices).unwrap();
        (request.to_bytes(), plan)
    };
    let (after, plan) = rewrite(&body);
    let tools_bytes = serde_json::to_string(&claude_code_tools()).unwrap().len();
    let wire_bytes = plan.wire_tools.as_ref().map_or(0, |t| t.get().len());
    // Tokens estimated as bytes / 4 (no tokenizer here).
    println!(
        "claude code request: {} B (~{} tokens, bytes/4) -> {} B (~{} tokens); \
         tools {} B (~{} tokens, 24 JSON schemas) -> wire tools {} B + sections {} B (~{} tokens)",
        body.len(),
        body.len() / 4,
        after.len(),
        after.len() / 4,
        tools_bytes,
        tools_bytes / 4,
        wire_bytes,
        plan.prompt.len(),
        (wire_bytes + plan.prompt.len()) / 4,
    );
    let mut group = c.benchmark_group("rewrite_80k_24_tools");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_with_input(
        BenchmarkId::new("messages", body.len()),
        &body,
        |b, body| b.iter(|| black_box(rewrite(black_box(body)).0)),
    );
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
    targets = rewrite, rewrite_codex, rewrite_claude_code, sdk, classifier
}
criterion_main!(benches);
