//! An upstream body that may not stay silent for long.
//!
//! A provider that sends its headers and then nothing would otherwise hold
//! the client (and a connection slot) forever: only the wait for headers is
//! bounded by `CODEMODE_UPSTREAM_TIMEOUT_SECS`. The deadline restarts with
//! every frame, so a long but live stream is never cut.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use super::{BoxError, BoxedError};

/// The error a silent upstream body ends with.
#[derive(Debug, thiserror::Error)]
#[error("the upstream provider sent nothing for {0} s (CODEMODE_UPSTREAM_IDLE_SECS)")]
pub struct UpstreamIdle(pub u64);

impl UpstreamIdle {
    /// Whether `err`, or an error it wraps, is a silent upstream.
    pub fn caused(err: &(dyn std::error::Error + 'static)) -> bool {
        UpstreamIdle::find(err).is_some()
    }

    /// The silence `err`, or an error it wraps, reports.
    pub fn find<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a UpstreamIdle> {
        if let Some(idle) = err.downcast_ref::<UpstreamIdle>() {
            return Some(idle);
        }
        // Boxing a body boxes its error again: look through every layer.
        if let Some(b) = err.downcast_ref::<BoxedError>() {
            return UpstreamIdle::find(b.inner());
        }
        err.source().and_then(UpstreamIdle::find)
    }
}

pin_project! {
    /// A body that fails with [`UpstreamIdle`] when no frame comes within `idle`.
    /// Generic over the inner body, so wrapping costs no box of its own.
    pub struct IdleBody<B> {
        #[pin]
        inner: B,
        idle: Duration,
        #[pin]
        deadline: Sleep,
        failed: bool,
    }
}

impl<B> IdleBody<B> {
    /// Wraps `inner`; the first deadline starts now.
    pub fn new(inner: B, idle: Duration) -> IdleBody<B> {
        IdleBody {
            inner,
            idle,
            deadline: tokio::time::sleep(idle),
            failed: false,
        }
    }
}

impl<B> Body for IdleBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxedError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxedError>>> {
        let mut this = self.project();
        if *this.failed {
            return Poll::Ready(None);
        }
        match this.inner.poll_frame(cx) {
            Poll::Ready(frame) => {
                this.deadline.as_mut().reset(Instant::now() + *this.idle);
                Poll::Ready(frame.map(|f| f.map_err(BoxedError::new)))
            }
            Poll::Pending => match this.deadline.poll(cx) {
                Poll::Ready(()) => {
                    *this.failed = true;
                    let err = UpstreamIdle(this.idle.as_secs());
                    Poll::Ready(Some(Err(BoxedError::new(err))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test(start_paused = true)]
    async fn a_silent_body_fails_after_the_idle_time() {
        let (_tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, BoxedError>>(1);
        let silent = http_body_util::StreamBody::new(tokio_stream_from(rx)).boxed_unsync();
        let mut body = std::pin::pin!(IdleBody::new(silent, Duration::from_secs(5)));
        let err = body.frame().await.unwrap().unwrap_err();
        assert!(UpstreamIdle::caused(&err), "{err}");
        assert!(body.frame().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn every_frame_restarts_the_deadline() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, BoxedError>>(1);
        let live = http_body_util::StreamBody::new(tokio_stream_from(rx)).boxed_unsync();
        let mut body = std::pin::pin!(IdleBody::new(live, Duration::from_secs(5)));
        tokio::spawn(async move {
            for _ in 0..4 {
                tokio::time::sleep(Duration::from_secs(4)).await;
                let _ = tx.send(Ok(Frame::data(Bytes::from_static(b"x")))).await;
            }
        });
        for _ in 0..4 {
            assert!(body.frame().await.unwrap().is_ok());
        }
        assert!(body.frame().await.is_none());
    }

    fn tokio_stream_from<T: Send + 'static>(
        mut rx: tokio::sync::mpsc::Receiver<T>,
    ) -> impl futures_util::Stream<Item = T> {
        futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }
}
