//! The text format: tracing-subscriber's full format, colours and all.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use super::{buffered, push_f64, push_timestamp};
use crate::observe::ledger;

const RESET: &str = "\x1b[0m";
const DIMMED: &str = "\x1b[2m";
const BOLD: &str = "\x1b[1m";
const ITALIC: &str = "\x1b[3m";

/// `2026-01-01T00:00:00.000000Z  INFO request{request_id="..."}: target: message name=value ...`,
/// in tracing-subscriber's colours when the writer takes them.
#[derive(Default)]
pub(crate) struct TextLine;

/// A text line's fields: the message, then ` name=value` each (strings quoted).
#[derive(Default)]
pub(crate) struct TextFields;

impl<S, N> FormatEvent<S, N> for TextLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let ansi = w.has_ansi_escapes();
        buffered(&mut w, |out| {
            let meta = event.metadata();
            style(out, ansi, DIMMED);
            push_timestamp(out);
            style(out, ansi, RESET);
            out.push(' ');
            style(out, ansi, level_color(*meta.level()));
            out.push_str(level_padded(*meta.level()));
            style(out, ansi, RESET);
            out.push(' ');
            let mut spans = false;
            if let Some(()) = ledger::with_current_id(|id| {
                span_open(out, ansi, "request");
                TextVisitor::new(out, ansi).record_str_named("request_id", id);
                span_close(out, ansi);
            }) {
                spans = true;
            }
            if let Some(scope) = ctx.event_scope() {
                for span in scope.from_root() {
                    span_open(out, ansi, span.metadata().name());
                    if let Some(fields) = span.extensions().get::<FormattedFields<N>>() {
                        out.push_str(fields);
                    }
                    span_close(out, ansi);
                    spans = true;
                }
            }
            if spans {
                out.push(' ');
            }
            style(out, ansi, DIMMED);
            out.push_str(meta.target());
            style(out, ansi, RESET);
            style(out, ansi, DIMMED);
            out.push(':');
            style(out, ansi, RESET);
            out.push(' ');
            let mut fields = TextVisitor::new(out, ansi);
            event.record(&mut fields);
            fields.result?;
            out.push('\n');
            Ok(())
        })
    }
}

fn span_open(out: &mut String, ansi: bool, name: &str) {
    style(out, ansi, BOLD);
    out.push_str(name);
    style(out, ansi, RESET);
    style(out, ansi, BOLD);
    out.push('{');
    style(out, ansi, RESET);
}

fn span_close(out: &mut String, ansi: bool) {
    style(out, ansi, BOLD);
    out.push('}');
    style(out, ansi, RESET);
    style(out, ansi, DIMMED);
    out.push(':');
    style(out, ansi, RESET);
}

fn style(out: &mut String, ansi: bool, escape: &str) {
    if ansi {
        out.push_str(escape);
    }
}

/// The colour tracing-subscriber gives each level.
fn level_color(level: Level) -> &'static str {
    match level {
        Level::TRACE => "\x1b[35m",
        Level::DEBUG => "\x1b[34m",
        Level::INFO => "\x1b[32m",
        Level::WARN => "\x1b[33m",
        Level::ERROR => "\x1b[31m",
    }
}

fn level_padded(level: Level) -> &'static str {
    match level {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => " INFO",
        Level::WARN => " WARN",
        Level::ERROR => "ERROR",
    }
}

impl<'w> FormatFields<'w> for TextFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        let ansi = writer.has_ansi_escapes();
        buffered(&mut writer, |out| {
            let mut visitor = TextVisitor::new(out, ansi);
            fields.record(&mut visitor);
            visitor.result
        })
    }
}

struct TextVisitor<'o> {
    out: &'o mut String,
    ansi: bool,
    first: bool,
    result: fmt::Result,
}

impl<'o> TextVisitor<'o> {
    fn new(out: &'o mut String, ansi: bool) -> TextVisitor<'o> {
        TextVisitor {
            out,
            ansi,
            first: true,
            result: Ok(()),
        }
    }

    /// Writes ` name=` (no space before the first field), then `value`.
    fn field(&mut self, name: &str, value: impl FnOnce(&mut String) -> fmt::Result) {
        if self.result.is_err() || name.starts_with("log.") {
            return;
        }
        let name = name.strip_prefix("r#").unwrap_or(name);
        let space = !std::mem::take(&mut self.first);
        let out = &mut *self.out;
        if name == "message" {
            if space {
                out.push(' ');
            }
        } else if self.ansi {
            if space {
                out.push(' ');
            }
            style(out, true, ITALIC);
            out.push_str(name);
            style(out, true, RESET);
            style(out, true, DIMMED);
            out.push('=');
            style(out, true, RESET);
        } else {
            push_name(out, space, name);
        }
        self.result = value(out);
    }

    fn record_str_named(&mut self, name: &str, value: &str) {
        self.field(name, |out| {
            push_quoted(out, value);
            Ok(())
        });
    }
}

/// ` name=` (without the space first).
fn push_name(out: &mut String, space: bool, name: &str) {
    if space {
        out.push(' ');
    }
    out.push_str(name);
    out.push('=');
}

/// `value` quoted as `Debug` quotes it; plain text goes as it is.
fn push_quoted(out: &mut String, value: &str) {
    if value
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        out.push('"');
        out.push_str(value);
        out.push('"');
    } else {
        let _ = write!(out, "{value:?}");
    }
}

impl Visit for TextVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.field("message", |out| {
                out.push_str(value);
                Ok(())
            });
        } else {
            self.record_str_named(field.name(), value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.field(field.name(), |out| {
            out.push_str(itoa::Buffer::new().format(value));
            Ok(())
        });
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.field(field.name(), |out| {
            out.push_str(itoa::Buffer::new().format(value));
            Ok(())
        });
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.field(field.name(), |out| {
            push_f64(out, value);
            Ok(())
        });
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.field(field.name(), |out| {
            out.push_str(if value { "true" } else { "false" });
            Ok(())
        });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.field(field.name(), |out| write!(out, "{value:?}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names_are_written_with_their_space_and_equals_sign() {
        for (space, name, want) in [
            (true, "route", " route="),
            (false, "route", "route="),
            (
                true,
                &"n".repeat(60)[..],
                &format!(" {}=", "n".repeat(60))[..],
            ),
        ] {
            let mut out = String::new();
            push_name(&mut out, space, name);
            assert_eq!(out, want);
        }
    }

    #[test]
    fn text_values_are_quoted_as_debug_quotes_them() {
        for s in ["plain", "a\"b", "tab\there", "é"] {
            let mut out = String::new();
            push_quoted(&mut out, s);
            assert_eq!(out, format!("{s:?}"));
        }
    }
}
