//! Property: a shape a judge cannot read where a call could stand is
//! refused, never forwarded (issue 47; docs/security.md, "Fail closed").
//!
//! Generated answers of every dialect (`answers`) are mutated at every
//! call-bearing path (`choices`, a message or delta, `tool_calls` and each
//! entry, a call's body and name; `output` and items; `content` and
//! blocks; `candidates`, `content`, `parts`, `functionCall`; `steps` and a
//! step's `name`; in a stream also an event's `item`, `response`,
//! `message`, `content_block`, `step`, `delta`, `interaction`): a list
//! written as an object keyed `"0"`, `"1"`, ... (`@google/genai` reads
//! `candidates` so), an object or a name written as a list holding it (a
//! JavaScript client looks a tool up by the string a list joins to),
//! `null`, and the key written twice, the second time `null` (serde keeps
//! the last, many clients the first).
//!
//! Each mutated answer goes through what the proxy does with it: whole,
//! the JSON driver's own steps (the quiet probe, the parse, the judge, the
//! edits, the provider's bytes or the answer written anew); as an event of
//! a stream, the stream body and the dialect's judge. A lenient client
//! reads what comes out: repeated keys first one first, an object keyed
//! `"0"` as a list, a list where an object goes as its first entry, a name
//! that is no string as the string JavaScript makes of it. The property:
//! the proxy refused it, or every call that client reads is one the
//! judge lets through (and, whole, the turn holds exactly as many calls
//! as the judge passed).

mod dialects;
mod lenient;
mod mutations;

use proptest::prelude::*;
use serde_json::{json, Value};

use super::answers::{
    chat_answer, gemini_answer, interactions_answer, messages_answer, modes, responses_answer,
};
use crate::chat::Chat;
use crate::gemini::stream::GeminiJudge;
use crate::gemini::Gemini;
use crate::interactions::stream::InteractionsJudge;
use crate::interactions::Interactions;
use crate::layer::drivers::json::{judge_answer, parse_answer};
use crate::messages::Messages;
use crate::mode::{Mode, Runtime};
use crate::plan::ToolPlan;
use crate::responses::Responses;
use crate::test_support::{
    client_events, gemini_plan, judge_pieces, Judge, MessagesJudge, ResponsesJudge, StreamJudge,
};
use crate::turn::Dialect;
use dialects::{answers, events, keys, lets_through, plan, sse, Api};
use lenient::{calls, first_wins};
use mutations::{mutated, paths, Mutation, Seg, MUTATIONS};

// ---- through the proxy ----

/// What the JSON driver sends for a first round's `body`: `None` for a
/// refusal; else the client's bytes and how many calls the judge passed.
fn through_json<D: Dialect>(body: &[u8], plan: &ToolPlan) -> Option<(Vec<u8>, usize)> {
    if D::quiet_answer(body).is_some() {
        return Some((body.to_vec(), 0));
    }
    let (mut answer, repeated) = parse_answer::<D>(body).ok()?;
    let (turn, edits) = judge_answer::<D>(&answer, plan).ok()?;
    let unchanged = edits.is_empty() && !repeated;
    edits.apply(&mut answer);
    let client = if unchanged {
        body.to_vec()
    } else {
        serde_json::to_vec(&answer).expect("an answer serialises")
    };
    Some((client, turn.calls.iter().filter(|c| c.passed()).count()))
}

/// The property for one whole answer's text, in every mode; in how many
/// the client got calls.
fn whole_holds(api: Api, body: &str) -> Result<usize, String> {
    let mut with_calls = 0;
    for (mode, runtime) in modes() {
        let plan = plan(api, mode, runtime);
        let sent = match api {
            Api::Chat => through_json::<Chat>(body.as_bytes(), &plan),
            Api::Responses => through_json::<Responses>(body.as_bytes(), &plan),
            Api::Messages => through_json::<Messages>(body.as_bytes(), &plan),
            Api::Gemini => through_json::<Gemini>(body.as_bytes(), &plan),
            Api::Interactions => through_json::<Interactions>(body.as_bytes(), &plan),
        };
        let Some((client, passed)) = sent else {
            continue; // Refused: nothing of it reaches the client.
        };
        let text = String::from_utf8_lossy(&client);
        let read = first_wins(&text).ok_or_else(|| format!("the client got no JSON: {text}"))?;
        let (turn, rest) = calls(api, &read);
        let why =
            |e: &str| format!("{api:?}, {mode:?} on {runtime:?}: {e}\nsent {body}\ngot {text}");
        if turn.len() != passed {
            return Err(why(&format!(
                "the client reads {} calls, the judge passed {passed}",
                turn.len()
            )));
        }
        if let Some(call) = turn
            .iter()
            .chain(&rest)
            .find(|c| !lets_through(api, c, &plan))
        {
            return Err(why(&format!(
                "the client reads a call the judge withholds: {call}"
            )));
        }
        with_calls += usize::from(!turn.is_empty());
    }
    Ok(with_calls)
}

fn stream_run<J: Judge>(judge: J, bytes: &[u8]) -> Vec<u8> {
    judge_pieces(judge, &[bytes]).client
}

/// The property for one stream whose event `n` is `text`, in a mode that
/// denies and one that passes natives.
fn stream_holds(api: Api, events: &[Value], n: usize, text: &str) -> Result<(), String> {
    let bytes = sse(events, n, text);
    for (mode, runtime) in [
        (Mode::Code, Runtime::Client),
        (Mode::Code, Runtime::Embedded),
        (Mode::Both, Runtime::Client),
    ] {
        let plan = plan(api, mode, runtime);
        let client = match api {
            Api::Chat => stream_run(StreamJudge::new(plan.clone(), 1), &bytes),
            Api::Responses => stream_run(ResponsesJudge::new(plan.clone(), 1), &bytes),
            Api::Messages => stream_run(MessagesJudge::new(plan.clone(), 1), &bytes),
            Api::Gemini => stream_run(GeminiJudge::new(plan.clone(), 1), &bytes),
            Api::Interactions => stream_run(InteractionsJudge::new(plan.clone(), 1), &bytes),
        };
        for ev in client_events(&client) {
            let Some(read) = first_wins(&ev.data) else {
                continue;
            };
            let (turn, rest) = calls(api, &read);
            // A delta that names no tool continues a call it went out with.
            let named = |c: &&Value| api != Api::Chat || c.to_string().contains("\"name\":");
            if let Some(call) = turn
                .iter()
                .chain(&rest)
                .filter(named)
                .find(|c| !lets_through(api, c, &plan))
            {
                return Err(format!(
                    "{api:?}, {mode:?} on {runtime:?}: the client reads a call the judge withholds: {call}\nsent {}\ngot {}",
                    String::from_utf8_lossy(&bytes),
                    String::from_utf8_lossy(&client)
                ));
            }
        }
    }
    Ok(())
}

/// The property for an answer mutated every way at every path, whole and
/// as each event of its stream; how often a mutated whole answer reached
/// the client judged, with calls.
fn holds(api: Api, answer: &Value) -> Result<usize, String> {
    whole_holds(api, &answer.to_string())?;
    let mut judged = 0;
    for path in paths(answer, keys(api, false)) {
        for mutation in MUTATIONS {
            if let Some(text) = mutated(answer, &path, mutation) {
                judged += whole_holds(api, &text)?;
            }
        }
    }
    let events = events(api, answer);
    for (n, event) in events.iter().enumerate() {
        for path in paths(event, keys(api, true)) {
            for mutation in MUTATIONS {
                if let Some(text) = mutated(event, &path, mutation) {
                    stream_holds(api, &events, n, &text)?;
                }
            }
        }
    }
    Ok(judged)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_chat_answer_mutated_where_a_call_stands_is_judged_or_refused(answer in chat_answer()) {
        holds(Api::Chat, &answer).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_responses_answer_mutated_where_a_call_stands_is_judged_or_refused(answer in responses_answer()) {
        holds(Api::Responses, &answer).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_messages_answer_mutated_where_a_call_stands_is_judged_or_refused(answer in messages_answer()) {
        holds(Api::Messages, &answer).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_gemini_answer_mutated_where_a_call_stands_is_judged_or_refused(answer in gemini_answer()) {
        holds(Api::Gemini, &answer).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn an_interactions_answer_mutated_where_a_call_stands_is_judged_or_refused(answer in interactions_answer()) {
        holds(Api::Interactions, &answer).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn mutations_a_judge_reads_reach_the_client_judged_in_every_dialect() {
    // The property is vacuous if every mutation is refused: `null` where
    // a field is optional, and a repeated key, are read, and their calls
    // judged.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    for api in Api::ALL {
        let strategy = answers(api);
        let judged: usize = (0..40)
            .map(|_| {
                let answer = strategy.new_tree(&mut runner).unwrap().current();
                holds(api, &answer).unwrap()
            })
            .sum();
        assert!(
            judged >= 100,
            "{api:?}: only {judged} mutated answers went out with calls"
        );
    }
}

#[test]
fn the_lenient_client_reads_what_the_issue_saw() {
    // `@google/genai` read the first candidate out of an object keyed "0":
    // the reader does too, so a judge that skipped it is caught.
    let keyed = json!({"candidates": {"0": {"content": {"parts": [
        {"functionCall": {"name": "read_file", "args": {}}}]}}}});
    let (turn, _) = calls(Api::Gemini, &keyed);
    assert_eq!(turn.len(), 1);
    let plan = gemini_plan(Mode::Code, Runtime::Client);
    assert!(!lets_through(Api::Gemini, &turn[0], &plan));
    assert!(whole_holds(Api::Gemini, &keyed.to_string()).is_ok());
    // The first of a repeated key, a list's first entry where an object
    // goes, a name a list joins to.
    let read =
        first_wins(r#"{"content": [{"type": "tool_use", "name": ["Read"]}], "content": null}"#)
            .unwrap();
    let (turn, _) = calls(Api::Messages, &read);
    assert_eq!(
        turn,
        vec![json!({"content": [{"type": "tool_use", "name": "Read"}]})]
    );
    let wrapped =
        json!({"choices": [[{"message": {"tool_calls": [{"function": {"name": "read"}}]}}]]});
    assert_eq!(calls(Api::Chat, &wrapped).0.len(), 1);
    // Every mutation applies where its shape is.
    let answer = json!({"a": [1, {"b": "x"}]});
    let at = |p: &[Seg]| p.to_vec();
    let list = at(&[Seg::Key("a".into())]);
    assert_eq!(
        mutated(&answer, &list, Mutation::Keyed).unwrap(),
        r#"{"a":{"0":1,"1":{"b":"x"}}}"#
    );
    assert_eq!(
        mutated(&answer, &list, Mutation::Repeated).unwrap(),
        r#"{"a":[1,{"b":"x"}],"a":null}"#
    );
    let name = at(&[Seg::Key("a".into()), Seg::Index(1), Seg::Key("b".into())]);
    assert_eq!(
        mutated(&answer, &name, Mutation::Wrapped).unwrap(),
        r#"{"a":[1,{"b":["x"]}]}"#
    );
    assert_eq!(
        mutated(&answer, &name, Mutation::Repeated).unwrap(),
        r#"{"a":[1,{"b":"x","b":null}]}"#
    );
    assert!(mutated(&answer, &list, Mutation::Wrapped).is_none());
}
