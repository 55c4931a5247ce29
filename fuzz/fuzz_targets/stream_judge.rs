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

use codemode_proxy::internals::plan::ToolPlan;
use codemode_proxy::internals::preset::Catalog;
use codemode_proxy::internals::stream::StreamJudge;
use codemode_proxy::{Mode, Runtime};
use common::{drive, events, Input};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

mod common;

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
    let Some(input) = Input::read(data) else {
        return;
    };
    let plan = plans()[usize::from(input.pick & 1)].clone();
    let client = drive(StreamJudge::new(plan, 2), &input);
    for name in names_seen(&client) {
        assert!(
            !NATIVE.contains(&name.as_str()),
            "the client could read a call to {name:?}"
        );
    }
});
