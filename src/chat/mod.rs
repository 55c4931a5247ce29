//! The Chat Completions dialect (`POST /v1/chat/completions`): the
//! request rewrite ([`request`]), a whole completion judged
//! ([`completion`]), the stream judge ([`stream`]), and what the turn core
//! writes in chat's shapes ([`answer`]): `tool` messages answering
//! withheld calls, the assistant turn handing a program's calls out.

pub mod answer;
pub mod completion;
pub mod history;
pub(crate) mod provider;
pub mod request;
pub mod stream;
pub mod tools;

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::error::ProxyError;
use crate::plan::ToolPlan;
use crate::runtime::history::{Refused, Trailing, Transcript};
use crate::runtime::{Execution, ExecutionLookup, Limits};
use crate::tenant::Tenant;
use crate::turn::{Dialect, Edits, JudgedCall, ModelTurn, Quiet, Shape, Unreadable};
use history::Reader;

pub use request::ChatRequest;
pub use stream::StreamJudge;

/// The Chat Completions API.
pub struct Chat;

impl Dialect for Chat {
    type Request = ChatRequest;
    type Judge = StreamJudge;
    const ANSWER: &'static str = "completion";
    const ROUTES: &'static [crate::api::Route] = provider::ROUTES;
    const PROVIDER: &'static crate::api::Provider = &provider::OPENAI;
    const ERRORS: &'static crate::api::Errors = &provider::ERRORS;
    const TOOLS: &'static crate::tools::ToolReader = &tools::TOOLS;

    fn parse(bytes: &[u8], _path: &str) -> Result<ChatRequest, ProxyError> {
        ChatRequest::parse(bytes)
    }

    fn read_history(
        request: &mut ChatRequest,
        store: &dyn ExecutionLookup,
        tenant: &Tenant,
        limits: &Limits,
    ) -> Result<(), ProxyError> {
        Reader::new(store, tenant).rewrite(&mut request.messages, limits);
        Ok(())
    }

    fn rename_echoes(
        request: &mut ChatRequest,
        store: &dyn ExecutionLookup,
        tenant: &Tenant,
    ) -> Result<(), String> {
        if let Some(renamed) = Reader::new(store, tenant).echoes(&request.messages)? {
            request.messages = renamed;
        }
        Ok(())
    }

    fn trailing_results(
        request: &ChatRequest,
        store: &dyn ExecutionLookup,
        tenant: &Tenant,
    ) -> Result<Option<Trailing>, Refused> {
        Reader::new(store, tenant).trailing_results(&request.messages)
    }

    fn push(request: &mut ChatRequest, items: &[Value]) {
        for m in items {
            request.push_message(m);
        }
    }

    fn judge_answer(
        answer: &Map<String, Value>,
        plan: &ToolPlan,
    ) -> Result<(ModelTurn, Edits), Unreadable> {
        let (judged, edits) = completion::judge_completion(answer, plan)?;
        let turn = ModelTurn {
            text: judged.content(),
            replay: judged.assistant,
            calls: judged.calls,
            response_id: None,
        };
        Ok((turn, edits))
    }

    fn quiet_answer(body: &[u8]) -> Option<Quiet> {
        completion::quiet(body)
    }

    fn give_up(answer: &mut Map<String, Value>, note: &str) {
        completion::give_up(answer, note);
    }

    fn open_with(answer: &mut Map<String, Value>, earlier: &[Value]) {
        answer::open_with(answer, earlier);
    }

    fn as_sse(answer: &Value, request: &ChatRequest) -> Bytes {
        answer::completion_as_sse(answer, request.include_usage())
    }

    fn answer_call(call: &JudgedCall, content: &str, repair: bool) -> Value {
        // A legacy `function_call` is answered by name in its own turn; in
        // a program's or a splice's history it is written as a tool call.
        if call.shape == Shape::Legacy && repair {
            json!({"role": "function", "name": call.name, "content": content})
        } else {
            json!({"role": "tool", "tool_call_id": call.id, "content": content})
        }
    }

    fn raw_call(call: &JudgedCall) -> Value {
        answer::tool_call(call)
    }

    fn repair_history(replay: &Value, answers: Vec<Value>) -> Vec<Value> {
        let mut messages = Vec::with_capacity(answers.len() + 1);
        messages.push(replay.clone());
        messages.extend(answers);
        messages
    }

    fn replay_calls(replay: &Value) -> Option<Vec<&Value>> {
        // A legacy `function_call` has no id to answer it by.
        if replay.get("function_call").is_some_and(|f| !f.is_null()) {
            return None;
        }
        Some(replay.get("tool_calls")?.as_array()?.iter().collect())
    }

    fn call_id(call: &Value) -> Option<&str> {
        call.get("id").and_then(Value::as_str)
    }

    fn program_pair(exec: &Execution) -> Vec<Value> {
        history::pair(exec)
    }

    fn client_turn(
        exec: &Execution,
        range: std::ops::Range<usize>,
        _plan: &ToolPlan,
        base: &Value,
        usage: Option<Value>,
        _model_turn: bool,
    ) -> Value {
        // A stream's hand-off writes only the turn's calls: the model's
        // words in it went out as they streamed.
        answer::client_turn(exec, range, base, usage)
    }

    fn judge(plan: Arc<ToolPlan>, max_repairs: u32) -> StreamJudge {
        StreamJudge::new(plan, max_repairs)
    }
}
