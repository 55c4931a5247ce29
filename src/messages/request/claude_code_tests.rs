//! The Messages request side on a Claude Code-shaped request: the plan's
//! view of its tools and the rewrite the upstream gets, in code mode and
//! native mode, for `messages` and `count_tokens` bodies (the HTTP route is
//! tested with the handler).

use serde_json::{json, Value};

use crate::turn::WireRequest;

use super::MessagesRequest;
use crate::mode::{Mode, Runtime};
use crate::plan::ToolPlan;
use crate::splice::fresh_splices;

/// A tool as Claude Code declares it: name, long description, JSON schema.
fn tool(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({"name": name, "description": description, "input_schema": {
        "type": "object", "properties": properties, "required": required,
        "additionalProperties": false, "$schema": "http://json-schema.org/draft-07/schema#"}})
}

fn s(d: &str) -> Value {
    json!({"type": "string", "description": d})
}

/// About two dozen client tools (built-ins, then MCP tools), with the
/// provider's web search among them and a cache breakpoint on the last.
fn tools() -> Value {
    let mut t = vec![
        tool(
            "Task",
            "Launch a new agent to handle complex, multi-step tasks autonomously.",
            json!({"description": s("A short task description"), "prompt": s("The task"),
                    "subagent_type": s("The agent type")}),
            &["description", "prompt", "subagent_type"],
        ),
        tool(
            "Bash",
            "Executes a given bash command in a persistent shell session.",
            json!({"command": s("The command to execute"), "timeout": {"type": "number"},
                    "description": s("What it does"), "run_in_background": {"type": "boolean"}}),
            &["command"],
        ),
        tool(
            "Glob",
            "Fast file pattern matching tool.",
            json!({"pattern": s("The glob pattern"), "path": s("The directory")}),
            &["pattern"],
        ),
        tool(
            "Grep",
            "A powerful search tool built on ripgrep.",
            json!({"pattern": s("The regex"), "path": s("Where"), "glob": s("Filter"),
                    "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"]},
                    "-i": {"type": "boolean"}, "-n": {"type": "boolean"}, "head_limit": {"type": "number"}}),
            &["pattern"],
        ),
        tool(
            "ExitPlanMode",
            "Prompts the user to exit plan mode.",
            json!({"plan": s("The plan")}),
            &["plan"],
        ),
        tool(
            "Read",
            "Reads a file from the local filesystem.",
            json!({"file_path": s("The absolute path"), "offset": {"type": "number"}, "limit": {"type": "number"}}),
            &["file_path"],
        ),
        tool(
            "Edit",
            "Performs exact string replacements in files.",
            json!({"file_path": s("The file"), "old_string": s("Text to replace"), "new_string": s("Replacement"),
                    "replace_all": {"type": "boolean", "default": false}}),
            &["file_path", "old_string", "new_string"],
        ),
        tool(
            "Write",
            "Writes a file to the local filesystem.",
            json!({"file_path": s("The file"), "content": s("The content")}),
            &["file_path", "content"],
        ),
        tool(
            "NotebookEdit",
            "Replaces the contents of a cell in a Jupyter notebook.",
            json!({"notebook_path": s("The notebook"), "cell_id": s("The cell"), "new_source": s("Source"),
                    "cell_type": {"type": "string", "enum": ["code", "markdown"]},
                    "edit_mode": {"type": "string", "enum": ["replace", "insert", "delete"]}}),
            &["notebook_path", "new_source"],
        ),
        tool(
            "WebFetch",
            "Fetches content from a URL and processes it.",
            json!({"url": {"type": "string", "format": "uri"}, "prompt": s("What to extract")}),
            &["url", "prompt"],
        ),
        tool(
            "TodoWrite",
            "Create and manage a structured task list.",
            json!({"todos": {"type": "array", "items": {"type": "object", "properties": {
                 "content": {"type": "string", "minLength": 1},
                 "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                 "activeForm": {"type": "string"}}, "required": ["content", "status", "activeForm"]}}}),
            &["todos"],
        ),
        tool(
            "BashOutput",
            "Retrieves output from a background bash shell.",
            json!({"bash_id": s("The shell"), "filter": s("A regex")}),
            &["bash_id"],
        ),
        tool(
            "KillShell",
            "Kills a running background bash shell.",
            json!({"shell_id": s("The shell")}),
            &["shell_id"],
        ),
        tool(
            "SlashCommand",
            "Execute a slash command.",
            json!({"command": s("The command")}),
            &["command"],
        ),
        tool(
            "Skill",
            "Execute a skill.",
            json!({"skill": s("The skill")}),
            &["skill"],
        ),
        tool(
            "AskUserQuestion",
            "Asks the user questions.",
            json!({"questions": {"type": "array", "items": {"type": "object"}}}),
            &["questions"],
        ),
    ];
    t.push(json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 8}));
    for (server, name) in [
        ("ide", "getDiagnostics"),
        ("ide", "executeCode"),
        ("github", "create_issue"),
        ("github", "list_pull_requests"),
        ("github", "get_file_contents"),
        ("linear", "create-issue"),
        ("linear", "search_issues"),
        ("sentry", "get_issue"),
    ] {
        t.push(tool(
            &format!("mcp__{server}__{name}"),
            &format!("{name} on {server} (MCP)."),
            json!({"query": s("Input"), "limit": {"type": "integer", "minimum": 1}}),
            &["query"],
        ));
    }
    t.last_mut().unwrap()["cache_control"] = json!({"type": "ephemeral"});
    Value::Array(t)
}

/// What Claude Code sends: three system blocks (two cached), thinking on,
/// streaming, a history with a signed thinking block and a tool round.
fn request(tool_choice: Option<Value>, count_tokens: bool) -> Vec<u8> {
    let mut v = json!({
        "model": "claude-sonnet-4-5-20250929",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                                          {"type": "text", "text": "Read a.txt"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should read it.", "signature": "EqQBCkYIBxgCKkD+/=="},
                {"type": "tool_use", "id": "toolu_01A", "name": "run_code", "input": {"code": "return await tools.Read({file_path: 'a.txt'})"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01A", "content": "hello",
                                          "cache_control": {"type": "ephemeral"}}]}
        ],
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.0.50"},
            {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.",
             "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "You are an interactive CLI tool that helps users with software engineering tasks.",
             "cache_control": {"type": "ephemeral"}}
        ],
        "tools": tools(),
        "thinking": {"type": "enabled", "budget_tokens": 31999},
    });
    if !count_tokens {
        v["max_tokens"] = json!(32000);
        v["stream"] = json!(true);
        v["metadata"] = json!({"user_id": "user_abc_account__session_1"});
        v["context_management"] =
            json!({"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]});
    }
    if let Some(c) = tool_choice {
        v["tool_choice"] = c;
    }
    serde_json::to_vec(&v).unwrap()
}

fn plan(mode: Mode, runtime: Runtime) -> ToolPlan {
    crate::plan::standard_plan(&crate::messages::tools::TOOLS, &tools(), mode, runtime)
}

fn rewrite(body: &[u8], plan: &ToolPlan) -> bytes::Bytes {
    let mut request = MessagesRequest::parse(body).unwrap();
    request.rewrite(plan, &fresh_splices()).unwrap();
    request.to_bytes()
}

#[test]
fn claude_code_in_code_mode_sees_run_code_and_web_search_only() {
    let plan = plan(Mode::Code, Runtime::Embedded);
    assert_eq!(plan.visible_names.len(), 24);
    let sent: Value = serde_json::from_slice(&rewrite(&request(None, false), &plan)).unwrap();
    let wire = sent["tools"].as_array().unwrap();
    let names: Vec<&str> = wire.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["run_code", "web_search"]);
    assert!(wire[0]["input_schema"]["properties"]["code"].is_object());
    assert_eq!(wire[1]["type"], "web_search_20250305");
    assert_eq!(wire[1]["max_uses"], 8);
    // The breakpoint on the client's last tool now ends the wire's tools.
    assert_eq!(wire[1]["cache_control"], json!({"type": "ephemeral"}));
    assert!(wire[0].get("cache_control").is_none());
    // Everything the proxy does not rewrite is the client's.
    assert_eq!(
        sent["thinking"],
        json!({"type": "enabled", "budget_tokens": 31999})
    );
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["context_management"]["edits"][0]["keep"], "all");
    assert!(sent.get("tool_choice").is_none());
}

#[test]
fn the_sdk_is_in_system_inside_the_cached_prefix() {
    let plan = plan(Mode::Code, Runtime::Embedded);
    let sent: Value = serde_json::from_slice(&rewrite(&request(None, false), &plan)).unwrap();
    let system = sent["system"].as_array().unwrap();
    assert_eq!(system.len(), 4);
    assert_eq!(
        system[0],
        json!({"type": "text", "text": "x-anthropic-billing-header: cc_version=2.0.50"})
    );
    assert_eq!(system[1]["cache_control"], json!({"type": "ephemeral"}));
    assert!(
        system[2].get("cache_control").is_none(),
        "the last breakpoint moved"
    );
    let sdk = system[3]["text"].as_str().unwrap();
    assert_eq!(system[3]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(sdk, plan.prompt);
    assert!(sdk.starts_with("# Tool mode: code"), "{sdk}");
    for name in [
        "Read(",
        "TodoWrite(",
        "mcp__github__create_issue(",
        "\"mcp__linear__create-issue\"",
    ] {
        assert!(sdk.contains(name), "{name} missing from the SDK: {sdk}");
    }
    assert!(
        !sdk.contains("web_search"),
        "server tools stay out of the SDK"
    );
    // As many breakpoints as the client sent: one moved, none added.
    let breakpoints = system
        .iter()
        .filter(|b| b.get("cache_control").is_some())
        .count();
    assert_eq!(breakpoints, 2);
}

#[test]
fn a_forced_native_tool_becomes_run_code() {
    let plan = plan(Mode::Code, Runtime::Embedded);
    let body = request(
        Some(json!({"type": "tool", "name": "Read", "disable_parallel_tool_use": true})),
        false,
    );
    let sent: Value = serde_json::from_slice(&rewrite(&body, &plan)).unwrap();
    assert_eq!(
        sent["tool_choice"],
        json!({"type": "tool", "name": "run_code", "disable_parallel_tool_use": true})
    );
    for kept in [
        json!({"type": "any"}),
        json!({"type": "tool", "name": "web_search"}),
    ] {
        let sent: Value =
            serde_json::from_slice(&rewrite(&request(Some(kept.clone()), false), &plan)).unwrap();
        assert_eq!(sent["tool_choice"], kept);
    }
}

#[test]
fn the_rewrite_is_byte_stable_and_keeps_the_history_bytes() {
    let body = request(Some(json!({"type": "auto"})), false);
    let a = rewrite(&body, &plan(Mode::Code, Runtime::Embedded));
    let b = rewrite(&body, &plan(Mode::Code, Runtime::Embedded));
    assert_eq!(a, b);
    let text = std::str::from_utf8(&a).unwrap();
    let original: Value = serde_json::from_slice(&body).unwrap();
    let messages = serde_json::to_string(&original["messages"]).unwrap();
    assert!(
        text.contains(&messages),
        "the messages are the client's bytes"
    );
    assert!(text.contains(r#""signature":"EqQBCkYIBxgCKkD+/==""#));
    assert!(a.len() < body.len(), "{} -> {} bytes", body.len(), a.len());
}

#[test]
fn native_mode_leaves_the_request_as_sent() {
    for choice in [None, Some(json!({"type": "tool", "name": "Read"}))] {
        let body = request(choice, false);
        let plan = plan(Mode::Native, Runtime::Embedded);
        assert!(plan.wire_tools.is_none());
        assert!(plan.prompt.is_empty());
        // serde_json writes compactly, as the rewrite re-joins: same bytes.
        assert_eq!(&rewrite(&body, &plan)[..], &body[..]);
    }
}

#[test]
fn count_tokens_gets_the_rewrite_of_its_messages_request() {
    let plan = plan(Mode::Code, Runtime::Embedded);
    let choice = Some(json!({"type": "tool", "name": "Bash"}));
    let full: Value =
        serde_json::from_slice(&rewrite(&request(choice.clone(), false), &plan)).unwrap();
    let counted: Value = serde_json::from_slice(&rewrite(&request(choice, true), &plan)).unwrap();
    for key in [
        "system",
        "tools",
        "tool_choice",
        "messages",
        "thinking",
        "model",
    ] {
        assert_eq!(counted[key], full[key], "{key}");
    }
    assert!(counted.get("stream").is_none() && counted.get("max_tokens").is_none());
}
