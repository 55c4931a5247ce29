//! Recorded Gemini API streams (`fixtures/streams/gemini`) through the
//! parser and the judge: fed whole, cut in two at every byte offset and
//! byte by byte, the client gets the same bytes and the round ends the
//! same way. In code mode on the client runtime what it gets is what the
//! fixture's `expect` says (every recorded call is a tool the plan does not
//! declare, so it is denied and repaired, and leaves no trace); in native
//! mode it gets every part the provider sent, each call with an id.

use std::sync::Arc;

use serde_json::Value;

use crate::gemini::parts::CallIds;
use crate::gemini::stream::GeminiJudge;
use crate::mode::{Mode, Runtime};
use crate::plan::ToolPlan;
use crate::test_support::{
    error_outcome_holds, expected_denials, fixtures, gemini_plan, same_at_every_cut, Fixture,
    RoundEnd,
};

/// What a Gemini client reads out of a stream.
#[derive(Debug, Default)]
struct View {
    text: String,
    calls: Vec<(String, String)>,
    finishes: usize,
    errors: usize,
    usage: Option<Value>,
    parts: usize,
}

fn view(bytes: &[u8]) -> View {
    let mut v = View::default();
    let text = String::from_utf8_lossy(bytes).replace("\r\n", "\n");
    for event in text.split("\n\n") {
        let Some(data) = event.trim().strip_prefix("data:") else {
            continue;
        };
        let chunk: Value = serde_json::from_str(data.trim()).expect("every chunk is JSON");
        if chunk.get("error").is_some() {
            v.errors += 1;
            continue;
        }
        if let Some(u) = chunk.get("usageMetadata") {
            v.usage = Some(u.clone());
        }
        for c in chunk["candidates"].as_array().into_iter().flatten() {
            v.finishes += usize::from(c.get("finishReason").is_some());
            for p in c["content"]["parts"].as_array().into_iter().flatten() {
                v.parts += 1;
                if let Some(call) = p.get("functionCall") {
                    v.calls.push((
                        call["name"].as_str().unwrap_or("").to_owned(),
                        call["id"].as_str().unwrap_or("").to_owned(),
                    ));
                } else if p["thought"] != true {
                    v.text.push_str(p["text"].as_str().unwrap_or(""));
                }
            }
        }
    }
    v
}

fn judge(plan: &Arc<ToolPlan>) -> impl Fn() -> GeminiJudge + '_ {
    || GeminiJudge::with_ids(plan.clone(), 2, CallIds::under("call_cmF".into()))
}

fn check_code_mode(f: &Fixture, plan: &Arc<ToolPlan>) {
    let Fixture { name, bytes, meta } = f;
    let expect = &meta["expect"];
    let judged = same_at_every_cut(name, bytes, judge(plan));
    let got = view(&judged.client);
    assert_eq!(got.text, expect["text"].as_str().unwrap(), "{name}: text");
    match expect["outcome"].as_str().unwrap() {
        "final" => {
            assert!(
                matches!(judged.end, RoundEnd::Done { splice: None }),
                "{name}: {:?}",
                judged.end
            );
            assert!(got.calls.is_empty(), "{name}");
            assert_eq!(
                got.finishes as u64,
                expect["finishes"].as_u64().unwrap(),
                "{name}"
            );
            assert_eq!(
                got.usage,
                view(bytes).usage,
                "{name}: the provider's last usage"
            );
        }
        "repair" => {
            let RoundEnd::Repair { messages } = &judged.end else {
                panic!("{name}: expected a repair, got {:?}", judged.end)
            };
            // Chunks carry running usage as they came; the finish is held back.
            assert_eq!(got.finishes, 0, "{name}: the end stays hidden");
            assert!(got.calls.is_empty(), "{name}: {:?}", got.calls);
            let [model, user] = messages.as_slice() else {
                panic!("{name}: the turn and one user content: {messages:?}")
            };
            let answers = user["parts"].as_array().unwrap();
            let denied = expected_denials(expect);
            assert_eq!(answers.len(), denied.len(), "{name}: one answer per call");
            let calls: Vec<&Value> = model["parts"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p.get("functionCall"))
                .collect();
            for ((answer, (denied_name, code)), call) in answers.iter().zip(&denied).zip(&calls) {
                let r = &answer["functionResponse"];
                assert_eq!(r["name"], denied_name.as_str(), "{name}");
                // The answer names its call as the model did: by its id, or
                // by name and place when the model gave none (the turn is
                // replayed as the model sent it).
                assert_eq!(r["id"], call["id"], "{name}: the answer names its call");
                let text = r["response"]["error"].as_str().unwrap();
                assert!(text.starts_with(&format!("{code}:")), "{name}: {text}");
                if let Some(id) = call["id"].as_str() {
                    assert!(
                        !String::from_utf8_lossy(&judged.client).contains(id),
                        "{name}: the denied call left a trace for the client"
                    );
                }
            }
            // The turn replays every signature the model sent, in place.
            let signed = |v: &str| v.matches("thoughtSignature").count();
            let sent: usize = String::from_utf8_lossy(bytes)
                .split("\n\n")
                .filter(|e| e.contains("functionCall"))
                .map(signed)
                .sum();
            assert!(
                signed(&model.to_string()) >= sent,
                "{name}: a signature was lost"
            );
        }
        "error" => error_outcome_holds(name, &judged, got.errors, expect),
        other => panic!("{name}: unknown outcome {other}"),
    }
}

#[test]
fn every_gemini_fixture_gives_the_client_its_expectation_at_every_cut() {
    let plan = gemini_plan(Mode::Code, Runtime::Client);
    let all = fixtures("gemini");
    assert!(all.len() >= 15, "fixtures for fifteen quirks");
    for f in &all {
        check_code_mode(f, &plan);
    }
}

#[test]
fn in_native_mode_every_part_reaches_the_client_and_every_call_has_an_id() {
    let plan = gemini_plan(Mode::Native, Runtime::Client);
    for Fixture { name, bytes, meta } in fixtures("gemini") {
        let judged = same_at_every_cut(&name, &bytes, judge(&plan));
        let (sent, got) = (view(&bytes), view(&judged.client));
        assert_eq!(got.parts, sent.parts, "{name}: every part");
        assert_eq!(got.text, sent.text, "{name}");
        assert_eq!(got.finishes, sent.finishes, "{name}");
        let names: Vec<&str> = got.calls.iter().map(|(n, _)| n.as_str()).collect();
        let sent_names: Vec<&str> = sent.calls.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, sent_names, "{name}");
        for ((_, id), (_, was)) in got.calls.iter().zip(&sent.calls) {
            assert!(!id.is_empty(), "{name}: a call without an id");
            if !was.is_empty() {
                assert_eq!(id, was, "{name}: the model's own id is kept");
            }
        }
        let error = meta["expect"]["outcome"] == "error";
        assert_eq!(judged.errored, error, "{name}");
    }
}
