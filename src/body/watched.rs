//! A body passed through untouched while something watches it: its
//! request's ledger, the token usage it carries, its round's trace span,
//! its request's place among those in flight. The frames and the end are
//! the inner body's; only the watcher differs.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

pin_project_lite::pin_project! {
    /// `inner`, watched by `watch`.
    pub struct Watched<B, W> {
        #[pin]
        inner: B,
        watch: W,
    }
}

impl<B, W> Watched<B, W> {
    /// Wraps `inner`.
    pub fn new(inner: B, watch: W) -> Watched<B, W> {
        Watched { inner, watch }
    }
}

/// One poll of a body, as its watcher sees it.
pub type Polled<E> = Poll<Option<Result<Frame<Bytes>, E>>>;

/// What watches a body.
pub trait Watch<E> {
    /// Runs one poll of the body (and [`Watch::seen`] after it) in the
    /// watcher's context: its span entered, its scope set.
    fn around<R>(&mut self, poll: impl FnOnce(&mut Self) -> R) -> R {
        poll(self)
    }
    /// What one poll gave; `ended` when nothing comes after it (said as
    /// soon as the body knows, with its last frame, and again by a poll
    /// after it: what a watcher does at the end must be done once).
    fn seen(&mut self, polled: &Polled<E>, ended: bool);
}

impl<B, W> Body for Watched<B, W>
where
    B: Body<Data = Bytes>,
    W: Watch<B::Error>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled<B::Error> {
        let this = self.project();
        let mut inner = this.inner;
        this.watch.around(|watch| {
            let polled = inner.as_mut().poll_frame(cx);
            let ended = match &polled {
                Poll::Ready(None) => true,
                Poll::Ready(Some(Ok(_))) => inner.is_end_stream(),
                _ => false,
            };
            watch.seen(&polled, ended);
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

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, Full, StreamBody};

    use super::*;

    /// Counts what it sees; `ended_after`: the frames seen at the first end.
    #[derive(Default)]
    struct Seen {
        frames: usize,
        ended_after: Option<usize>,
        errors: usize,
    }

    impl<E> Watch<E> for &mut Seen {
        fn seen(&mut self, polled: &Polled<E>, ended: bool) {
            match polled {
                Poll::Ready(Some(Ok(_))) => self.frames += 1,
                Poll::Ready(Some(Err(_))) => self.errors += 1,
                _ => {}
            }
            if ended && self.ended_after.is_none() {
                self.ended_after = Some(self.frames);
            }
        }
    }

    #[tokio::test]
    async fn the_frames_pass_untouched_and_the_end_is_seen_with_the_last() {
        let mut seen = Seen::default();
        let body = Watched::new(Full::new(Bytes::from_static(b"abc")), &mut seen);
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"abc");
        assert_eq!(
            (seen.frames, seen.ended_after, seen.errors),
            (1, Some(1), 0)
        );
    }

    #[tokio::test]
    async fn a_stream_ends_at_its_none_and_an_error_is_no_end() {
        let frames: Vec<Result<Frame<Bytes>, &str>> = vec![
            Ok(Frame::data(Bytes::from_static(b"a"))),
            Ok(Frame::data(Bytes::from_static(b"b"))),
        ];
        let mut seen = Seen::default();
        let body = Watched::new(
            StreamBody::new(futures_util::stream::iter(frames)),
            &mut seen,
        );
        assert_eq!(&body.collect().await.unwrap().to_bytes()[..], b"ab");
        assert_eq!(
            (seen.frames, seen.ended_after, seen.errors),
            (2, Some(2), 0)
        );

        let broken: Vec<Result<Frame<Bytes>, &str>> = vec![Err("cut")];
        let mut seen = Seen::default();
        let body = Watched::new(
            StreamBody::new(futures_util::stream::iter(broken)),
            &mut seen,
        );
        assert!(body.collect().await.is_err());
        assert_eq!((seen.frames, seen.ended_after, seen.errors), (0, None, 1));
    }
}
