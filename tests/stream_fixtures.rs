//! Real providers' stream shapes (fixtures/streams), through the parser and
//! the judge, cut at every byte offset.

mod common;

use std::path::{Path, PathBuf};

use codemode_proxy::internals::stream::RoundEnd;
use codemode_proxy::Mode;
use common::sse_client::reassemble;
use common::{agent_plan, judge_pieces};
use serde_json::Value;

fn fixtures() -> Vec<(String, Vec<u8>, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/streams");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sse"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let meta: Value =
                serde_json::from_str(&std::fs::read_to_string(p.with_extension("json")).unwrap())
                    .unwrap();
            for key in ["provider", "behaviour", "evidence", "expect"] {
                assert!(meta.get(key).is_some(), "{} lacks {key}", p.display());
            }
            (
                p.file_stem().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
                meta,
            )
        })
        .collect()
}

#[test]
fn every_fixture_holds_in_code_mode_at_every_cut() {
    let all = fixtures();
    let code = agent_plan(Mode::Code);
    assert!(all.len() >= 12, "fixtures from at least ten providers");
    for (name, bytes, meta) in &all {
        let expect = &meta["expect"];
        let (whole, end, errored) = judge_pieces(&[bytes], &code, 2);
        let view = reassemble(&whole);
        assert!(
            view.call_names().iter().all(|n| *n == "run_code"),
            "{name}: client saw {:?}",
            view.call_names()
        );
        let want: Vec<(String, String)> = expect["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap().to_owned(),
                    c["arguments"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
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
                let RoundEnd::Repair { messages } = &end else {
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
                let RoundEnd::Done { splice } = &end else {
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
        for cut in 0..=bytes.len() {
            let (cut_out, _, _) = judge_pieces(&[&bytes[..cut], &bytes[cut..]], &code, 2);
            assert_eq!(cut_out, whole, "{name}: output differs when cut at {cut}");
        }
    }
}

#[test]
fn repair_fixtures_give_up_at_the_bound_without_a_denied_call() {
    let code = agent_plan(Mode::Code);
    for (name, bytes, meta) in fixtures() {
        if meta["expect"]["outcome"] != "repair" {
            continue;
        }
        let (out, end, _) = judge_pieces(&[&bytes], &code, 0);
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
