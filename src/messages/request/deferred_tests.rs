//! Deferred loading on the request side: tools declared with
//! `defer_loading: true`, the provider's tool search tool, and the
//! `tool_reference` blocks a history carries (Claude Code's `ToolSearch`
//! results, and what it echoes of the model's turns).

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::turn::WireRequest;

use super::MessagesRequest;
use crate::mode::{Mode, Runtime};
use crate::plan::ToolPlan;
use crate::preset::{Catalog, ConfigFile};
use crate::splice::fresh_splices;

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

fn rewritten(messages: Value, tools: &Value, plan: &ToolPlan) -> Value {
    let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "tools": tools,
                      "messages": messages});
    let mut r = MessagesRequest::parse(&serde_json::to_vec(&body).unwrap()).unwrap();
    r.rewrite(plan, &fresh_splices()).unwrap();
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
    r.rewrite(&plan_in(&tools(), Mode::Code, "standard"), &fresh_splices())
        .unwrap();
    let v: Value = serde_json::from_slice(&r.to_bytes()).unwrap();
    assert_eq!(
        v["tool_choice"],
        json!({"type": "tool", "name": "run_code"})
    );
}

/// A history as Claude Code sends it after its `ToolSearch` loaded WebFetch
/// (the `tool_result` holds the reference) and after the model's turn held
/// a reference and a regex search's result (Claude Code echoes both).
fn history() -> Value {
    json!([
        {"role": "user", "content": "fetch it"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "ToolSearch",
             "input": {"query": "select:WebFetch"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                {"type": "tool_reference", "tool_name": "WebFetch"},
                {"type": "tool_reference", "tool_name": "run_code"}]},
            {"type": "text", "text": "Tool loaded."}]},
        {"role": "assistant", "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_regex",
             "input": {"pattern": "Web"}},
            {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1", "content": {
                "type": "tool_search_tool_search_result", "tool_references": [
                    {"type": "tool_reference", "tool_name": "WebFetch"},
                    {"type": "tool_reference", "tool_name": "docs_search"}]}},
            {"type": "tool_reference", "tool_name": "WebSearch",
             "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Loaded."}]},
        {"role": "user", "content": "go on"}
    ])
}

#[test]
fn references_to_tools_the_wire_lacks_are_rewritten_where_a_history_holds_them() {
    let plan = plan_in(&tools(), Mode::Code, "standard");
    let v = rewritten(history(), &tools(), &plan);
    let m = &v["messages"];
    // Inside ToolSearch's result: where the tool is now, in the SDK.
    let result = &m[2]["content"][0]["content"];
    assert_eq!(result[0]["type"], "text");
    let note = result[0]["text"].as_str().unwrap();
    assert!(
        note.contains("\"WebFetch\" is loaded") && note.contains("await tools.WebFetch(args)"),
        "{note}"
    );
    assert_eq!(
        result[1]["tool_name"], "run_code",
        "run_code is on the wire"
    );
    // The echoed search result keeps no name the wire lacks; a reference
    // of its own becomes text, its breakpoint kept.
    let found = &m[3]["content"][1]["content"]["tool_references"];
    assert_eq!(found, &json!([]));
    assert_eq!(
        m[3]["content"][2],
        json!({"type": "text", "text": "Tool \"WebSearch\" is not available in this conversation.",
               "cache_control": {"type": "ephemeral"}})
    );
    assert_eq!(
        m[3]["content"][3],
        json!({"type": "text", "text": "Loaded."})
    );
    assert_eq!(m[0], history()[0]);
    assert_eq!(m[1], history()[1]);
}

/// A request of [`tools`] whose `messages` are `history`, as JSON text.
fn with_history(history: &str) -> Vec<u8> {
    format!(
        r#"{{"model":"m","max_tokens":8,"tools":{},"messages":{history}}}"#,
        tools()
    )
    .into_bytes()
}

/// The request [`with_history`] gives, rewritten under `plan`, as text.
fn rewritten_text(history: &str, plan: &ToolPlan) -> String {
    let mut r = MessagesRequest::parse(&with_history(history)).unwrap();
    r.rewrite(plan, &fresh_splices()).unwrap();
    String::from_utf8(r.to_bytes().to_vec()).unwrap()
}

#[test]
fn a_message_without_a_reference_the_wire_lacks_keeps_its_bytes() {
    let plan = plan_in(&tools(), Mode::Code, "standard");
    let history = r#"[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_reference","tool_name":"run_code"} ,{"type":"text","text":"caf\u00e9"}]},{"role":"user","content":[{"type":"tool_r\u0065ference","tool_name":"WebFetch"}]}]"#;
    let out = rewritten_text(history, &plan);
    assert!(
        out.contains(r#"{"role":"assistant","content":[{"type":"tool_reference","tool_name":"run_code"} ,{"type":"text","text":"caf\u00e9"}]}"#),
        "{out}"
    );
    // A type spelled with escapes is read as the provider reads it.
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["messages"][2]["content"][0]["type"], "text", "{out}");
}

#[test]
fn references_stay_where_the_wire_carries_their_tool() {
    // Both mode: WebFetch is on the wire (deferred); a preset that hides it
    // takes it off, and its references with it.
    let both = plan_in(&tools(), Mode::Both, "standard");
    let v = rewritten(history(), &tools(), &both);
    assert_eq!(v["messages"][2], history()[2]);
    let hidden = plan_in(&tools(), Mode::Both, "no-fetch");
    let v = rewritten(history(), &tools(), &hidden);
    let note = v["messages"][2]["content"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert_eq!(
        note,
        "Tool \"WebFetch\" is not available in this conversation."
    );

    // An MCP toolset on the wire: a name the client declared nowhere may be
    // one of its tools; the client's collapsed WebFetch still goes.
    let mut t = tools();
    t.as_array_mut()
        .unwrap()
        .push(json!({"type": "mcp_toolset", "mcp_server_name": "docs"}));
    let plan = plan_in(&t, Mode::Code, "standard");
    let v = rewritten(history(), &t, &plan);
    let found = &v["messages"][3]["content"][1]["content"]["tool_references"];
    assert_eq!(
        found,
        &json!([{"type": "tool_reference", "tool_name": "docs_search"}])
    );

    // Native mode with nothing hidden leaves the history as sent.
    let native = plan_in(&tools(), Mode::Native, "standard");
    let v = rewritten(history(), &tools(), &native);
    assert_eq!(v["messages"], history());
}

#[test]
fn a_reference_hidden_behind_a_repeated_key_is_read_as_the_provider_reads_it() {
    let plan = plan_in(&tools(), Mode::Code, "standard");
    // A block whose second `type` makes it a reference (serde and most
    // providers read the last): written anew from that reading.
    let history = r#"[{"role":"user","content":[{"type":"text","text":"x","type":"tool_reference","tool_name":"WebFetch"}]}]"#;
    let out = rewritten_text(history, &plan);
    assert!(!out.contains("tool_reference"), "{out}");
    // A message with two `content`s has no single reading: refused.
    let history = r#"[{"role":"user","content":"hi","content":[{"type":"tool_reference","tool_name":"WebFetch"}]}]"#;
    let mut r = MessagesRequest::parse(&with_history(history)).unwrap();
    let err = r.rewrite(&plan, &fresh_splices()).unwrap_err();
    assert!(
        err.to_string().contains("`content` more than once"),
        "{err}"
    );
}
