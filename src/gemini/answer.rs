//! A whole Gemini answer (`GenerateContentResponse`), judged: the same rule
//! as on the other dialects, on the parts of its candidates.
//!
//! The turn is the first candidate's content. A client that asked for one
//! candidate gets one; should a provider send more, the calls of every
//! candidate are judged and the withheld ones never reach the client.

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::parts::{
    check_part, ensure_id, is_call_part, is_safe_key, judge_part, text_of, CallIds,
};
use crate::plan::ToolPlan;
use crate::turn::shape;
use crate::turn::{probe, Edit, Edits, Field, JudgedCall, ModelTurn, Obj, Quiet, Step, Unreadable};

/// A candidate's parts, judged.
#[derive(Debug)]
pub struct JudgedParts {
    /// The parts as the model sent them: what the model is shown of its
    /// own turn (no id it did not write).
    pub sent: Vec<Value>,
    /// The parts as the client gets them: each id-less call given its id.
    pub whole: Vec<Value>,
    /// The calls, judged, in order.
    pub calls: Vec<JudgedCall>,
    /// Which parts reach the client.
    pub keep: Vec<bool>,
    /// Each id given: the part's index, the field holding its call, the id.
    pub minted: Vec<(usize, &'static str, String)>,
}

impl JudgedParts {
    /// The parts the client gets: `whole` without the withheld calls.
    pub fn shown(&self) -> Vec<Value> {
        self.whole
            .iter()
            .zip(&self.keep)
            .filter(|(_, keep)| **keep)
            .map(|(p, _)| p.clone())
            .collect()
    }
}

/// Judges a candidate's parts; an id-less call gets one for the client,
/// which the model's own view of the turn ([`JudgedParts::sent`], and each
/// call's `raw`) does not carry.
pub fn judge_parts(parts: &[Value], plan: &ToolPlan, ids: &mut CallIds) -> JudgedParts {
    let mut judged = JudgedParts {
        sent: parts.to_vec(),
        whole: parts.to_vec(),
        calls: Vec::new(),
        keep: Vec::with_capacity(parts.len()),
        minted: Vec::new(),
    };
    for (i, part) in judged.whole.iter_mut().enumerate() {
        let mut given = None;
        if is_call_part(part) {
            if let Some((field, id)) = ensure_id(part, ids) {
                given = Some(id.clone());
                judged.minted.push((i, field, id));
            }
        }
        match judge_part(&parts[i], plan) {
            Some(mut call) => {
                if let Some(id) = given {
                    call.id = id;
                }
                judged.keep.push(call.passed());
                judged.calls.push(call);
            }
            None => judged.keep.push(true),
        }
    }
    judged
}

/// A candidate's parts, to judge.
pub fn parts_of(candidate: &Value) -> Option<&Vec<Value>> {
    candidate.get("content")?.get("parts")?.as_array()
}

/// A candidate's parts, to change.
pub fn parts_mut(candidate: &mut Value) -> Option<&mut Vec<Value>> {
    candidate
        .get_mut("content")?
        .get_mut("parts")?
        .as_array_mut()
}

/// The parts of each candidate of an answer or a stream chunk, read where
/// calls could stand as a judge may (`crate::turn::shape`): `candidates`
/// a list of objects, each one's `content` an object, its `parts` a list
/// of parts a judge can read ([`check_part`]); `None` for a candidate
/// without parts. `@google/genai` reads `candidates` keyed `"0"` as a
/// list, and `?.` reads `null` as absent: the first is refused, the
/// second is absent here too (a candidate a safety filter stopped has no
/// content).
pub fn candidate_parts(answer: &Map<String, Value>) -> Result<Vec<Option<&[Value]>>, Unreadable> {
    use Step::{Index, Key};
    let candidates = shape::list(answer.get("candidates"), &[Key("candidates")])?;
    let mut out = Vec::with_capacity(candidates.len());
    for (n, candidate) in candidates.iter().enumerate() {
        let candidate = shape::entry(candidate, &[Key("candidates"), Index(n)])?;
        let at = [Key("candidates"), Index(n), Key("content")];
        let Some(content) = shape::object(candidate.get("content"), &at)? else {
            out.push(None);
            continue;
        };
        let at = [Key("candidates"), Index(n), Key("content"), Key("parts")];
        let parts = match content.get("parts") {
            None | Some(Value::Null) => None,
            parts => Some(shape::list(parts, &at)?),
        };
        for (j, part) in parts.into_iter().flatten().enumerate() {
            let at = [
                Key("candidates"),
                Index(n),
                Key("content"),
                Key("parts"),
                Index(j),
            ];
            check_part(part, &at)?;
        }
        out.push(parts);
    }
    Ok(out)
}

/// Judges every call of an answer: the turn (the first candidate's), and
/// the edits that give id-less calls their ids and withhold every call
/// that does not pass. An answer whose candidates a judge cannot read
/// ([`candidate_parts`]) is refused.
pub fn judge_answer(
    answer: &Map<String, Value>,
    plan: &ToolPlan,
) -> Result<(ModelTurn, Edits), Unreadable> {
    let mut turn = ModelTurn {
        replay: json!({"role": "model", "parts": []}),
        ..ModelTurn::default()
    };
    let mut edits = Edits::default();
    let mut ids = CallIds::new();
    for (n, parts) in candidate_parts(answer)?.into_iter().enumerate() {
        let Some(parts) = parts else {
            continue;
        };
        let judged = judge_parts(parts, plan, &mut ids);
        let at_parts = vec![
            Step::Key("candidates"),
            Step::Index(n),
            Step::Key("content"),
            Step::Key("parts"),
        ];
        for (i, field, id) in judged.minted {
            let mut at = at_parts.clone();
            at.extend([Step::Index(i), Step::Key(field)]);
            edits.push(Edit::Put {
                at,
                key: "id",
                value: Value::String(id),
            });
        }
        edits.push(Edit::Retain {
            at: at_parts,
            keep: judged.keep,
        });
        if n == 0 {
            let text = text_of(&judged.whole);
            turn.text = (!text.is_empty()).then_some(text);
            turn.replay = json!({"role": "model", "parts": judged.sent});
            turn.calls = judged.calls;
        } else if judged.calls.iter().any(|c| !c.passed()) {
            tracing::warn!(target: "codemode::denial", "a call of a second candidate was withheld");
        }
    }
    Ok((turn, edits))
}

/// Ends the turn without calls: the model's text stays, and `note` when it
/// has none; `finishReason` is `STOP`.
pub fn give_up(answer: &mut Map<String, Value>, note: &str) {
    let Some(Value::Array(candidates)) = answer.get_mut("candidates") else {
        answer.insert("candidates".into(), json!([note_candidate(note)]));
        return;
    };
    if candidates.is_empty() {
        candidates.push(note_candidate(note));
        return;
    }
    for candidate in candidates.iter_mut() {
        if let Some(parts) = parts_mut(candidate) {
            parts.retain(|p| !is_call_part(p));
        }
    }
    let first = &mut candidates[0];
    let has_text = first
        .get("content")
        .and_then(|c| c.get("parts"))
        .and_then(Value::as_array)
        .is_some_and(|p| !text_of(p).trim().is_empty());
    if !has_text {
        match parts_mut(first) {
            Some(parts) => parts.push(json!({"text": note})),
            None => {
                if let Some(c) = first.as_object_mut() {
                    c.insert(
                        "content".into(),
                        json!({"role": "model", "parts": [{"text": note}]}),
                    );
                }
            }
        }
    }
    if let Some(c) = first.as_object_mut() {
        c.insert("finishReason".into(), json!("STOP"));
    }
}

/// A candidate holding only `note`.
pub fn note_candidate(note: &str) -> Value {
    json!({"content": {"role": "model", "parts": [{"text": note}]}, "finishReason": "STOP",
           "index": 0})
}

/// The words of earlier turns go first, as a stream showed them: one
/// paragraph each, then the answer's own (Gemini's clients join text parts
/// with nothing between them).
pub fn open_with(answer: &mut Map<String, Value>, earlier: &[Value]) {
    let texts: Vec<String> = earlier
        .iter()
        .filter_map(|t| t.get("parts").and_then(Value::as_array))
        .map(|parts| text_of(parts))
        .filter(|t| !t.is_empty())
        .collect();
    if texts.is_empty() {
        return;
    }
    let joined = texts.join("\n\n");
    let Some(first) = answer
        .get_mut("candidates")
        .and_then(Value::as_array_mut)
        .and_then(|c| c.first_mut())
    else {
        return;
    };
    let Some(parts) = parts_mut(first) else {
        return;
    };
    let words = parts.iter_mut().find(|p| {
        p.get("thought").and_then(Value::as_bool) != Some(true)
            && p.get("text")
                .and_then(Value::as_str)
                .is_some_and(|t| !t.is_empty())
    });
    match words.and_then(|p| p.get_mut("text")) {
        Some(Value::String(text)) => text.insert_str(0, &format!("{joined}\n\n")),
        _ => parts.insert(0, json!({"text": joined})),
    }
}

/// The answer as [`judge_answer`] would pass it untouched with no call,
/// read without a tree (`crate::turn::quiet`): `candidates` absent or a
/// list of candidates whose parts hold only fields that are no call.
pub fn quiet(body: &[u8]) -> Option<Quiet> {
    #[allow(dead_code)] // `candidates` is read for its shape
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        candidates: Field<Vec<Obj<Candidate>>>,
        #[serde(default, rename = "usageMetadata")]
        usage: Field<Value>,
    }
    #[allow(dead_code)] // read for its shape, as `Content` is
    #[derive(Deserialize)]
    struct Candidate {
        #[serde(default)]
        content: Field<Obj<Content>>,
    }
    #[allow(dead_code)] // a part that may be a call fails the probe
    #[derive(Deserialize)]
    struct Content {
        #[serde(default)]
        parts: Field<Vec<WordsOnly>>,
    }
    let answer: Answer = probe(body)?;
    Some(answer.usage.usage())
}

/// A part whose every field is no call, whatever its value (its words,
/// its thinking); reading any other part fails.
struct WordsOnly;

impl<'de> Deserialize<'de> for WordsOnly {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = WordsOnly;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a part of words")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WordsOnly, A::Error> {
                // A key with an escape is not borrowed, and fails: rare enough.
                while let Some(key) = map.next_key::<&'de str>()? {
                    if !is_safe_key(key) {
                        return Err(serde::de::Error::custom("a part that may be a call"));
                    }
                    map.next_value::<IgnoredAny>()?;
                }
                Ok(WordsOnly)
            }
        }
        d.deserialize_map(Fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::{Mode, Runtime};
    use crate::test_support::gemini_plan;

    #[test]
    fn a_native_call_in_code_mode_is_withheld_and_given_an_id() {
        let plan = gemini_plan(Mode::Code, Runtime::Client);
        let mut answer = json!({"candidates": [{"content": {"role": "model", "parts": [
            {"text": "Reading."},
            {"functionCall": {"name": "read_file", "args": {"path": "a"}}, "thoughtSignature": "s1"}
        ]}, "finishReason": "STOP", "index": 0}], "usageMetadata": {"promptTokenCount": 3}});
        let turn = crate::test_support::judged::<crate::gemini::Gemini>(&mut answer, &plan);
        assert_eq!(turn.calls.len(), 1);
        assert!(!turn.calls[0].passed());
        assert!(turn.calls[0].id.starts_with("call_"));
        assert_eq!(turn.replay["parts"][1]["thoughtSignature"], "s1");
        assert_eq!(
            answer["candidates"][0]["content"]["parts"],
            json!([{"text": "Reading."}])
        );
        assert_eq!(turn.text.as_deref(), Some("Reading."));
        give_up(answer.as_object_mut().unwrap(), "note");
        assert_eq!(answer["candidates"][0]["finishReason"], "STOP");
        assert_eq!(
            answer["candidates"][0]["content"]["parts"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn candidates_parts_or_calls_in_a_shape_no_judge_reads_are_refused() {
        let plan = gemini_plan(Mode::Code, Runtime::Client);
        let call = json!({"functionCall": {"name": "read_file", "args": {"path": "a"}}});
        let cases = [
            (
                json!({"candidates": {"0": {"content": {"parts": [call]}}}}),
                "`candidates` is an object, not a list",
            ),
            (
                json!({"candidates": [[{"content": {"parts": [call]}}]]}),
                "`candidates[0]` is a list, not an object",
            ),
            (
                json!({"candidates": [{"content": [{"parts": [call]}]}]}),
                "`candidates[0].content` is a list, not an object",
            ),
            (
                json!({"candidates": [{"content": {"parts": {"0": call}}}]}),
                "`candidates[0].content.parts` is an object, not a list",
            ),
            (
                json!({"candidates": [{}, {"content": {"parts": [[call]]}}]}),
                "`candidates[1].content.parts[0]` is a list, not an object",
            ),
            (
                json!({"candidates": [{"content": {"parts": [{"functionCall": [call["functionCall"]]}]}}]}),
                "`candidates[0].content.parts[0].functionCall` is a list, not an object",
            ),
            (
                json!({"candidates": [{"content": {"parts": [{"function_call": {"name": ["read_file"]}}]}}]}),
                "`candidates[0].content.parts[0].function_call.name` is a list, not a string",
            ),
        ];
        for (answer, why) in cases {
            let refused = judge_answer(answer.as_object().unwrap(), &plan).unwrap_err();
            assert_eq!(refused.to_string(), why);
        }
        // `null` where the API makes a field optional is absent, as `?.`
        // reads it: nothing to judge, nothing to edit.
        for answer in [
            json!({"candidates": null}),
            json!({"candidates": [{"content": null, "finishReason": "SAFETY"}]}),
            json!({"candidates": [{"content": {"role": "model", "parts": null}}]}),
        ] {
            let (turn, edits) = judge_answer(answer.as_object().unwrap(), &plan).unwrap();
            assert!(turn.calls.is_empty() && edits.is_empty(), "{answer}");
        }
    }

    #[test]
    fn a_recorded_answer_with_two_calls_and_one_signature_keeps_it_on_the_replay() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/streams/gemini/whole_two_calls.json"
        );
        let mut answer: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let sent = answer.clone();
        let plan = gemini_plan(Mode::Code, Runtime::Client);
        let turn = crate::test_support::judged::<crate::gemini::Gemini>(&mut answer, &plan);
        assert_eq!(turn.calls.len(), 2);
        assert!(turn.calls.iter().all(|c| !c.passed() && !c.id.is_empty()));
        assert!(!answer.to_string().contains("functionCall"));
        let parts = sent["candidates"][0]["content"]["parts"]
            .as_array()
            .unwrap();
        let replayed = turn.replay["parts"].as_array().unwrap();
        assert_eq!(replayed.len(), parts.len());
        for (got, was) in replayed.iter().zip(parts) {
            assert_eq!(got.get("thoughtSignature"), was.get("thoughtSignature"));
            assert_eq!(got["functionCall"]["args"], was["functionCall"]["args"]);
        }
    }
}
