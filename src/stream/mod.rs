//! Streaming interception (design.md section 6, "Streaming").
//!
//! [`judge`] decides, event by event, what the client sees; [`body`] feeds
//! it from the upstream and runs repair rounds inside the same client
//! stream. The SSE parser lives in [`crate::sse`], the classification rule
//! in [`crate::classify`]: this module only applies them.

mod accumulate;
mod body;
mod calls;
pub mod judge;

pub use body::{intercept_stream, Next, RepairFuture, RepairTarget, RoundJudge};
pub use judge::{HeldProgram, StreamJudge};

#[cfg(test)]
mod stream_fixtures;
#[cfg(test)]
mod stream_props;
