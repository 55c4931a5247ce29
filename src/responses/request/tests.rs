use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::conversation::Anchor;
use crate::mode::{Mode, Runtime};
use crate::preset::{Catalog, ConfigFile, Preset};
use crate::splice::{Splice, TenantSplices};
use crate::test_support::fresh_splices;

fn tools() -> Value {
    json!([
        {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
        {"type": "custom", "name": "apply_patch", "format": {"type": "text"}},
        {"type": "namespace", "name": "agents", "tools": [
            {"type": "function", "name": "spawn", "parameters": {"type": "object"}},
            {"type": "function", "name": "kill", "parameters": {"type": "object"}}
        ]},
        {"type": "local_shell"},
        {"type": "web_search"}
    ])
}

fn preset(toml_text: &str, name: &str) -> Arc<Preset> {
    let file: ConfigFile = toml::from_str(toml_text).unwrap();
    Catalog::build(Mode::Code, file)
        .unwrap()
        .get(name)
        .unwrap()
        .clone()
}

fn plan_with(tools: &Value, preset: &Preset, mode: Mode) -> ToolPlan {
    let raw = RawValue::from_string(tools.to_string()).unwrap();
    ToolPlan::build_for(
        &crate::responses::tools::TOOLS,
        Some(&raw),
        preset,
        mode,
        Runtime::Embedded,
    )
    .unwrap()
}

fn plan(mode: Mode) -> ToolPlan {
    plan_with(&tools(), &preset("", "standard"), mode)
}

fn body(extra: Value) -> Vec<u8> {
    let mut v = json!({"model": "gpt-5", "tools": tools(), "prompt_cache_key": "k1"});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    serde_json::to_vec(&v).unwrap()
}

fn rewritten(body: &[u8], plan: &ToolPlan, splices: &TenantSplices) -> Value {
    let mut r = ResponsesRequest::parse(body).unwrap();
    r.rewrite(plan, splices).unwrap();
    serde_json::from_slice(&r.to_bytes()).unwrap()
}

#[test]
fn an_untouched_request_is_the_clients_bytes() {
    let body = br#"{"model":"m", "input":[{"role":"user","content":"hi"} ,{"type":"x"}],"stream":true,"vendor":{"a":1}}"#;
    let mut r = ResponsesRequest::parse(body).unwrap();
    assert!(r.stream);
    assert_eq!(r.input_items().len(), 2);
    r.rewrite(&plan(Mode::Native), &fresh_splices()).unwrap();
    // The top level is re-joined without spaces; the items are as sent.
    assert_eq!(
        &r.to_bytes()[..],
        &br#"{"model":"m","input":[{"role":"user","content":"hi"},{"type":"x"}],"stream":true,"vendor":{"a":1}}"#[..]
    );
}

#[test]
fn input_must_be_a_string_or_a_list() {
    let err = ResponsesRequest::parse(br#"{"input":{"role":"user"}}"#).unwrap_err();
    assert!(
        err.to_string()
            .contains("`input` must be a string or an array"),
        "{err}"
    );
    let err = ResponsesRequest::parse(br#"{"input":1,"input":2}"#).unwrap_err();
    assert!(matches!(err, ProxyError::DuplicateKey { .. }), "{err}");
}

#[test]
fn a_string_input_stays_a_string_and_the_sections_become_instructions() {
    let v = rewritten(
        &body(json!({"input": "fix the bug"})),
        &plan(Mode::Code),
        &fresh_splices(),
    );
    assert_eq!(v["input"], "fix the bug");
    let instructions = v["instructions"].as_str().unwrap();
    assert!(
        instructions.starts_with("# Tool mode: code"),
        "{instructions}"
    );
    assert_eq!(v["prompt_cache_key"], "k1");
}

#[test]
fn sections_follow_the_clients_instructions() {
    let v = rewritten(
        &body(json!({"instructions": "Be terse.", "input": [
            {"role": "developer", "content": "dev"}, {"role": "user", "content": "hi"}
        ]})),
        &plan(Mode::Code),
        &fresh_splices(),
    );
    let instructions = v["instructions"].as_str().unwrap();
    assert!(
        instructions.starts_with("Be terse.\n\n# Tool mode: code"),
        "{instructions}"
    );
    assert_eq!(
        v["input"][0],
        json!({"role": "developer", "content": "dev"})
    );
    let err = {
        let mut r = ResponsesRequest::parse(&body(json!({"instructions": ["x"]}))).unwrap();
        r.rewrite(&plan(Mode::Code), &fresh_splices()).unwrap_err()
    };
    assert!(
        err.to_string().contains("`instructions` must be a string"),
        "{err}"
    );
}

#[test]
fn without_instructions_the_first_system_or_developer_message_takes_the_sections() {
    let v = rewritten(
        &body(json!({"input": [
            {"type": "message", "role": "user", "content": "u"},
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "A"}]},
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "B"}]}
        ]})),
        &plan(Mode::Code),
        &fresh_splices(),
    );
    assert!(v.get("instructions").is_none());
    let parts = v["input"][1]["content"].as_array().unwrap();
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[1]["type"], "input_text");
    assert!(parts[1]["text"].as_str().unwrap().contains("agents.spawn"));
    assert_eq!(v["input"][2]["content"].as_array().unwrap().len(), 1);
    let v = rewritten(
        &body(json!({"input": [{"role": "system", "content": "S"}]})),
        &plan(Mode::Code),
        &fresh_splices(),
    );
    assert!(v["input"][0]["content"]
        .as_str()
        .unwrap()
        .starts_with("S\n\n# Tool mode"));
}

#[test]
fn the_rewrite_is_byte_stable() {
    let b = body(json!({"input": [{"role": "developer", "content": "d"}], "tool_choice": "auto"}));
    let p = plan(Mode::Code);
    let run = || {
        let mut r = ResponsesRequest::parse(&b).unwrap();
        r.rewrite(&p, &fresh_splices()).unwrap();
        r.to_bytes()
    };
    assert_eq!(run(), run());
}

#[test]
fn tool_choice_never_names_a_tool_the_wire_lacks() {
    let p = plan(Mode::Code);
    let cases = [
        (json!("required"), json!("required")),
        (
            json!({"type": "function", "name": "exec_command"}),
            json!({"type": "function", "name": "run_code"}),
        ),
        (
            json!({"type": "custom", "name": "apply_patch"}),
            json!({"type": "function", "name": "run_code"}),
        ),
        (
            json!({"type": "function", "namespace": "agents", "name": "spawn"}),
            json!({"type": "function", "name": "run_code"}),
        ),
        (
            json!({"type": "local_shell"}),
            json!({"type": "function", "name": "run_code"}),
        ),
        (json!({"type": "web_search"}), json!({"type": "web_search"})),
        (
            json!({"type": "function", "name": "run_code"}),
            json!({"type": "function", "name": "run_code"}),
        ),
        (
            json!({"type": "allowed_tools", "mode": "required", "tools": [
                {"type": "function", "name": "exec_command"}, {"type": "web_search"},
                {"type": "custom", "name": "apply_patch"}
            ]}),
            json!({"type": "allowed_tools", "mode": "required", "tools": [
                {"type": "function", "name": "run_code"}, {"type": "web_search"}
            ]}),
        ),
    ];
    for (choice, expected) in cases {
        let v = rewritten(
            &body(json!({"input": "x", "tool_choice": choice.clone()})),
            &p,
            &fresh_splices(),
        );
        assert_eq!(v["tool_choice"], expected, "{choice}");
    }
    for bad in [
        json!("sometimes"),
        json!({"type": "function"}),
        json!({"type": "allowed_tools", "mode": "x", "tools": []}),
        json!(3),
    ] {
        let mut r = ResponsesRequest::parse(&body(json!({"tool_choice": bad.clone()}))).unwrap();
        let err = r.rewrite(&p, &fresh_splices()).unwrap_err();
        assert!(
            err.to_string().contains("use \"none\", \"auto\""),
            "{bad}: {err}"
        );
    }
}

#[test]
fn a_preset_hiding_a_tool_of_a_namespace_keeps_the_rest_of_the_group() {
    let safe = preset(
        "[[preset]]\nname = \"safe\"\ndeny = [\"agents.kill\", \"local_shell\"]\n",
        "safe",
    );
    for mode in [Mode::Native, Mode::Both] {
        let p = plan_with(&tools(), &safe, mode);
        let v = rewritten(
            &body(
                json!({"input": "x", "tool_choice": {"type": "function", "namespace": "agents", "name": "kill"}}),
            ),
            &p,
            &fresh_splices(),
        );
        let wire = v["tools"].as_array().unwrap();
        let group = wire.iter().find(|t| t["type"] == "namespace").unwrap();
        assert_eq!(group["name"], "agents");
        assert_eq!(
            group["tools"],
            json!([{"type": "function", "name": "spawn", "parameters": {"type": "object"}}])
        );
        assert!(wire.iter().all(|t| t["type"] != "local_shell"), "{wire:?}");
        assert!(wire.iter().any(|t| t["type"] == "web_search"));
        assert_eq!(v["tool_choice"], "auto", "{mode:?}");
        let v = rewritten(
            &body(json!({"tool_choice": {"type": "local_shell"}})),
            &p,
            &fresh_splices(),
        );
        assert_eq!(v["tool_choice"], "auto");
    }
}

/// Stores a turn's splice in the conversation `anchor` names.
fn stored(splices: &TenantSplices, anchor: &Anchor, ids: &[&str]) {
    splices.put(
        anchor,
        &ids.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
        Arc::new(Splice {
            denied_calls: vec![json!({"type": "function_call", "call_id": "d1", "name": "bash", "arguments": "{}"})],
            denials: vec![json!({"type": "function_call_output", "call_id": "d1", "output": "UNKNOWN_TOOL: ..."})],
        }),
    );
}

fn kinds(v: &Value) -> Vec<String> {
    v["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!(
                "{}:{}",
                i["type"].as_str().unwrap_or("msg"),
                i["call_id"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[test]
fn stored_denials_follow_the_turns_calls_in_every_history_shape() {
    let splices = fresh_splices();
    // Histories that open with the user's "u", and ones that carry no
    // user message (previous_response_id, a bare run of calls).
    stored(&splices, &Anchor::of_content(&json!("u")), &["a", "b"]);
    stored(&splices, &Anchor::NONE, &["a", "b"]);
    let call = |id: &str| json!({"type": "function_call", "call_id": id, "name": "exec_command", "arguments": "{}"});
    let out = |id: &str| json!({"type": "function_call_output", "call_id": id, "output": "ok"});
    let user = json!({"role": "user", "content": "u"});
    let rs = json!({"type": "reasoning", "id": "rs_1", "summary": []});
    // Calls then outputs (Codex).
    let v = rewritten(
        &body(json!({"input": [user, rs, call("a"), call("b"), out("a"), out("b")]})),
        &plan(Mode::Code),
        &splices,
    );
    assert_eq!(
        kinds(&v),
        [
            "msg:",
            "reasoning:",
            "function_call:a",
            "function_call:b",
            "function_call:d1",
            "function_call_output:d1",
            "function_call_output:a",
            "function_call_output:b"
        ]
    );
    // Each call followed by its output.
    let v = rewritten(
        &body(json!({"input": [user, call("a"), out("a"), call("b"), out("b"), user]})),
        &plan(Mode::Code),
        &splices,
    );
    assert_eq!(
        kinds(&v),
        [
            "msg:",
            "function_call:a",
            "function_call_output:a",
            "function_call:b",
            "function_call:d1",
            "function_call_output:d1",
            "function_call_output:b",
            "msg:"
        ]
    );
    // previous_response_id: the provider holds the calls, denied ones included.
    let v = rewritten(
        &body(json!({"previous_response_id": "resp_1", "input": [out("b"), out("a")]})),
        &plan(Mode::Code),
        &splices,
    );
    assert_eq!(
        kinds(&v),
        [
            "function_call_output:d1",
            "function_call_output:b",
            "function_call_output:a"
        ]
    );
    // Sent again with the denial already in place: nothing twice.
    let again = rewritten(
        &serde_json::to_vec(&v).unwrap(),
        &plan(Mode::Code),
        &splices,
    );
    assert_eq!(kinds(&again), kinds(&v));
    // Another turn's ids, or part of the turn, find nothing.
    let v = rewritten(
        &body(json!({"input": [call("a"), out("a")]})),
        &plan(Mode::Code),
        &splices,
    );
    assert_eq!(kinds(&v), ["function_call:a", "function_call_output:a"]);
}

#[test]
fn two_turns_in_one_run_are_told_apart_by_their_outputs() {
    let splices = fresh_splices();
    stored(&splices, &Anchor::NONE, &["b"]);
    let call = |id: &str| json!({"type": "custom_tool_call", "call_id": id, "name": "apply_patch", "input": "p"});
    let out = |id: &str| json!({"type": "custom_tool_call_output", "call_id": id, "output": "ok"});
    let v = rewritten(
        &body(json!({"input": [call("a"), out("a"), call("b"), out("b")]})),
        &plan(Mode::Code),
        &splices,
    );
    assert_eq!(
        kinds(&v),
        [
            "custom_tool_call:a",
            "custom_tool_call_output:a",
            "custom_tool_call:b",
            "function_call:d1",
            "function_call_output:d1",
            "custom_tool_call_output:b"
        ]
    );
}

#[test]
fn pushed_items_follow_the_input() {
    let mut r = ResponsesRequest::parse(br#"{"input":"hi","model":"m"}"#).unwrap();
    r.push_items(&[json!({"type": "function_call_output", "call_id": "c", "output": "x"})]);
    let v: Value = serde_json::from_slice(&r.to_bytes()).unwrap();
    assert_eq!(
        v["input"],
        json!([{"type": "message", "role": "user", "content": "hi"},
               {"type": "function_call_output", "call_id": "c", "output": "x"}])
    );
    let mut r = ResponsesRequest::parse(br#"{"previous_response_id":"resp_1"}"#).unwrap();
    assert_eq!(r.previous_response_id().as_deref(), Some("resp_1"));
    r.push_items(&[json!({"type": "x"})]);
    assert_eq!(
        &r.to_bytes()[..],
        br#"{"previous_response_id":"resp_1","input":[{"type":"x"}]}"#
    );
    let mut r = ResponsesRequest::parse(b"{}").unwrap();
    r.push_items(&[json!(1)]);
    assert_eq!(&r.to_bytes()[..], br#"{"input":[1]}"#);
}

#[test]
fn declaring_items_are_found_whether_or_not_they_open_with_their_type() {
    let body = br#"{"model":"m","tools":[{"type":"function","name":"a"}],"input":[
        {"type":"message","role":"user","content":"additional_tools in the text"},
        {"type":"additional_tools","tools":[{"type":"function","name":"b"}]},
        {"role":"developer","tools":[{"type":"function","name":"c"}],"type":"additional_tools"},
        {"call_id":"s","tools":[{"type":"function","name":"d"}],"type":"tool_search_output"}
    ]}"#;
    let r = ResponsesRequest::parse(body).unwrap();
    let all = r.declared_tools().unwrap().unwrap();
    let names: Vec<String> = serde_json::from_str::<Vec<Value>>(all.get())
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
}
