#![no_main]
//! The SSE parser and the Responses stream judge on any bytes, cut
//! anywhere, over up to three rounds (a repair or a program continues the
//! stream): nothing panics, and no call item the client gets, read as the
//! OpenAI SDKs and Codex read it (the `item` of every
//! `response.output_item.added` and `.done`, the `output` of any response
//! object), calls a tool other than `run_code`: not a native tool the
//! code-mode plan collapsed, not a built-in or provider tool the client
//! never declared as its own.
//!
//! Input layout as `stream_judge` (see `common`).

use std::sync::{Arc, OnceLock};

use codemode_proxy::internals::plan::ToolPlan;
use codemode_proxy::internals::preset::Catalog;
use codemode_proxy::internals::responses::stream::ResponsesJudge;
use codemode_proxy::{Mode, Runtime};
use common::{drive, events, Input};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

mod common;

/// Call item types a client executes, with the tool a nameless one calls.
const CALL_ITEMS: [(&str, Option<&str>); 5] = [
    ("function_call", None),
    ("custom_tool_call", None),
    ("local_shell_call", Some("local_shell")),
    ("shell_call", Some("shell")),
    ("apply_patch_call", Some("apply_patch")),
];

fn plan(runtime: Runtime) -> Arc<ToolPlan> {
    let tools = json!([
        {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
        {"type": "function", "name": "read", "parameters": {"type": "object"}},
        {"type": "custom", "name": "apply_patch", "format": {"type": "text"}},
        {"type": "namespace", "name": "agents", "tools": [
            {"type": "function", "name": "spawn", "parameters": {"type": "object"}}
        ]},
        {"type": "function", "name": "run_code", "parameters": {"type": "object"}},
        {"type": "web_search"}
    ]);
    let raw = serde_json::value::to_raw_value(&tools).expect("tools serialise");
    let catalog = Catalog::builtin(Mode::Code);
    let preset = catalog.get("standard").expect("the built-in preset");
    Arc::new(
        ToolPlan::build_for(
            &codemode_proxy::internals::responses::TOOLS,
            Some(&raw),
            preset,
            Mode::Code,
            runtime,
        )
        .expect("a valid plan"),
    )
}

fn plans() -> &'static [Arc<ToolPlan>; 2] {
    static PLANS: OnceLock<[Arc<ToolPlan>; 2]> = OnceLock::new();
    PLANS.get_or_init(|| [plan(Runtime::Client), plan(Runtime::Embedded)])
}

/// The tool a call item calls, as a client executor reads it; `None` for
/// an item that is no call.
fn called(item: &Value) -> Option<String> {
    let kind = item.get("type")?.as_str()?;
    let (_, builtin) = CALL_ITEMS.iter().find(|(t, _)| *t == kind)?;
    if let Some(tool) = builtin {
        return Some((*tool).to_owned());
    }
    let name = item.get("name").and_then(Value::as_str).unwrap_or("");
    Some(match item.get("namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() => format!("{ns}.{name}"),
        _ => name.to_owned(),
    })
}

/// Every call item a client could find in the stream.
fn calls_seen(bytes: &[u8]) -> Vec<String> {
    let mut seen = Vec::new();
    for data in events(bytes) {
        let Ok(event) = serde_json::from_str::<Value>(&data) else {
            continue;
        };
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        if kind == "response.output_item.added" || kind == "response.output_item.done" {
            seen.extend(event.get("item").and_then(called));
        }
        let output = event.pointer("/response/output").and_then(Value::as_array);
        seen.extend(output.into_iter().flatten().filter_map(called));
    }
    seen
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::read(data) else {
        return;
    };
    let plan = plans()[usize::from(input.pick & 1)].clone();
    let client = drive(ResponsesJudge::new(plan, 2), &input);
    for name in calls_seen(&client) {
        assert!(
            name == "run_code",
            "the client could execute a call to {name:?}"
        );
    }
});
