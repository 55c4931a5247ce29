//! Server-sent events: a pure, incremental parser.
//!
//! [`SseParser::push`] takes bytes as they arrive, cut anywhere, and yields
//! whole events; [`SseParser::finish`] flushes at end of stream. Every event
//! keeps the exact bytes it came as, so an event that needs no change is
//! forwarded byte for byte. [`named_event`] and [`data_event`] write the
//! frames the proxy writes itself.

mod parser;
mod write;

pub use parser::{SseEvent, SseParser};
pub use write::{data_event, digits, is_event_name, named_event, push_number, span_of};

/// The largest event the proxy holds by default (a whole tool call can arrive in one).
pub const DEFAULT_MAX_EVENT_BYTES: usize = 4 << 20;
