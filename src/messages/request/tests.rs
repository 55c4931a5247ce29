use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::conversation::Anchor;
use crate::messages::items;
use crate::mode::{Mode, Runtime};
use crate::splice::{MemorySpliceStore, Splice, TenantSplices};
use crate::test_support::{fresh_splices, standard_plan};
use crate::turn::JudgedCall;

fn tools() -> Value {
    json!([
        {"name": "Read", "description": "Reads a file.",
         "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}},
        {"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        {"name": "mcp__github__create_issue", "input_schema": {"type": "object"},
         "cache_control": {"type": "ephemeral"}}
    ])
}

fn plan_with(tools: &Value, mode: Mode, runtime: Runtime) -> ToolPlan {
    standard_plan(&crate::messages::tools::TOOLS, tools, mode, runtime)
}

fn plan(mode: Mode) -> ToolPlan {
    plan_with(&tools(), mode, Runtime::Embedded)
}

/// Code mode with the client's own `run_code` (client runtime): a turn
/// calling `run_code` and `Read` passes the first and denies the second.
fn client_plan() -> ToolPlan {
    let mut t = tools();
    t.as_array_mut().unwrap().insert(
        0,
        json!({"name": "run_code", "input_schema": {"type": "object"}}),
    );
    plan_with(&t, Mode::Code, Runtime::Client)
}

fn body(extra: Value) -> Vec<u8> {
    let mut v = json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "tools": tools(),
                       "messages": [{"role": "user", "content": "hi"}]});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    serde_json::to_vec(&v).unwrap()
}

fn rewritten(body: &[u8], plan: &ToolPlan, splices: &TenantSplices) -> Value {
    let mut r = MessagesRequest::parse(body).unwrap();
    r.rewrite(plan, splices).unwrap();
    serde_json::from_slice(&r.to_bytes()).unwrap()
}

#[test]
fn an_untouched_request_is_the_clients_bytes() {
    let body = br#"{"model":"m", "messages":[{"role":"user","content":"hi"} ,{"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":"s\u00e9"}]}],"stream":true,"thinking":{"type":"enabled","budget_tokens":1024}}"#;
    let mut r = MessagesRequest::parse(body).unwrap();
    assert!(r.stream);
    assert_eq!(r.messages().len(), 2);
    r.rewrite(&plan(Mode::Native), &fresh_splices()).unwrap();
    // The top level is re-joined without spaces; the messages are as sent.
    assert_eq!(
        &r.to_bytes()[..],
        &br#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":"s\u00e9"}]}],"stream":true,"thinking":{"type":"enabled","budget_tokens":1024}}"#[..]
    );
}

#[test]
fn messages_must_be_a_list() {
    let err = MessagesRequest::parse(br#"{"messages":{"role":"user"}}"#).unwrap_err();
    assert!(
        err.to_string().contains("`messages` must be an array"),
        "{err}"
    );
    let err = MessagesRequest::parse(br#"{"messages":[],"messages":[]}"#).unwrap_err();
    assert!(matches!(err, ProxyError::DuplicateKey { .. }), "{err}");
}

#[test]
fn code_mode_puts_run_code_and_the_server_tools_on_the_wire_with_the_tools_breakpoint() {
    let v = rewritten(&body(json!({})), &plan(Mode::Code), &fresh_splices());
    let tools = v["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["run_code", "web_search"]);
    assert!(tools[0]["input_schema"].is_object());
    assert_eq!(tools[1]["max_uses"], 5);
    // The client's last tool cached every tool: the wire's last does now.
    assert_eq!(tools[1]["cache_control"], json!({"type": "ephemeral"}));
    assert!(tools[0].get("cache_control").is_none());
}

#[test]
fn without_a_breakpoint_on_the_last_tool_the_wire_gets_none() {
    let mut t = tools();
    t[3].as_object_mut().unwrap().remove("cache_control");
    t[0]["cache_control"] = json!({"type": "ephemeral"});
    // The plan is built for the tools the request declares, as the proxy
    // builds it (the breakpoint is read with the plan, once per tool set).
    let v = rewritten(
        &body(json!({"tools": t})),
        &plan_with(&t, Mode::Code, Runtime::Embedded),
        &fresh_splices(),
    );
    for tool in v["tools"].as_array().unwrap() {
        assert!(tool.get("cache_control").is_none(), "{tool}");
    }
}

#[test]
fn sections_follow_a_string_system_or_become_the_system() {
    let v = rewritten(
        &body(json!({"system": "You are Claude Code."})),
        &plan(Mode::Code),
        &fresh_splices(),
    );
    let system = v["system"].as_str().unwrap();
    assert!(
        system.starts_with("You are Claude Code.\n\n# Tool mode: code"),
        "{system}"
    );
    assert!(system.contains("Read"), "{system}");
    let v = rewritten(&body(json!({})), &plan(Mode::Code), &fresh_splices());
    assert!(v["system"]
        .as_str()
        .unwrap()
        .starts_with("# Tool mode: code"));
    let v = rewritten(
        &body(json!({"system": ""})),
        &plan(Mode::Code),
        &fresh_splices(),
    );
    assert!(v["system"]
        .as_str()
        .unwrap()
        .starts_with("# Tool mode: code"));
}

#[test]
fn sections_go_inside_the_last_cache_breakpoint_of_a_block_system() {
    let cc = json!({"type": "ephemeral", "ttl": "1h"});
    let v = rewritten(
        &body(json!({"system": [
            {"type": "text", "text": "billing"},
            {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Long prompt.", "cache_control": cc},
            {"type": "text", "text": "Uncached tail."}
        ]})),
        &plan(Mode::Code),
        &fresh_splices(),
    );
    let system = v["system"].as_array().unwrap();
    assert_eq!(system.len(), 5);
    assert_eq!(
        system[1]["cache_control"],
        json!({"type": "ephemeral"}),
        "earlier breakpoints stay"
    );
    assert_eq!(
        system[2],
        json!({"type": "text", "text": "Long prompt."}),
        "the last breakpoint moves"
    );
    assert!(system[3]["text"]
        .as_str()
        .unwrap()
        .starts_with("# Tool mode: code"));
    assert_eq!(system[3]["cache_control"], cc);
    assert_eq!(system[4], json!({"type": "text", "text": "Uncached tail."}));

    let v = rewritten(
        &body(json!({"system": [{"type": "text", "text": "a"}]})),
        &plan(Mode::Code),
        &fresh_splices(),
    );
    let system = v["system"].as_array().unwrap();
    assert_eq!(system.len(), 2);
    assert!(system[1].get("cache_control").is_none());
    assert_eq!(system[1]["type"], "text");

    let mut r = MessagesRequest::parse(&body(json!({"system": 7}))).unwrap();
    let err = r.rewrite(&plan(Mode::Code), &fresh_splices()).unwrap_err();
    assert!(
        err.to_string().contains("`system` must be a string"),
        "{err}"
    );
}

#[test]
fn the_rewrite_is_byte_stable() {
    let b = body(
        json!({"system": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}],
                        "tool_choice": {"type": "tool", "name": "Read"}}),
    );
    let once = |p: &ToolPlan| {
        let mut r = MessagesRequest::parse(&b).unwrap();
        r.rewrite(p, &fresh_splices()).unwrap();
        r.to_bytes()
    };
    assert_eq!(once(&plan(Mode::Code)), once(&plan(Mode::Code)));
}

#[test]
fn tool_choice_never_names_a_tool_the_wire_lacks() {
    let v = rewritten(
        &body(
            json!({"tool_choice": {"type": "tool", "name": "Read", "disable_parallel_tool_use": true}}),
        ),
        &plan(Mode::Code),
        &fresh_splices(),
    );
    assert_eq!(
        v["tool_choice"],
        json!({"type": "tool", "name": "run_code", "disable_parallel_tool_use": true})
    );
    let v = rewritten(
        &body(json!({"tool_choice": {"type": "tool", "name": "web_search"}})),
        &plan(Mode::Code),
        &fresh_splices(),
    );
    assert_eq!(
        v["tool_choice"],
        json!({"type": "tool", "name": "web_search"})
    );
    // Native mode narrows nothing: the choice is the client's bytes.
    let b = body(json!({"tool_choice": {"type": "tool", "name": "Read", "x": 1}}));
    let v = rewritten(&b, &plan(Mode::Native), &fresh_splices());
    assert_eq!(
        v["tool_choice"],
        json!({"type": "tool", "name": "Read", "x": 1})
    );
}

fn call(id: &str, name: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": {"file_path": "a"}})
}

/// Stores the splice of a turn that called `run_code` (passed to the
/// client) and `Read` (denied in code mode), judged as the proxy does.
fn stored_turn(splices: &TenantSplices, plan: &ToolPlan) {
    let calls: Vec<JudgedCall> = [call("toolu_run", "run_code"), call("toolu_read", "Read")]
        .iter()
        .filter_map(|b| items::judge_block(b, plan))
        .collect();
    let (keys, splice) = crate::turn::splice::<crate::messages::Messages>(&calls).unwrap();
    assert_eq!(keys, ["toolu_run"]);
    // The conversation of `history()`: its first user message.
    splices.put(
        &Anchor::of_content(&json!("read a")),
        &keys,
        Arc::new(splice),
    );
}

fn history() -> Value {
    json!([
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            call("toolu_run", "run_code")
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_run", "content": "1"},
            {"type": "text", "text": "go on"}
        ]}
    ])
}

#[test]
fn stored_denials_join_their_turn_and_its_answers() {
    let plan = client_plan();
    let splices = fresh_splices();
    stored_turn(&splices, &plan);
    let v = rewritten(&body(json!({"messages": history()})), &plan, &splices);
    let m = v["messages"].as_array().unwrap();
    assert_eq!(m.len(), 3);
    assert_eq!(
        m[1]["content"],
        json!([{"type": "thinking", "thinking": "hm", "signature": "sig"},
               call("toolu_run", "run_code"), call("toolu_read", "Read")])
    );
    let user = m[2]["content"].as_array().unwrap();
    assert_eq!(user[0]["tool_use_id"], "toolu_run");
    assert_eq!(user[1]["tool_use_id"], "toolu_read");
    assert_eq!(user[1]["is_error"], true);
    assert!(user[1]["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("UNKNOWN_TOOL"));
    assert_eq!(user[2], json!({"type": "text", "text": "go on"}));

    // Nothing twice: a history that already holds the denial is as sent.
    let again = v["messages"].clone();
    let w = rewritten(&body(json!({"messages": again})), &plan, &splices);
    assert_eq!(w["messages"], v["messages"]);
    // Another tenant's turn with the same ids finds nothing.
    let other = TenantSplices::new(
        Arc::new(MemorySpliceStore::new(Duration::from_secs(60), 1 << 20)),
        crate::tenant::Tenant::anonymous("other"),
    );
    other.put(
        &Anchor::of_content(&json!("read a")),
        &["unrelated".to_owned()],
        Arc::new(Splice {
            denied_calls: vec![],
            denials: vec![],
        }),
    );
    let w = rewritten(&body(json!({"messages": history()})), &plan, &other);
    assert_eq!(w["messages"], history());
}

#[test]
fn a_splice_leaves_the_other_messages_bytes_alone() {
    let plan = client_plan();
    let splices = fresh_splices();
    stored_turn(&splices, &plan);
    let b = body(json!({"messages": history()}));
    let mut r = MessagesRequest::parse(&b).unwrap();
    let first = r.messages()[0].get().to_owned();
    r.rewrite(&plan, &splices).unwrap();
    assert_eq!(r.messages()[0].get(), first);
    // The thinking block is the client's bytes inside the re-written turn.
    let turn = r.messages()[1].get();
    assert!(
        turn.contains(r#"{"type":"thinking","thinking":"hm","signature":"sig"}"#),
        "{turn}"
    );
}

#[test]
fn a_count_tokens_body_gets_the_rewrite_of_its_messages_request() {
    let plan = plan(Mode::Code);
    let system = json!([{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}]);
    let choice = json!({"type": "tool", "name": "Bash"});
    let full = rewritten(
        &body(json!({"system": system, "tool_choice": choice, "stream": true})),
        &plan,
        &fresh_splices(),
    );
    let count = serde_json::to_vec(&json!({"model": "claude-sonnet-4-5", "system": system,
        "tool_choice": choice, "tools": tools(), "messages": [{"role": "user", "content": "hi"}]}))
    .unwrap();
    let counted = rewritten(&count, &plan, &fresh_splices());
    for key in ["system", "tools", "tool_choice", "messages"] {
        assert_eq!(counted[key], full[key], "{key}");
    }
    assert!(counted.get("max_tokens").is_none());
}

#[test]
fn pushed_messages_follow_the_messages() {
    let mut r = MessagesRequest::parse(br#"{"model":"m"}"#).unwrap();
    r.push_messages(&[json!({"role": "user", "content": "hi"})]);
    assert_eq!(
        &r.to_bytes()[..],
        &br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#[..]
    );
    r.set_field("max_tokens", &json!(5));
    assert_eq!(r.field("max_tokens").unwrap().get(), "5");
}
