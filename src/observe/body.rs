//! Body wrappers: the response body that finishes its request's ledger,
//! and the upstream body that reads token usage on the side.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use tracing::Span;

use super::ledger::{self, RequestLedger};
use super::usage::{Kind, Tokens, UsageScanner};
use crate::body::{BoxedError, ProxyBody};

// ---- ObservedBody ----

/// A response body polled inside its request's span and ledger (a stream's
/// later rounds run in these polls); its end, or its drop, finishes the
/// ledger.
pub struct ObservedBody {
    inner: ProxyBody,
    ledger: Arc<RequestLedger>,
    span: Span,
}

impl ObservedBody {
    /// Wraps `inner`.
    pub fn new(inner: ProxyBody, ledger: Arc<RequestLedger>, span: Span) -> ObservedBody {
        ObservedBody {
            inner,
            ledger,
            span,
        }
    }
}

impl Body for ObservedBody {
    type Data = Bytes;
    type Error = BoxedError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxedError>>> {
        let this = &mut *self;
        let _entered = this.span.enter();
        let inner = &mut this.inner;
        ledger::sync_scope(&this.ledger, || {
            let polled = Pin::new(&mut *inner).poll_frame(cx);
            match &polled {
                Poll::Ready(None) => this.ledger.finish(true),
                Poll::Ready(Some(Err(_))) => this.ledger.finish(false),
                Poll::Ready(Some(Ok(_))) if inner.is_end_stream() => this.ledger.finish(true),
                _ => {}
            }
            polled
        })
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for ObservedBody {
    fn drop(&mut self) {
        // A body the server never had to poll (empty) ended all the same;
        // any other dropped before its end means the client went away.
        let _entered = self.span.enter();
        let completed = self.inner.is_end_stream();
        ledger::sync_scope(&self.ledger, || self.ledger.finish(completed));
    }
}

// ---- UsageTap ----

pin_project_lite::pin_project! {
    /// An upstream body whose usage is read as it passes; the frames are the
    /// inner body's, untouched.
    pub struct UsageTap<B> {
        #[pin]
        inner: B,
        tap: Option<Tap>,
    }
}

/// What a tapped body reads usage into.
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

impl<B> Body for UsageTap<B>
where
    B: Body<Data = Bytes, Error = BoxedError>,
{
    type Data = Bytes;
    type Error = BoxedError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxedError>>> {
        let mut this = self.project();
        let polled = this.inner.as_mut().poll_frame(cx);
        if let Some(tap) = this.tap {
            match &polled {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Some(data) = frame.data_ref() {
                        if tap.scanner.push(data) {
                            tap.report();
                        }
                    }
                    if this.inner.is_end_stream() {
                        tap.end();
                    }
                }
                Poll::Ready(None) => tap.end(),
                _ => {}
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
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
    res.map(|inner| UnsyncBoxBody::new(UsageTap { inner, tap }))
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
