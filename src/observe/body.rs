//! Body wrappers: the response body that finishes its request's ledger,
//! and the upstream body that reads token usage on the side.

use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use http::{header, Response};
use http_body::Body;
use http_body_util::combinators::UnsyncBoxBody;
use tracing::Span;

use super::ledger::{self, RequestLedger};
use super::usage::{Kind, Tokens, UsageScanner};
use crate::body::{BoxedError, Polled, ProxyBody, Watch, Watched};

// ---- ObservedBody ----

/// A response body polled inside its request's span and ledger (a stream's
/// later rounds run in these polls); its end, or its drop, finishes the
/// ledger.
pub type ObservedBody = Watched<ProxyBody, Observer>;

/// Wraps `inner`.
pub fn observed(inner: ProxyBody, ledger: Arc<RequestLedger>, span: Span) -> ObservedBody {
    let ended = inner.is_end_stream();
    Watched::new(
        inner,
        Observer {
            ledger,
            span,
            ended,
        },
    )
}

/// What finishes a request's ledger with its response body.
pub struct Observer {
    ledger: Arc<RequestLedger>,
    span: Span,
    /// The body ended (a body the server never had to poll, empty, ends
    /// before its first poll).
    ended: bool,
}

impl Watch<BoxedError> for Observer {
    fn around<R>(&mut self, poll: impl FnOnce(&mut Self) -> R) -> R {
        let span = self.span.clone();
        let _entered = span.enter();
        let ledger = Arc::clone(&self.ledger);
        ledger::sync_scope(&ledger, || poll(self))
    }

    fn seen(&mut self, polled: &Polled<BoxedError>, ended: bool) {
        if let Poll::Ready(Some(Err(_))) = polled {
            self.ledger.finish(false);
        } else if ended {
            self.ended = true;
            self.ledger.finish(true);
        }
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        // Any body dropped before its end means the client went away.
        let _entered = self.span.enter();
        ledger::sync_scope(&self.ledger, || self.ledger.finish(self.ended));
    }
}

// ---- usage on the side ----

/// What reads an upstream body's usage as it passes; the frames are the
/// body's, untouched.
struct Tap {
    scanner: UsageScanner,
    ledger: Arc<RequestLedger>,
    reported: Tokens,
    done: bool,
}

impl Tap {
    fn report(&mut self) {
        let now = self.scanner.tokens();
        let input = now.input.saturating_sub(self.reported.input);
        let output = now.output.saturating_sub(self.reported.output);
        self.ledger.add_tokens(input, output);
        self.reported = Tokens {
            input: self.reported.input.max(now.input),
            output: self.reported.output.max(now.output),
        };
    }

    fn end(&mut self) {
        if !self.done {
            self.done = true;
            if self.scanner.finish() {
                self.report();
            }
        }
    }
}

impl Watch<BoxedError> for Tap {
    fn seen(&mut self, polled: &Polled<BoxedError>, ended: bool) {
        if let Poll::Ready(Some(Ok(frame))) = polled {
            if let Some(data) = frame.data_ref() {
                if self.scanner.push(data) {
                    self.report();
                }
            }
        }
        if ended {
            self.end();
        }
    }
}

/// An upstream response, boxed once, whose body reports its token usage to
/// the current request's ledger: JSON and event-stream bodies the proxy
/// can read (not compressed); any other goes as it is.
pub fn tap_usage<B>(res: Response<B>) -> Response<ProxyBody>
where
    B: Body<Data = Bytes, Error = BoxedError> + Send + 'static,
{
    let kind = usage_kind(res.headers());
    let tap = kind.and_then(|kind| {
        let ledger = ledger::current()?;
        Some(Tap {
            scanner: UsageScanner::new(kind, ledger.usage_shape()),
            ledger,
            reported: Tokens::default(),
            done: false,
        })
    });
    match tap {
        Some(tap) => res.map(|inner| UnsyncBoxBody::new(Watched::new(inner, tap))),
        None => res.map(UnsyncBoxBody::new),
    }
}

/// What to scan a body with these headers as, if it can be read.
fn usage_kind(headers: &http::HeaderMap) -> Option<Kind> {
    let encoded = headers
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .any(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"));
    if encoded {
        return None;
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .map(|v| v.as_bytes())
        .unwrap_or(b"");
    if content_type.starts_with(b"text/event-stream") {
        Some(Kind::EventStream)
    } else if content_type.starts_with(b"application/json") {
        Some(Kind::Json)
    } else {
        None
    }
}
