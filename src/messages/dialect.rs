//! Anthropic's Messages API as a [`Dialect`] of the turn core: `tool_use`
//! blocks in, `tool_result` blocks out.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::completion::{give_up, judge_message};
use super::embedded::{client_message, pair};
use super::events::message_as_sse;
use super::history::MessageReader;
use super::items::{answer_block, is_call_block, raw_block};
use super::request::MessagesRequest;
use super::stream::MessagesJudge;
use crate::error::ProxyError;
use crate::plan::ToolPlan;
use crate::runtime::history::{Refused, Trailing, Transcript};
use crate::runtime::{Execution, ExecutionLookup, Limits};
use crate::tenant::Tenant;
use crate::turn::{Dialect, Edits, JudgedCall, ModelTurn, Quiet, Unreadable};

/// Anthropic's Messages API.
pub struct Messages;

impl Dialect for Messages {
    type Request = MessagesRequest;
    type Judge = MessagesJudge;
    const ANSWER: &'static str = "message";
    const ROUTES: &'static [crate::api::Route] = super::provider::ROUTES;
    const PROVIDER: &'static crate::api::Provider = &super::provider::ANTHROPIC;
    const ERRORS: &'static crate::api::Errors = &super::provider::ERRORS;
    const CALL_ID_PREFIX: &'static str = crate::runtime::TOOL_USE_PREFIX;
    const TOOLS: &'static crate::tools::ToolReader = &super::tools::TOOLS;

    fn parse(bytes: &[u8], _path: &str) -> Result<MessagesRequest, ProxyError> {
        MessagesRequest::parse(bytes)
    }

    /// A top-level `system`, or a tool with an `input_schema`.
    fn recognises(body: &Value) -> bool {
        let anthropic_tools = body["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t.get("input_schema").is_some()));
        body.get("system").is_some() || anthropic_tools
    }

    fn read_history(
        request: &mut MessagesRequest,
        store: &dyn ExecutionLookup,
        tenant: &Tenant,
        limits: &Limits,
    ) -> Result<(), ProxyError> {
        MessageReader::new(store, tenant).rewrite(request.messages_mut(), limits);
        Ok(())
    }

    /// A turn whose results cannot be told apart is refused with its
    /// request while it is the last (`trailing_results`); read after, it
    /// is left as it came, and so is the rest of the history.
    fn rename_echoes(
        request: &mut MessagesRequest,
        store: &dyn ExecutionLookup,
        tenant: &Tenant,
    ) -> Result<(), String> {
        if let Ok(Some(renamed)) = MessageReader::new(store, tenant).echoes(request.messages()) {
            *request.messages_mut() = renamed;
        }
        Ok(())
    }

    fn trailing_results(
        request: &MessagesRequest,
        store: &dyn ExecutionLookup,
        tenant: &Tenant,
    ) -> Result<Option<Trailing>, Refused> {
        MessageReader::new(store, tenant).trailing_results(request.messages())
    }

    fn push(request: &mut MessagesRequest, items: &[Value]) {
        request.push_messages(items);
    }

    fn judge_answer(
        answer: &Map<String, Value>,
        plan: &ToolPlan,
    ) -> Result<(ModelTurn, Edits), Unreadable> {
        let (judged, edits) = judge_message(answer, plan)?;
        let turn = ModelTurn {
            text: judged.text(),
            replay: judged.assistant,
            calls: judged.calls,
            response_id: None,
        };
        Ok((turn, edits))
    }

    fn quiet_answer(body: &[u8]) -> Option<Quiet> {
        super::completion::quiet(body)
    }

    fn give_up(answer: &mut Map<String, Value>, note: &str) {
        give_up(answer, note);
    }

    /// The text blocks of earlier turns go first, as a stream showed them
    /// (each its own block).
    fn open_with(answer: &mut Map<String, Value>, earlier: &[Value]) {
        let blocks: Vec<Value> = earlier
            .iter()
            .filter_map(|t| t.get("content").and_then(Value::as_array))
            .flatten()
            .filter(|b| b["type"] == "text" && b["text"].as_str().is_some_and(|t| !t.is_empty()))
            .cloned()
            .collect();
        if blocks.is_empty() {
            return;
        }
        if let Some(Value::Array(content)) = answer.get_mut("content") {
            content.splice(0..0, blocks);
        }
    }

    fn as_sse(answer: &Value, _request: &MessagesRequest) -> Bytes {
        message_as_sse(answer)
    }

    fn answer_call(call: &JudgedCall, content: &str, _repair: bool) -> Value {
        answer_block(call, content)
    }

    fn raw_call(call: &JudgedCall) -> Value {
        raw_block(call)
    }

    /// The model's turn as it came (its thinking blocks and their
    /// signatures untouched), then one user message holding the answers.
    fn repair_history(replay: &Value, answers: Vec<Value>) -> Vec<Value> {
        vec![replay.clone(), json!({"role": "user", "content": answers})]
    }

    fn replay_calls(replay: &Value) -> Option<Vec<&Value>> {
        let blocks = replay["content"].as_array()?;
        Some(blocks.iter().filter(|b| is_call_block(b)).collect())
    }

    fn call_id(call: &Value) -> Option<&str> {
        call.get("id").and_then(Value::as_str)
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
        let model = base.get("model").cloned().unwrap_or(Value::Null);
        client_message(exec, range, &model, usage, model_turn)
    }

    fn judge(plan: Arc<ToolPlan>, max_repairs: u32) -> MessagesJudge {
        MessagesJudge::new(plan, max_repairs)
    }
}
