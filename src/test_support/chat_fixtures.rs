//! Real providers' chat stream shapes (fixtures/streams/*.sse), through the
//! parser and the judge, cut at every byte offset.

use serde_json::Value;

use crate::mode::Mode;
use crate::test_support::chat_client::reassemble;
use crate::test_support::{
    agent_plan, expected_calls, fixtures, judge_pieces, repair_fixtures, same_at_every_cut,
    Fixture, RoundEnd, StreamJudge,
};

#[test]
fn every_fixture_holds_in_code_mode_at_every_cut() {
    let all = fixtures("");
    let code = agent_plan(Mode::Code);
    assert!(all.len() >= 12, "fixtures from at least ten providers");
    for Fixture { name, bytes, meta } in &all {
        let expect = &meta["expect"];
        // Cut in two at every offset and byte by byte, the client's bytes
        // and the round's end are the stream's fed whole.
        let judged = same_at_every_cut(name, bytes, || StreamJudge::new(code.clone(), 2));
        let (whole, end, errored) = (&judged.client, &judged.end, judged.errored);
        let view = reassemble(whole);
        assert!(
            view.call_names().iter().all(|n| *n == "run_code"),
            "{name}: client saw {:?}",
            view.call_names()
        );
        let want = expected_calls(expect);
        let got: Vec<(String, String)> = view
            .calls
            .iter()
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect();
        assert_eq!(
            got, want,
            "{name}: allowed calls arrive with their arguments intact"
        );
        for (i, c) in view.calls.iter().enumerate() {
            assert_eq!(
                c.index, i as i64,
                "{name}: client indices are contiguous from 0"
            );
            assert!(
                !c.id.is_empty(),
                "{name}: every call the client sees has an id"
            );
        }
        if let Some(text) = expect.get("text").and_then(Value::as_str) {
            assert_eq!(view.text, text, "{name}: text passes");
        }
        match expect["outcome"].as_str().unwrap() {
            "repair" => {
                let RoundEnd::Repair { messages } = end else {
                    panic!("{name}: expected a repair, got {end:?}")
                };
                assert!(
                    view.finish_reasons.is_empty() && view.done == 0,
                    "{name}: a repaired turn's end stays hidden"
                );
                let denied: Vec<&str> = expect["denied"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_str().unwrap())
                    .collect();
                assert_eq!(
                    messages.len(),
                    1 + denied.len(),
                    "{name}: the turn and one denial per call"
                );
                for m in &messages[1..] {
                    assert!(
                        m["content"].as_str().unwrap().starts_with("UNKNOWN_TOOL:"),
                        "{name}: {m}"
                    );
                }
            }
            "final" => {
                let RoundEnd::Done { splice } = end else {
                    panic!("{name}: expected the end, got {end:?}")
                };
                let wants_splice = expect
                    .get("splice")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                assert_eq!(
                    splice.is_some(),
                    wants_splice,
                    "{name}: mixed turns store their denials"
                );
                assert_eq!(view.finish_reasons.len(), 1, "{name}: one finish_reason");
            }
            "error" => {
                assert!(errored, "{name}: the in-band error is recognised");
                assert_eq!(view.errors.len(), 1, "{name}: the error reaches the client");
                assert!(
                    matches!(end, RoundEnd::Done { .. }),
                    "{name}: no repair after an error"
                );
            }
            other => panic!("{name}: unknown outcome {other}"),
        }
    }
}

#[test]
fn repair_fixtures_give_up_at_the_bound_without_a_denied_call() {
    let code = agent_plan(Mode::Code);
    for Fixture { name, bytes, meta } in repair_fixtures("") {
        let judged = judge_pieces(StreamJudge::new(code.clone(), 0), &[&bytes]);
        let (out, end) = (judged.client, judged.end);
        assert!(matches!(end, RoundEnd::Done { splice: None }), "{name}");
        let view = reassemble(&out);
        assert!(view.calls.is_empty(), "{name}: {:?}", view.calls);
        assert_eq!(view.finish_reasons, vec!["stop"], "{name}");
        assert!(
            view.text.contains("CODEMODE_MAX_REPAIRS") || meta["expect"].get("text").is_some(),
            "{name}: {}",
            view.text
        );
    }
}
