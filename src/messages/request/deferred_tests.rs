//! Deferred loading on the request side: tools declared with
//! `defer_loading: true`, the provider's tool search tool, and the
//! `tool_reference` blocks a history carries (Claude Code's `ToolSearch`
//! results, and what it echoes of the model's turns).

use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::MessagesRequest;
use crate::mode::{Mode, Runtime};
use crate::plan::ToolPlan;
use crate::preset::{Catalog, ConfigFile};
use crate::splice::{MemorySpliceStore, TenantSplices};

/// Claude Code's tools with tool search on, after its `ToolSearch` loaded
/// WebFetch (tests/fixtures/claude/after_tool_search.json, trimmed), and
/// the provider's regex tool search beside them.
fn tools() -> Value {
    json!([
        {"name": "Read", "description": "Reads a file.",
         "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}},
                          "required": ["file_path"]}},
        {"name": "ToolSearch", "description": "Fetches full schema definitions for deferred tools.",
         "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}},
        {"name": "WebFetch", "description": "Fetches a URL.", "defer_loading": true,
         "input_schema": {"type": "object", "properties": {"url": {"type": "string"}},
                          "required": ["url"]}},
        {"name": "DeferredToolPlaceholder", "defer_loading": true,
         "description": "Reserved placeholder that keeps deferred tool loading active; never call this tool.",
         "input_schema": {"type": "object", "properties": {}}},
        {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
    ])
}

fn plan_in(tools: &Value, mode: Mode, preset: &str) -> ToolPlan {
    let raw = RawValue::from_string(tools.to_string()).unwrap();
    let file: ConfigFile = toml::from_str(
        "[[preset]]\nname = \"no-fetch\"\nextends = \"standard\"\ndeny = [\"WebFetch\"]\n",
    )
    .unwrap();
    let catalog = Catalog::build(Mode::Code, file).unwrap();
    ToolPlan::build_for(
        &crate::messages::tools::TOOLS,
        Some(&raw),
        catalog.get(preset).unwrap(),
        mode,
        Runtime::Embedded,
    )
    .unwrap()
}

fn store() -> TenantSplices {
    let store = Arc::new(MemorySpliceStore::new(Duration::from_secs(60), 1 << 20));
    TenantSplices::new(store, crate::tenant::Tenant::anonymous("default"))
}

fn rewritten(messages: Value, tools: &Value, plan: &ToolPlan) -> Value {
    let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "tools": tools,
                      "messages": messages});
    let mut r = MessagesRequest::parse(&serde_json::to_vec(&body).unwrap()).unwrap();
    r.rewrite(plan, &store()).unwrap();
    serde_json::from_slice(&r.to_bytes()).unwrap()
}

fn names(v: &Value) -> Vec<&str> {
    v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().or(t["type"].as_str()).unwrap())
        .collect()
}

#[test]
fn deferred_tools_collapse_with_the_rest_and_the_idle_tool_search_leaves_the_wire() {
    let plan = plan_in(&tools(), Mode::Code, "standard");
    let v = rewritten(json!([{"role": "user", "content": "hi"}]), &tools(), &plan);
    // The regex search would search the wire's deferred tools: none is left.
    assert_eq!(names(&v), ["run_code", "web_search"]);
    assert!(!v["tools"].to_string().contains("defer_loading"), "{v}");
    let sdk = v["system"].as_str().unwrap();
    for name in ["Read", "ToolSearch", "WebFetch"] {
        assert!(sdk.contains(&format!("{name}(")), "{name} missing: {sdk}");
    }
    let doc = plan.docs.get("WebFetch").expect("describe answers for it");
    assert!(doc.contains("Fetches a URL."), "{doc}");
}

#[test]
fn a_tool_search_stays_while_the_wire_keeps_something_to_search() {
    // An MCP toolset (its tools may be deferred) stays on the wire.
    let mut t = tools();
    t.as_array_mut().unwrap().push(json!({"type": "mcp_toolset",
        "mcp_server_name": "docs", "default_config": {"defer_loading": true}}));
    let plan = plan_in(&t, Mode::Code, "standard");
    let v = rewritten(json!([{"role": "user", "content": "hi"}]), &t, &plan);
    assert_eq!(
        names(&v),
        [
            "run_code",
            "tool_search_tool_regex",
            "web_search",
            "mcp_toolset"
        ]
    );

    // Both mode keeps the visible deferred tools on the wire, deferred.
    let plan = plan_in(&tools(), Mode::Both, "standard");
    let v = rewritten(json!([{"role": "user", "content": "hi"}]), &tools(), &plan);
    let fetch = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "WebFetch")
        .unwrap();
    assert_eq!(fetch["defer_loading"], true);
    assert!(names(&v).contains(&"tool_search_tool_regex"), "{v}");

    // Native mode with nothing hidden leaves the tools as sent.
    let plan = plan_in(&tools(), Mode::Native, "standard");
    assert!(plan.wire_tools.is_none());
}

#[test]
fn a_forced_tool_search_the_wire_lost_is_forced_no_more() {
    let body = json!({"model": "m", "max_tokens": 8, "tools": tools(),
                      "tool_choice": {"type": "tool", "name": "tool_search_tool_regex"},
                      "messages": [{"role": "user", "content": "hi"}]});
    let mut r = MessagesRequest::parse(&serde_json::to_vec(&body).unwrap()).unwrap();
    r.rewrite(&plan_in(&tools(), Mode::Code, "standard"), &store())
        .unwrap();
    let v: Value = serde_json::from_slice(&r.to_bytes()).unwrap();
    assert_eq!(
        v["tool_choice"],
        json!({"type": "tool", "name": "run_code"})
    );
}
