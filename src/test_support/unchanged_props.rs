//! Property: a whole answer whose judge asked for no edit, sent to the
//! client as the provider's bytes, never carries a call the full path
//! (judge, then write the edits) would withhold.
//!
//! For every dialect, on generated answers (calls of every name, shape and
//! id-lessness, lists that are not lists, extra choices and candidates,
//! item and block types no one knows) and on every recorded stream's
//! objects read as whole answers, in every mode: the calls a lenient
//! client reads off what it gets are exactly the calls the judge passed,
//! in order; and no edits means nothing was withheld and the full path
//! would have sent the same answer.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::answers::{
    chat_answer, gemini_answer, messages_answer, modes, recorded, responses_answer,
};
use crate::chat::Chat;
use crate::gemini::parts::is_call_part;
use crate::gemini::stream::GeminiJudge;
use crate::gemini::Gemini;
use crate::messages::items::is_call_block;
use crate::messages::Messages;
use crate::mode::{Mode, Runtime};
use crate::plan::ToolPlan;
use crate::responses::items::is_judged_item;
use crate::responses::Responses;
use crate::test_support::{
    agent_plan, fixtures, gemini_plan, judge_pieces, messages_plan, responses_plan,
};
use crate::turn::{Dialect, Edits, JudgedCall, ModelTurn, Shape};

/// A lenient client of one dialect.
#[derive(Clone, Copy, PartialEq)]
enum Reader {
    Chat,
    Responses,
    Messages,
    Gemini,
}

impl Reader {
    /// Every call a client could execute off an answer, in order, as it
    /// reads it: every choice or candidate, every list entry the dialect's
    /// fail-closed rule counts as a call.
    fn calls(self, answer: &Value) -> Vec<Value> {
        match self {
            Reader::Chat => chat_calls(answer),
            Reader::Responses => responses_calls(answer),
            Reader::Messages => messages_calls(answer),
            Reader::Gemini => gemini_calls(answer),
        }
    }
}

fn chat_calls(answer: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for choice in answer["choices"].as_array().into_iter().flatten() {
        let message = &choice["message"];
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            out.push(call.clone());
        }
        let legacy = &message["function_call"];
        if !legacy.is_null() {
            out.push(json!({"legacy": legacy["name"].as_str().unwrap_or("")}));
        }
    }
    out
}

fn responses_calls(answer: &Value) -> Vec<Value> {
    let items = answer["output"].as_array().into_iter().flatten();
    items.filter(|i| is_judged_item(i)).cloned().collect()
}

fn messages_calls(answer: &Value) -> Vec<Value> {
    let blocks = answer["content"].as_array().into_iter().flatten();
    blocks.filter(|b| is_call_block(b)).cloned().collect()
}

fn gemini_calls(answer: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for candidate in answer["candidates"].as_array().into_iter().flatten() {
        let parts = candidate["content"]["parts"]
            .as_array()
            .into_iter()
            .flatten();
        out.extend(parts.filter(|p| is_call_part(p)).cloned());
    }
    out
}

/// A passed call as the reader shows it.
fn shown(call: &JudgedCall) -> Value {
    match (&call.raw, call.shape) {
        (_, Shape::Legacy) | (None, _) => json!({"legacy": call.name}),
        (Some(raw), _) => Value::Object(raw.clone()),
    }
}

/// A Gemini call as the client reads it: as the model sent it, with the
/// id the proxy gave it when the model gave none.
fn given_id(mut shown: Value, call: &JudgedCall, read: Reader) -> Value {
    if read != Reader::Gemini {
        return shown;
    }
    for key in ["functionCall", "function_call"] {
        if let Some(Value::Object(c)) = shown.get_mut(key) {
            if c.get("id")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                c.insert("id".into(), json!(call.id));
            }
            break;
        }
    }
    shown
}

/// The property for one answer; `Err` says what broke, `Ok(true)` that
/// the answer went out unedited holding calls.
fn holds<D: Dialect>(answer: &Value, plan: &ToolPlan, read: Reader) -> Result<bool, String> {
    let Some(object) = answer.as_object() else {
        return Ok(false);
    };
    let Ok((turn, edits)) = D::judge_answer(object, plan) else {
        // Refused: nothing of it reaches the client.
        return Ok(false);
    };
    verdict_holds(answer, plan, &turn, edits, read)
}

/// The property for one answer judged as `turn` with `edits`.
fn verdict_holds(
    answer: &Value,
    plan: &ToolPlan,
    turn: &ModelTurn,
    edits: Edits,
    read: Reader,
) -> Result<bool, String> {
    let Some(object) = answer.as_object() else {
        return Ok(false);
    };
    let unchanged = edits.is_empty();
    let mut full: Map<String, Value> = object.clone();
    edits.apply(&mut full);
    let full = Value::Object(full);
    let passed: Vec<Value> = turn
        .calls
        .iter()
        .filter(|c| c.passed())
        .map(|c| given_id(shown(c), c, read))
        .collect();
    // Gemini judges every candidate; the turn is the first one's.
    let first_only = |v: &Value| -> Value {
        match v.get("candidates").and_then(Value::as_array) {
            Some(c) if read == Reader::Gemini => {
                let mut v = v.clone();
                v["candidates"] = Value::Array(c.iter().take(1).cloned().collect());
                v
            }
            _ => v.clone(),
        }
    };
    let client = if unchanged { answer } else { &full };
    let read_off = read.calls(&first_only(client));
    if read_off != passed {
        return Err(format!(
            "the client reads {read_off:?} but the judge passed {passed:?} (unchanged: {unchanged})"
        ));
    }
    if unchanged {
        if let Some(c) = turn.calls.iter().find(|c| !c.passed()) {
            return Err(format!("no edits, yet `{}` was withheld", c.name));
        }
        if &full != answer {
            return Err("no edits, yet the full path wrote another answer".into());
        }
    }
    // Later candidates are never the turn: whatever of them the client
    // reads was judged too, and only passed calls stay.
    if let Some(later) = full.get("candidates").and_then(Value::as_array) {
        for candidate in later.iter().skip(1) {
            for part in gemini_calls(&json!({"candidates": [candidate]})) {
                let judged = crate::gemini::parts::judge_part(&part, plan);
                if judged.is_some_and(|c| !c.passed()) {
                    return Err(format!("a later candidate kept a withheld call: {part}"));
                }
            }
        }
    }
    Ok(unchanged && !passed.is_empty())
}

/// The property in every mode; how many of them sent the answer unedited
/// with calls in it.
fn check_everywhere(api: &str, answer: &Value) -> Result<usize, String> {
    let mut unedited = 0;
    for (mode, runtime) in modes() {
        let result = match api {
            "chat" => holds::<Chat>(answer, &agent_plan(mode), Reader::Chat),
            "responses" => {
                holds::<Responses>(answer, &responses_plan(mode, runtime), Reader::Responses)
            }
            "messages" => {
                holds::<Messages>(answer, &messages_plan(mode, runtime), Reader::Messages)
            }
            _ => holds::<Gemini>(answer, &gemini_plan(mode, runtime), Reader::Gemini),
        };
        unedited += usize::from(
            result.map_err(|e| format!("{api}, {mode:?} on {runtime:?}: {e}\n{answer}"))?,
        );
    }
    Ok(unedited)
}

#[test]
fn every_recorded_answer_keeps_the_rule_on_both_paths() {
    let (mut checked, mut unedited) = (0, 0);
    for (api, dir) in [
        ("chat", ""),
        ("responses", "responses"),
        ("messages", "messages"),
        ("gemini", "gemini"),
    ] {
        for f in fixtures(dir) {
            for answer in recorded(api, &f.bytes) {
                match check_everywhere(api, &answer) {
                    Ok(n) => unedited += n,
                    Err(e) => panic!("{}: {e}", f.name),
                }
                checked += 1;
            }
        }
    }
    let whole = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/streams/gemini/whole_two_calls.json"
    );
    let answer: Value = serde_json::from_slice(&std::fs::read(whole).unwrap()).unwrap();
    check_everywhere("gemini", &answer).unwrap();
    assert!(checked > 100, "only {checked} recorded answers");
    // The fast path is exercised, not only the edited one.
    assert!(
        unedited > 20,
        "only {unedited} went out unedited with calls"
    );
}

/// A Gemini chunk the stream judge sends as the provider's bytes is one
/// the whole-answer judge asks no edit of (so, by the property above, one
/// holding no withheld call), in every mode.
fn gemini_stream_holds(answer: &Value) -> Result<(), String> {
    let mut chunk = answer.clone();
    // A chunk with a finishReason is held to the turn's end and written
    // then: only earlier chunks can go out as they came.
    for candidate in chunk["candidates"].as_array_mut().into_iter().flatten() {
        if let Some(c) = candidate.as_object_mut() {
            c.remove("finishReason");
        }
    }
    let own = format!("data: {chunk}\r\n\r\n");
    let stop = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]},
                                      "finishReason": "STOP", "index": 0}]});
    let bytes = format!("{own}data: {stop}\r\n\r\n");
    for (mode, runtime) in modes() {
        let plan = gemini_plan(mode, runtime);
        let run = judge_pieces(GeminiJudge::new(plan.clone(), 1), &[bytes.as_bytes()]);
        let as_came = run.client.windows(own.len()).any(|w| w == own.as_bytes());
        let Some(object) = chunk.as_object() else {
            continue;
        };
        let edits = match Gemini::judge_answer(object, &plan) {
            Ok((_, edits)) => edits,
            Err(e) if as_came => {
                return Err(format!(
                    "{mode:?} on {runtime:?}: the stream sent as it came a chunk the whole-answer judge refuses: {e}\n{chunk}"
                ));
            }
            Err(_) => continue,
        };
        if as_came && !edits.is_empty() {
            return Err(format!(
                "{mode:?} on {runtime:?}: the stream sent as it came a chunk the whole-answer judge edits: {edits:?}\n{chunk}"
            ));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn a_chat_answer_without_edits_hides_no_withheld_call(answer in chat_answer()) {
        check_everywhere("chat", &answer).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_responses_answer_without_edits_hides_no_withheld_call(answer in responses_answer()) {
        check_everywhere("responses", &answer).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_messages_answer_without_edits_hides_no_withheld_call(answer in messages_answer()) {
        check_everywhere("messages", &answer).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_gemini_answer_without_edits_hides_no_withheld_call(answer in gemini_answer()) {
        check_everywhere("gemini", &answer).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_gemini_chunk_sent_as_it_came_is_one_no_judge_edits(answer in gemini_answer()) {
        gemini_stream_holds(&answer).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn a_judge_that_forgot_an_edit_is_caught() {
    // The property is only as good as its reader: a judge that withheld a
    // call but asked for no edit would send it; the property says so.
    let answer = json!({"choices": [{"index": 0, "message": {"role": "assistant",
        "tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}}]});
    let plan = agent_plan(Mode::Code);
    let (turn, edits) = Chat::judge_answer(answer.as_object().unwrap(), &plan).unwrap();
    assert!(!turn.calls[0].passed());
    assert!(verdict_holds(&answer, &plan, &turn, edits, Reader::Chat).is_ok());
    let forgot = verdict_holds(&answer, &plan, &turn, Edits::default(), Reader::Chat);
    assert!(forgot.unwrap_err().contains("the client reads"));
    // And one for a Gemini part whose id was never given.
    let answer = json!({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "run_code", "args": {"code": "return 1"}}}]}}]});
    let plan = gemini_plan(Mode::Code, Runtime::Client);
    let (turn, edits) = Gemini::judge_answer(answer.as_object().unwrap(), &plan).unwrap();
    assert!(turn.calls[0].passed());
    assert!(verdict_holds(&answer, &plan, &turn, edits, Reader::Gemini).is_ok());
    assert!(verdict_holds(&answer, &plan, &turn, Edits::default(), Reader::Gemini).is_err());
}
