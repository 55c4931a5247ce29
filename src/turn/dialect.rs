//! What a wire dialect must say, so the turn core can apply every decision
//! once for all of them.
//!
//! A dialect reads its request and its provider's answers into the core's
//! terms (a [`ModelTurn`] of [`JudgedCall`]s), and writes the core's
//! decisions back in its own shapes: denials, the repair round's history,
//! a program's nested calls, the give-up note, proxy-written answers and
//! stream events. The drivers above (`layer::drivers`: `json`,
//! `streamed`, `entry`) are written once over this trait; a new dialect is one
//! module implementing it.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{Edits, JudgedCall, Quiet, RoundJudge, Unreadable, WireRequest};
use crate::error::ProxyError;
use crate::plan::ToolPlan;
use crate::runtime::history::{Refused, Trailing};
use crate::runtime::{Execution, ExecutionLookup, Limits};
use crate::tenant::Tenant;

/// One model turn, read off a dialect's answer: what the core decides on.
#[derive(Debug, Default)]
pub struct ModelTurn {
    /// Every call of the turn, judged, in the order the model made them.
    pub calls: Vec<JudgedCall>,
    /// The turn as the dialect replays it into a history, withheld calls
    /// included (Chat and Messages: the assistant message; Responses: the
    /// array of output items).
    pub replay: Value,
    /// The text the model wrote in the turn.
    pub text: Option<String>,
    /// The provider's id of the answer that held the turn (Responses: a
    /// program's record keeps it for `previous_response_id`).
    pub response_id: Option<String>,
}

/// A wire dialect: its request, its answers and its stream judge.
pub trait Dialect: Send + Sync + Sized + 'static {
    /// The parsed client request, rewritten in place.
    type Request: WireRequest;
    /// The stream judge of one client stream.
    type Judge: RoundJudge;

    /// What the dialect calls one whole answer, for error messages
    /// ("the completion is not a JSON object").
    const ANSWER: &'static str;
    /// The routes the API is judged on.
    const ROUTES: &'static [crate::api::Route];
    /// The provider that serves the API: its URL and the operator's key.
    const PROVIDER: &'static crate::api::Provider;
    /// The shapes the API's clients read a failure in.
    const ERRORS: &'static crate::api::Errors;
    /// How the API's requests declare their tools.
    const TOOLS: &'static crate::tools::ToolReader;
    /// The key of a whole answer's token counts, which the proxy sums
    /// field by field over a request's rounds.
    const USAGE: &'static str = "usage";
    /// The prefix of the call ids the provider makes, which the proxy's
    /// own take (docs/embedded-runtime.md, "Ids").
    const CALL_ID_PREFIX: &'static str = crate::runtime::CALL_PREFIX;

    // ----- the request -----

    /// Parses a client body sent to `path` (one of [`Dialect::ROUTES`]'
    /// canonical spellings, where a route's path names a model or a stream).
    fn parse(bytes: &[u8], path: &str) -> Result<Self::Request, ProxyError>;
    /// Every tool the request declares, wherever it declares them, as one
    /// `tools` array (the plan reads this); `tools` by default.
    fn declared_tools(
        request: &Self::Request,
    ) -> Result<Option<std::borrow::Cow<'_, RawValue>>, ProxyError> {
        Ok(request.field("tools").map(std::borrow::Cow::Borrowed))
    }
    /// Whether a body sent with no API named (a dry-run's) is written in
    /// this dialect. Asked of each API in [`crate::api::Api::ALL`]'s order;
    /// a body none recognises is the first API's.
    fn recognises(_body: &Value) -> bool {
        false
    }
    /// Grows the conversation by `items` (messages or input items) the
    /// proxy wrote: a repair's turn and answers, a program's pair.
    fn push(request: &mut Self::Request, items: &[Value]);
    /// Gives the turns a client sent back under ids of its own the proxy's
    /// ids again, where they echo a batch one of the tenant's programs
    /// handed out (`runtime::echoed_batch`): once a request, before
    /// [`Self::trailing_results`] and [`Self::read_history`] read the
    /// history (each read it whole before, twice a request). `Err` names a
    /// turn whose results cannot be told apart, refused where the dialect
    /// refuses it; the history is then left as it came.
    fn rename_echoes(
        _request: &mut Self::Request,
        _store: &dyn ExecutionLookup,
        _tenant: &Tenant,
    ) -> Result<(), String> {
        Ok(())
    }
    /// Shows the model its programs in the request's history (the embedded
    /// runtime): each `run_code` call answered by its program's result.
    fn read_history(
        request: &mut Self::Request,
        store: &dyn ExecutionLookup,
        tenant: &Tenant,
        limits: &Limits,
    ) -> Result<(), ProxyError>;
    /// The results the request's last turn returns for a program, if any;
    /// `Err` names results for calls this tenant was never handed.
    fn trailing_results(
        request: &Self::Request,
        store: &dyn ExecutionLookup,
        tenant: &Tenant,
    ) -> Result<Option<Trailing>, Refused>;
    /// How the API's answers name their token counts, which the proxy
    /// reads on the side of every body: the provider's, unless the API
    /// names them its own way.
    fn usage_shape() -> &'static crate::observe::usage::Shape {
        Self::PROVIDER.usage
    }
    /// The request's `model`, or null.
    fn model(request: &Self::Request) -> Value {
        request
            .field("model")
            .and_then(|m| serde_json::from_str(m.get()).ok())
            .unwrap_or(Value::Null)
    }

    // ----- a whole answer -----

    /// Judges every call of a whole answer (a JSON object): the turn, and
    /// the edits that withhold from it every call that does not pass (and
    /// whatever else the client must not read as it came). The judge only
    /// reads; [`Edits::apply`] writes, and no edits means the answer goes
    /// out as the provider's bytes. An answer with a shape the judge
    /// cannot read where a call could stand is [`Unreadable`], and refused
    /// (`super::shape`).
    fn judge_answer(
        answer: &Map<String, Value>,
        plan: &ToolPlan,
    ) -> Result<(ModelTurn, Edits), Unreadable>;
    /// A whole answer with nothing to judge, found without building its
    /// tree: `Some` only when [`Self::judge_answer`] would read it, find
    /// no call and ask no edit, and no key repeats (`super::quiet`); `None` sends
    /// the answer the full way.
    fn quiet_answer(_body: &[u8]) -> Option<Quiet> {
        None
    }
    /// The proxy gave up on the turn: the answer keeps the model's words
    /// without calls, and `note` when it has none.
    fn give_up(answer: &mut Map<String, Value>, note: &str);
    /// Puts what the model wrote beside programs that ended earlier in the
    /// request (their turns' replays, in order) before the answer's own
    /// content, as a stream showed it.
    fn open_with(answer: &mut Map<String, Value>, earlier: &[Value]);
    /// The answer as the event stream a streaming client expects (an
    /// answer the proxy wrote itself).
    fn as_sse(answer: &Value, request: &Self::Request) -> Bytes;

    // ----- what the core writes in the dialect's shapes -----

    /// The message or item answering a withheld call with `content`;
    /// `repair` when it follows the model's own turn in a repair round.
    fn answer_call(call: &JudgedCall, content: &str, repair: bool) -> Value;
    /// The call as the model sent it (its `tool_calls` entry, item or block).
    fn raw_call(call: &JudgedCall) -> Value;
    /// A repair round's history: the model's turn, then `answers`.
    fn repair_history(replay: &Value, answers: Vec<Value>) -> Vec<Value>;
    /// The calls of the model's turn `replay` (its `tool_calls` entries,
    /// call items, blocks or parts); `None` for a turn no history can
    /// replay.
    fn replay_calls(replay: &Value) -> Option<Vec<&Value>>;
    /// The id a call goes by (one of `replay_calls`, or one the proxy
    /// answers), when the model gave it one.
    fn call_id(call: &Value) -> Option<&str>;
    /// Whether `call` of a replayed turn is the program's own call.
    fn is_program_call(call: &Value, run_call_id: &str) -> bool {
        Self::call_id(call) == Some(run_call_id)
    }
    /// The model's turn as a program's history replays it, when it can be:
    /// it must hold the program's call once, and every other call must be
    /// one the proxy answers (`answered`), as a replay puts one result
    /// after it per call.
    fn replayable(replay: &Value, run_call_id: &str, answered: &[Value]) -> Option<String> {
        let calls = Self::replay_calls(replay)?;
        let (program, others): (Vec<&Value>, Vec<&Value>) = calls
            .into_iter()
            .partition(|c| Self::is_program_call(c, run_call_id));
        // A call the model gave no id is answered by the same call.
        let same = |a: &Value, c: &Value| match (Self::call_id(a), Self::call_id(c)) {
            (Some(a), Some(c)) => a == c,
            (None, None) => a == c,
            _ => false,
        };
        let complete = program.len() == 1
            && others.len() == answered.len()
            && others.iter().all(|c| answered.iter().any(|a| same(a, c)));
        complete.then(|| replay.to_string())
    }

    // ----- programs -----

    /// The model's view of an execution that ended: its turn, its result.
    fn program_pair(exec: &Execution) -> Vec<Value>;
    /// The answer that hands a program's waiting calls (`range`) to the
    /// client. `base` is the model's answer it replaces (or `{model}`);
    /// with `model_turn`, the first batch carries the model's own content
    /// (a stream has sent it already).
    fn client_turn(
        exec: &Execution,
        range: std::ops::Range<usize>,
        plan: &ToolPlan,
        base: &Value,
        usage: Option<Value>,
        model_turn: bool,
    ) -> Value;

    // ----- streams -----

    /// The judge of one client stream under `plan`.
    fn judge(plan: Arc<ToolPlan>, max_repairs: u32) -> Self::Judge;
}
