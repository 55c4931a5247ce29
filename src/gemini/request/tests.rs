//! The Gemini request rewrite: tools, `toolConfig`, the sections, stored
//! denials, `countTokens`' wrapper.

use crate::turn::WireRequest;
use std::sync::Arc;

use serde_json::{json, Value};

use super::GeminiRequest;
use crate::conversation::Anchor;
use crate::mode::{Mode, Runtime};
use crate::plan::ToolPlan;
use crate::splice::TenantSplices;
use crate::test_support::{fresh_splices, gemini_plan};

const STREAM: &str = "/v1beta/models/gemini-2.5-pro:streamGenerateContent";

fn tools() -> Value {
    json!([
        {"functionDeclarations": [
            {"name": "read_file", "description": "Reads a file.", "parametersJsonSchema":
                {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
            {"name": "run_shell_command", "description": "Runs a command.",
             "parameters": {"type": "OBJECT", "properties": {"command": {"type": "STRING"}},
                            "required": ["command"]}},
            {"name": "run_code", "description": "Run a JavaScript program.", "parametersJsonSchema":
                {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}
        ]},
        {"googleSearch": {}}
    ])
}

fn body(extra: Value) -> Vec<u8> {
    let mut v = json!({"contents": [{"role": "user", "parts": [{"text": "read a"}]}],
                       "systemInstruction": {"role": "user", "parts": [{"text": "You are gemini-cli."}]},
                       "tools": tools()});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    serde_json::to_vec(&v).unwrap()
}

fn rewritten(body: &[u8], path: &str, plan: &ToolPlan, splices: &TenantSplices) -> Value {
    let mut r = GeminiRequest::parse(body, path).unwrap();
    r.rewrite(plan, splices).unwrap();
    serde_json::from_slice(&r.to_bytes()).unwrap()
}

#[test]
fn the_path_names_the_model_and_the_stream() {
    let r = GeminiRequest::parse(b"{}", STREAM).unwrap();
    assert!(r.stream);
    assert_eq!(r.model, "gemini-2.5-pro");
    let r = GeminiRequest::parse(b"{}", "/v1beta/models/g:generateContent").unwrap();
    assert!(!r.stream);
    assert!(GeminiRequest::parse(b"[1]", STREAM).is_err());
    assert!(GeminiRequest::parse(br#"{"contents": 3}"#, STREAM)
        .unwrap_err()
        .to_string()
        .contains("`contents` must be an array"));
}

#[test]
fn an_untouched_request_is_the_clients_bytes() {
    let body = br#"{"contents":[{"role":"user","parts":[{"text":"h\u00e9"}]},{"role": "model" ,"parts":[{"text":"x","thoughtSignature":"s"}]}],"generationConfig":{"thinkingConfig":{"includeThoughts": true}}}"#;
    let r = GeminiRequest::parse(body, STREAM).unwrap();
    assert_eq!(&r.to_bytes()[..], &body[..]);
}

#[test]
fn code_mode_announces_only_run_code_and_keeps_googles_tools() {
    let plan = gemini_plan(Mode::Code, Runtime::Client);
    let v = rewritten(&body(json!({})), STREAM, &plan, &fresh_splices());
    let tools = v["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2, "{tools:?}");
    let decls = tools[0]["functionDeclarations"].as_array().unwrap();
    assert_eq!(decls.len(), 1);
    assert_eq!(decls[0]["name"], "run_code");
    assert_eq!(tools[1], json!({"googleSearch": {}}));
    let system = v["systemInstruction"]["parts"].as_array().unwrap();
    assert_eq!(system[0]["text"], "You are gemini-cli.");
    assert!(system[1]["text"].as_str().unwrap().contains("read_file"));
    assert_eq!(v["systemInstruction"]["role"], "user");
    assert_eq!(v["contents"][0]["parts"][0]["text"], "read a");
}

#[test]
fn the_embedded_runtime_announces_the_proxys_run_code() {
    let plan = gemini_plan(Mode::Code, Runtime::Embedded);
    let v = rewritten(&body(json!({})), STREAM, &plan, &fresh_splices());
    let decls = v["tools"][0]["functionDeclarations"].as_array().unwrap();
    assert_eq!(decls.len(), 1);
    assert_eq!(decls[0]["name"], "run_code");
    assert!(decls[0]["parametersJsonSchema"]["properties"]["code"].is_object());
}

#[test]
fn no_system_instruction_becomes_the_sections_alone() {
    let plan = gemini_plan(Mode::Code, Runtime::Client);
    let mut b: Value = serde_json::from_slice(&body(json!({}))).unwrap();
    b.as_object_mut().unwrap().remove("systemInstruction");
    let v = rewritten(
        &serde_json::to_vec(&b).unwrap(),
        STREAM,
        &plan,
        &fresh_splices(),
    );
    assert!(v["systemInstruction"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .contains("run_code"));
}

#[test]
fn allowed_function_names_point_only_at_what_the_wire_announces() {
    let plan = gemini_plan(Mode::Code, Runtime::Client);
    let config = json!({"functionCallingConfig": {"mode": "ANY",
        "allowedFunctionNames": ["read_file", "run_shell_command", "run_code"]}});
    let v = rewritten(
        &body(json!({"toolConfig": config})),
        STREAM,
        &plan,
        &fresh_splices(),
    );
    assert_eq!(
        v["toolConfig"]["functionCallingConfig"],
        json!({"mode": "ANY", "allowedFunctionNames": ["run_code"]})
    );
    let bad = json!({"functionCallingConfig": {"allowedFunctionNames": "read_file"}});
    let mut r = GeminiRequest::parse(&body(json!({"toolConfig": bad})), STREAM).unwrap();
    assert!(r.rewrite(&plan, &fresh_splices()).is_err());
}

#[test]
fn count_tokens_is_rewritten_inside_its_wrapper() {
    let plan = gemini_plan(Mode::Code, Runtime::Client);
    let inner: Value =
        serde_json::from_slice(&body(json!({"model": "models/gemini-2.5-pro"}))).unwrap();
    let wrapped = serde_json::to_vec(&json!({"generateContentRequest": inner})).unwrap();
    let v = rewritten(
        &wrapped,
        "/v1beta/models/gemini-2.5-pro:countTokens",
        &plan,
        &fresh_splices(),
    );
    let inner = &v["generateContentRequest"];
    assert_eq!(inner["model"], "models/gemini-2.5-pro");
    assert_eq!(
        inner["tools"][0]["functionDeclarations"][0]["name"],
        "run_code"
    );
    assert!(inner["systemInstruction"]["parts"][1]["text"].is_string());
}

fn call(id: Option<&str>, name: &str, signature: Option<&str>) -> Value {
    let mut part = json!({"functionCall": {"name": name, "args": {"path": "a"}}});
    if let Some(id) = id {
        part["functionCall"]["id"] = json!(id);
    }
    if let Some(s) = signature {
        part["thoughtSignature"] = json!(s);
    }
    part
}

/// Stores the splice of a turn that called `read_file` (denied, signed)
/// then `run_code` (passed to the client), as the proxy judges it.
fn stored_turn(splices: &TenantSplices, plan: &ToolPlan) {
    let mut ids = crate::gemini::parts::CallIds::under("x".into());
    let parts = vec![
        call(Some("c_read"), "read_file", Some("sig")),
        call(Some("c_run"), "run_code", None),
    ];
    let calls = crate::gemini::answer::judge_parts(&parts, plan, &mut ids).calls;
    let (keys, splice) = crate::turn::splice::<crate::gemini::Gemini>(&calls).unwrap();
    assert_eq!(keys, ["c_run"]);
    splices.put(
        &Anchor::of_content(&json!([{"text": "read a"}])),
        &keys,
        Arc::new(splice),
    );
}

#[test]
fn stored_denials_join_their_turn_and_the_signature_moves_to_its_first_call() {
    let plan = gemini_plan(Mode::Code, Runtime::Client);
    let splices = fresh_splices();
    stored_turn(&splices, &plan);
    // The client echoes no id: its answer is placed by name and position.
    let contents = json!([
        {"role": "user", "parts": [{"text": "read a"}]},
        {"role": "model", "parts": [call(Some("c_run"), "run_code", Some("skip_thought_signature_validator"))]},
        {"role": "user", "parts": [{"functionResponse": {"name": "run_code", "response": {"output": "1"}}}]}
    ]);
    let v = rewritten(
        &body(json!({"contents": contents})),
        STREAM,
        &plan,
        &splices,
    );
    let model = v["contents"][1]["parts"].as_array().unwrap();
    assert_eq!(model.len(), 2);
    assert_eq!(model[0]["thoughtSignature"], "sig");
    assert_eq!(model[1]["functionCall"]["id"], "c_read");
    assert!(model[1].get("thoughtSignature").is_none());
    let user = v["contents"][2]["parts"].as_array().unwrap();
    assert_eq!(user.len(), 2);
    assert_eq!(user[1]["functionResponse"]["id"], "c_read");
    assert!(user[1]["functionResponse"]["response"]["error"]
        .as_str()
        .unwrap()
        .starts_with("UNKNOWN_TOOL"));
    // Nothing twice.
    let again = rewritten(&serde_json::to_vec(&v).unwrap(), STREAM, &plan, &splices);
    assert_eq!(again["contents"], v["contents"]);
}

#[test]
fn a_field_in_both_spellings_is_refused_not_half_rewritten() {
    let plan = gemini_plan(Mode::Code, Runtime::Client);
    let names = json!({"allowedFunctionNames": ["read_file"]});
    for extra in [
        json!({"toolConfig": {}, "tool_config": {"functionCallingConfig": names}}),
        json!({"toolConfig": {"functionCallingConfig": {}, "function_calling_config": names}}),
        json!({"toolConfig": {"functionCallingConfig": {"allowedFunctionNames": [],
                                                        "allowed_function_names": ["read_file"]}}}),
        json!({"system_instruction": {"parts": []}}),
    ] {
        let mut r = GeminiRequest::parse(&body(extra.clone()), STREAM).unwrap();
        let e = r.rewrite(&plan, &fresh_splices()).unwrap_err().to_string();
        assert!(e.contains("both"), "{extra}: {e}");
    }
    let wrapped = br#"{"generateContentRequest":null,"generate_content_request":{"tools":[]}}"#;
    let e = GeminiRequest::parse(wrapped, "/v1beta/models/g:countTokens").unwrap_err();
    assert!(e.to_string().contains("both"), "{e}");
}

#[test]
fn a_cached_content_is_refused_where_calls_can_be_denied() {
    let body = body(json!({"cachedContent": "cachedContents/abc"}));
    let plan = gemini_plan(Mode::Code, Runtime::Client);
    let mut r = GeminiRequest::parse(&body, STREAM).unwrap();
    let e = r.rewrite(&plan, &fresh_splices()).unwrap_err().to_string();
    assert!(e.contains("cached content"), "{e}");
    let native = gemini_plan(Mode::Native, Runtime::Client);
    let mut r = GeminiRequest::parse(&body, STREAM).unwrap();
    r.rewrite(&native, &fresh_splices()).unwrap();
}
