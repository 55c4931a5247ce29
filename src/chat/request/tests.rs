use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::conversation::Anchor;
use crate::preset::Catalog;
use crate::splice::{Splice, TenantSplices};
use crate::test_support::fresh_splices;

const TOOLS: &str = r#"[{"type":"function","function":{"name":"read","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}},{"type":"function","function":{"name":"run_code","parameters":{"type":"object"}}}]"#;

fn request(messages: Value, extra: &str) -> Vec<u8> {
    format!(r#"{{"model":"m","messages":{messages},"tools":{TOOLS}{extra},"vendor_x":{{"k":1}}}}"#)
        .into_bytes()
}

fn plan(mode: Mode) -> ToolPlan {
    let c = Catalog::builtin(Mode::Code);
    let raw = RawValue::from_string(TOOLS.into()).unwrap();
    ToolPlan::build(
        Some(&raw),
        c.get("standard").unwrap(),
        mode,
        crate::mode::Runtime::Client,
    )
    .unwrap()
}

fn rewritten(body: &[u8], mode: Mode, splices: &TenantSplices) -> Value {
    let mut chat = ChatRequest::parse(body).unwrap();
    chat.rewrite(&plan(mode), splices).unwrap();
    serde_json::from_slice(&chat.to_bytes()).unwrap()
}

#[test]
fn code_mode_appends_sections_to_the_first_system_message() {
    let body = request(
        json!([{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hi"}]),
        "",
    );
    let v = rewritten(&body, Mode::Code, &fresh_splices());
    let system = v["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("Be kind.\n\n# Tool mode: code"),
        "{system}"
    );
    assert_eq!(v["tools"].as_array().unwrap().len(), 1);
    assert_eq!(v["vendor_x"], json!({"k": 1}));
    assert_eq!(v["messages"][1], json!({"role": "user", "content": "hi"}));
}

#[test]
fn content_part_arrays_get_a_text_part() {
    let body = request(
        json!([{"role": "developer", "content": [{"type": "text", "text": "A"}]}]),
        "",
    );
    let v = rewritten(&body, Mode::Code, &fresh_splices());
    let parts = v["messages"][0]["content"].as_array().unwrap();
    assert_eq!(parts.len(), 2);
    assert!(parts[1]["text"].as_str().unwrap().contains("run_code"));
}

#[test]
fn a_system_message_is_added_when_there_is_none() {
    let body = request(json!([{"role": "user", "content": "hi"}]), "");
    let v = rewritten(&body, Mode::Code, &fresh_splices());
    assert_eq!(v["messages"][0]["role"], "system");
    assert_eq!(v["messages"][1]["role"], "user");
}

#[test]
fn forced_native_tool_becomes_run_code_in_code_mode() {
    let body = request(
        json!([]),
        r#","tool_choice":{"type":"function","function":{"name":"read"}}"#,
    );
    let v = rewritten(&body, Mode::Code, &fresh_splices());
    assert_eq!(
        v["tool_choice"],
        json!({"type": "function", "function": {"name": "run_code"}})
    );
    let v = rewritten(&body, Mode::Both, &fresh_splices());
    assert_eq!(v["tool_choice"]["function"]["name"], "read");
}

#[test]
fn stored_denials_are_spliced_after_the_turns_results() {
    let s = fresh_splices();
    s.put(
        &Anchor::of_content(&json!("go")),
        &["keep".into()],
        Arc::new(Splice {
            denied_calls: vec![json!({"id": "gone", "type": "function", "function": {"name": "read", "arguments": "{}"}})],
            denials: vec![json!({"role": "tool", "tool_call_id": "gone", "content": "UNKNOWN_TOOL: x"})],
        }),
    );
    let body = request(
        json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "keep", "type": "function", "function": {"name": "run_code", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "keep", "content": "ok"},
            {"role": "user", "content": "next"}
        ]),
        "",
    );
    let v = rewritten(&body, Mode::Code, &s);
    let m = v["messages"].as_array().unwrap();
    let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        vec!["system", "user", "assistant", "tool", "tool", "user"]
    );
    assert_eq!(m[2]["tool_calls"].as_array().unwrap().len(), 2);
    assert_eq!(m[4]["tool_call_id"], "gone");
}

#[test]
fn bad_bodies_are_clear_errors() {
    assert_eq!(
        ChatRequest::parse(b"{nope").unwrap_err().code(),
        "invalid_json"
    );
    assert_eq!(
        ChatRequest::parse(b"{\"model\":\"m\"}").unwrap_err().code(),
        "invalid_request"
    );
    assert_eq!(
        ChatRequest::parse(b"{\"messages\":3}").unwrap_err().code(),
        "invalid_request"
    );
}

#[test]
fn rewriting_is_byte_stable() {
    let body = request(
        json!([{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}]),
        "",
    );
    let a = {
        let mut c = ChatRequest::parse(&body).unwrap();
        c.rewrite(&plan(Mode::Code), &fresh_splices()).unwrap();
        c.to_bytes()
    };
    let b = {
        let mut c = ChatRequest::parse(&body).unwrap();
        c.rewrite(&plan(Mode::Code), &fresh_splices()).unwrap();
        c.to_bytes()
    };
    assert_eq!(a, b);
}

const AGENT: &str = r#"[{"type":"function","function":{"name":"read"}},{"type":"function","function":{"name":"bash"}},{"type":"function","function":{"name":"run_code"}}]"#;

/// The plan for AGENT under a preset that hides `bash`.
fn safe_plan(mode: Mode) -> ToolPlan {
    let file: crate::preset::ConfigFile =
        toml::from_str("[[preset]]\nname = \"safe\"\ndeny = [\"bash\"]\n").unwrap();
    let c = Catalog::build(Mode::Native, file).unwrap();
    let raw = RawValue::from_string(AGENT.into()).unwrap();
    ToolPlan::build(
        Some(&raw),
        c.get("safe").unwrap(),
        mode,
        crate::mode::Runtime::Client,
    )
    .unwrap()
}

fn safe_rewritten(extra: &str, mode: Mode) -> Result<Value, ProxyError> {
    let body = format!(r#"{{"model":"m","messages":[],"tools":{AGENT}{extra}}}"#);
    let mut chat = ChatRequest::parse(body.as_bytes())?;
    chat.rewrite(&safe_plan(mode), &fresh_splices())?;
    Ok(serde_json::from_slice(&chat.to_bytes()).unwrap())
}

fn allowed(mode: &str, names: &[&str]) -> String {
    let tools: Vec<Value> = names
        .iter()
        .map(|n| json!({"type": "function", "function": {"name": n}}))
        .collect();
    format!(
        r#","tool_choice":{}"#,
        json!({"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": tools}})
    )
}

#[test]
fn allowed_tools_name_only_run_code_in_code_mode() {
    let v = safe_rewritten(
        &allowed("required", &["read", "bash", "run_code"]),
        Mode::Code,
    )
    .unwrap();
    assert_eq!(
        v["tool_choice"],
        json!({"type": "allowed_tools", "allowed_tools": {"mode": "required",
            "tools": [{"type": "function", "function": {"name": "run_code"}}]}})
    );
    // The Responses shape is read too, and written in the chat shape.
    let extra = r#","tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"read"}]}"#;
    let v = safe_rewritten(extra, Mode::Code).unwrap();
    assert_eq!(
        v["tool_choice"]["allowed_tools"]["tools"][0]["function"]["name"],
        "run_code"
    );
    assert_eq!(v["tool_choice"]["allowed_tools"]["mode"], "auto");
}

#[test]
fn allowed_tools_drop_hidden_tools_and_fall_back_to_their_mode() {
    for mode in [Mode::Native, Mode::Both] {
        let v = safe_rewritten(&allowed("auto", &["read", "bash"]), mode).unwrap();
        let tools = &v["tool_choice"]["allowed_tools"]["tools"];
        assert_eq!(
            tools,
            &json!([{"type": "function", "function": {"name": "read"}}])
        );
        let v = safe_rewritten(&allowed("required", &["bash"]), mode).unwrap();
        assert_eq!(v["tool_choice"], "required");
        let v = safe_rewritten(&allowed("auto", &["bash"]), mode).unwrap();
        assert_eq!(v["tool_choice"], "auto");
    }
}

#[test]
fn forced_hidden_tools_and_unread_fields_do_not_reach_the_wire() {
    let extra = r#","tool_choice":{"type":"function","function":{"name":"bash"}}"#;
    assert_eq!(
        safe_rewritten(extra, Mode::Native).unwrap()["tool_choice"],
        "auto"
    );
    // A nested duplicate and a field the proxy does not read are not carried.
    let extra = r#","tool_choice":{"type":"function","function":{"name":"bash","name":"read"},"x":{"name":"bash"}}"#;
    let v = safe_rewritten(extra, Mode::Native).unwrap();
    assert_eq!(
        v["tool_choice"],
        json!({"type": "function", "function": {"name": "read"}})
    );
    for bad in [
        r#","tool_choice":"bash""#,
        r#","tool_choice":{"type":"mcp"}"#,
        r#","tool_choice":{"type":"function","function":{"name":"read"},"name":"bash"}"#,
        r#","tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"any","tools":[]}}"#,
    ] {
        let err = safe_rewritten(bad, Mode::Native).unwrap_err();
        assert_eq!(err.code(), "invalid_request", "{bad}");
    }
}

#[test]
fn legacy_functions_follow_the_presets_lists_in_native_mode() {
    let extra = r#","functions":[{"name":"read"},{"name":"bash"}],"function_call":{"name":"bash"}"#;
    let v = safe_rewritten(extra, Mode::Native).unwrap();
    assert_eq!(v["functions"], json!([{"name": "read"}]));
    assert_eq!(v["function_call"], "auto");
    let extra = r#","functions":[{"name":"bash"}],"function_call":"auto""#;
    let v = safe_rewritten(extra, Mode::Native).unwrap();
    assert!(
        v.get("functions").is_none() && v.get("function_call").is_none(),
        "{v}"
    );
    let extra = r#","functions":[{"name":"read"}],"function_call":{"name":"read"}"#;
    let v = safe_rewritten(extra, Mode::Native).unwrap();
    assert_eq!(v["function_call"], json!({"name": "read"}));
}

#[test]
fn duplicate_top_level_keys_are_refused_by_name() {
    let body = br#"{"model":"m","messages":[],"n":1,"n":2}"#;
    let err = ChatRequest::parse(body).unwrap_err();
    assert_eq!(err.code(), "duplicate_key");
    assert!(err.to_string().contains("`n`"), "{err}");
}

#[test]
fn n_is_read_as_a_lenient_reader_reads_it() {
    let n = |text: &str| {
        let body = format!(r#"{{"model":"m","messages":[]{text}}}"#);
        ChatRequest::parse(body.as_bytes()).map(|r| r.n)
    };
    for (text, want) in [("", 1), (r#","n":null"#, 1), (r#","n":2"#, 2)] {
        assert_eq!(n(text).unwrap(), want, "{text}");
    }
    for text in [r#","n":"2""#, r#","n":2.0"#, r#","n":"2.0""#, r#","n":2e0"#] {
        assert_eq!(n(text).unwrap(), 2, "{text}");
    }
    for text in [r#","n":2.5"#, r#","n":-1"#, r#","n":"two""#, r#","n":[2]"#] {
        let err = n(text).unwrap_err();
        assert!(
            err.to_string().contains("positive integer"),
            "{text}: {err}"
        );
    }
}
