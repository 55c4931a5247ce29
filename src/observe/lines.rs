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
use std::fmt::{self, Write as _};

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

/// Runs `line` on a reused per-thread buffer, then hands the result to `w`
/// in one write: `w` is a `dyn fmt::Write`, and a line spelled straight
/// into it pays a dynamic call for each of its hundred-odd pieces.
fn buffered(w: &mut Writer<'_>, line: impl FnOnce(&mut String) -> fmt::Result) -> fmt::Result {
    thread_local! {
        static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
    }
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut out) => {
            out.clear();
            line(&mut out)?;
            w.write_str(&out)?;
            // One huge line does not pin its buffer for the thread's life.
            if out.capacity() > 64 << 10 {
                *out = String::new();
            }
            Ok(())
        }
        // A value's `Debug` that logs: its line gets its own buffer.
        Err(_) => {
            let mut out = String::new();
            line(&mut out)?;
            w.write_str(&out)
        }
    })
}

/// The time as tracing-subscriber's `SystemTime` spells it
/// (`2026-01-01T00:00:00.000000Z`); the part up to the second is spelled
/// once a second per thread.
fn push_timestamp(out: &mut String) {
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
        out.push_str(&second.1);
    });
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(micros);
    out.push_str(&"000000"[digits.len().min(6)..]);
    out.push_str(digits);
    out.push('Z');
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

/// `value` as `Debug` spells an `f64`. The proxy's own floats are
/// milliseconds to the microsecond, spelled here without `core::fmt`'s
/// shortest-digits search.
fn push_f64(out: &mut String, value: f64) {
    // A value that is exactly the double nearest m/1000 for an integer m
    // below 2^40 is spelled by Debug as m/1000's decimal digits: the doubles
    // there are far closer together than 0.001, so no shorter decimal
    // names the same one.
    let thousandths = (value * 1000.0).round();
    if (0.0..(1u64 << 40) as f64).contains(&thousandths)
        && thousandths / 1000.0 == value
        && value.is_sign_positive()
        && (value == 0.0 || value >= 1e-4)
    {
        let m = thousandths as u64;
        out.push_str(itoa::Buffer::new().format(m / 1000));
        out.push('.');
        let frac = m % 1000;
        let digits = [
            b'0' + (frac / 100) as u8,
            b'0' + (frac / 10 % 10) as u8,
            b'0' + (frac % 10) as u8,
        ];
        let keep = match digits {
            [_, b'0', b'0'] => 1,
            [_, _, b'0'] => 2,
            _ => 3,
        };
        out.push_str(std::str::from_utf8(&digits[..keep]).unwrap_or("0"));
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
        buffered(&mut w, |out| {
            let meta = event.metadata();
            out.push_str("{\"timestamp\":\"");
            push_timestamp(out);
            out.push_str("\",\"level\":\"");
            out.push_str(meta.level().as_str());
            out.push('"');
            let mut fields = JsonVisitor::new(out, false);
            event.record(&mut fields);
            fields.result?;
            out.push_str(",\"target\":");
            push_json_str(out, meta.target());
            let current = ctx.lookup_current();
            let mut span_open = false;
            ledger::with_current_id(|id| {
                out.push_str(",\"span\":{\"request_id\":");
                push_json_str(out, id);
                out.push(',');
                span_open = true;
            });
            if current.is_some() && !span_open {
                out.push_str(",\"span\":{");
                span_open = true;
            }
            if span_open {
                let name = match &current {
                    Some(span) => {
                        if let Some(fields) = span.extensions().get::<FormattedFields<N>>() {
                            if !fields.is_empty() {
                                out.push_str(fields);
                                out.push(',');
                            }
                        }
                        span.metadata().name()
                    }
                    None => "request",
                };
                out.push_str("\"name\":");
                push_json_str(out, name);
                out.push('}');
            }
            out.push_str("}\n");
            Ok(())
        })
    }
}

impl<'w> FormatFields<'w> for JsonFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        buffered(&mut writer, |out| {
            let mut visitor = JsonVisitor::new(out, true);
            fields.record(&mut visitor);
            visitor.result
        })
    }
}

struct JsonVisitor<'o> {
    out: &'o mut String,
    /// No comma before the next pair.
    first: bool,
    result: fmt::Result,
}

impl<'o> JsonVisitor<'o> {
    /// `first`: the pairs open an object (else they follow earlier ones).
    fn new(out: &'o mut String, first: bool) -> JsonVisitor<'o> {
        JsonVisitor {
            out,
            first,
            result: Ok(()),
        }
    }

    fn pair(&mut self, name: &str, value: impl FnOnce(&mut String)) {
        if self.result.is_err() || name.starts_with("log.") {
            return;
        }
        let name = name.strip_prefix("r#").unwrap_or(name);
        if !std::mem::take(&mut self.first) {
            self.out.push(',');
        }
        push_json_str(self.out, name);
        self.out.push(':');
        value(self.out);
    }
}

/// `value` as a JSON string.
fn push_json_str(out: &mut String, value: &str) {
    if value
        .bytes()
        .all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b != 0x7f)
    {
        out.push('"');
        out.push_str(value);
        out.push('"');
    } else {
        // Serializing a str cannot fail.
        out.push_str(&serde_json::to_string(value).unwrap_or_default());
    }
}

impl Visit for JsonVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.pair(field.name(), |out| push_json_str(out, value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.pair(field.name(), |out| {
            out.push_str(itoa::Buffer::new().format(value))
        });
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.pair(field.name(), |out| {
            out.push_str(itoa::Buffer::new().format(value))
        });
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.pair(field.name(), |out| {
            if value.is_finite() {
                push_f64(out, value)
            } else {
                out.push_str("null")
            }
        });
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.pair(field.name(), |out| {
            out.push_str(if value { "true" } else { "false" })
        });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let mut text = String::new();
        if write!(text, "{value:?}").is_err() {
            self.result = Err(fmt::Error);
            return;
        }
        self.pair(field.name(), |out| push_json_str(out, &text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(value: &str) -> String {
        let mut out = String::new();
        push_json_str(&mut out, value);
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
        push_timestamp(&mut out);
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

    #[test]
    fn floats_are_spelled_as_debug_spells_them() {
        let mut values = vec![
            0.0,
            0.001,
            0.906,
            1.0,
            1.5,
            12.34,
            999.999,
            1e-4,
            5e-5,
            1e-7,
            0.1 + 0.2,
            1e9,
            1e12,
            1e16,
            1e17,
            1.0 / 3.0,
            -0.5,
            -0.0,
            f64::MAX,
            f64::MIN_POSITIVE,
        ];
        // Every microsecond count as the ledger turns it into milliseconds.
        values.extend((0..200_000u64).step_by(7).map(|us| us as f64 / 1000.0));
        values.extend((0..40).map(|shift| (1u64 << shift) as f64 / 1000.0 + 0.001));
        for v in values {
            let mut out = String::new();
            push_f64(&mut out, v);
            assert_eq!(out, format!("{v:?}"), "{v}");
        }
    }
}
