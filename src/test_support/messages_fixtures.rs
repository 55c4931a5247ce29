//! Recorded Messages API stream shapes (`fixtures/streams/messages`)
//! through the parser and the judge, in code mode on the client runtime:
//! fed whole, cut in two at every byte offset and byte by byte, the client
//! gets the same bytes and the round ends the same way, and what it gets
//! is what the fixture's `expect` says.

use std::sync::Arc;

use serde_json::Value;

use crate::mode::{Mode, Runtime};
use crate::plan::ToolPlan;
use crate::test_support::messages_client::reassemble;
use crate::test_support::{
    error_outcome_holds, expected_calls, expected_denials, final_outcome_holds, fixture, fixtures,
    judge_pieces, messages_plan, repair_fixtures, same_at_every_cut, Fixture, MessagesJudge,
    RoundEnd,
};

fn check(f: &Fixture, plan: &Arc<ToolPlan>) {
    let Fixture { name, bytes, meta } = f;
    let expect = &meta["expect"];
    let judged = same_at_every_cut(name, bytes, || MessagesJudge::new(plan.clone(), 2));
    let view = reassemble(&judged.client);
    let calls: Vec<(String, String)> = view
        .calls
        .iter()
        .map(|c| (c.name.clone(), c.input.clone()))
        .collect();
    assert_eq!(
        calls,
        expected_calls(expect),
        "{name}: the client's calls, their input intact"
    );
    assert!(
        view.calls.iter().all(|c| !c.id.is_empty()),
        "{name}: every call the client gets has an id"
    );
    assert_eq!(view.text, expect["text"].as_str().unwrap(), "{name}: text");
    for (field, got) in [("thinking", &view.thinking), ("signature", &view.signature)] {
        if let Some(want) = expect.get(field).and_then(Value::as_str) {
            assert_eq!(got, want, "{name}: {field} byte for byte");
        }
    }
    assert_eq!(
        view.stop_reason.as_deref().map_or(Value::Null, Value::from),
        expect["stop_reason"],
        "{name}: the client's stop_reason"
    );
    match expect["outcome"].as_str().unwrap() {
        "final" => {
            final_outcome_holds(name, &judged, expect);
            // A message_delta when the upstream sent one.
            let delta = usize::from(!expect["stop_reason"].is_null());
            assert_eq!(
                (view.message_deltas, view.message_stops),
                (delta, 1),
                "{name}: the message ends once"
            );
        }
        "repair" => {
            let RoundEnd::Repair { messages } = &judged.end else {
                panic!("{name}: expected a repair, got {:?}", judged.end)
            };
            assert_eq!(
                (view.message_deltas, view.message_stops),
                (0, 0),
                "{name}: a repaired round's end stays hidden"
            );
            let [assistant, user] = messages.as_slice() else {
                panic!("{name}: the turn and one user message: {messages:?}")
            };
            let turn = assistant["content"].as_array().unwrap();
            let answers = user["content"].as_array().unwrap();
            let denied = expected_denials(expect);
            assert_eq!(
                answers.len(),
                denied.len(),
                "{name}: one answer per denied call"
            );
            for (answer, (denied_name, code)) in answers.iter().zip(&denied) {
                assert_eq!(answer["type"], "tool_result", "{name}");
                assert_eq!(answer["is_error"], true, "{name}");
                let call = turn
                    .iter()
                    .find(|b| b["id"] == answer["tool_use_id"])
                    .unwrap_or_else(|| panic!("{name}: the repair replays the call {answer}"));
                assert_eq!(call["name"], denied_name.as_str(), "{name}");
                let text = answer["content"][0]["text"].as_str().unwrap();
                assert!(text.starts_with(&format!("{code}:")), "{name}: {text}");
                let id = call["id"].as_str().unwrap();
                assert!(
                    !String::from_utf8_lossy(&judged.client).contains(id),
                    "{name}: the denied call left a trace for the client"
                );
            }
        }
        "error" => error_outcome_holds(name, &judged, view.errors.len(), expect),
        other => panic!("{name}: unknown outcome {other}"),
    }
}

#[test]
fn every_messages_fixture_gives_the_client_its_expectation_at_every_cut() {
    let plan = messages_plan(Mode::Code, Runtime::Client);
    let all = fixtures("messages");
    assert!(all.len() >= 10, "fixtures for ten quirks");
    for f in &all {
        check(f, &plan);
    }
}

/// A `message_start` may already hold the turn's content (a turn resumed
/// from a container): no block events follow. The judge takes the content
/// out of the `message_start` and judges it block by block, so the client
/// gets the turn's calls and text, and a denied call among them is repaired.
#[test]
fn a_message_start_with_content_is_judged_block_by_block() {
    let plan = messages_plan(Mode::Code, Runtime::Client);
    check(&fixture("messages", "message_start_with_content"), &plan);
}

#[test]
fn repair_fixtures_give_up_at_the_bound_and_end_the_turn() {
    let plan = messages_plan(Mode::Code, Runtime::Client);
    for Fixture { name, bytes, meta } in repair_fixtures("messages") {
        let judged = judge_pieces(MessagesJudge::new(plan.clone(), 0), &[&bytes]);
        assert!(
            matches!(judged.end, RoundEnd::Done { splice: None }),
            "{name}: {:?}",
            judged.end
        );
        let view = reassemble(&judged.client);
        assert!(view.calls.is_empty(), "{name}: {:?}", view.calls);
        assert_eq!(
            (view.message_deltas, view.message_stops),
            (1, 1),
            "{name}: the proxy ends the message"
        );
        assert_eq!(view.stop_reason.as_deref(), Some("end_turn"), "{name}");
        // The model's text stands; without any, a note names the call.
        let denied = meta["expect"]["denied"][0]["name"].as_str().unwrap();
        let text = meta["expect"]["text"].as_str().unwrap();
        if text.is_empty() {
            assert!(view.text.contains(denied), "{name}: {}", view.text);
        } else {
            assert_eq!(view.text, text, "{name}");
        }
    }
}
