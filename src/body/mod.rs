//! The body type the proxy speaks on both sides.

use std::fmt;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};

/// Any error a body or the upstream service can fail with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A boxed error behind a named type.
///
/// Naming it keeps the trait object out of the body and service types that
/// cross `.await` points: with `Box<dyn Error>` there, rustc cannot prove the
/// request futures `Send` (rust-lang/rust#102211).
#[derive(Debug)]
pub struct BoxedError(BoxError);

impl BoxedError {
    /// Wraps any error.
    pub fn new(e: impl Into<BoxError>) -> BoxedError {
        BoxedError(e.into())
    }

    /// The wrapped error.
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl fmt::Display for BoxedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for BoxedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// The body of every request the proxy sends upstream and every response it returns.
pub type ProxyBody = UnsyncBoxBody<Bytes, BoxedError>;

/// A body holding `bytes`.
pub fn full(bytes: impl Into<Bytes>) -> ProxyBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// Boxes any body without copying its frames.
pub fn boxed<B>(body: B) -> ProxyBody
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    body.map_err(BoxedError::new).boxed_unsync()
}

mod idle;
mod sse_tail;
mod watched;

pub use idle::{IdleBody, UpstreamIdle};
pub use sse_tail::SseErrorTail;
pub use watched::{Polled, Watch, Watched};
