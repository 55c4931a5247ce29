//! Server-sent events: a pure, incremental parser.
//!
//! [`SseParser::push`] takes bytes as they arrive, cut anywhere, and yields
//! whole events; [`SseParser::finish`] flushes at end of stream. Every event
//! keeps the exact bytes it came as, so an event that needs no change is
//! forwarded byte for byte.

mod parser;

pub use parser::{SseEvent, SseParser};

/// The largest event the proxy holds by default (a whole tool call can arrive in one).
pub const DEFAULT_MAX_EVENT_BYTES: usize = 4 << 20;
