//! How a log line is spelled: tracing-subscriber's full text format or its
//! flattened JSON format, with the request's id, written without the
//! general formatting machinery.
//!
//! Every request writes an access line of twenty fields; spelled through
//! `core::fmt` and tracing-subscriber's visitors (a styled name, an `=` and
//! a `Debug` value per field) it cost more than the rest of a request's
//! handling. Here a field is a few direct writes.
//!
//! The request id comes from the request's ledger, current while code runs
//! for the request (see [`super::logging`]).

use std::cell::RefCell;
use std::fmt;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use super::ledger;

const RESET: &str = "\x1b[0m";
const DIMMED: &str = "\x1b[2m";
const BOLD: &str = "\x1b[1m";
const ITALIC: &str = "\x1b[3m";

// ---- Text ----

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
        let meta = event.metadata();
        style(&mut w, ansi, DIMMED)?;
        write_timestamp(&mut w)?;
        style(&mut w, ansi, RESET)?;
        w.write_char(' ')?;
        style(&mut w, ansi, level_color(*meta.level()))?;
        w.write_str(level_padded(*meta.level()))?;
        style(&mut w, ansi, RESET)?;
        w.write_char(' ')?;
        let mut spans = false;
        if let Some(written) = ledger::with_current_id(|id| {
            span_open(&mut w, ansi, "request")?;
            let mut fields = TextVisitor::new(w.by_ref(), ansi);
            fields.record_str_named("request_id", id);
            fields.result?;
            span_close(&mut w, ansi)
        }) {
            written?;
            spans = true;
        }
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                span_open(&mut w, ansi, span.metadata().name())?;
                if let Some(fields) = span.extensions().get::<FormattedFields<N>>() {
                    w.write_str(fields)?;
                }
                span_close(&mut w, ansi)?;
                spans = true;
            }
        }
        if spans {
            w.write_char(' ')?;
        }
        style(&mut w, ansi, DIMMED)?;
        w.write_str(meta.target())?;
        style(&mut w, ansi, RESET)?;
        style(&mut w, ansi, DIMMED)?;
        w.write_char(':')?;
        style(&mut w, ansi, RESET)?;
        w.write_char(' ')?;
        ctx.format_fields(w.by_ref(), event)?;
        w.write_char('\n')
    }
}

/// The time as tracing-subscriber's `SystemTime` spells it
/// (`2026-01-01T00:00:00.000000Z`); the part up to the second is spelled
/// once a second per thread.
fn write_timestamp(w: &mut Writer<'_>) -> fmt::Result {
    thread_local! {
        static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let (secs, micros) = (now.as_secs(), now.subsec_micros());
    SECOND.with(|second| {
        let mut second = second.borrow_mut();
        if second.0 != secs {
            *second = (secs, date_and_second(secs));
        }
        w.write_str(&second.1)
    })?;
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(micros);
    w.write_str(&"000000"[digits.len().min(6)..])?;
    w.write_str(digits)?;
    w.write_char('Z')
}

/// `YYYY-MM-DDThh:mm:ss.` of `secs` since the Unix epoch, UTC (the civil
/// calendar from a day count, as in Howard Hinnant's `civil_from_days`).
fn date_and_second(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let of_day = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.",
        of_day / 3_600,
        of_day / 60 % 60,
        of_day % 60
    )
}

fn span_open(w: &mut Writer<'_>, ansi: bool, name: &str) -> fmt::Result {
    style(w, ansi, BOLD)?;
    w.write_str(name)?;
    style(w, ansi, RESET)?;
    style(w, ansi, BOLD)?;
    w.write_char('{')?;
    style(w, ansi, RESET)
}

fn span_close(w: &mut Writer<'_>, ansi: bool) -> fmt::Result {
    style(w, ansi, BOLD)?;
    w.write_char('}')?;
    style(w, ansi, RESET)?;
    style(w, ansi, DIMMED)?;
    w.write_char(':')?;
    style(w, ansi, RESET)
}

fn style(w: &mut Writer<'_>, ansi: bool, escape: &str) -> fmt::Result {
    if ansi {
        w.write_str(escape)?;
    }
    Ok(())
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
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let ansi = writer.has_ansi_escapes();
        let mut visitor = TextVisitor::new(writer, ansi);
        fields.record(&mut visitor);
        visitor.result
    }
}

struct TextVisitor<'w> {
    w: Writer<'w>,
    ansi: bool,
    first: bool,
    result: fmt::Result,
}

impl<'w> TextVisitor<'w> {
    fn new(w: Writer<'w>, ansi: bool) -> TextVisitor<'w> {
        TextVisitor {
            w,
            ansi,
            first: true,
            result: Ok(()),
        }
    }

    /// Writes ` name=` (no space before the first field), then `value`.
    fn field(&mut self, name: &str, value: impl FnOnce(&mut Writer<'w>) -> fmt::Result) {
        if self.result.is_err() || name.starts_with("log.") {
            return;
        }
        let name = name.strip_prefix("r#").unwrap_or(name);
        let space = !std::mem::take(&mut self.first);
        self.result = (|| {
            if name == "message" {
                if space {
                    self.w.write_char(' ')?;
                }
            } else if self.ansi {
                if space {
                    self.w.write_char(' ')?;
                }
                style(&mut self.w, self.ansi, ITALIC)?;
                self.w.write_str(name)?;
                style(&mut self.w, self.ansi, RESET)?;
                style(&mut self.w, self.ansi, DIMMED)?;
                self.w.write_char('=')?;
                style(&mut self.w, self.ansi, RESET)?;
            } else {
                write_name(&mut self.w, space, name)?;
            }
            value(&mut self.w)
        })();
    }

    fn record_str_named(&mut self, name: &str, value: &str) {
        self.field(name, |w| write_quoted(w, value));
    }
}

/// ` name=` (without the space first).
fn write_name(w: &mut Writer<'_>, space: bool, name: &str) -> fmt::Result {
    if space {
        w.write_char(' ')?;
    }
    w.write_str(name)?;
    w.write_char('=')
}

/// `value` quoted as `Debug` quotes it; plain text goes as it is.
fn write_quoted(w: &mut Writer<'_>, value: &str) -> fmt::Result {
    if value
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        w.write_char('"')?;
        w.write_str(value)?;
        w.write_char('"')
    } else {
        write!(w, "{value:?}")
    }
}

impl Visit for TextVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.field("message", |w| w.write_str(value));
        } else {
            self.record_str_named(field.name(), value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.field(field.name(), |w| {
            w.write_str(itoa::Buffer::new().format(value))
        });
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.field(field.name(), |w| {
            w.write_str(itoa::Buffer::new().format(value))
        });
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.field(field.name(), |w| {
            w.write_str(if value { "true" } else { "false" })
        });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.field(field.name(), |w| write!(w, "{value:?}"));
    }
}

// ---- JSON ----

/// `{"timestamp":...,"level":...,<fields>,"target":...,"span":{"request_id":...,"name":"request"}}`:
/// tracing-subscriber's JSON format with the event's fields flattened and
/// the current span (the request's, holding its id) under `span`.
#[derive(Default)]
pub(crate) struct JsonLine;

/// A JSON line's fields: `"name":value` pairs, comma-separated.
#[derive(Default)]
pub(crate) struct JsonFields;

impl<S, N> FormatEvent<S, N> for JsonLine
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
        let meta = event.metadata();
        w.write_str("{\"timestamp\":\"")?;
        write_timestamp(&mut w)?;
        w.write_str("\",\"level\":\"")?;
        w.write_str(meta.level().as_str())?;
        w.write_char('"')?;
        let mut fields = JsonVisitor::new(w.by_ref(), false);
        event.record(&mut fields);
        fields.result?;
        w.write_str(",\"target\":")?;
        write_json_str(&mut w, meta.target())?;
        let current = ctx.lookup_current();
        let id = ledger::with_current_id(|id| {
            let mut quoted = String::with_capacity(id.len() + 2);
            write_json_str(&mut Writer::new(&mut quoted), id).map(|()| quoted)
        })
        .transpose()?;
        if current.is_some() || id.is_some() {
            w.write_str(",\"span\":{")?;
            if let Some(id) = &id {
                w.write_str("\"request_id\":")?;
                w.write_str(id)?;
                w.write_char(',')?;
            }
            let name = match &current {
                Some(span) => {
                    if let Some(fields) = span.extensions().get::<FormattedFields<N>>() {
                        if !fields.is_empty() {
                            w.write_str(fields)?;
                            w.write_char(',')?;
                        }
                    }
                    span.metadata().name()
                }
                None => "request",
            };
            w.write_str("\"name\":")?;
            write_json_str(&mut w, name)?;
            w.write_char('}')?;
        }
        w.write_str("}\n")
    }
}

impl<'w> FormatFields<'w> for JsonFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut visitor = JsonVisitor::new(writer, true);
        fields.record(&mut visitor);
        visitor.result
    }
}

struct JsonVisitor<'w> {
    w: Writer<'w>,
    /// No comma before the next pair.
    first: bool,
    result: fmt::Result,
}

impl<'w> JsonVisitor<'w> {
    /// `first`: the pairs open an object (else they follow earlier ones).
    fn new(w: Writer<'w>, first: bool) -> JsonVisitor<'w> {
        JsonVisitor {
            w,
            first,
            result: Ok(()),
        }
    }

    fn pair(&mut self, name: &str, value: impl FnOnce(&mut Writer<'w>) -> fmt::Result) {
        if self.result.is_err() || name.starts_with("log.") {
            return;
        }
        let name = name.strip_prefix("r#").unwrap_or(name);
        self.result = (|| {
            if !std::mem::take(&mut self.first) {
                self.w.write_char(',')?;
            }
            write_json_str(&mut self.w, name)?;
            self.w.write_char(':')?;
            value(&mut self.w)
        })();
    }
}

/// `value` as a JSON string.
fn write_json_str(w: &mut Writer<'_>, value: &str) -> fmt::Result {
    if value
        .bytes()
        .all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b != 0x7f)
    {
        w.write_char('"')?;
        w.write_str(value)?;
        w.write_char('"')
    } else {
        let quoted = serde_json::to_string(value).map_err(|_| fmt::Error)?;
        w.write_str(&quoted)
    }
}

impl Visit for JsonVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.pair(field.name(), |w| write_json_str(w, value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.pair(field.name(), |w| {
            w.write_str(itoa::Buffer::new().format(value))
        });
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.pair(field.name(), |w| {
            w.write_str(itoa::Buffer::new().format(value))
        });
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.pair(field.name(), |w| {
            if value.is_finite() {
                write!(w, "{value:?}")
            } else {
                w.write_str("null")
            }
        });
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.pair(field.name(), |w| {
            w.write_str(if value { "true" } else { "false" })
        });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        self.pair(field.name(), |w| write_json_str(w, &text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(value: &str) -> String {
        let mut out = String::new();
        write_json_str(&mut Writer::new(&mut out), value).unwrap();
        out
    }

    #[test]
    fn json_strings_round_trip() {
        for s in [
            "plain",
            "a\"b",
            "back\\slash",
            "new\nline",
            "\u{7f}del",
            "é ü",
        ] {
            let out = json(s);
            assert_eq!(serde_json::from_str::<String>(&out).unwrap(), s, "{out}");
        }
    }

    #[test]
    fn timestamps_are_spelled_as_rfc_3339_utc() {
        for (secs, text) in [
            (0, "1970-01-01T00:00:00."),
            (951_782_400, "2000-02-29T00:00:00."),
            (1_709_164_800, "2024-02-29T00:00:00."),
            (1_796_068_257, "2026-11-30T19:50:57."),
            (4_102_444_799, "2099-12-31T23:59:59."),
        ] {
            assert_eq!(date_and_second(secs), text);
        }
        let mut out = String::new();
        write_timestamp(&mut Writer::new(&mut out)).unwrap();
        assert_eq!(out.len(), "2026-11-30T19:50:57.123456Z".len(), "{out}");
        assert!(out.ends_with('Z') && out.as_bytes()[19] == b'.', "{out}");
    }

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
            write_name(&mut Writer::new(&mut out), space, name).unwrap();
            assert_eq!(out, want);
        }
    }

    #[test]
    fn text_values_are_quoted_as_debug_quotes_them() {
        for s in ["plain", "a\"b", "tab\there", "é"] {
            let mut out = String::new();
            write_quoted(&mut Writer::new(&mut out), s).unwrap();
            assert_eq!(out, format!("{s:?}"));
        }
    }
}
