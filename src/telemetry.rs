//! Traces: the proxy's spans, named after the OpenTelemetry GenAI semantic
//! conventions, and (cargo feature `otel`) their export over OTLP/HTTP.
//!
//! The spans are plain `tracing` spans at `debug` with target
//! [`TARGET`], kept out of the log lines (a log line stays in its
//! request's span, [`crate::observe::logging::layer`]); `otel.name` and
//! `otel.kind` fields give them their OpenTelemetry names and kinds as
//! `tracing-opentelemetry` reads them:
//!
//! - `chat {model}` (client) per upstream call of a chat route, every
//!   round: repairs, rounds after programs and passthrough alike. It lasts
//!   until the upstream body ends, a stream's included.
//! - `execute_tool run_code` per run of a program (its start and each
//!   resume), with a child `execute_tool {name}` per nested call handed to
//!   the client.
//! - `codemode.denial` events in the round that made a denied call.
//!
//! No span or event carries arguments, results, prompts or credentials.
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! let otel = codemode_proxy::telemetry::otel_layer(|k| std::env::var(k).ok())
//!     .expect("valid OTEL_* variables");
//! let (layer, guard) = otel.unzip();
//! tracing_subscriber::registry().with(layer).init();
//! // ... serve; dropping `guard` flushes what is left.
//! drop(guard);
//! ```
//!
//! One file per kind of span: `round` (upstream calls), `program`
//! (programs and denials); `otlp` holds the export and its variables.

mod otlp;
mod program;
mod round;

pub use otlp::{otel_layer, OtelGuard};
pub(crate) use program::{denied, handed_out, program_ended, program_span};
pub(crate) use round::Round;

/// The target of every span and event this module makes.
pub const TARGET: &str = "codemode::trace";
