#![no_main]
//! The SSE parser and the Gemini stream judge on any bytes, cut anywhere,
//! over up to three rounds (a repair or a program continues the stream):
//! nothing panics, and no call the client gets calls a tool other than
//! `run_code`: not a native tool the code-mode plan collapsed, not a tool
//! the client never declared. Read as a lenient client would: every
//! `data:` event's JSON object (an `error` chunk's too), every candidate
//! (not only the first), every part, `functionCall` or `function_call`.
//! A part holding a field that is no call (`text`, `thought`,
//! `thoughtSignature`, `inlineData`, ..., in either spelling) passes; so
//! does the provider's own work, a `toolCall` or `toolResponse` whose
//! `toolType` is Google Search, URL context, Google Maps, file search or
//! code execution. A part with any other field (a `toolCall` of a tool
//! type the proxy does not know, a `functionResponse` from the model) is
//! judged as a call, so it must not reach the client either.
//!
//! Input layout as `stream_judge` (see `common`).

use std::sync::{Arc, OnceLock};

use codemode_proxy::internals::gemini::stream::GeminiJudge;
use codemode_proxy::internals::plan::ToolPlan;
use codemode_proxy::internals::preset::Catalog;
use codemode_proxy::{Mode, Runtime};
use common::{drive, events, Input};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

mod common;

fn plan(runtime: Runtime) -> Arc<ToolPlan> {
    let object = |prop: &str| json!({"type": "object", "properties": {prop: {"type": "string"}}});
    let tools = json!([
        {"functionDeclarations": [
            {"name": "read_file", "description": "Reads a file.", "parametersJsonSchema": object("absolute_path")},
            {"name": "run_shell_command", "description": "Runs a command.",
             "parameters": {"type": "OBJECT", "properties": {"command": {"type": "STRING"}}}},
            {"name": "run_code", "description": "Run a JavaScript program.",
             "parametersJsonSchema": object("code")}
        ]},
        {"googleSearch": {}}
    ]);
    let raw = serde_json::value::to_raw_value(&tools).expect("tools serialise");
    let catalog = Catalog::builtin(Mode::Code);
    let preset = catalog.get("standard").expect("the built-in preset");
    Arc::new(
        ToolPlan::build_for(
            &codemode_proxy::internals::gemini::TOOLS,
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

/// The fields of a part that are no call (camelCase; other spellings are
/// read as the proxy reads them, by [`camel`]).
const SAFE_FIELDS: &[&str] = &[
    "text",
    "thought",
    "thoughtSignature",
    "inlineData",
    "fileData",
    "executableCode",
    "codeExecutionResult",
    "videoMetadata",
    "partMetadata",
    "mediaResolution",
];

/// `thought_signature` as `thoughtSignature`: every `_` upper-cases the
/// letter after it (the proxy's reading of snake_case field names).
fn camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The tool types of the provider's own `toolCall`/`toolResponse` parts
/// (prefixes: `GOOGLE_SEARCH_WEB` is Google Search's).
const PROVIDER_TOOL_TYPES: &[&str] = &[
    "GOOGLE_SEARCH",
    "URL_CONTEXT",
    "GOOGLE_MAPS",
    "FILE_SEARCH",
    "CODE_EXECUTION",
];

/// Whether a part's field `key` holding `value` is the provider's own
/// work: a `toolCall` or `toolResponse` of a tool Google runs.
fn is_provider_work(key: &str, value: &Value) -> bool {
    let tool = matches!(key, "toolCall" | "toolResponse");
    let kind = value
        .get("toolType")
        .or_else(|| value.get("tool_type"))
        .and_then(Value::as_str);
    tool && kind.is_some_and(|t| PROVIDER_TOOL_TYPES.iter().any(|p| t.starts_with(p)))
}

/// What a part calls, as a lenient client reads it: the name of each
/// `functionCall` (either spelling), and each field that is neither the
/// model's words nor the provider's work (by its own name).
fn called(part: &Map<String, Value>) -> Vec<String> {
    let mut calls = Vec::new();
    for (key, value) in part {
        if key == "functionCall" || key == "function_call" {
            let name = value.get("name").and_then(Value::as_str).unwrap_or("");
            calls.push(name.to_owned());
            continue;
        }
        let field = camel(key);
        if !SAFE_FIELDS.contains(&field.as_str()) && !is_provider_work(&field, value) {
            calls.push(format!("a part's `{key}` field"));
        }
    }
    calls
}

/// Every call a client could find in a chunk (or in each chunk of an array).
fn calls_in(chunk: &Value, seen: &mut Vec<String>) {
    if let Value::Array(chunks) = chunk {
        for c in chunks {
            calls_in(c, seen);
        }
        return;
    }
    let candidates = chunk.get("candidates").and_then(Value::as_array);
    for candidate in candidates.into_iter().flatten() {
        let parts = candidate
            .pointer("/content/parts")
            .and_then(Value::as_array);
        for part in parts.into_iter().flatten().filter_map(Value::as_object) {
            seen.extend(called(part));
        }
    }
}

/// Every call a client could find in the stream.
fn calls_seen(bytes: &[u8]) -> Vec<String> {
    let mut seen = Vec::new();
    for data in events(bytes) {
        if let Ok(chunk) = serde_json::from_str::<Value>(&data) {
            calls_in(&chunk, &mut seen);
        }
    }
    seen
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::read(data) else {
        return;
    };
    let plan = plans()[usize::from(input.pick & 1)].clone();
    let client = drive(GeminiJudge::new(plan, 2), &input);
    for name in calls_seen(&client) {
        assert!(
            name == "run_code",
            "the client could execute a call to {name:?}"
        );
    }
});
