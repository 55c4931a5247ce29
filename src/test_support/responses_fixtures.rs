//! Recorded Responses API stream shapes (`fixtures/streams/responses`)
//! through the parser and the judge, in code mode on the client runtime:
//! fed whole, cut in two at every byte offset and byte by byte, the client
//! gets the same bytes and the round ends the same way, and what it gets
//! is what the fixture's `expect` says.

use std::sync::Arc;

use serde_json::Value;

use crate::mode::{Mode, Runtime};
use crate::plan::ToolPlan;
use crate::test_support::responses_client::reassemble;
use crate::test_support::{
    error_outcome_holds, expected_calls, expected_denials, final_outcome_holds, fixture, fixtures,
    judge_pieces, repair_fixtures, responses_plan, same_at_every_cut, Fixture, ResponsesJudge,
    RoundEnd,
};

fn check(f: &Fixture, plan: &Arc<ToolPlan>) {
    let name = &f.name;
    let expect = &f.meta["expect"];
    let judged = same_at_every_cut(name, &f.bytes, || ResponsesJudge::new(plan.clone(), 2));
    let view = reassemble(&judged.client);
    let calls: Vec<(String, String)> = view
        .calls
        .iter()
        .map(|c| (c.name.clone(), c.arguments.clone()))
        .collect();
    assert_eq!(
        calls,
        expected_calls(expect),
        "{name}: the client's calls, their arguments intact"
    );
    assert!(
        view.calls.iter().all(|c| !c.call_id.is_empty()),
        "{name}: every call the client gets has a call_id"
    );
    assert_eq!(view.text, expect["text"].as_str().unwrap(), "{name}: text");
    let terminal = view
        .terminal
        .as_ref()
        .map(|t| Value::from(t["type"].as_str().unwrap()));
    assert_eq!(
        terminal.unwrap_or(Value::Null),
        expect["terminal"],
        "{name}: the client's terminal event"
    );
    assert_eq!(
        view.done as u64,
        expect["done"].as_u64().unwrap(),
        "{name}: [DONE]"
    );
    match expect["outcome"].as_str().unwrap() {
        "final" => {
            final_outcome_holds(name, &judged, expect);
        }
        "repair" => {
            let RoundEnd::Repair { messages } = &judged.end else {
                panic!("{name}: expected a repair, got {:?}", judged.end)
            };
            assert!(
                view.terminal.is_none(),
                "{name}: a repaired round's end stays hidden"
            );
            let denied = expected_denials(expect);
            let answers: Vec<&Value> = messages
                .iter()
                .filter(|m| m["type"].as_str().is_some_and(|t| t.ends_with("_output")))
                .collect();
            assert_eq!(
                answers.len(),
                denied.len(),
                "{name}: one answer per denied call"
            );
            for (answer, (denied_name, code)) in answers.iter().zip(&denied) {
                let call = messages
                    .iter()
                    .find(|m| m.get("call_id") == answer.get("call_id") && m.get("name").is_some())
                    .unwrap_or_else(|| panic!("{name}: the repair replays the call {answer}"));
                assert_eq!(call["name"], denied_name.as_str(), "{name}");
                let output = answer["output"].as_str().unwrap();
                assert!(output.starts_with(&format!("{code}:")), "{name}: {output}");
                let call_id = call["call_id"].as_str().unwrap();
                assert!(
                    !String::from_utf8_lossy(&judged.client).contains(call_id),
                    "{name}: the denied call left a trace for the client"
                );
            }
            if let Some(first) = expect.get("repair_starts_with") {
                assert_eq!(&messages[0]["type"], first, "{name}: the repair's turn");
            }
        }
        "error" => error_outcome_holds(name, &judged, view.errors.len(), expect),
        other => panic!("{name}: unknown outcome {other}"),
    }
}

#[test]
fn every_responses_fixture_gives_the_client_its_expectation_at_every_cut() {
    let plan = responses_plan(Mode::Code, Runtime::Client);
    let all = fixtures("responses");
    assert!(all.len() >= 10, "fixtures for ten quirks");
    for f in &all {
        check(f, &plan);
    }
}

/// OpenAI sends `error` and then `response.failed`; Codex ignores `error`
/// events and reads the error's code from `response.failed` (quota
/// exhausted stops it, a rate limit is retried after the delay the message
/// names). A judge that ended the round at the `error` event dropped the
/// `response.failed` after it, so Codex saw only "stream closed before
/// response.completed" and retried a request that cannot succeed.
#[test]
fn an_error_event_keeps_the_response_failed_that_follows_it() {
    let plan = responses_plan(Mode::Code, Runtime::Client);
    check(&fixture("responses", "error_then_response_failed"), &plan);
}

#[test]
fn repair_fixtures_give_up_at_the_bound_with_a_terminal_and_no_call() {
    let plan = responses_plan(Mode::Code, Runtime::Client);
    for Fixture { name, bytes, meta } in repair_fixtures("responses") {
        let judged = judge_pieces(ResponsesJudge::new(plan.clone(), 0), &[&bytes]);
        assert!(
            matches!(judged.end, RoundEnd::Done { splice: None }),
            "{name}: {:?}",
            judged.end
        );
        let view = reassemble(&judged.client);
        assert!(view.calls.is_empty(), "{name}: {:?}", view.calls);
        let terminal = view.terminal.expect("a terminal event");
        assert_eq!(terminal["type"], "response.completed", "{name}");
        assert_eq!(terminal["response"]["status"], "completed", "{name}");
        // The model's text stands; without any, a note names the call.
        let denied = meta["expect"]["denied"][0]["name"].as_str().unwrap();
        let text = meta["expect"]["text"].as_str().unwrap();
        if text.is_empty() {
            let note = view.items.last().expect("the give-up note");
            let note = note["content"][0]["text"].as_str().unwrap_or("");
            assert!(
                note.contains(denied),
                "{name}: the note names the call: {note}"
            );
        } else {
            assert_eq!(view.text, text, "{name}");
        }
    }
}
