//! Programs in an Interactions input: what differs from other dialects in
//! reading a history ([`crate::runtime::history`] walks it). Each call and
//! each result is a step of its own, as on Responses; an input that
//! continues a stored interaction (`previous_interaction_id`) sends only
//! the results; and the model's turn holds steps (thoughts, words) a
//! stateless client sends back before the calls.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::steps::{FUNCTION_CALL, FUNCTION_RESULT};
use crate::mode::RUN_CODE;
use crate::runtime::history::{
    continue_entries, trailing_entries, CallIds, Kind, Refused, Trailing, Transcript,
};
use crate::runtime::output::Field;
use crate::runtime::{Execution, ExecutionLookup, Limits, MINTED_PREFIX};
use crate::tenant::Tenant;

#[derive(Deserialize)]
struct StepView {
    #[serde(rename = "type")]
    kind: Option<String>,
    id: Option<String>,
    call_id: Option<String>,
    name: Option<String>,
    result: Option<Value>,
}

/// Finds executions' calls in one tenant's Interactions input.
pub struct StepReader<'a> {
    ids: CallIds<'a>,
}

impl<'a> StepReader<'a> {
    /// A reader of `tenant`'s inputs, finding executions in `store`.
    pub fn new(store: &'a dyn ExecutionLookup, tenant: &'a Tenant) -> StepReader<'a> {
        StepReader {
            ids: CallIds { store, tenant },
        }
    }

    fn kind(&self, raw: &RawValue) -> Kind {
        let text = raw.get();
        if !crate::runtime::may_name_minted(text) {
            return Kind::Other;
        }
        let Ok(step) = serde_json::from_str::<StepView>(text) else {
            return Kind::Other;
        };
        match step.kind.as_deref() {
            Some(FUNCTION_RESULT) => {
                let Some(id) = step.call_id.as_deref() else {
                    return Kind::Other;
                };
                match self.ids.resolve(id) {
                    Some((e, n)) => {
                        let name = step.name.as_deref().unwrap_or("");
                        let text = crate::runtime::output::output_text(
                            Field::GeminiResponse(name),
                            step.result.as_ref(),
                        );
                        Kind::Results(e, vec![(n, text)], Vec::new())
                    }
                    None if id.starts_with(MINTED_PREFIX) => Kind::Unplaced(vec![id.to_owned()]),
                    None => Kind::Other,
                }
            }
            Some(FUNCTION_CALL) => match step.id.as_deref().and_then(|id| self.ids.resolve(id)) {
                Some((e, n)) => Kind::Calls(e, vec![(n, step.name.unwrap_or_default())]),
                None => Kind::Other,
            },
            _ => Kind::Other,
        }
    }

    /// The results at the end of the input for a program's calls, and the
    /// call steps before them (a stateless client sends both; one that
    /// continues a stored interaction sends only the results).
    pub fn trailing_results(&self, steps: &[Box<RawValue>]) -> Result<Option<Trailing>, Refused> {
        trailing_entries(steps, |raw| self.kind(raw))
    }

    /// The `call_id`s of the input's `function_result` steps that answer no
    /// call of `exec`: in a continuation of an interaction the proxy minted
    /// for it, every result answers one of the calls it handed out, so
    /// these are ids the client changed (or made up).
    pub fn foreign_results(&self, steps: &[Box<RawValue>], exec: &Execution) -> Vec<String> {
        steps
            .iter()
            .filter_map(|raw| serde_json::from_str::<StepView>(raw.get()).ok())
            .filter(|s| s.kind.as_deref() == Some(FUNCTION_RESULT))
            .filter_map(|s| s.call_id)
            .filter(|id| self.ids.resolve(id).is_none_or(|(e, _)| e != exec.id))
            .collect()
    }

    /// The input of a request that continues an interaction the proxy
    /// minted (`previous_interaction_id`): the results of the program's
    /// calls become the program's own result (and the answers of calls
    /// denied beside it); other steps stay.
    pub fn rewrite_continued(
        &self,
        steps: &mut Vec<Box<RawValue>>,
        exec: &Execution,
        limits: &Limits,
    ) {
        let kinds = self.kinds(steps);
        continue_entries(steps, &kinds, exec, self.ids.store, limits, |e| {
            let mut answer = vec![program_result(&e.run_call_id, e.outcome.as_deref())];
            answer.extend(e.denials.iter().cloned());
            answer
        });
    }
}

impl Transcript for StepReader<'_> {
    fn ids(&self) -> &CallIds<'_> {
        &self.ids
    }

    fn kinds(&self, steps: &[Box<RawValue>]) -> Vec<Kind> {
        steps.iter().map(|s| self.kind(s)).collect()
    }

    const RESULTS_BEGIN_A_RUN: bool = true;

    /// The model's own steps (thoughts, words) reached the client with the
    /// program's first calls, and the client sent them back before those
    /// calls: the model's turn holds them.
    fn before_run(out: &mut Vec<Box<RawValue>>, e: &Execution) {
        let own = model_steps(e);
        while out.last().is_some_and(|raw| {
            serde_json::from_str::<Value>(raw.get()).is_ok_and(|step| own.contains(&step))
        }) {
            out.pop();
        }
    }

    fn pair(e: &Execution, _beside: &[Value]) -> Vec<Value> {
        pair(e)
    }

    fn missing_pair(exec_id: &str, content: &str, _beside: Vec<Value>) -> Vec<Value> {
        let id = crate::runtime::lost_program_call_id(crate::runtime::CALL_PREFIX, exec_id);
        vec![
            super::steps::function_call(&id, RUN_CODE, "{\"code\":\"/* no longer available */\"}"),
            program_result(&id, Some(content)),
        ]
    }
}

/// The `function_result` answering the program's own call.
fn program_result(run_call_id: &str, outcome: Option<&str>) -> Value {
    json!({"type": FUNCTION_RESULT, "call_id": run_call_id, "name": RUN_CODE, "result": outcome})
}

/// The model's steps other than calls in a program's turn.
fn model_steps(e: &Execution) -> Vec<Value> {
    let Some(Value::Array(steps)) = e.kept_turn() else {
        return Vec::new();
    };
    steps
        .into_iter()
        .filter(|s| !super::steps::is_judged_step(s))
        .collect()
}

/// The model's view of one execution: its turn, and the program's result
/// once it ended, with the answers of calls denied beside it.
pub fn pair(e: &Execution) -> Vec<Value> {
    let mut v = run_code_turn(e);
    if let Some(outcome) = &e.outcome {
        v.push(program_result(&e.run_call_id, Some(outcome)));
        v.extend(e.denials.iter().cloned());
    }
    v
}

/// The model's `run_code` turn: its steps as they arrived (thoughts
/// included, their signatures with them), or rebuilt when the proxy kept
/// none.
fn run_code_turn(e: &Execution) -> Vec<Value> {
    if let Some(Value::Array(steps)) = e.kept_turn() {
        return steps;
    }
    let mut v = vec![super::steps::function_call(
        &e.run_call_id,
        RUN_CODE,
        &json!({"code": e.code}).to_string(),
    )];
    v.extend(e.denied_calls.iter().cloned());
    v
}
