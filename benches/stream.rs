//! Per-chunk cost of streaming interception: the parser and the judge on
//! a text chunk (the byte check, no JSON parse) and on a tool-call chunk.
//!
//! `cargo bench --features bench-internals --bench stream`

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use codemode_proxy::internals::plan::ToolPlan;
use codemode_proxy::internals::preset::Catalog;
use codemode_proxy::internals::sse::SseParser;
use codemode_proxy::internals::stream::{RoundJudge, StreamJudge};
use codemode_proxy::Mode;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::json;

fn plan() -> Arc<ToolPlan> {
    let tools = json!([
        {"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "run_code", "parameters": {"type": "object", "properties": {"code": {"type": "string"}}}}}
    ]);
    let raw = serde_json::value::to_raw_value(&tools).unwrap();
    let catalog = Catalog::builtin(Mode::Code);
    Arc::new(
        ToolPlan::build(
            Some(&raw),
            catalog.get("standard").unwrap(),
            Mode::Code,
            codemode_proxy::Runtime::Client,
        )
        .unwrap(),
    )
}

fn chunk(delta: serde_json::Value) -> Vec<u8> {
    let c = json!({"id": "chatcmpl-AbC123xyz", "object": "chat.completion.chunk", "created": 1730000000,
                   "model": "gpt-4.1-2025-04-14", "system_fingerprint": "fp_0123456789",
                   "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]});
    format!("data: {c}\n\n").into_bytes()
}

fn per_chunk(c: &mut Criterion) {
    let plan = plan();
    let text = chunk(json!({"content": " the quick brown fox"}));
    let args = chunk(
        json!({"tool_calls": [{"index": 0, "function": {"arguments": "wait tools.read({path: 'a'"}}]}),
    );
    let mut group = c.benchmark_group("stream_chunk");

    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function(format!("text_{}B", text.len()), |b| {
        let mut parser = SseParser::new(1 << 20);
        let mut judge = StreamJudge::new(plan.clone(), 2);
        let mut events = Vec::new();
        let mut out: Vec<Bytes> = Vec::new();
        b.iter(|| {
            parser.push(black_box(&text), &mut events).unwrap();
            for ev in events.drain(..) {
                judge.on_event(ev, &mut out).expect("a readable event");
            }
            out.clear();
        })
    });

    group.throughput(Throughput::Bytes(args.len() as u64));
    group.bench_function(format!("tool_call_args_{}B", args.len()), |b| {
        let mut parser = SseParser::new(1 << 20);
        let mut judge = StreamJudge::new(plan.clone(), 2);
        let mut events = Vec::new();
        let mut out: Vec<Bytes> = Vec::new();
        let first = chunk(json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "run_code", "arguments": ""}}]}));
        parser.push(&first, &mut events).unwrap();
        for ev in events.drain(..) {
            judge.on_event(ev, &mut out).expect("a readable event");
        }
        b.iter(|| {
            parser.push(black_box(&args), &mut events).unwrap();
            for ev in events.drain(..) {
                judge.on_event(ev, &mut out).expect("a readable event");
            }
            out.clear();
        })
    });

    let data = String::from_utf8(args[6..args.len() - 2].to_vec()).unwrap();
    group.bench_function("json_value_parse_only", |b| {
        b.iter(|| black_box(serde_json::from_str::<serde_json::Value>(black_box(&data)).unwrap()))
    });

    group.bench_function(format!("parser_only_{}B", text.len()), |b| {
        let mut parser = SseParser::new(1 << 20);
        let mut events = Vec::new();
        b.iter(|| {
            parser.push(black_box(&text), &mut events).unwrap();
            events.clear();
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = per_chunk
}
criterion_main!(benches);
