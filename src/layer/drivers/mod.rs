//! The turn drivers, for every dialect: a judged request's entry
//! ([`entry`]), the JSON driver for whole answers ([`json`]), the stream
//! driver ([`streamed`], whose client body is [`stream_body`]), one
//! upstream round ([`round`]), programs in a request ([`embedded`]) and the
//! request's view of the stores ([`stores`]).
//!
//! A dialect's judge decides, event by event or answer by answer, what the
//! client sees; the decisions are the turn core's ([`crate::turn`]); these
//! modules only drive them: upstream calls, backpressure, cancellation,
//! and each decision's effect (docs/streaming.md).

pub(crate) mod embedded;
pub(crate) mod entry;
pub(crate) mod json;
pub(crate) mod round;
pub(crate) mod stores;
pub(crate) mod stream_body;
pub(crate) mod streamed;
