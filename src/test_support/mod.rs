//! What the crate's own stream tests share: an agent's tools and their plan
//! in each dialect, a judge of any dialect fed through the proxy's own
//! stream body (cut anywhere), the recorded streams under
//! `fixtures/streams/`, and what a client makes of each dialect's stream; and the judges' fixture and
//! property tests that use them (kept here, so the dialects never import
//! this module).
//!
//! The client views are written independently of the proxy's SSE parser
//! on purpose: they read the bytes the way the providers' SDKs do.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::Body;
use http_body_util::BodyExt;
use serde_json::{json, Value};

use crate::layer::drivers::stream_body::{
    intercept_stream, RepairFuture, RepairTarget, StreamLimits,
};
use crate::mode::{Mode, Runtime};
use crate::plan::ToolPlan;

pub(crate) use crate::plan::standard_plan;
pub(crate) use crate::splice::fresh_splices;
pub use recorded::{
    error_outcome_holds, expected_calls, expected_denials, final_outcome_holds, fixture, fixtures,
    repair_fixtures, Fixture,
};

// The judges, by the names the tests use (one place to follow them).
pub use crate::chat::StreamJudge;
pub use crate::messages::stream::MessagesJudge;
pub use crate::responses::stream::ResponsesJudge;
pub use crate::turn::{RoundEnd, RoundJudge};

mod answers;
/// What an OpenAI SDK makes of a chat stream: the same file the
/// integration tests read (`tests/it/common/sse_client.rs`), so there is one
/// copy of it.
#[allow(dead_code)]
#[path = "../../tests/it/common/sse_client.rs"]
pub mod chat_client;
mod chat_fixtures;
mod chat_props;
mod gemini_fixtures;
pub mod messages_client;
mod messages_fixtures;
mod messages_props;
mod quiet_props;
mod recorded;
pub mod responses_client;
mod responses_fixtures;
mod responses_props;
pub mod rounds;
mod stream_props;
mod unchanged_props;
mod unreadable_props;

// ---- plans ----

/// A chat tool.
fn chat_tool(name: &str, description: &str, parameters: Value) -> Value {
    json!({"type": "function", "function": {"name": name, "description": description, "parameters": parameters}})
}

fn object(prop: &str) -> Value {
    json!({"type": "object", "properties": {prop: {"type": "string"}}, "required": [prop]})
}

/// The agent of the integration tests: `read`, `write`, `bash` and its
/// own `run_code`, as chat tools.
pub fn agent_tools() -> Vec<Value> {
    vec![
        chat_tool("read", "Read a file.", object("path")),
        chat_tool(
            "write",
            "Write a file.",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}),
        ),
        chat_tool("bash", "Run a shell command.", object("command")),
        chat_tool("run_code", "Run a JavaScript program.", object("code")),
    ]
}

/// The plan of [`agent_tools`] in `mode` on the client runtime.
pub fn agent_plan(mode: Mode) -> Arc<ToolPlan> {
    Arc::new(standard_plan(
        &crate::chat::tools::TOOLS,
        &json!(agent_tools()),
        mode,
        Runtime::Client,
    ))
}

/// A Codex-like agent on the Responses API: `exec_command`, its own
/// `run_code`, a freeform `apply_patch`, and the provider's web search.
pub fn responses_plan(mode: Mode, runtime: Runtime) -> Arc<ToolPlan> {
    let tools = json!([
        {"type": "function", "name": "exec_command", "description": "Runs a command.",
         "parameters": object("cmd"), "strict": false},
        {"type": "function", "name": "read", "description": "Read a file.", "parameters": object("path")},
        {"type": "function", "name": "run_code", "description": "Run a JavaScript program.",
         "parameters": object("code")},
        {"type": "custom", "name": "apply_patch", "description": "Edit files with a patch.",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
        {"type": "web_search"}
    ]);
    Arc::new(standard_plan(
        &crate::responses::tools::TOOLS,
        &tools,
        mode,
        runtime,
    ))
}

/// A Claude Code-like agent on the Messages API: `Read`, `Bash`, its own
/// `run_code`, and the provider's web search.
pub fn messages_plan(mode: Mode, runtime: Runtime) -> Arc<ToolPlan> {
    let tool = |name: &str, prop: &str| json!({"name": name, "description": format!("The {name} tool."), "input_schema": object(prop)});
    let tools = json!([
        tool("Read", "file_path"),
        tool("Bash", "command"),
        tool("run_code", "code"),
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    ]);
    Arc::new(standard_plan(
        &crate::messages::tools::TOOLS,
        &tools,
        mode,
        runtime,
    ))
}

/// A gemini-cli-like agent on the Gemini API: `read_file`,
/// `run_shell_command` (Gemini's capitalised schema types), its own
/// `run_code`, and the provider's Google Search.
pub fn gemini_plan(mode: Mode, runtime: Runtime) -> Arc<ToolPlan> {
    let tools = json!([
        {"functionDeclarations": [
            {"name": "read_file", "description": "Reads a file.", "parametersJsonSchema": object("path")},
            {"name": "run_shell_command", "description": "Runs a command.",
             "parameters": {"type": "OBJECT", "properties": {"command": {"type": "STRING"}},
                            "required": ["command"]}},
            {"name": "run_code", "description": "Run a JavaScript program.",
             "parametersJsonSchema": object("code")}
        ]},
        {"googleSearch": {}}
    ]);
    Arc::new(standard_plan(
        &crate::gemini::tools::TOOLS,
        &tools,
        mode,
        runtime,
    ))
}

// ---- driving a judge as the body does ----

/// A stream judge of any dialect.
pub trait Judge: RoundJudge {
    /// Whether the upstream reported an error in-band.
    fn errored(&self) -> bool;
}

impl Judge for StreamJudge {
    fn errored(&self) -> bool {
        StreamJudge::errored(self)
    }
}

impl Judge for ResponsesJudge {
    fn errored(&self) -> bool {
        ResponsesJudge::errored(self)
    }
}

impl Judge for MessagesJudge {
    fn errored(&self) -> bool {
        MessagesJudge::errored(self)
    }
}

impl Judge for crate::gemini::stream::GeminiJudge {
    fn errored(&self) -> bool {
        crate::gemini::stream::GeminiJudge::errored(self)
    }
}

/// One upstream round through a fresh parser and `judge`.
#[derive(Debug)]
pub struct Judged {
    /// The bytes the client gets.
    pub client: Vec<u8>,
    /// What the round's end says comes next.
    pub end: RoundEnd,
    /// Whether the upstream reported an error.
    pub errored: bool,
    /// The shape the judge could not read, when an event held one: the
    /// body ended the stream there with the dialect's error event, and
    /// the round never ended (`end` is then `Done`).
    pub refused: Option<crate::turn::Unreadable>,
}

impl Judged {
    /// The round's end, comparable (`RoundEnd` holds JSON and stores).
    pub fn end_text(&self) -> String {
        format!("{:?}", self.end)
    }
}

/// Feeds `pieces` to `judge` through the stream body the proxy serves
/// (`layer::drivers::stream_body`): its SSE parser, its limits, and what it
/// sends when the round ends. The round's end is kept as the judge
/// returns it, and the body is told the answer is complete, so exactly one
/// round is judged and no next one is asked for.
pub fn judge_pieces<J: Judge>(judge: J, pieces: &[&[u8]]) -> Judged {
    let ended = Arc::new(Mutex::new(None));
    let refused = Arc::new(Mutex::new(None));
    let judge = OneRound {
        judge,
        ended: ended.clone(),
        refused: refused.clone(),
    };
    let upstream = Pieces(pieces.iter().map(|p| Bytes::copy_from_slice(p)).collect());
    let limits = StreamLimits {
        keepalive: None,
        ..StreamLimits::default()
    };
    let res = intercept_stream(
        http::Response::new(upstream.boxed_unsync()),
        judge,
        Box::new(NoNextRound),
        fresh_splices(),
        limits,
    );
    let client = drain(res.into_body());
    let refused = refused.lock().expect("not poisoned").take();
    let ended = ended.lock().expect("not poisoned").take();
    let (end, errored) = match (ended, &refused) {
        (Some(ended), _) => ended,
        (None, Some(_)) => (RoundEnd::Done { splice: None }, true),
        (None, None) => panic!("the body neither ended the round nor refused an event"),
    };
    Judged {
        client,
        end,
        errored,
        refused,
    }
}

/// `judge` over `bytes`, where an event in a shape no judge reads stands
/// between the texts "Before." and "After.": the body refused it as `why`,
/// and the client got what came before and `error_mark` (its dialect's
/// error event), but neither `withheld` nor what came after. The client's
/// bytes, as text.
pub fn refused_mid_stream<J: Judge>(
    judge: J,
    bytes: &[u8],
    why: &str,
    withheld: &str,
    error_mark: &str,
) -> String {
    let run = judge_pieces(judge, &[bytes]);
    let text = String::from_utf8_lossy(&run.client).into_owned();
    assert_eq!(
        run.refused.map(|e| e.to_string()).as_deref(),
        Some(why),
        "{text}"
    );
    assert!(
        !text.contains(withheld) && !text.contains("After."),
        "{text}"
    );
    assert!(
        text.contains("Before.") && text.contains(error_mark),
        "{text}"
    );
    text
}

/// An upstream body that yields each piece as one frame, at once.
struct Pieces(std::collections::VecDeque<Bytes>);

impl Body for Pieces {
    type Data = Bytes;
    type Error = crate::body::BoxedError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(http_body::Frame::data(b))))
    }
}

/// Every byte of `body`, which must never wait: its upstream is [`Pieces`].
fn drain(body: crate::body::ProxyBody) -> Vec<u8> {
    let mut body = std::pin::pin!(body);
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    loop {
        match body.as_mut().poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    out.extend_from_slice(&data);
                }
            }
            Poll::Ready(Some(Err(e))) => panic!("the stream body failed: {e}"),
            Poll::Ready(None) => return out,
            Poll::Pending => panic!("the stream body waited, with nothing to wait for"),
        }
    }
}

/// `judge`, whose first round's end is kept in `ended` (with whether the
/// upstream reported an error) while the body is told the answer is done,
/// and the shape it could not read, if any, in `refused`.
struct OneRound<J> {
    judge: J,
    ended: Arc<Mutex<Option<(RoundEnd, bool)>>>,
    refused: Arc<Mutex<Option<crate::turn::Unreadable>>>,
}

impl<J: Judge> RoundJudge for OneRound<J> {
    fn on_event(
        &mut self,
        ev: crate::sse::SseEvent,
        out: &mut Vec<Bytes>,
    ) -> Result<(), crate::turn::Unreadable> {
        let judged = self.judge.on_event(ev, out);
        if let Err(e) = &judged {
            *self.refused.lock().expect("not poisoned") = Some(e.clone());
        }
        judged
    }
    fn end_round(&mut self, out: &mut Vec<Bytes>) -> RoundEnd {
        let end = self.judge.end_round(out);
        *self.ended.lock().expect("not poisoned") = Some((end, self.judge.errored()));
        RoundEnd::Done { splice: None }
    }
    fn start_repair_round(&mut self) {
        self.judge.start_repair_round();
    }
    fn start_program_round(&mut self) {
        self.judge.start_program_round();
    }
    fn hand_off(&mut self, turn: &Value, out: &mut Vec<Bytes>) {
        self.judge.hand_off(turn, out);
    }
    fn upstream_failed(&mut self, message: &str, code: &str, out: &mut Vec<Bytes>) {
        self.judge.upstream_failed(message, code, out);
    }
    fn repairs(&self) -> u32 {
        self.judge.repairs()
    }
    fn round_usage(&self) -> Option<&Value> {
        self.judge.round_usage()
    }
}

/// The target of a body that never starts another round.
struct NoNextRound;

impl RepairTarget for NoNextRound {
    fn reask(&mut self, _messages: Vec<Value>) -> RepairFuture {
        unreachable!("one round is judged: the body is told it is done")
    }
    fn run_program(&mut self, _program: crate::turn::HeldProgram) -> RepairFuture {
        unreachable!("one round is judged: the body is told it is done")
    }
}

/// Judges a whole answer as dialect `D` and writes the edits into it, as
/// the JSON driver does: the turn, and `answer` as the client gets it.
pub fn judged<D: crate::turn::Dialect>(
    answer: &mut Value,
    plan: &ToolPlan,
) -> crate::turn::ModelTurn {
    let answer = answer.as_object_mut().expect("an answer is an object");
    let (turn, edits) = D::judge_answer(answer, plan).expect("a readable answer");
    edits.apply(answer);
    turn
}

/// `bytes` cut at `cuts` (each taken modulo the length, in any order).
pub fn pieces_at(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut pieces = Vec::with_capacity(points.len() + 1);
    let mut last = 0;
    for p in points.into_iter().chain([bytes.len()]) {
        pieces.push(bytes[last..p].to_vec());
        last = p;
    }
    pieces
}

/// `judge`'s run over `bytes` cut at `cuts` (as [`pieces_at`] cuts).
pub fn judge_at_cuts<J: Judge>(judge: J, bytes: &[u8], cuts: &[usize]) -> Judged {
    let pieces = pieces_at(bytes, cuts);
    let pieces: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
    judge_pieces(judge, &pieces)
}

/// Judges `bytes` whole, then cut in two at every offset and byte by
/// byte, each with a fresh judge from `judge`: the client's bytes and the
/// round's end never change. Returns the whole stream's result.
pub fn same_at_every_cut<J: Judge>(name: &str, bytes: &[u8], judge: impl Fn() -> J) -> Judged {
    let whole = judge_pieces(judge(), &[bytes]);
    let same = |run: Judged, how: &str| {
        assert!(
            run.client == whole.client,
            "{name}: the client's bytes differ when cut {how}:\n{}\nagainst\n{}",
            String::from_utf8_lossy(&run.client),
            String::from_utf8_lossy(&whole.client)
        );
        assert_eq!(
            run.end_text(),
            whole.end_text(),
            "{name}: the round's end differs when cut {how}"
        );
        assert_eq!(run.errored, whole.errored, "{name}: cut {how}");
        assert_eq!(run.refused, whole.refused, "{name}: cut {how}");
    };
    for cut in 0..=bytes.len() {
        same(
            judge_pieces(judge(), &[&bytes[..cut], &bytes[cut..]]),
            &format!("at {cut}"),
        );
    }
    let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
    same(judge_pieces(judge(), &bytewise), "byte by byte");
    whole
}

// ---- the client's events ----

/// One event as an SSE client dispatches it: its `event:` field and its
/// `data:` lines joined.
#[derive(Debug)]
pub struct ClientEvent {
    /// The `event:` field, when there is one.
    pub event: Option<String>,
    /// The data.
    pub data: String,
}

/// The events of an SSE body as the WHATWG algorithm (and the SDKs)
/// dispatch them: lines end at CRLF, LF or CR; a blank line dispatches an
/// event with data; comment lines and unknown fields are ignored.
pub fn client_events(bytes: &[u8]) -> Vec<ClientEvent> {
    let text = String::from_utf8(bytes.to_vec()).expect("the client's bytes are UTF-8");
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut events = Vec::new();
    let mut event: Option<String> = None;
    let mut data: Vec<&str> = Vec::new();
    for line in text.split('\n') {
        if line.is_empty() {
            if !data.is_empty() {
                events.push(ClientEvent {
                    event: event.take(),
                    data: data.join("\n"),
                });
            }
            event = None;
            data.clear();
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => event = Some(value.to_owned()),
            "data" => data.push(value),
            _ => {}
        }
    }
    events
}
