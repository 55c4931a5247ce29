#![no_main]
//! The SSE parser and the stream judge on any bytes, cut anywhere, over up
//! to three rounds (a repair or a program continues the stream): nothing
//! panics, and nothing the client gets, read as the OpenAI SDK reads it or
//! as a lenient client would (escapes decoded, every choice, `function`
//! and `custom` names, legacy `function_call`, names appended or replaced),
//! is a call to a native tool the code-mode plan denies.
//!
//! Input layout: byte 0 picks the plan (client or embedded runtime); byte 1
//! is the number of cut points, then two bytes each; the rest is the
//! upstream body, rounds separated by two NUL bytes.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use codemode_proxy::internals::plan::ToolPlan;
use codemode_proxy::internals::preset::Catalog;
use codemode_proxy::internals::sse::SseParser;
use codemode_proxy::internals::stream::{RoundEnd, StreamJudge};
use codemode_proxy::{Mode, Runtime};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

const NATIVE: [&str; 3] = ["read", "write", "bash"];

fn plan(runtime: Runtime) -> Arc<ToolPlan> {
    let tools = json!([
        {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "write", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "run_code", "parameters": {"type": "object"}}}
    ]);
    let raw = serde_json::value::to_raw_value(&tools).expect("tools serialise");
    let catalog = Catalog::builtin(Mode::Code);
    let preset = catalog.get("standard").expect("the built-in preset");
    Arc::new(ToolPlan::build(Some(&raw), preset, Mode::Code, runtime).expect("a valid plan"))
}

fn plans() -> &'static [Arc<ToolPlan>; 2] {
    static PLANS: OnceLock<[Arc<ToolPlan>; 2]> = OnceLock::new();
    PLANS.get_or_init(|| [plan(Runtime::Client), plan(Runtime::Embedded)])
}

/// The data of every event in `bytes`, as an SSE client splits them.
fn events(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    text.split("\n\n")
        .filter_map(|block| {
            let data: Vec<&str> = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .collect()
}

/// Every name a client could end up with: each fragment, and per call the
/// fragments appended (the SDKs accumulate strings by index).
fn names_seen(bytes: &[u8]) -> Vec<String> {
    let mut names = Vec::new();
    let mut joined: BTreeMap<(String, String), String> = BTreeMap::new();
    for data in events(bytes) {
        let Ok(chunk) = serde_json::from_str::<Value>(&data) else {
            continue;
        };
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            continue;
        };
        for (pos, choice) in choices.iter().enumerate() {
            let ci = choice
                .get("index")
                .map_or(format!("@{pos}"), |i| i.to_string());
            for part in ["delta", "message"] {
                let Some(d) = choice.get(part) else { continue };
                if let Some(calls) = d.get("tool_calls").and_then(Value::as_array) {
                    for (k, call) in calls.iter().enumerate() {
                        let key = call.get("index").map_or(format!("@{k}"), |i| i.to_string());
                        for body in ["function", "custom"] {
                            if let Some(n) = call
                                .get(body)
                                .and_then(|b| b.get("name"))
                                .and_then(Value::as_str)
                            {
                                names.push(n.to_owned());
                                joined
                                    .entry((ci.clone(), key.clone()))
                                    .or_default()
                                    .push_str(n);
                            }
                        }
                    }
                }
                if let Some(n) = d
                    .get("function_call")
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                {
                    names.push(n.to_owned());
                    joined
                        .entry((ci.clone(), "legacy".into()))
                        .or_default()
                        .push_str(n);
                }
            }
        }
    }
    names.extend(joined.into_values());
    names
}

fuzz_target!(|data: &[u8]| {
    let [pick, ncuts, rest @ ..] = data else {
        return;
    };
    let plan = plans()[usize::from(*pick & 1)].clone();
    let ncuts = usize::from(*ncuts % 16);
    if rest.len() < ncuts * 2 {
        return;
    }
    let (cut_bytes, body) = rest.split_at(ncuts * 2);
    let mut cuts: Vec<usize> = cut_bytes
        .chunks(2)
        .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])))
        .collect();
    cuts.sort_unstable();

    let mut judge = StreamJudge::new(plan, 2);
    let mut out: Vec<Bytes> = Vec::new();
    let mut evs = Vec::new();
    let rounds: Vec<&[u8]> = body.split_inclusive_rounds();
    for (n, round) in rounds.iter().enumerate() {
        let mut parser = SseParser::new(1 << 16);
        let mut last = 0;
        let mut failed = false;
        for &cut in cuts.iter().chain([&round.len()]) {
            let cut = cut.min(round.len());
            if cut < last {
                continue;
            }
            let pushed = parser.push(&round[last..cut], &mut evs);
            for ev in evs.drain(..) {
                judge.on_event(ev, &mut out);
            }
            last = cut;
            if pushed.is_err() {
                judge.upstream_failed("too large", "upstream_event_too_large", &mut out);
                failed = true;
                break;
            }
        }
        if failed {
            break;
        }
        parser.finish(&mut evs);
        for ev in evs.drain(..) {
            judge.on_event(ev, &mut out);
        }
        match judge.end_round(&mut out) {
            RoundEnd::Done { .. } => break,
            RoundEnd::Repair { messages } => {
                assert!(!messages.is_empty());
                if n + 1 < rounds.len() {
                    judge.start_repair_round();
                }
            }
            RoundEnd::Program(_) => {
                if n + 1 < rounds.len() {
                    judge.start_program_round();
                }
            }
        }
    }

    let client: Vec<u8> = out.iter().flat_map(|b| b.iter().copied()).collect();
    if std::env::var_os("FUZZ_DEBUG").is_some() {
        // What the client got, for reading a finding: FUZZ_DEBUG=1 cargo fuzz run ...
        eprintln!("client stream: {}", String::from_utf8_lossy(&client));
    }
    for name in names_seen(&client) {
        assert!(
            !NATIVE.contains(&name.as_str()),
            "the client could read a call to {name:?}"
        );
    }
});

/// Splits the body into at most three rounds at double NUL bytes.
trait Rounds {
    fn split_inclusive_rounds(&self) -> Vec<&[u8]>;
}

impl Rounds for [u8] {
    fn split_inclusive_rounds(&self) -> Vec<&[u8]> {
        let mut rounds = Vec::new();
        let mut rest = self;
        while rounds.len() < 2 {
            match rest.windows(2).position(|w| w == [0, 0]) {
                Some(i) => {
                    rounds.push(&rest[..i]);
                    rest = &rest[i + 2..];
                }
                None => break,
            }
        }
        rounds.push(rest);
        rounds
    }
}
