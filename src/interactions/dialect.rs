//! Google's Interactions API as a [`Dialect`] of the turn core:
//! `function_call` steps in, `function_result` steps out.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::embedded::{client_interaction, minted_interaction};
use super::history::StepReader;
use super::request::InteractionsRequest;
use super::steps::{answer_step, is_judged_step, raw_step};
use super::stream::InteractionsJudge;
use crate::error::ProxyError;
use crate::plan::ToolPlan;
use crate::runtime::history::{stored_program, Refused, Trailing, Transcript};
use crate::runtime::{Execution, ExecutionLookup, Limits};
use crate::tenant::Tenant;
use crate::turn::{Dialect, Edits, JudgedCall, ModelTurn, Unreadable};

/// Google's Interactions API.
pub struct Interactions;

impl Dialect for Interactions {
    type Request = InteractionsRequest;
    type Judge = InteractionsJudge;
    const ANSWER: &'static str = "interaction";
    const ROUTES: &'static [crate::api::Route] = super::provider::ROUTES;
    const PROVIDER: &'static crate::api::Provider = &crate::gemini::provider::GOOGLE;
    const ERRORS: &'static crate::api::Errors = &super::provider::ERRORS;
    const TOOLS: &'static crate::tools::ToolReader = &super::tools::TOOLS;

    /// `usage.total_input_tokens`, not the Gemini API's `usageMetadata`.
    fn usage_shape() -> &'static crate::observe::usage::Shape {
        &super::provider::USAGE
    }

    fn parse(bytes: &[u8], _path: &str) -> Result<InteractionsRequest, ProxyError> {
        InteractionsRequest::parse(bytes)
    }

    /// `input` with `system_instruction` or `previous_interaction_id`, the
    /// fields no other API has.
    fn recognises(body: &Value) -> bool {
        let has = |key: &str| body.get(key).is_some();
        has("previous_interaction_id") || (has("input") && has("system_instruction"))
    }

    /// A continuation of a minted interaction goes on from the program's
    /// own turn in the provider's stored conversation.
    fn read_history(
        request: &mut InteractionsRequest,
        store: &dyn ExecutionLookup,
        tenant: &Tenant,
        limits: &Limits,
    ) -> Result<(), ProxyError> {
        let reader = StepReader::new(store, tenant);
        match minted_previous(request) {
            Some(exec_id) => {
                let (exec, previous) =
                    stored_program(store, tenant, &exec_id, PREVIOUS, "an interaction")?;
                let foreign = reader.foreign_results(request.steps(), &exec);
                if !foreign.is_empty() {
                    return Err(ProxyError::InvalidRequest(format!(
                        "`previous_interaction_id` continues interaction `{}`, whose \
                         function_call steps codemode-proxy handed out, but the function_result \
                         steps name call ids it did not hand out there ({}): send each result \
                         with the `id` of its function_call step as `call_id`",
                        request.previous_interaction_id().unwrap_or_default(),
                        foreign.join(", ")
                    )));
                }
                if let Some(steps) = request.steps_mut() {
                    reader.rewrite_continued(steps, &exec, limits);
                }
                request.set_field(PREVIOUS, &Value::String(previous));
            }
            None => {
                if let Some(steps) = request.steps_mut() {
                    reader.rewrite(steps, limits);
                }
            }
        }
        Ok(())
    }

    fn trailing_results(
        request: &InteractionsRequest,
        store: &dyn ExecutionLookup,
        tenant: &Tenant,
    ) -> Result<Option<Trailing>, Refused> {
        let steps = request.steps();
        if steps.is_empty() {
            return Ok(None);
        }
        StepReader::new(store, tenant).trailing_results(steps)
    }

    fn push(request: &mut InteractionsRequest, steps: &[Value]) {
        request.push_steps(steps);
    }

    fn judge_answer(
        answer: &Map<String, Value>,
        plan: &ToolPlan,
    ) -> Result<(ModelTurn, Edits), Unreadable> {
        super::answer::judge_answer(answer, plan)
    }

    fn give_up(answer: &mut Map<String, Value>, note: &str) {
        super::answer::give_up(answer, note);
    }

    fn open_with(answer: &mut Map<String, Value>, earlier: &[Value]) {
        super::answer::open_with(answer, earlier);
    }

    fn as_sse(answer: &Value, _request: &InteractionsRequest) -> Bytes {
        super::events::interaction_as_sse(answer)
    }

    fn answer_call(call: &JudgedCall, content: &str, _repair: bool) -> Value {
        answer_step(call, content)
    }

    fn raw_call(call: &JudgedCall) -> Value {
        raw_step(call)
    }

    /// The model's steps as they came (its thoughts, whose signatures the
    /// provider checks, with the calls), then the answers.
    fn repair_history(replay: &Value, answers: Vec<Value>) -> Vec<Value> {
        let mut steps = replay.as_array().cloned().unwrap_or_default();
        steps.extend(answers);
        steps
    }

    fn replay_calls(replay: &Value) -> Option<Vec<&Value>> {
        let steps = replay.as_array()?;
        Some(steps.iter().filter(|s| is_judged_step(s)).collect())
    }

    fn call_id(call: &Value) -> Option<&str> {
        call.get("id")
            .or_else(|| call.get("call_id"))
            .and_then(Value::as_str)
    }

    fn program_pair(exec: &Execution) -> Vec<Value> {
        super::history::pair(exec)
    }

    fn client_turn(
        exec: &Execution,
        range: std::ops::Range<usize>,
        _plan: &ToolPlan,
        base: &Value,
        usage: Option<Value>,
        model_turn: bool,
    ) -> Value {
        let model = base.get("model").cloned().unwrap_or(Value::Null);
        client_interaction(exec, range, &model, usage, model_turn)
    }

    fn judge(plan: Arc<ToolPlan>, max_repairs: u32) -> InteractionsJudge {
        InteractionsJudge::new(plan, max_repairs)
    }
}

/// The execution a minted `previous_interaction_id` names, if it names one.
/// The field a continuation names the provider's stored answer by.
const PREVIOUS: &str = "previous_interaction_id";

fn minted_previous(request: &InteractionsRequest) -> Option<String> {
    minted_interaction(&request.previous_interaction_id()?)
}
