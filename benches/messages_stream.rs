//! Per-event cost of the Messages stream judge next to the chat one: a
//! 200-event turn of text then a passed `run_code` call, fed event by event
//! through the parser and the judge, in each dialect.
//!
//! `cargo bench --features bench-internals --bench messages_stream` (criterion reports time per event).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use codemode_proxy::internals::api::Api;
use codemode_proxy::internals::messages::stream::MessagesJudge;
use codemode_proxy::internals::plan::ToolPlan;
use codemode_proxy::internals::preset::Catalog;
use codemode_proxy::internals::sse::SseParser;
use codemode_proxy::internals::stream::{RoundJudge, StreamJudge};
use codemode_proxy::Mode;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::{json, Value};

const EVENTS: usize = 200;
const TEXT: usize = 120;

/// The same tools in each dialect's shape: names and verdicts are the same.
fn plan(dialect: Api) -> Arc<ToolPlan> {
    let tool = |name: &str, prop: &str| {
        let schema = json!({"type": "object", "properties": {prop: {"type": "string"}}});
        match dialect {
            Api::Messages => json!({"name": name, "input_schema": schema}),
            _ => json!({"type": "function", "function": {"name": name, "parameters": schema}}),
        }
    };
    let tools = json!([
        tool("read", "path"),
        tool("bash", "command"),
        tool("run_code", "code")
    ]);
    let raw = serde_json::value::to_raw_value(&tools).unwrap();
    let catalog = Catalog::builtin(Mode::Code);
    Arc::new(
        ToolPlan::build_for(
            match dialect {
                Api::Messages => &codemode_proxy::internals::messages::TOOLS,
                _ => &codemode_proxy::internals::chat::TOOLS,
            },
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

fn messages_stream() -> Vec<Vec<u8>> {
    let mut ev = vec![
        json!({"type": "message_start", "message": {"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message",
               "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": null,
               "stop_sequence": null, "usage": {"input_tokens": 1200, "cache_creation_input_tokens": 0,
               "cache_read_input_tokens": 0, "output_tokens": 1}}}),
        json!({"type": "ping"}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ];
    for _ in 0..TEXT {
        ev.push(json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": " the quick"}}));
    }
    ev.push(json!({"type": "content_block_stop", "index": 0}));
    ev.push(json!({"type": "content_block_start", "index": 1, "content_block":
                   {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "run_code", "input": {}}}));
    while ev.len() < EVENTS - 3 {
        ev.push(json!({"type": "content_block_delta", "index": 1,
                       "delta": {"type": "input_json_delta", "partial_json": "tools.read({"}}));
    }
    ev.push(json!({"type": "content_block_stop", "index": 1}));
    ev.push(
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                   "usage": {"output_tokens": 300}}),
    );
    ev.push(json!({"type": "message_stop"}));
    ev.into_iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()).into_bytes())
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
    let chat_plan = plan(Api::Chat);
    let messages_plan = plan(Api::Messages);
    let chat = chat_stream();
    let messages = messages_stream();
    assert_eq!(chat.len(), EVENTS);
    assert_eq!(messages.len(), EVENTS);
    let mut group = c.benchmark_group("stream_turn_200_events");
    group.throughput(Throughput::Elements(EVENTS as u64));
    group.bench_function("chat", |b| {
        b.iter(|| turn(&mut StreamJudge::new(chat_plan.clone(), 2), &chat))
    });
    group.bench_function("messages", |b| {
        b.iter(|| turn(&mut MessagesJudge::new(messages_plan.clone(), 2), &messages))
    });
    group.finish();

    // One text delta of an open block, the commonest event, next to
    // `benches/stream.rs`'s `stream_chunk/text_*` (the chat fast path).
    let mut group = c.benchmark_group("stream_event");
    let delta = messages[3].clone();
    group.throughput(Throughput::Bytes(delta.len() as u64));
    group.bench_function(format!("messages_text_delta_{}B", delta.len()), |b| {
        let mut parser = SseParser::new(1 << 20);
        let mut judge = MessagesJudge::new(messages_plan.clone(), 2);
        let mut events = Vec::new();
        let mut out: Vec<Bytes> = Vec::new();
        for piece in &messages[..3] {
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
    let text = chat[1].clone();
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function(format!("chat_text_{}B", text.len()), |b| {
        let mut parser = SseParser::new(1 << 20);
        let mut judge = StreamJudge::new(chat_plan.clone(), 2);
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
