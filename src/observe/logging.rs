//! The binary's log output: text or one JSON object a line
//! (`CODEMODE_LOG_FORMAT`), filtered by `RUST_LOG` (default `info`).
//!
//! Arguments, results, prompts and credentials are never logged at any
//! level: the proxy's own events carry counts, names and codes only.

use tracing_subscriber::filter::{filter_fn, FilterExt};
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines; a request's span prefixes its lines as
    /// `request{request_id=...}`.
    #[default]
    Text,
    /// One JSON object a line; the request's span fields (`request_id`)
    /// are listed under `span` on every line of the request.
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
/// The trace spans (`chat {model}`, `execute_tool ...`) are for export
/// only: a log line's span stays the request's, so it carries its id.
pub fn layer(format: LogFormat) -> Box<dyn Layer<Registry> + Send + Sync> {
    let env = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let filter = env.and(filter_fn(|meta| {
        !(meta.is_span() && meta.target() == crate::telemetry::TARGET)
    }));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    match format {
        LogFormat::Text => fmt.with_filter(filter).boxed(),
        LogFormat::Json => fmt
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_filter(filter)
            .boxed(),
    }
}
