//! A whole (non-streamed) interaction, judged: the rule on its `steps`.

use serde_json::{json, Map, Value};

use super::steps::{check_step, is_judged_step, judge_step, output_text, text_step};
use crate::plan::ToolPlan;
use crate::turn::shape;
use crate::turn::{Edit, Edits, ModelTurn, Step, Unreadable};

/// Judges every call step of `interaction`: the turn, and the edit that
/// withholds from its `steps` every call that does not pass (denied ones,
/// and programs the proxy runs). `steps` that is no list, a step that is
/// no object, or a call step whose name is no string refuses the answer
/// (`crate::turn::shape`; `null` is absent).
pub fn judge_answer(
    interaction: &Map<String, Value>,
    plan: &ToolPlan,
) -> Result<(ModelTurn, Edits), Unreadable> {
    // The schema Google retired in June 2026 held the turn in `outputs`:
    // a client written for it would read calls there no judge reads.
    if let Some(outputs) = interaction.get("outputs").filter(|o| !o.is_null()) {
        return Err(Unreadable::new(
            &[Step::Key("outputs")],
            outputs,
            "no `outputs` (the steps schema)",
        ));
    }
    let steps = shape::list(interaction.get("steps"), &[Step::Key("steps")])?;
    for (i, step) in steps.iter().enumerate() {
        check_step(step).map_err(|e| e.under(&[Step::Key("steps"), Step::Index(i)]))?;
    }
    let mut turn = ModelTurn {
        replay: Value::Array(steps.to_vec()),
        text: text(steps),
        response_id: interaction
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_owned),
        ..ModelTurn::default()
    };
    let mut keep = Vec::with_capacity(steps.len());
    for step in steps {
        match judge_step(step, plan) {
            Some(call) => {
                keep.push(call.passed());
                turn.calls.push(call);
            }
            None => keep.push(true),
        }
    }
    let mut edits = Edits::default();
    edits.push(Edit::Retain {
        at: vec![Step::Key("steps")],
        keep,
    });
    Ok((turn, edits))
}

/// The text of the turn's `model_output` steps.
pub fn text(steps: &[Value]) -> Option<String> {
    let text: String = steps.iter().filter_map(output_text).collect();
    (!text.is_empty()).then_some(text)
}

/// Ends the turn without calls: the model's words stay, and a note when it
/// wrote none (the repair bound, or programs past theirs).
pub fn give_up(interaction: &mut Map<String, Value>, note: &str) {
    let Some(steps) = interaction.get_mut("steps").and_then(Value::as_array_mut) else {
        return;
    };
    steps.retain(|s| !is_judged_step(s));
    let has_text = steps
        .iter()
        .filter_map(output_text)
        .any(|t| !t.trim().is_empty());
    if !has_text {
        steps.push(text_step(note));
    }
    interaction.insert("status".into(), json!("completed"));
}

/// The `model_output` steps of earlier turns (their replays) go first, as a
/// stream showed them.
pub fn open_with(interaction: &mut Map<String, Value>, earlier: &[Value]) {
    let words: Vec<Value> = earlier
        .iter()
        .filter_map(Value::as_array)
        .flatten()
        .filter(|s| output_text(s).is_some_and(|t| !t.is_empty()))
        .cloned()
        .collect();
    if words.is_empty() {
        return;
    }
    if let Some(Value::Array(steps)) = interaction.get_mut("steps") {
        steps.splice(0..0, words);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::Mode;

    fn plan() -> std::sync::Arc<ToolPlan> {
        super::super::test_plan::plan(Mode::Code, crate::mode::Runtime::Client)
    }

    #[test]
    fn a_native_call_in_code_mode_is_withheld_and_text_stays() {
        let mut answer = json!({"id": "v1_a", "status": "requires_action", "steps": [
            {"type": "thought", "signature": "sig"},
            {"type": "model_output", "content": [{"type": "text", "text": "Reading."}]},
            {"type": "function_call", "id": "c1", "name": "read", "arguments": {"path": "a"}},
        ]});
        let turn = crate::test_support::judged::<super::super::Interactions>(&mut answer, &plan());
        assert_eq!(turn.calls.len(), 1);
        assert!(!turn.calls[0].passed());
        assert_eq!(turn.response_id.as_deref(), Some("v1_a"));
        assert_eq!(turn.text.as_deref(), Some("Reading."));
        assert_eq!(answer["steps"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn steps_no_judge_reads_are_refused() {
        for bad in [
            json!({"steps": {"0": {"type": "function_call", "name": "read"}}}),
            json!({"steps": ["function_call"]}),
            json!({"steps": [{"type": "function_call", "name": ["read"]}]}),
            json!({"steps": [], "outputs": [{"type": "function_call", "name": "read"}]}),
        ] {
            assert!(
                judge_answer(bad.as_object().unwrap(), &plan()).is_err(),
                "{bad}"
            );
        }
        let fine = json!({"steps": null});
        assert!(judge_answer(fine.as_object().unwrap(), &plan()).is_ok());
    }

    #[test]
    fn giving_up_keeps_words_or_leaves_the_note() {
        let mut a = json!({"status": "requires_action", "steps": [
            {"type": "function_call", "id": "c1", "name": "read", "arguments": {}}]});
        give_up(a.as_object_mut().unwrap(), "note");
        assert_eq!(a["status"], "completed");
        assert_eq!(a["steps"], json!([text_step("note")]));
    }
}
