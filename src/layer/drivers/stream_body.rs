//! The client's body for an intercepted stream.
//!
//! Reads the upstream only when the client has taken everything judged so
//! far, so a slow client slows the upstream read instead of growing a
//! buffer. Dropping it (the client went away) drops the upstream body or the
//! pending repair request with it; a repair round is only ever started from
//! inside `poll_frame`, so none starts for a client that is gone.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{header, Response};
use http_body::{Body, Frame};
use serde_json::Value;

use crate::body::{BoxedError, ProxyBody, UpstreamIdle};
use crate::conversation::Anchor;
use crate::error::ProxyError;
use crate::runtime::StoreError;
use crate::splice::TenantSplices;
use crate::sse::{SseEvent, SseParser};
use crate::telemetry::Round;
use crate::turn::{HeldProgram, RoundEnd, RoundJudge, Unreadable};

/// What comes after a round the client does not see the end of.
pub enum Next {
    /// The next round's upstream response, already checked to be a stream.
    Stream(Response<ProxyBody>),
    /// A program waits on the client: this assistant turn (a completion
    /// holding its calls) ends the client stream.
    HandOff(Value),
}

/// The next round of a stream.
pub type RepairFuture = Pin<Box<dyn Future<Output = Result<Next, ProxyError>> + Send>>;

/// Continues a stream upstream.
pub trait RepairTarget: Send {
    /// Asks the upstream again with messages appended to the conversation.
    fn reask(&mut self, messages: Vec<Value>) -> RepairFuture;
    /// Runs the model's program; then asks again, or hands its calls to the client.
    fn run_program(&mut self, program: HeldProgram) -> RepairFuture;
    /// The conversation the stream's turns belong to, for a mixed turn's
    /// stored denials.
    fn anchor(&self) -> Anchor {
        Anchor::NONE
    }
}

/// Which kind of round is being started.
#[derive(Clone, Copy)]
enum Pending {
    Repair,
    Program,
}

enum Phase {
    Reading(ProxyBody),
    Asking(RepairFuture, Pending),
    /// A mixed turn's denials on their way to a shared store: the stream's
    /// last events wait, so the client cannot send the turn back (to
    /// another replica) before they are there.
    Saving(Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send>>),
    Done,
}

/// What one judged client stream may hold.
#[derive(Clone, Copy, Debug)]
pub struct StreamLimits {
    /// The largest single event (`CODEMODE_MAX_EVENT_BYTES` is fixed: a
    /// whole tool call can arrive in one).
    pub max_event: usize,
    /// The most upstream bytes one client stream judges across its rounds
    /// (`CODEMODE_MAX_STREAM_STATE_BYTES`): a judge keeps the turn it
    /// judges (its text, its calls' arguments, the items a Responses
    /// client's terminal lists), so this bounds what it holds.
    pub max_state: usize,
    /// How often a client waiting on the proxy gets an SSE comment
    /// (`CODEMODE_STREAM_KEEPALIVE_MS`); `None`: never.
    pub keepalive: Option<Duration>,
}

/// What a waiting client is sent: an SSE comment, which every client's
/// event parser skips (providers send such lines too).
const KEEPALIVE: &[u8] = b": codemode-proxy is working on this answer\n\n";

impl Default for StreamLimits {
    fn default() -> StreamLimits {
        StreamLimits {
            max_event: crate::sse::DEFAULT_MAX_EVENT_BYTES,
            max_state: crate::config::DEFAULT_MAX_STREAM_STATE_BYTES,
            keepalive: Some(Duration::from_millis(
                crate::config::DEFAULT_STREAM_KEEPALIVE_MS,
            )),
        }
    }
}

/// Judges the upstream's events on their way to the client.
pub struct InterceptBody<J> {
    phase: Phase,
    parser: SseParser,
    limits: StreamLimits,
    /// Upstream bytes judged so far in this client stream.
    judged: usize,
    judge: J,
    out: VecDeque<Bytes>,
    events: Vec<SseEvent>,
    emitted: Vec<Bytes>,
    repair: Box<dyn RepairTarget>,
    splices: TenantSplices,
    /// The last events, held while [`Phase::Saving`].
    held: Vec<Bytes>,
    /// The current upstream round's trace span: the judge's denials are its events.
    round: Round,
    /// When the client waiting on the next round gets its next comment.
    tick: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// The client's response for an upstream stream: its status and headers,
/// and a body that judges every event.
pub fn intercept_stream<J: RoundJudge>(
    first: Response<ProxyBody>,
    judge: J,
    repair: Box<dyn RepairTarget>,
    splices: TenantSplices,
    limits: StreamLimits,
) -> Response<ProxyBody> {
    let (mut parts, body) = first.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let round = Round::of_response(&mut parts.extensions);
    let body = InterceptBody {
        phase: Phase::Reading(body),
        parser: SseParser::new(limits.max_event),
        limits,
        judged: 0,
        judge,
        out: VecDeque::new(),
        events: Vec::new(),
        emitted: Vec::new(),
        repair,
        splices,
        held: Vec::new(),
        round,
        tick: None,
    };
    Response::from_parts(parts, http_body_util::BodyExt::boxed_unsync(body))
}

impl<J: RoundJudge> InterceptBody<J> {
    /// Judges the events parsed so far; false when one could not be
    /// judged and the stream ended there.
    fn judge_events(&mut self) -> bool {
        let events = std::mem::take(&mut self.events);
        for ev in events {
            let before = self.emitted.len();
            if let Err(unreadable) = self.judge.on_event(ev, &mut self.emitted) {
                // Whatever the judge wrote of the event before it found
                // the shape stays here: the client gets the events before
                // it, then the error.
                self.emitted.truncate(before);
                self.refuse(&unreadable);
                return false;
            }
        }
        self.out.extend(self.emitted.drain(..));
        true
    }

    /// An event held a shape the judge cannot read where a call could
    /// stand: the stream ends with the dialect's error event, as for an
    /// upstream that failed (docs/security.md, "Fail closed").
    fn refuse(&mut self, unreadable: &Unreadable) {
        tracing::warn!(target: "codemode::denial", %unreadable, "an upstream event the judge cannot read ended the stream");
        let error = unreadable.refusal("an event of the stream");
        self.fail(&error.to_string(), error.code());
    }

    fn feed(&mut self, data: &[u8]) {
        let _round = self.round.entered();
        self.judged += data.len();
        if self.judged > self.limits.max_state {
            let limit = self.limits.max_state;
            tracing::error!(target: "codemode::stream", limit, "a judged stream outgrew CODEMODE_MAX_STREAM_STATE_BYTES and was ended");
            let message = format!(
                "the upstream stream grew past {limit} bytes, the most the proxy holds of one \
                 judged stream (CODEMODE_MAX_STREAM_STATE_BYTES); raise it, or ask for a shorter answer"
            );
            self.fail(&message, "stream_state_too_large");
            return;
        }
        let pushed = self.parser.push(data, &mut self.events);
        if !self.judge_events() {
            return;
        }
        if let Err(e) = pushed {
            self.fail(&e.to_string(), "upstream_event_too_large");
        }
    }

    fn end_of_round(&mut self) {
        let round = std::mem::replace(&mut self.round, Round::none());
        let _round = round.entered();
        self.parser.finish(&mut self.events);
        if !self.judge_events() {
            return;
        }
        round.usage(self.judge.round_usage());
        match self.judge.end_round(&mut self.emitted) {
            RoundEnd::Repair { messages } => {
                tracing::info!(target: "codemode::repair", round = self.judge.repairs() + 1, "re-asking the model inside the stream");
                self.phase = Phase::Asking(self.repair.reask(messages), Pending::Repair);
            }
            RoundEnd::Program(program) => {
                self.phase = Phase::Asking(self.repair.run_program(program), Pending::Program);
            }
            RoundEnd::Done { splice } => {
                self.phase = Phase::Done;
                if let Some((keys, splice)) = splice {
                    self.splices
                        .put(&self.repair.anchor(), &keys, Arc::new(splice));
                    if self.splices.is_remote() {
                        let splices = self.splices.clone();
                        self.phase = Phase::Saving(Box::pin(async move { splices.settle().await }));
                        self.held.append(&mut self.emitted);
                        return;
                    }
                }
            }
        }
        self.out.extend(self.emitted.drain(..));
    }

    /// While the next round is prepared (a program waits for its slot or
    /// runs, the model is asked again), a comment every so often keeps the
    /// client's and any middlebox's idle timeout from cutting the stream.
    fn keep_alive(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxedError>>> {
        let Some(every) = self.limits.keepalive else {
            return Poll::Pending;
        };
        let tick = self
            .tick
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(every)));
        ready!(tick.as_mut().poll(cx));
        tick.as_mut().reset(tokio::time::Instant::now() + every);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(KEEPALIVE)))))
    }

    /// Starts the round the pending future prepared, or ends the stream.
    fn next_round(&mut self, next: Result<Next, ProxyError>, pending: Pending) {
        match next {
            Ok(Next::Stream(res)) => {
                match pending {
                    Pending::Repair => self.judge.start_repair_round(),
                    Pending::Program => self.judge.start_program_round(),
                }
                self.parser = SseParser::new(self.limits.max_event);
                let (mut parts, body) = res.into_parts();
                self.round = Round::of_response(&mut parts.extensions);
                self.phase = Phase::Reading(body);
            }
            Ok(Next::HandOff(turn)) => {
                self.judge.hand_off(&turn, &mut self.emitted);
                self.out.extend(self.emitted.drain(..));
                self.phase = Phase::Done;
            }
            Err(e) => {
                let message = e.to_string();
                self.fail(&message, e.code());
            }
        }
    }

    fn fail(&mut self, message: &str, code: &str) {
        self.judge.upstream_failed(message, code, &mut self.emitted);
        self.out.extend(self.emitted.drain(..));
        self.phase = Phase::Done;
    }
}

impl<J: RoundJudge> Body for InterceptBody<J> {
    type Data = Bytes;
    type Error = BoxedError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxedError>>> {
        let this = self.get_mut();
        loop {
            if let Some(bytes) = this.out.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(bytes))));
            }
            match &mut this.phase {
                Phase::Done => return Poll::Ready(None),
                Phase::Reading(body) => match ready!(Pin::new(body).poll_frame(cx)) {
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            this.feed(&data);
                        }
                    }
                    Some(Err(e)) => {
                        let message = format!("the upstream stream broke off: {e}");
                        let code = if UpstreamIdle::caused(&e) {
                            "upstream_stream_idle"
                        } else {
                            "upstream_stream_broken"
                        };
                        this.fail(&message, code);
                    }
                    None => this.end_of_round(),
                },
                Phase::Asking(future, pending) => match future.as_mut().poll(cx) {
                    Poll::Pending => return this.keep_alive(cx),
                    Poll::Ready(next) => {
                        let pending = *pending;
                        this.tick = None;
                        this.next_round(next, pending);
                    }
                },
                Phase::Saving(saving) => {
                    if let Err(e) = ready!(saving.as_mut().poll(cx)) {
                        // The turn's calls already went out; the model will
                        // see the turn without its denials.
                        tracing::warn!(target: "codemode::store", error = %e, "a mixed turn's denials could not be stored");
                    }
                    this.out.extend(this.held.drain(..));
                    this.phase = Phase::Done;
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.phase, Phase::Done) && self.out.is_empty()
    }
}
