#![no_main]
//! The SSE parser and the Messages stream judge on any bytes, cut
//! anywhere, over up to three rounds (a repair or a program continues the
//! stream): nothing panics, and no `tool_use` block the client gets, read
//! as Anthropic's SDKs read it or as a lenient client would (every
//! `content_block_start`, whatever its `event:` line says or its index
//! repeats, and any content a `message_start` carries), calls a tool other
//! than `run_code`: not a native tool the code-mode plan collapsed, not a
//! tool the client never declared. (`server_tool_use` blocks are the
//! provider's and pass; a block inside an event of another type is no
//! block a client reads.)
//!
//! Input layout as `stream_judge` (see `common`).

use std::sync::{Arc, OnceLock};

use codemode_proxy::internals::messages::stream::MessagesJudge;
use codemode_proxy::internals::plan::ToolPlan;
use codemode_proxy::internals::preset::Catalog;
use codemode_proxy::{Mode, Runtime};
use common::{drive, events, Input};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

mod common;

fn plan(runtime: Runtime) -> Arc<ToolPlan> {
    let tool = |name: &str| json!({"name": name, "input_schema": {"type": "object"}});
    let tools = json!([
        tool("Read"),
        tool("Bash"),
        tool("run_code"),
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    ]);
    let raw = serde_json::value::to_raw_value(&tools).expect("tools serialise");
    let catalog = Catalog::builtin(Mode::Code);
    let preset = catalog.get("standard").expect("the built-in preset");
    Arc::new(
        ToolPlan::build_for(
            &codemode_proxy::internals::messages::TOOLS,
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

/// The name of a `tool_use` block; `None` for any other block.
fn called(block: &Value) -> Option<String> {
    if block.get("type").and_then(Value::as_str) != Some("tool_use") {
        return None;
    }
    Some(
        block
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
    )
}

/// Every `tool_use` block a client could find in the stream.
fn calls_seen(bytes: &[u8]) -> Vec<String> {
    let mut seen = Vec::new();
    for data in events(bytes) {
        let Ok(event) = serde_json::from_str::<Value>(&data) else {
            continue;
        };
        match event.get("type").and_then(Value::as_str) {
            Some("content_block_start") => seen.extend(event.get("content_block").and_then(called)),
            Some("message_start") => {
                let content = event.pointer("/message/content").and_then(Value::as_array);
                seen.extend(content.into_iter().flatten().filter_map(called));
            }
            _ => {}
        }
    }
    seen
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::read(data) else {
        return;
    };
    let plan = plans()[usize::from(input.pick & 1)].clone();
    let client = drive(MessagesJudge::new(plan, 2), &input);
    for name in calls_seen(&client) {
        assert!(
            name == "run_code",
            "the client could execute a call to {name:?}"
        );
    }
});
