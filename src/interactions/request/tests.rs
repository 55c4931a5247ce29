//! The Interactions request: what is read, what the rewrite changes, and
//! what stays the client's bytes.

use serde_json::{json, Value};

use super::*;
use crate::interactions::test_plan::plan;
use crate::mode::{Mode, Runtime};
use crate::test_support::fresh_splices;

fn parse(v: Value) -> InteractionsRequest {
    InteractionsRequest::parse(v.to_string().as_bytes()).unwrap()
}

fn body(r: &InteractionsRequest) -> Value {
    serde_json::from_slice(&r.to_bytes()).unwrap()
}

#[test]
fn a_string_or_contents_hold_no_steps_and_stay_as_sent() {
    let text = br#"{"model":"m","input":"Hi","stream":true}"#;
    let r = InteractionsRequest::parse(text).unwrap();
    assert!(r.steps().is_empty() && r.stream);
    assert_eq!(&r.to_bytes()[..], &text[..]);
    let r = parse(json!({"input": [{"type": "text", "text": "Hi"}]}));
    assert!(r.steps().is_empty());
    let r = parse(json!({"input": [{"type": "user_input", "content": []},
                                   {"type": "function_result", "call_id": "c", "result": "ok"}]}));
    assert_eq!(r.steps().len(), 2);
}

#[test]
fn a_repair_turns_the_users_words_into_a_step_and_appends() {
    for input in [
        json!("Hi"),
        json!([{"type": "text", "text": "Hi"}]),
        json!({"type": "text", "text": "Hi"}),
    ] {
        let mut r = parse(json!({"model": "m", "input": input}));
        r.push_steps(&[json!({"type": "function_result", "call_id": "c", "result": "x"})]);
        let got = body(&r);
        assert_eq!(
            got["input"][0],
            json!({"type": "user_input", "content": [{"type": "text", "text": "Hi"}]}),
            "{input}"
        );
        assert_eq!(got["input"][1]["call_id"], "c");
    }
}

#[test]
fn code_mode_puts_run_code_on_the_wire_and_the_sdk_in_the_system_instruction() {
    let plan = plan(Mode::Code, Runtime::Embedded);
    let mut r = parse(
        json!({"model": "m", "input": "Hi", "system_instruction": "Be brief.",
                             "tools": [{"type": "function", "name": "read"}],
                             "generation_config": {"tool_choice": {"allowed_tools":
                                 {"mode": "any", "tools": ["read"]}}}}),
    );
    r.rewrite(&plan, &fresh_splices()).unwrap();
    let got = body(&r);
    let names: Vec<&str> = got["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["run_code"]);
    let system = got["system_instruction"].as_str().unwrap();
    assert!(system.starts_with("Be brief.\n\n"), "{system}");
    assert!(system.contains("(read, bash)"), "{system}");
    assert_eq!(
        got["generation_config"]["tool_choice"]["allowed_tools"]["tools"],
        json!(["run_code"])
    );
}

#[test]
fn what_the_proxy_cannot_judge_is_refused_with_the_way_out() {
    for (body, says) in [
        (json!({"background": true}), "background"),
        (json!({"agent": "deep-research-preview-04-2026"}), "`agent`"),
    ] {
        let err = parse(body).check().unwrap_err().to_string();
        assert!(err.contains(says) && err.contains("native mode"), "{err}");
    }
    assert!(parse(json!({"background": false})).check().is_ok());
}

#[test]
fn the_conversation_is_anchored_on_the_users_first_words_unless_the_provider_keeps_it() {
    let a = parse(json!({"store": false, "input": "Hi"})).anchor();
    let b = parse(json!({"store": false, "input": [{"type": "user_input",
                                    "content": [{"type": "text", "text": "Hi"}]},
                                   {"type": "function_result", "call_id": "c", "result": ""}]}))
    .anchor();
    assert_ne!(a, Anchor::NONE);
    assert_ne!(b, Anchor::NONE);
    let kept = parse(json!({"previous_interaction_id": "v1_x", "input": "Hi"})).anchor();
    assert_eq!(kept, Anchor::NONE);
    assert_eq!(parse(json!({"input": "Hi"})).anchor(), Anchor::NONE);
}
