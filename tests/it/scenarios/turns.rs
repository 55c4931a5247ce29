//! The table, part one: what the model does in a turn and what the client
//! and the provider see of it (pass, deny and repair, the repair limit, a
//! mixed turn, programs, ONE_PROGRAM, INVALID_ARGS).

use serde_json::json;

use crate::scenarios::harness::{Runtime, Scenario};
use crate::scenarios::model::{call, is_scripted, turn, Expect, Reply, Text};

fn read_a() -> crate::scenarios::model::Call {
    call("read", r#"{"path":"a.txt"}"#)
}

/// Client runtime, code mode: the model's `run_code` and its text reach the
/// client as they came.
fn a_run_code_call_reaches_a_client_runtime_unchanged() -> Scenario {
    Scenario::new("code", Runtime::Client)
        .replies(vec![Reply::Turn(turn(
            Some("Running a program."),
            vec![call("run_code", r#"{"code":"return 1"}"#)],
            (10, 5),
        ))])
        .expect(
            Expect::text("Running a program.", (10, 5))
                .with_calls(vec![("run_code", json!({"code": "return 1"}))]),
        )
        .provider(|p| {
            assert_eq!(p.len(), 1, "one round");
            assert_eq!(p[0].tools, ["run_code"], "code mode carries run_code only");
        })
}

/// `both` mode: a native call passes to the client with the text beside it.
fn a_native_call_passes_in_both_mode() -> Scenario {
    Scenario::new("both", Runtime::Embedded)
        .replies(vec![Reply::Turn(turn(
            Some("Reading."),
            vec![read_a()],
            (10, 5),
        ))])
        .expect(
            Expect::text("Reading.", (10, 5)).with_calls(vec![("read", json!({"path": "a.txt"}))]),
        )
        .provider(|p| {
            assert_eq!(p.len(), 1, "one round");
            let mut tools = p[0].tools.clone();
            tools.sort();
            assert_eq!(
                tools,
                ["read", "run_code", "write"],
                "both: native + run_code"
            );
        })
}

/// Code mode: a direct `read` never reaches the client; the model is asked
/// again with an UNKNOWN_TOOL denial that shows the route through
/// `run_code`; its second answer reaches the client, usage summed.
fn a_direct_native_call_is_denied_and_repaired() -> Scenario {
    Scenario::new("code", Runtime::Embedded)
        .replies(vec![
            Reply::Turn(turn(None, vec![read_a()], (100, 10))),
            Reply::Turn(turn(Some("I will use run_code."), vec![], (120, 8))),
        ])
        .expect(Expect::text("I will use run_code.", (220, 18)))
        .provider(|p| {
            assert_eq!(p.len(), 2, "one repair round");
            assert_eq!(p[0].tools, ["run_code"]);
            let denial = p[1].assert_denied("read", "UNKNOWN_TOOL");
            assert!(
                denial
                    .text
                    .contains(r#"await tools.read({"path": "a.txt"})"#),
                "the denial shows the route: {}",
                denial.text
            );
        })
}

/// The model keeps calling `read` past CODEMODE_MAX_REPAIRS: the client
/// gets no call and a note, streamed as the dialect streams text.
fn repair_limit_note_streams_as_text() -> Scenario {
    Scenario::new("code", Runtime::Embedded)
        .var("CODEMODE_MAX_REPAIRS", "1")
        .replies(vec![
            Reply::Turn(turn(None, vec![read_a()], (100, 10))),
            Reply::Turn(turn(
                None,
                vec![call("read", r#"{"path":"b.txt"}"#)],
                (110, 10),
            )),
        ])
        .expect(Expect {
            text: Text::Prefix("[codemode-proxy]"),
            ..Expect::text("", (210, 20))
        })
        .provider(|p| {
            assert_eq!(p.len(), 2, "the first round and one repair");
            p[1].assert_denied("read", "UNKNOWN_TOOL");
        })
}

/// Client runtime, code mode: `run_code` and `read` in one turn. The client
/// gets `run_code` only; when it sends that call's result, the provider's
/// next request holds the `read` call and its denial too.
fn a_mixed_turn_passes_one_call_and_splices_the_denial() -> Scenario {
    Scenario::new("code", Runtime::Client)
        .replies(vec![
            Reply::Turn(turn(
                Some("Two calls."),
                vec![call("run_code", r#"{"code":"return 42"}"#), read_a()],
                (100, 10),
            )),
            Reply::Turn(turn(Some("Done."), vec![], (130, 5))),
        ])
        .expect(
            Expect::text("Two calls.", (100, 10))
                .with_calls(vec![("run_code", json!({"code": "return 42"}))]),
        )
        .then(vec!["42"], Expect::text("Done.", (130, 5)))
        .provider(|p| {
            assert_eq!(p.len(), 2, "no repair: the turn had a passing call");
            assert_eq!(p[1].result_of("run_code").text, "42");
            p[1].assert_denied("read", "UNKNOWN_TOOL");
        })
}

/// Embedded runtime: the model writes text beside a program that ends
/// without calls; the model is asked again; the client gets both texts, a
/// blank line apart.
fn text_beside_a_program_that_ends_in_the_request_is_kept() -> Scenario {
    Scenario::new("code", Runtime::Embedded)
        .replies(vec![
            Reply::Turn(turn(
                Some("Let me check."),
                vec![call("run_code", r#"{"code":"return 42"}"#)],
                (100, 10),
            )),
            Reply::Turn(turn(Some("Done."), vec![], (130, 5))),
        ])
        .expect(Expect::text("Let me check.\n\nDone.", (230, 15)))
        .provider(|p| {
            assert_eq!(p.len(), 2, "the program's round, then the answer");
            assert_eq!(p[1].result_of("run_code").text, "Result: 42");
        })
}

/// Embedded runtime: the program waits on `tools.read`; the client gets a
/// `read` call under a minted id, sends its result, the program ends, the
/// model answers.
fn a_program_waits_on_a_client_call_and_resumes() -> Scenario {
    let code = r#"{"code":"const a = await tools.read({path: 'a.txt'}); return a;"}"#;
    Scenario::new("code", Runtime::Embedded)
        .replies(vec![
            Reply::Turn(turn(None, vec![call("run_code", code)], (100, 10))),
            Reply::Turn(turn(Some("a.txt says alpha."), vec![], (130, 5))),
        ])
        .expect(
            Expect::text("", (100, 10))
                .with_calls(vec![("read", json!({"path": "a.txt"}))])
                .with_minted_ids(),
        )
        .then(vec!["alpha"], Expect::text("a.txt says alpha.", (130, 5)))
        .provider(|p| {
            assert_eq!(p.len(), 2, "the program's round, then the answer");
            assert_eq!(p[1].result_of("run_code").text, "Result: \"alpha\"");
            for r in p {
                assert!(
                    r.calls
                        .iter()
                        .all(|(id, n)| n == "run_code" && (id.is_empty() || is_scripted(id))),
                    "a call the proxy minted reached the provider: {}",
                    r.body
                );
            }
        })
}

/// Embedded runtime: two `run_code` calls in one turn; neither runs, both
/// are answered ONE_PROGRAM and the model is asked again.
fn two_programs_in_one_turn_are_repaired_with_one_program() -> Scenario {
    Scenario::new("code", Runtime::Embedded)
        .replies(vec![
            Reply::Turn(turn(
                None,
                vec![
                    call("run_code", r#"{"code":"return 1"}"#),
                    call("run_code", r#"{"code":"return 2"}"#),
                ],
                (100, 10),
            )),
            Reply::Turn(turn(Some("Done."), vec![], (120, 5))),
        ])
        .expect(Expect::text("Done.", (220, 15)))
        .provider(|p| {
            assert_eq!(p.len(), 2, "one repair round");
            let answers = p[1].results_of("run_code");
            assert_eq!(answers.len(), 2, "both programs answered: {}", p[1].body);
            for a in answers {
                assert!(a.text.starts_with("ONE_PROGRAM:"), "{}", a.text);
                if p[1].dialect.flags_denials() {
                    assert!(
                        a.is_error,
                        "a {:?} denial is flagged an error",
                        p[1].dialect
                    );
                }
            }
        })
}

/// A collapsed call (code mode, a native name) whose arguments are no JSON
/// object is denied INVALID_ARGS, not UNKNOWN_TOOL, and repaired.
fn invalid_args(args: &'static str) -> Scenario {
    Scenario::new("code", Runtime::Embedded)
        .replies(vec![
            Reply::Turn(turn(None, vec![call("read", args)], (100, 10))),
            Reply::Turn(turn(Some("Fixed."), vec![], (120, 5))),
        ])
        .expect(Expect::text("Fixed.", (220, 15)))
        .provider(|p| {
            assert_eq!(p.len(), 2, "one repair round");
            p[1].assert_denied("read", "INVALID_ARGS");
        })
}

fn arguments_that_are_not_json_are_denied_invalid_args() -> Scenario {
    invalid_args("not json")
}

fn arguments_that_are_a_json_array_are_denied_invalid_args() -> Scenario {
    invalid_args("[1, 2]")
}

crate::scenarios!(
    a_run_code_call_reaches_a_client_runtime_unchanged,
    a_native_call_passes_in_both_mode,
    a_direct_native_call_is_denied_and_repaired,
    repair_limit_note_streams_as_text,
    a_mixed_turn_passes_one_call_and_splices_the_denial,
    text_beside_a_program_that_ends_in_the_request_is_kept,
    a_program_waits_on_a_client_call_and_resumes,
    two_programs_in_one_turn_are_repaired_with_one_program,
    arguments_that_are_not_json_are_denied_invalid_args,
    arguments_that_are_a_json_array_are_denied_invalid_args,
);
