//! Client connections that hold a slot for nothing are closed.
//!
//! A connection is busy while a request on it is being answered (its
//! response body not yet finished or dropped). Otherwise it is either
//! waiting for the first byte of its next request (closed after the
//! keep-alive time) or has started one whose head has not come whole
//! (closed after the header read time). Both HTTP/1 and HTTP/2 are covered
//! the same way, from outside hyper: the connection's reads and its
//! requests are what is observed.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use crate::body::{Polled, Watch};
use crate::config::ConnectionLimits;

/// No read is pending an answer.
const NONE: u64 = u64::MAX;

/// What one connection is doing, shared by its I/O, its requests and its watchdog.
pub(crate) struct Activity {
    start: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds since `start` when the connection last became idle.
    idle_since: AtomicU64,
    /// Milliseconds since `start` of the first read with no request in
    /// flight (a request head on its way), or [`NONE`].
    reading_since: AtomicU64,
}

/// Why a connection was closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expired {
    /// A request head did not arrive whole in time.
    HeaderRead,
    /// The connection stayed idle past the keep-alive time.
    KeepAlive,
}

impl Activity {
    pub(crate) fn new() -> Arc<Activity> {
        Arc::new(Activity {
            start: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            reading_since: AtomicU64::new(NONE),
        })
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn on_read(&self) {
        if self.in_flight.load(Ordering::Acquire) == 0 {
            let now = self.now_ms();
            let _ =
                self.reading_since
                    .compare_exchange(NONE, now, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    fn begin_request(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.reading_since.store(NONE, Ordering::Release);
        InFlight(self.clone())
    }

    /// Whether the connection should be closed now.
    pub(crate) fn expired(&self, limits: &ConnectionLimits) -> Option<Expired> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let now = self.now_ms();
        let reading = self.reading_since.load(Ordering::Acquire);
        if reading != NONE {
            let over = now.saturating_sub(reading) > limits.header_read_timeout.as_millis() as u64;
            return over.then_some(Expired::HeaderRead);
        }
        let idle = self.idle_since.load(Ordering::Acquire);
        let over = now.saturating_sub(idle) > limits.keepalive_timeout.as_millis() as u64;
        over.then_some(Expired::KeepAlive)
    }
}

/// How often the watchdog looks: often enough that a limit is kept to
/// within half of itself, rarely enough to cost nothing per connection.
pub(crate) fn check_interval(limits: &ConnectionLimits) -> Duration {
    let shortest = limits.header_read_timeout.min(limits.keepalive_timeout);
    (shortest / 2).clamp(Duration::from_millis(50), Duration::from_secs(5))
}

/// One request being answered; the connection is idle again when the last goes.
pub(crate) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.0;
        if a.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            a.idle_since.store(a.now_ms(), Ordering::Release);
        }
    }
}

pin_project! {
    /// The client socket, noting each read.
    pub(crate) struct WatchedIo<T> {
        #[pin]
        inner: T,
        activity: Arc<Activity>,
    }
}

impl<T> WatchedIo<T> {
    pub(crate) fn new(inner: T, activity: Arc<Activity>) -> WatchedIo<T> {
        WatchedIo { inner, activity }
    }
}

impl<T: AsyncRead> AsyncRead for WatchedIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        let res = this.inner.poll_read(cx, buf);
        if matches!(res, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.on_read();
        }
        res
    }
}

impl<T: AsyncWrite> AsyncWrite for WatchedIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.project().inner.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.project().inner.poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.project().inner.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Marks each request of a connection in flight until its response body ends.
#[derive(Clone)]
pub(crate) struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
    peer: Option<crate::layer::PeerAddr>,
}

impl<S> Watched<S> {
    /// `inner` on one connection, whose requests carry `peer` as an
    /// extension.
    pub(crate) fn new(
        inner: S,
        activity: Arc<Activity>,
        peer: Option<std::net::SocketAddr>,
    ) -> Watched<S> {
        Watched {
            inner,
            activity,
            peer: peer.map(crate::layer::PeerAddr),
        }
    }
}

impl<S, B, RB> tower::Service<Request<B>> for Watched<S>
where
    S: tower::Service<Request<B>, Response = Response<RB>>,
    RB: Body<Data = Bytes>,
{
    type Response = Response<WatchedBody<RB>>;
    type Error = S::Error;
    type Future = WatchedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        if let Some(peer) = self.peer {
            req.extensions_mut().insert(peer);
        }
        let token = self.activity.begin_request();
        WatchedFuture {
            inner: self.inner.call(req),
            token: Some(token),
        }
    }
}

pin_project! {
    /// A request being answered; its token moves into the response body.
    pub(crate) struct WatchedFuture<F> {
        #[pin]
        inner: F,
        token: Option<InFlight>,
    }
}

impl<F, RB, E> std::future::Future for WatchedFuture<F>
where
    F: std::future::Future<Output = Result<Response<RB>, E>>,
{
    type Output = Result<Response<WatchedBody<RB>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let res = std::task::ready!(this.inner.poll(cx))?;
        let token = this.token.take();
        Poll::Ready(Ok(res.map(|inner| crate::body::Watched::new(inner, token))))
    }
}

/// A response body that keeps its request in flight until it ends.
pub(crate) type WatchedBody<B> = crate::body::Watched<B, Option<InFlight>>;

impl<E> Watch<E> for Option<InFlight> {
    fn seen(&mut self, _polled: &Polled<E>, ended: bool) {
        if ended {
            self.take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(2),
            keepalive_timeout: Duration::from_secs(5),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_expires_after_the_keepalive_time() {
        let a = Activity::new();
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(a.expired(&limits()), None);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(a.expired(&limits()), Some(Expired::KeepAlive));
    }

    #[tokio::test(start_paused = true)]
    async fn a_half_sent_head_expires_after_the_header_time() {
        let a = Activity::new();
        a.on_read();
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(a.expired(&limits()), Some(Expired::HeaderRead));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_never_expires_and_idles_after() {
        let a = Activity::new();
        a.on_read();
        let token = a.begin_request();
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(a.expired(&limits()), None);
        drop(token);
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(a.expired(&limits()), None);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(a.expired(&limits()), Some(Expired::KeepAlive));
    }
}
