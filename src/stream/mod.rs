//! Streaming interception (docs/streaming.md), for every
//! dialect.
//!
//! A dialect's [`RoundJudge`] decides, event by event, what the client
//! sees; [`body`] feeds it from the upstream with backpressure and
//! cancellation, and runs the rounds it asks for (repairs, programs)
//! inside the same client stream. The SSE parser lives in [`crate::sse`],
//! the decisions in [`crate::turn`]: this module only drives them.

mod body;

pub use crate::turn::HeldProgram;
pub use body::{intercept_stream, Next, RepairFuture, RepairTarget, StreamLimits};
