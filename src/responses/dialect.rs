//! The Responses API as a [`Dialect`] of the turn core: output items in,
//! `function_call_output` (and kin) items out.

use crate::turn::WireRequest;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::completion::{give_up, judge_response, message_text};
use super::embedded::{client_response, response_as_sse};
use super::history::ItemReader;
use super::items::{answer_item, is_judged_item, raw_item};
use super::request::ResponsesRequest;
use super::stream::ResponsesJudge;
use crate::error::ProxyError;
use crate::plan::ToolPlan;
use crate::runtime::history::{stored_program, Refused, Trailing, Transcript};
use crate::runtime::{Execution, ExecutionLookup, Limits};
use crate::tenant::Tenant;
use crate::turn::{Dialect, Edits, JudgedCall, ModelTurn, Quiet, Unreadable};

/// The OpenAI Responses API.
pub struct Responses;

impl Dialect for Responses {
    type Request = ResponsesRequest;
    type Judge = ResponsesJudge;
    const ANSWER: &'static str = "response";
    const ROUTES: &'static [crate::api::Route] = super::provider::ROUTES;
    const PROVIDER: &'static crate::api::Provider = &crate::chat::provider::OPENAI;
    const ERRORS: &'static crate::api::Errors = &super::provider::ERRORS;
    const TOOLS: &'static crate::tools::ToolReader = &super::tools::TOOLS;

    fn parse(bytes: &[u8], _path: &str) -> Result<ResponsesRequest, ProxyError> {
        ResponsesRequest::parse(bytes)
    }

    /// `input` or `instructions` without `messages`, nor the Interactions
    /// API's `system_instruction` or `previous_interaction_id`.
    fn recognises(body: &Value) -> bool {
        let has = |key: &str| body.get(key).is_some();
        (has("input") || has("instructions"))
            && !["messages", "system_instruction", "previous_interaction_id"]
                .iter()
                .any(|k| has(k))
    }

    fn declared_tools(
        request: &ResponsesRequest,
    ) -> Result<Option<std::borrow::Cow<'_, RawValue>>, ProxyError> {
        request.declared_tools()
    }

    /// A continuation of a minted response goes on from the program's own
    /// turn in the provider's stored conversation.
    fn read_history(
        request: &mut ResponsesRequest,
        store: &dyn ExecutionLookup,
        tenant: &Tenant,
        limits: &Limits,
    ) -> Result<(), ProxyError> {
        let reader = ItemReader::new(store, tenant);
        match minted_previous(request) {
            Some(exec_id) => {
                let (exec, previous) =
                    stored_program(store, tenant, &exec_id, PREVIOUS, "a response")?;
                if let Some(input) = request.input_mut() {
                    reader.rewrite_continued(input, &exec, limits);
                }
                request.set_field(PREVIOUS, &Value::String(previous));
            }
            None => {
                if let Some(input) = request.input_mut() {
                    reader.rewrite(input, limits);
                }
            }
        }
        Ok(())
    }

    fn rename_echoes(
        request: &mut ResponsesRequest,
        store: &dyn ExecutionLookup,
        tenant: &Tenant,
    ) -> Result<(), String> {
        let reader = ItemReader::new(store, tenant);
        if let Some(renamed) = reader.echoes(request.input_items())? {
            if let Some(input) = request.input_mut() {
                *input = renamed;
            }
        }
        Ok(())
    }

    fn trailing_results(
        request: &ResponsesRequest,
        store: &dyn ExecutionLookup,
        tenant: &Tenant,
    ) -> Result<Option<Trailing>, Refused> {
        let input = request.input_items();
        if input.is_empty() {
            return Ok(None);
        }
        ItemReader::new(store, tenant).trailing_results(input)
    }

    fn push(request: &mut ResponsesRequest, items: &[Value]) {
        request.push_items(items);
    }

    fn judge_answer(
        answer: &Map<String, Value>,
        plan: &ToolPlan,
    ) -> Result<(ModelTurn, Edits), Unreadable> {
        let (judged, edits) = judge_response(answer, plan)?;
        let turn = ModelTurn {
            text: judged.text(),
            replay: Value::Array(judged.items),
            calls: judged.calls,
            response_id: answer.get("id").and_then(Value::as_str).map(str::to_owned),
        };
        Ok((turn, edits))
    }

    fn quiet_answer(body: &[u8]) -> Option<Quiet> {
        super::completion::quiet(body)
    }

    fn give_up(answer: &mut Map<String, Value>, note: &str) {
        give_up(answer, note);
    }

    /// The message items of earlier turns go first, as a stream showed
    /// them (each its own item).
    fn open_with(answer: &mut Map<String, Value>, earlier: &[Value]) {
        let messages: Vec<Value> = earlier
            .iter()
            .filter_map(Value::as_array)
            .flatten()
            .filter(|i| message_text(i).is_some_and(|t| !t.is_empty()))
            .cloned()
            .collect();
        if messages.is_empty() {
            return;
        }
        if let Some(Value::Array(output)) = answer.get_mut("output") {
            output.splice(0..0, messages);
        }
    }

    fn as_sse(answer: &Value, _request: &ResponsesRequest) -> Bytes {
        response_as_sse(answer)
    }

    fn answer_call(call: &JudgedCall, content: &str, _repair: bool) -> Value {
        answer_item(call, content)
    }

    fn raw_call(call: &JudgedCall) -> Value {
        raw_item(call)
    }

    /// The model's output items as they came (its reasoning items with the
    /// calls, as providers require), then the answers.
    fn repair_history(replay: &Value, answers: Vec<Value>) -> Vec<Value> {
        let mut items = replay.as_array().cloned().unwrap_or_default();
        items.extend(answers);
        items
    }

    fn replay_calls(replay: &Value) -> Option<Vec<&Value>> {
        let items = replay.as_array()?;
        Some(items.iter().filter(|i| is_judged_item(i)).collect())
    }

    fn call_id(call: &Value) -> Option<&str> {
        call.get("call_id").and_then(Value::as_str)
    }

    fn program_pair(exec: &Execution) -> Vec<Value> {
        super::history::pair(exec)
    }

    fn client_turn(
        exec: &Execution,
        range: std::ops::Range<usize>,
        plan: &ToolPlan,
        base: &Value,
        usage: Option<Value>,
        model_turn: bool,
    ) -> Value {
        let model = base.get("model").cloned().unwrap_or(Value::Null);
        client_response(exec, range, plan, &model, usage, model_turn)
    }

    fn judge(plan: Arc<ToolPlan>, max_repairs: u32) -> ResponsesJudge {
        ResponsesJudge::new(plan, max_repairs)
    }
}

/// The execution a minted `previous_response_id` names, if it names one.
/// The field a continuation names the provider's stored answer by.
const PREVIOUS: &str = "previous_response_id";

fn minted_previous(request: &ResponsesRequest) -> Option<String> {
    let id: String = serde_json::from_str(request.field(PREVIOUS)?.get()).ok()?;
    super::embedded::minted_response(&id)
}
