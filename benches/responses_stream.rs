//! Per-event cost of the Responses stream judge next to the chat one: a
//! 200-event turn of text then a passed `run_code` call, fed event by event
//! through the parser and the judge, in each dialect.
//!
//! `cargo bench --features bench-internals --bench responses_stream` (criterion reports time per event).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use codemode_proxy::internals::plan::ToolPlan;
use codemode_proxy::internals::preset::Catalog;
use codemode_proxy::internals::responses::stream::ResponsesJudge;
use codemode_proxy::internals::sse::SseParser;
use codemode_proxy::internals::stream::{RoundJudge, StreamJudge};
use codemode_proxy::Mode;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::{json, Value};

const EVENTS: usize = 200;
const TEXT: usize = 120;

/// The same tools for both dialects: the Responses tool parser reads the
/// flat shape, the chat one the nested; names and verdicts are the same.
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

fn chat_stream() -> Vec<Vec<u8>> {
    let chunk = |delta: Value, finish: Value| {
        let c = json!({"id": "chatcmpl-AbC123xyz", "object": "chat.completion.chunk", "created": 1730000000,
                       "model": "gpt-4.1-2025-04-14", "system_fingerprint": "fp_0123456789",
                       "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
        format!("data: {c}\n\n").into_bytes()
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for _ in 0..TEXT {
        out.push(chunk(json!({"content": " the quick"}), Value::Null));
    }
    out.push(chunk(
        json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "run_code", "arguments": ""}}]}),
        Value::Null,
    ));
    while out.len() < EVENTS - 2 {
        out.push(chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "tools.read({"}}]}),
            Value::Null,
        ));
    }
    out.push(chunk(json!({}), json!("tool_calls")));
    out.push(b"data: [DONE]\n\n".to_vec());
    out
}

fn responses_stream() -> Vec<Vec<u8>> {
    let resp = |status: &str| {
        json!({"id": "resp_0123456789abcdef", "object": "response", "created_at": 1730000000,
               "status": status, "model": "gpt-5-2025-08-07", "output": [], "usage": null})
    };
    let mut ev = vec![
        json!({"type": "response.created", "response": resp("in_progress")}),
        json!({"type": "response.in_progress", "response": resp("in_progress")}),
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": {"type": "message", "id": "msg_0123456789abcdef", "status": "in_progress", "role": "assistant", "content": []}}),
        json!({"type": "response.content_part.added", "item_id": "msg_0123456789abcdef", "output_index": 0,
               "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
    ];
    for _ in 0..TEXT {
        ev.push(json!({"type": "response.output_text.delta", "item_id": "msg_0123456789abcdef",
                       "output_index": 0, "content_index": 0, "delta": " the quick", "logprobs": []}));
    }
    let text = " the quick".repeat(TEXT);
    let message = json!({"type": "message", "id": "msg_0123456789abcdef", "status": "completed", "role": "assistant",
                         "content": [{"type": "output_text", "text": text, "annotations": []}]});
    ev.push(json!({"type": "response.output_text.done", "item_id": "msg_0123456789abcdef", "output_index": 0,
                   "content_index": 0, "text": text}));
    ev.push(json!({"type": "response.content_part.done", "item_id": "msg_0123456789abcdef", "output_index": 0,
                   "content_index": 0, "part": message["content"][0]}));
    ev.push(json!({"type": "response.output_item.done", "output_index": 0, "item": message}));
    ev.push(json!({"type": "response.output_item.added", "output_index": 1,
                   "item": {"type": "function_call", "id": "fc_0123456789abcdef", "call_id": "call_1",
                            "name": "run_code", "arguments": "", "status": "in_progress"}}));
    let deltas = EVENTS - ev.len() - 3;
    for _ in 0..deltas {
        ev.push(json!({"type": "response.function_call_arguments.delta", "item_id": "fc_0123456789abcdef",
                       "output_index": 1, "delta": "tools.read({"}));
    }
    let args = "tools.read({".repeat(deltas);
    let call = json!({"type": "function_call", "id": "fc_0123456789abcdef", "call_id": "call_1",
                      "name": "run_code", "arguments": args, "status": "completed"});
    ev.push(
        json!({"type": "response.function_call_arguments.done", "item_id": "fc_0123456789abcdef",
                   "output_index": 1, "arguments": args}),
    );
    ev.push(json!({"type": "response.output_item.done", "output_index": 1, "item": call}));
    let mut done = resp("completed");
    done["output"] = json!([message, call]);
    done["usage"] = json!({"input_tokens": 1200, "input_tokens_details": {"cached_tokens": 0},
                           "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 1500});
    ev.push(json!({"type": "response.completed", "response": done}));
    ev.into_iter()
        .enumerate()
        .map(|(i, mut e)| {
            e["sequence_number"] = json!(i);
            format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()).into_bytes()
        })
        .collect()
}

/// One whole turn through a fresh parser and judge, event by event.
fn turn<J: RoundJudge>(judge: &mut J, stream: &[Vec<u8>]) -> usize {
    let mut parser = SseParser::new(1 << 20);
    let mut events = Vec::new();
    let mut out: Vec<Bytes> = Vec::new();
    let mut sent = 0;
    for piece in stream {
        parser.push(black_box(piece), &mut events).unwrap();
        for ev in events.drain(..) {
            judge.on_event(ev, &mut out).expect("a readable event");
        }
        sent += out.drain(..).map(|b| b.len()).sum::<usize>();
    }
    parser.finish(&mut events);
    let _ = judge.end_round(&mut out);
    sent
}

fn per_event(c: &mut Criterion) {
    let plan = plan();
    let chat = chat_stream();
    let responses = responses_stream();
    assert_eq!(chat.len(), EVENTS);
    assert_eq!(responses.len(), EVENTS);
    let mut group = c.benchmark_group("stream_turn_200_events");
    group.throughput(Throughput::Elements(EVENTS as u64));
    group.bench_function("chat", |b| {
        b.iter(|| turn(&mut StreamJudge::new(plan.clone(), 2), &chat))
    });
    group.bench_function("responses", |b| {
        b.iter(|| turn(&mut ResponsesJudge::new(plan.clone(), 2), &responses))
    });
    group.finish();

    // One text delta of an open message, the commonest event, next to
    // `benches/stream.rs`'s `stream_chunk/text_*` (the chat fast path).
    let mut group = c.benchmark_group("stream_event");
    let delta = responses[4].clone();
    group.throughput(Throughput::Bytes(delta.len() as u64));
    group.bench_function(format!("responses_text_delta_{}B", delta.len()), |b| {
        let mut parser = SseParser::new(1 << 20);
        let mut judge = ResponsesJudge::new(plan.clone(), 2);
        let mut events = Vec::new();
        let mut out: Vec<Bytes> = Vec::new();
        for piece in &responses[..4] {
            parser.push(piece, &mut events).unwrap();
            for ev in events.drain(..) {
                judge.on_event(ev, &mut out).expect("a readable event");
            }
        }
        b.iter(|| {
            parser.push(black_box(&delta), &mut events).unwrap();
            for ev in events.drain(..) {
                judge.on_event(ev, &mut out).expect("a readable event");
            }
            out.clear();
        })
    });
    group.bench_function(format!("responses_parser_only_{}B", delta.len()), |b| {
        let mut parser = SseParser::new(1 << 20);
        let mut events = Vec::new();
        b.iter(|| {
            parser.push(black_box(&delta), &mut events).unwrap();
            events.clear();
        })
    });
    let text = chat[1].clone();
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function(format!("chat_text_{}B", text.len()), |b| {
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
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = per_event
}
criterion_main!(benches);
