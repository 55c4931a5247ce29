//! Property: an answer a dialect's probe calls quiet is one its judge
//! finds no call in and asks no edit of, in every mode, with the usage
//! the full path reads; and it has a single reading.
//!
//! Held on the generated answers of `unchanged_props` (as bytes), on every
//! recorded stream's objects read as whole answers, and on hand-written
//! bodies the generators cannot make (repeated keys, arrays where objects
//! go, escaped keys, numbers spelled otherwise).

use proptest::prelude::*;
use serde_json::{json, Value};

use super::answers::{
    chat_answer, gemini_answer, messages_answer, modes, recorded, responses_answer,
};
use crate::chat::Chat;
use crate::gemini::Gemini;
use crate::messages::Messages;
use crate::responses::Responses;
use crate::test_support::{agent_plan, fixtures, gemini_plan, messages_plan, responses_plan};
use crate::turn::{Dialect, Edits, ModelTurn, Quiet};
use crate::wire::parse_noting_repeats;

const APIS: [&str; 4] = ["chat", "responses", "messages", "gemini"];

fn quiet(api: &str, body: &[u8]) -> Option<Quiet> {
    match api {
        "chat" => Chat::quiet_answer(body),
        "responses" => Responses::quiet_answer(body),
        "messages" => Messages::quiet_answer(body),
        _ => Gemini::quiet_answer(body),
    }
}

fn usage_key(api: &str) -> &'static str {
    if api == "gemini" {
        Gemini::USAGE
    } else {
        Chat::USAGE
    }
}

/// The property for one body; `Ok(true)` when it was quiet.
fn holds(api: &str, body: &[u8]) -> Result<bool, String> {
    let Some(q) = quiet(api, body) else {
        return Ok(false);
    };
    let shown = String::from_utf8_lossy(body);
    let (value, repeated) =
        parse_noting_repeats(body).map_err(|e| format!("quiet, yet no JSON ({e}): {shown}"))?;
    if repeated {
        return Err(format!("quiet, yet a key repeats: {shown}"));
    }
    let Some(answer) = value.as_object() else {
        return Err(format!("quiet, yet no object: {shown}"));
    };
    if q.usage.as_ref() != answer.get(usage_key(api)) {
        return Err(format!("quiet with usage {:?}: {shown}", q.usage));
    }
    for (mode, runtime) in modes() {
        let judged: Result<(ModelTurn, Edits), _> = match api {
            "chat" => Chat::judge_answer(answer, &agent_plan(mode)),
            "responses" => Responses::judge_answer(answer, &responses_plan(mode, runtime)),
            "messages" => Messages::judge_answer(answer, &messages_plan(mode, runtime)),
            _ => Gemini::judge_answer(answer, &gemini_plan(mode, runtime)),
        };
        // The probe never calls quiet what the judge cannot read.
        let (turn, edits) = judged.map_err(|e| {
            format!(
                "{api}, {mode:?} on {runtime:?}: quiet, yet the judge refuses it ({e}): {shown}"
            )
        })?;
        if !turn.calls.is_empty() || !edits.is_empty() {
            return Err(format!(
                "{api}, {mode:?} on {runtime:?}: quiet, yet the judge found {} calls and asked {edits:?}: {shown}",
                turn.calls.len()
            ));
        }
    }
    Ok(true)
}

fn holds_on_value(api: &str, answer: &Value) -> Result<bool, String> {
    holds(api, &serde_json::to_vec(answer).unwrap())
}

#[test]
fn every_recorded_answer_is_quiet_only_where_the_judge_agrees() {
    let mut quiet = 0;
    for (api, dir) in [
        ("chat", ""),
        ("responses", "responses"),
        ("messages", "messages"),
        ("gemini", "gemini"),
    ] {
        for f in fixtures(dir) {
            for answer in recorded(api, &f.bytes) {
                match holds_on_value(api, &answer) {
                    Ok(q) => quiet += usize::from(q),
                    Err(e) => panic!("{}: {e}", f.name),
                }
            }
        }
    }
    assert!(quiet > 20, "only {quiet} recorded answers were quiet");
}

#[test]
fn a_plain_text_answer_is_quiet_in_every_dialect() {
    // The answers of bench/dialects.py: what the fast path is for.
    let answers = [
        (
            "chat",
            json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Done.", "refusal": null,
                "annotations": []}, "logprobs": null, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}}),
        ),
        (
            "responses",
            json!({"id": "resp_1", "object": "response", "status": "completed",
            "output": [{"type": "reasoning", "id": "rs_1", "summary": []},
                       {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}],
            "usage": {"input_tokens": 9, "output_tokens": 2}}),
        ),
        (
            "messages",
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "thinking", "thinking": "Hm.", "signature": "s"},
                        {"type": "text", "text": "Done."}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 9, "output_tokens": 2}}),
        ),
        (
            "gemini",
            json!({"candidates": [{"content": {"role": "model", "parts": [
                {"text": "Hm.", "thought": true}, {"text": "Done.", "thoughtSignature": "s"}]},
                "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 9}, "modelVersion": "m"}),
        ),
    ];
    for (api, answer) in answers {
        assert_eq!(holds_on_value(api, &answer), Ok(true), "{api}");
        let usage = answer.get(usage_key(api)).cloned();
        assert_eq!(
            quiet(api, &serde_json::to_vec(&answer).unwrap()),
            Some(Quiet { usage })
        );
    }
}

#[test]
fn bodies_the_generators_cannot_make_are_quiet_only_where_the_judge_agrees() {
    let loud = [
        // A repeated key, known to the probe or not, at any depth.
        (
            "chat",
            r#"{"choices": [{"message": {"tool_calls": [{"id": "a", "function": {"name": "read"}}], "tool_calls": []}}]}"#,
        ),
        (
            "chat",
            r#"{"choices": [], "choices": [{"message": {"function_call": {"name": "read"}}}]}"#,
        ),
        (
            "chat",
            r#"{"choices": [{"index": 0, "message": {"content": "a", "content": "b"}}]}"#,
        ),
        (
            "messages",
            r#"{"content": [{"type": "text", "type": "tool_use", "name": "read"}]}"#,
        ),
        (
            "responses",
            r#"{"output": [{"type": "message", "x": 1, "x": 2}]}"#,
        ),
        (
            "gemini",
            r#"{"candidates": [{"content": {"parts": [{"text": "a", "text": "b"}]}}]}"#,
        ),
        // A call of each shape.
        (
            "chat",
            r#"{"choices": [{"index": 0, "message": {"function_call": {"name": "read"}}}]}"#,
        ),
        (
            "chat",
            r#"{"choices": [{"message": {"tool_calls": [{"type": "custom", "custom": {"name": "read"}}]}}]}"#,
        ),
        (
            "chat",
            r#"{"choices": [{"index": 0, "message": {}}, {"index": 1, "message": {}}]}"#,
        ),
        (
            "responses",
            r#"{"output": [{"type": "function_call", "name": "read"}, {"type": "brand_new"}]}"#,
        ),
        (
            "messages",
            r#"{"content": [{"type": "text"}, {"type": "tool_use", "name": "read"}]}"#,
        ),
        (
            "gemini",
            r#"{"candidates": [{}, {"content": {"parts": [{"functionCall": {"name": "read"}}]}}]}"#,
        ),
        // Arrays where objects go.
        ("chat", r#"[{"choices": []}]"#),
        ("chat", r#"{"choices": [[0, {"tool_calls": [1]}]]}"#),
        (
            "chat",
            r#"{"choices": [{"index": 0, "message": [[{"id": "a"}], null]}]}"#,
        ),
        ("messages", r#"{"content": [["tool_use"]]}"#),
        ("responses", r#"{"output": [["function_call"]]}"#),
        (
            "gemini",
            r#"{"candidates": [[{"parts": [{"functionCall": {"name": "read"}}]}]]}"#,
        ),
        // Escaped keys spell the same names.
        (
            "chat",
            r#"{"choices": [{"message": {"tool\u005fcalls": [{"id": "a", "function": {"name": "read"}}]}}]}"#,
        ),
        (
            "messages",
            r#"{"content": [{"typ\u0065": "tool_use", "name": "read"}]}"#,
        ),
        (
            "gemini",
            r#"{"candidates": [{"content": {"parts": [{"function\u0043all": {"name": "read"}}]}}]}"#,
        ),
        (
            "gemini",
            r#"{"candidates": [{"content": {"parts": [{"te\u0078t": "a"}]}}]}"#,
        ),
        // Numbers spelled otherwise, null where a shape goes.
        ("chat", r#"{"choices": [{"index": 0.0, "message": {}}]}"#),
        ("chat", r#"{"choices": [{"index": null, "message": {}}]}"#),
        ("chat", r#"{"choices": null}"#),
        ("responses", r#"{"output": null}"#),
        (
            "responses",
            r#"{"output": [{"type": "message", "execution": "client"}]}"#,
        ),
        (
            "responses",
            r#"{"output": [{"type": "web_search_call", "execution": 1}]}"#,
        ),
        ("messages", r#"{"content": "text"}"#),
        ("messages", r#"{"content": [{"type": null}]}"#),
        (
            "gemini",
            r#"{"candidates": [{"content": {"parts": [{"toolCall": {"toolType": "GOOGLE_SEARCH"}}]}}]}"#,
        ),
        // Not one object.
        ("chat", r#"{} {}"#),
        ("gemini", r#"1"#),
    ];
    for (api, body) in loud {
        assert!(holds(api, body.as_bytes()).is_ok(), "{api}: {body}");
        assert!(
            quiet(api, body.as_bytes()).is_none(),
            "{api} took as quiet: {body}"
        );
    }
    // Either way, as long as probe and judge agree.
    for (api, body) in [
        ("chat", r#"{"choices": [{"index": -0, "message": {}}]}"#),
        (
            "chat",
            r#"{"choices": [{"index": 0, "message": {"tool_calls": [null]}}]}"#,
        ),
        ("messages", r#"{"content": []}"#),
        ("responses", r#"{"output": []}"#),
    ] {
        assert!(holds(api, body.as_bytes()).is_ok(), "{api}: {body}");
    }
    let quiet_bodies = [
        ("chat", r#"{}"#),
        (
            "chat",
            r#"{"choices": [{"message": {"tool_calls": [], "function_call": null}}]}"#,
        ),
        ("chat", r#"{"choices": [{"index": 0}], "usage": null}"#),
        (
            "responses",
            r#"{"output": [{"type": "web_search_call", "execution": "server"}]}"#,
        ),
        (
            "messages",
            r#"{"content": [{"type": "web_search_tool_result"}]}"#,
        ),
        (
            "gemini",
            r#"{"candidates": [{"content": {"parts": [{"thought_signature": "s"}]}}, {}]}"#,
        ),
    ];
    for (api, body) in quiet_bodies {
        assert_eq!(holds(api, body.as_bytes()), Ok(true), "{api}: {body}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_quiet_chat_answer_is_one_the_judge_leaves_alone(answer in chat_answer()) {
        holds_on_value("chat", &answer).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_quiet_responses_answer_is_one_the_judge_leaves_alone(answer in responses_answer()) {
        holds_on_value("responses", &answer).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_quiet_messages_answer_is_one_the_judge_leaves_alone(answer in messages_answer()) {
        holds_on_value("messages", &answer).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_quiet_gemini_answer_is_one_the_judge_leaves_alone(answer in gemini_answer()) {
        holds_on_value("gemini", &answer).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn every_dialect_has_quiet_answers_among_the_generated_ones() {
    // The property is vacuous for a probe that never says quiet.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    for api in APIS {
        let strategy = match api {
            "chat" => chat_answer().boxed(),
            "responses" => responses_answer().boxed(),
            "messages" => messages_answer().boxed(),
            _ => gemini_answer().boxed(),
        };
        let quiet = (0..300)
            .filter(|_| {
                let answer = strategy.new_tree(&mut runner).unwrap().current();
                holds_on_value(api, &answer).unwrap()
            })
            .count();
        assert!(
            quiet >= 10,
            "{api}: only {quiet} of 300 generated answers were quiet"
        );
    }
}
