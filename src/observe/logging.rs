//! The binary's log output: text or one JSON object a line
//! (`CODEMODE_LOG_FORMAT`), filtered by `RUST_LOG` (default `info`).
//!
//! Arguments, results, prompts and credentials are never logged at any
//! level: the proxy's own events carry counts, names and codes only.
//!
//! A line written for a request carries its id, read from the request's
//! ledger (current for the handler and every poll of its body) when the
//! line is written. No span is built per request for it: a span costs its
//! creation, field formatting and an enter per poll on every request,
//! where the ledger lookup costs only the lines actually written.

use std::io::IsTerminal;

use tracing_subscriber::filter::{filter_fn, FilterExt};
use tracing_subscriber::{EnvFilter, Layer, Registry};

pub use super::log_writer::flush;

use super::lines::{JsonFields, JsonLine, TextFields, TextLine};

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines; a request's lines start with
    /// `request{request_id="..."}:`.
    #[default]
    Text,
    /// One JSON object a line; a request's lines list its id under
    /// `span` (`"span": {"request_id": ..., "name": "request"}`).
    Json,
}

impl LogFormat {
    /// Parses `text` or `json`.
    pub fn parse(v: &str) -> Result<LogFormat, String> {
        match v.trim() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!(
                "`{other}` is not a log format; use `text` or `json`"
            )),
        }
    }
}

/// The process's log layer, writing to stderr and filtered by `RUST_LOG`
/// on its own, so other layers (trace export) see every span whatever the
/// log level.
///
/// The trace spans (`chat {model}`, `execute_tool ...`) and the request
/// span are for export only: this layer never sees them, so without an
/// exporter they are never built.
///
/// Lines are written in batches (`log_writer`): call [`flush`]
/// before the process exits.
pub fn layer(format: LogFormat) -> Box<dyn Layer<Registry> + Send + Sync> {
    // Colours only for a terminal: a file or a collector gets plain text.
    let ansi = std::io::stderr().is_terminal();
    layer_to(format, super::log_writer::batched_stderr(), ansi)
}

/// The same lines as [`layer`], written to `file` instead of stderr
/// (`codemode-proxy run`: the agent keeps the terminal), without colours.
pub fn file_layer(
    format: LogFormat,
    file: std::fs::File,
) -> Box<dyn Layer<Registry> + Send + Sync> {
    layer_to(format, std::sync::Mutex::new(file), false)
}

fn layer_to<W>(format: LogFormat, writer: W, ansi: bool) -> Box<dyn Layer<Registry> + Send + Sync>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let env = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let filter = env.and(filter_fn(|meta| {
        !(meta.is_span()
            && (meta.target() == crate::telemetry::TARGET
                || meta.target() == super::REQUEST_TARGET))
    }));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi);
    match format {
        LogFormat::Text => fmt
            .event_format(TextLine)
            .fmt_fields(TextFields)
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => fmt
            .event_format(JsonLine)
            .fmt_fields(JsonFields)
            .with_filter(filter)
            .boxed(),
    }
}
