//! Google's Gemini API as a [`Dialect`] of the turn core: `functionCall`
//! parts in, `functionResponse` parts out.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::answer;
use super::embedded::{client_answer, pair};
use super::history::ContentReader;
use super::parts::{answer_part, function_call, is_call_part, raw_part};
use super::request::GeminiRequest;
use super::stream::GeminiJudge;
use crate::error::ProxyError;
use crate::plan::ToolPlan;
use crate::runtime::history::{Refused, Trailing, Transcript};
use crate::runtime::{Execution, ExecutionLookup, Limits};
use crate::tenant::Tenant;
use crate::turn::{Dialect, Edits, JudgedCall, ModelTurn, Quiet, Unreadable};

/// Google's Gemini API.
pub struct Gemini;

impl Dialect for Gemini {
    type Request = GeminiRequest;
    type Judge = GeminiJudge;
    const ANSWER: &'static str = "response";
    const ROUTES: &'static [crate::api::Route] = super::provider::ROUTES;
    const PROVIDER: &'static crate::api::Provider = &super::provider::GOOGLE;
    const ERRORS: &'static crate::api::Errors = &super::provider::ERRORS;
    const TOOLS: &'static crate::tools::ToolReader = &super::tools::TOOLS;
    const USAGE: &'static str = "usageMetadata";

    fn parse(bytes: &[u8], path: &str) -> Result<GeminiRequest, ProxyError> {
        GeminiRequest::parse(bytes, path)
    }

    /// `contents`, the field no other API has.
    fn recognises(body: &Value) -> bool {
        body.get("contents").is_some()
    }

    /// The model the path names.
    fn model(request: &GeminiRequest) -> Value {
        Value::String(request.model.clone())
    }

    fn read_history(
        request: &mut GeminiRequest,
        store: &dyn ExecutionLookup,
        tenant: &Tenant,
        limits: &Limits,
    ) -> Result<(), ProxyError> {
        ContentReader::new(store, tenant).rewrite(request.contents_mut(), limits);
        Ok(())
    }

    fn trailing_results(
        request: &GeminiRequest,
        store: &dyn ExecutionLookup,
        tenant: &Tenant,
    ) -> Result<Option<Trailing>, Refused> {
        ContentReader::new(store, tenant)
            .trailing_results(request.contents())
            .map_err(Refused::NotHandedOut)
    }

    fn push(request: &mut GeminiRequest, items: &[Value]) {
        request.push_contents(items);
    }

    fn judge_answer(
        answer: &Map<String, Value>,
        plan: &ToolPlan,
    ) -> Result<(ModelTurn, Edits), Unreadable> {
        answer::judge_answer(answer, plan)
    }

    fn quiet_answer(body: &[u8]) -> Option<Quiet> {
        answer::quiet(body)
    }

    fn give_up(answer: &mut Map<String, Value>, note: &str) {
        answer::give_up(answer, note);
    }

    fn open_with(answer: &mut Map<String, Value>, earlier: &[Value]) {
        answer::open_with(answer, earlier);
    }

    /// One chunk: a streamed answer's chunks are whole answers.
    fn as_sse(answer: &Value, _request: &GeminiRequest) -> Bytes {
        crate::sse::data_event(answer)
    }

    fn answer_call(call: &JudgedCall, content: &str, _repair: bool) -> Value {
        answer_part(call, content)
    }

    fn raw_call(call: &JudgedCall) -> Value {
        raw_part(call)
    }

    /// The model's turn as it came (its thought signatures untouched),
    /// then one user content holding the answers.
    fn repair_history(replay: &Value, answers: Vec<Value>) -> Vec<Value> {
        vec![replay.clone(), json!({"role": "user", "parts": answers})]
    }

    fn replay_calls(replay: &Value) -> Option<Vec<&Value>> {
        let parts = replay["parts"].as_array()?;
        Some(parts.iter().filter(|p| is_call_part(p)).collect())
    }

    fn call_id(call: &Value) -> Option<&str> {
        function_call(call)?
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
    }

    /// The one named `run_call_id`, or a `run_code` call the model sent
    /// without an id (the proxy's id for it never reaches the model).
    fn is_program_call(call: &Value, run_call_id: &str) -> bool {
        match Self::call_id(call) {
            Some(id) => id == run_call_id,
            None => function_call(call).is_some_and(|c| {
                c.get("name").and_then(Value::as_str) == Some(crate::mode::RUN_CODE)
            }),
        }
    }

    fn program_pair(exec: &Execution) -> Vec<Value> {
        pair(exec, &[])
    }

    fn client_turn(
        exec: &Execution,
        range: std::ops::Range<usize>,
        _plan: &ToolPlan,
        base: &Value,
        usage: Option<Value>,
        model_turn: bool,
    ) -> Value {
        client_answer(exec, range, base, usage, model_turn)
    }

    fn judge(plan: Arc<ToolPlan>, max_repairs: u32) -> GeminiJudge {
        GeminiJudge::new(plan, max_repairs)
    }
}
