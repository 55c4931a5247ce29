//! The Responses request side on a Codex-shaped request: the plan's view of
//! its tools and the rewrite the upstream gets, in code mode and the others
//! (the HTTP route is tested with the handler).

use serde_json::{json, Value};

use crate::turn::WireRequest;

use super::ResponsesRequest;
use crate::mode::{Mode, Runtime};
use crate::plan::ToolPlan;
use crate::splice::fresh_splices;

const GRAMMAR: &str = "start: begin_patch hunk+ end_patch\nbegin_patch: \"*** Begin Patch\" LF\nend_patch: \"*** End Patch\" LF?\n";

fn tools() -> Value {
    json!([
        {"type": "function", "name": "exec_command", "description": "Runs a command in a PTY.",
         "strict": false, "parameters": {"type": "object", "properties": {
             "cmd": {"type": "string", "description": "Shell command to execute."},
             "yield_time_ms": {"type": "number"}}, "required": ["cmd"], "additionalProperties": false}},
        {"type": "function", "name": "write_stdin", "description": "Writes to a session.",
         "strict": false, "parameters": {"type": "object", "properties": {
             "session_id": {"type": "number"}, "chars": {"type": "string"}}, "required": ["session_id"]}},
        {"type": "function", "name": "update_plan", "description": "Updates the plan.",
         "parameters": {"type": "object", "properties": {"plan": {"type": "array", "items": {"type": "object"}}}}},
        {"type": "custom", "name": "apply_patch", "description": "Use the `apply_patch` tool to edit files.",
         "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR}},
        {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.", "tools": [
            {"type": "function", "name": "spawn_agent", "description": "Starts an agent.",
             "parameters": {"type": "object", "properties": {"task": {"type": "string"}}}},
            {"type": "function", "name": "send_input", "parameters": {"type": "object"}},
            {"type": "function", "name": "wait", "parameters": {"type": "object"}}
        ]},
        {"type": "function", "name": "view_image", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
        {"type": "function", "name": "list_mcp_resources", "parameters": {"type": "object"}},
        {"type": "web_search", "external_web_access": false}
    ])
}

/// What Codex sends: two developer messages, no `instructions`, the whole
/// history, `store: false`, `prompt_cache_key`.
fn codex_request(tools: &Value, tool_choice: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "model": "gpt-5-codex",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex, a coding agent."}]},
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>sandboxed</permissions>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>cwd=/w</environment_context>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List the files."}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA..."},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "run_code", "arguments": "{\"code\":\"return 1\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "1"}
        ],
        "tools": tools,
        "tool_choice": tool_choice,
        "parallel_tool_calls": true,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": false,
        "stream": true,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "0199-abc"
    }))
    .unwrap()
}

fn plan(tools: &Value, mode: Mode, runtime: Runtime) -> ToolPlan {
    crate::plan::standard_plan(&crate::responses::tools::TOOLS, tools, mode, runtime)
}

fn rewrite(body: &[u8], plan: &ToolPlan) -> bytes::Bytes {
    let mut request = ResponsesRequest::parse(body).unwrap();
    request.rewrite(plan, &fresh_splices()).unwrap();
    request.to_bytes()
}

#[test]
fn codex_in_code_mode_sees_run_code_and_the_providers_tools_only() {
    let plan = plan(&tools(), Mode::Code, Runtime::Embedded);
    let body = codex_request(&tools(), json!("auto"));
    let sent: Value = serde_json::from_slice(&rewrite(&body, &plan)).unwrap();
    let wire: Vec<&str> = sent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().or(t["type"].as_str()).unwrap())
        .collect();
    assert_eq!(wire, ["run_code", "web_search"]);
    assert_eq!(sent["tools"][0]["type"], "function");
    assert_eq!(
        sent["tools"][1],
        json!({"type": "web_search", "external_web_access": false})
    );
    assert_eq!(sent["tool_choice"], "auto");
}

#[test]
fn codex_tools_are_in_the_sdk_with_their_input_shapes() {
    let plan = plan(&tools(), Mode::Code, Runtime::Embedded);
    let sdk = &plan.prompt;
    assert!(
        sdk.contains("apply_patch(input: string): Promise<string>;"),
        "{sdk}"
    );
    assert!(sdk.contains("start: begin_patch hunk+ end_patch"), "{sdk}");
    assert!(sdk.contains("\"multi_agent_v1.spawn_agent\""), "{sdk}");
    assert!(
        sdk.contains("tools[\"multi_agent_v1.send_input\"]"),
        "{sdk}"
    );
    assert!(
        sdk.contains("Part of the `multi_agent_v1` tool group: Sub-agents."),
        "{sdk}"
    );
    assert!(sdk.contains("exec_command("), "{sdk}");
    assert!(
        !sdk.contains("web_search"),
        "provider tools stay out of the SDK: {sdk}"
    );
    assert!(plan.is_freeform("apply_patch"));
    assert_eq!(plan.visible_names.len(), 9);
}

#[test]
fn codex_sections_land_in_the_first_developer_message_and_nothing_else_moves() {
    let plan = plan(&tools(), Mode::Code, Runtime::Embedded);
    let body = codex_request(&tools(), json!("auto"));
    let client: Value = serde_json::from_slice(&body).unwrap();
    let sent: Value = serde_json::from_slice(&rewrite(&body, &plan)).unwrap();
    assert!(sent.get("instructions").is_none());
    let first = sent["input"][0]["content"].as_array().unwrap();
    assert_eq!(first[0], client["input"][0]["content"][0]);
    assert_eq!(first[1], json!({"type": "input_text", "text": plan.prompt}));
    for i in 1..7 {
        assert_eq!(sent["input"][i], client["input"][i], "input[{i}]");
    }
    for key in [
        "model",
        "parallel_tool_calls",
        "reasoning",
        "store",
        "stream",
        "include",
        "prompt_cache_key",
    ] {
        assert_eq!(sent[key], client[key], "{key}");
    }
}

#[test]
fn codex_forcing_a_native_tool_in_code_mode_forces_run_code() {
    let plan = plan(&tools(), Mode::Code, Runtime::Embedded);
    for choice in [
        json!({"type": "custom", "name": "apply_patch"}),
        json!({"type": "function", "name": "exec_command"}),
        json!({"type": "function", "namespace": "multi_agent_v1", "name": "wait"}),
    ] {
        let sent: Value =
            serde_json::from_slice(&rewrite(&codex_request(&tools(), choice.clone()), &plan))
                .unwrap();
        assert_eq!(
            sent["tool_choice"],
            json!({"type": "function", "name": "run_code"}),
            "{choice}"
        );
    }
    let choice = json!({"type": "allowed_tools", "mode": "auto",
                        "tools": [{"type": "function", "name": "view_image"}, {"type": "web_search"}]});
    let sent: Value =
        serde_json::from_slice(&rewrite(&codex_request(&tools(), choice), &plan)).unwrap();
    assert_eq!(
        sent["tool_choice"]["tools"],
        json!([{"type": "function", "name": "run_code"}, {"type": "web_search"}])
    );
}

#[test]
fn codex_rewrite_is_byte_stable_across_requests() {
    let body = codex_request(&tools(), json!("auto"));
    let a = rewrite(&body, &plan(&tools(), Mode::Code, Runtime::Embedded));
    let b = rewrite(&body, &plan(&tools(), Mode::Code, Runtime::Embedded));
    assert_eq!(a, b);
    // The next turn's request starts with the same bytes (prompt caching).
    let tools_end = |b: &[u8]| {
        let s = std::str::from_utf8(b).unwrap();
        s[..s.find("{\"type\":\"message\",\"role\":\"user\"").unwrap()].to_owned()
    };
    let mut next: Value = serde_json::from_slice(&body).unwrap();
    next["input"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "message", "role": "user", "content": "next"}));
    let c = rewrite(
        &serde_json::to_vec(&next).unwrap(),
        &plan(&tools(), Mode::Code, Runtime::Embedded),
    );
    assert_eq!(tools_end(&a), tools_end(&c));
}

#[test]
fn codex_in_native_mode_is_passed_as_sent() {
    let body = codex_request(&tools(), json!({"type": "custom", "name": "apply_patch"}));
    let plan = plan(&tools(), Mode::Native, Runtime::Embedded);
    assert!(plan.wire_tools.is_none());
    assert_eq!(&rewrite(&body, &plan)[..], &body[..]);
}

#[test]
fn with_the_client_runtime_the_clients_run_code_is_the_transport() {
    let mut with_run_code = tools();
    with_run_code
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "function", "name": "run_code",
        "description": "Client runs programs.", "parameters": {"type": "object"}}));
    let plan = plan(&with_run_code, Mode::Code, Runtime::Client);
    let sent: Value = serde_json::from_slice(&rewrite(
        &codex_request(&with_run_code, json!("required")),
        &plan,
    ))
    .unwrap();
    assert_eq!(
        sent["tools"][0]["description"], "Client runs programs.",
        "{}",
        sent["tools"]
    );
    assert_eq!(sent["tools"].as_array().unwrap().len(), 2);
    assert_eq!(sent["tool_choice"], "required");
}
