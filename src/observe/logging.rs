//! The binary's log output: text or one JSON object a line
//! (`CODEMODE_LOG_FORMAT`), filtered by `RUST_LOG` (default `info`).
//!
//! Arguments, results, prompts and credentials are never logged at any
//! level: the proxy's own events carry counts, names and codes only.

use tracing_subscriber::EnvFilter;

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

/// Installs the process's subscriber, writing to stderr.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .init(),
    }
}
