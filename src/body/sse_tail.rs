//! A relayed event stream that ends with an error event instead of a cut.
//!
//! Once a stream's headers went out, an HTTP status can no longer say that
//! the upstream failed; a final error event in the client's API's shape
//! can (`data: {"error": ...}` for chat, an `error` event for Responses
//! and Messages). The bytes before it pass through untouched.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::{BoxedError, ProxyBody, UpstreamIdle};

/// A relayed SSE body whose failure becomes a final error event.
pub struct SseErrorTail {
    inner: ProxyBody,
    done: bool,
    event: StreamError,
}

/// Writes the final event of a failed stream from its message and code.
pub type StreamError = fn(message: &str, code: &str) -> Bytes;

impl SseErrorTail {
    /// Wraps the body of an upstream `text/event-stream` response; a
    /// failure ends it with what `event` writes.
    pub fn new(inner: ProxyBody, event: StreamError) -> SseErrorTail {
        SseErrorTail {
            inner,
            done: false,
            event,
        }
    }
}

/// The final event for an upstream failure: `upstream_stream_idle` for a
/// silent provider, `upstream_stream_broken` otherwise.
fn upstream_error_event(err: &BoxedError, event: StreamError) -> Bytes {
    let code = if UpstreamIdle::caused(err) {
        "upstream_stream_idle"
    } else {
        "upstream_stream_broken"
    };
    let event = event(&format!("the upstream stream broke off: {err}"), code);
    // The blank lines first end any event the upstream left half-sent, so
    // the error is a whole event of its own.
    let mut out = Vec::with_capacity(event.len() + 2);
    out.extend_from_slice(b"\n\n");
    out.extend_from_slice(&event);
    Bytes::from(out)
}

impl Body for SseErrorTail {
    type Data = Bytes;
    type Error = BoxedError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxedError>>> {
        if self.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Err(e))) => {
                tracing::warn!(error = %e, "upstream stream ended with an error");
                self.done = true;
                Poll::Ready(Some(Ok(Frame::data(upstream_error_event(&e, self.event)))))
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        // A final event may be added, so no exact size is promised.
        SizeHint::new()
    }
}
