//! The JSON format: tracing-subscriber's, with the event's fields
//! flattened.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::Event;
use tracing::Subscriber;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use super::{buffered, push_f64, push_timestamp};
use crate::observe::ledger;

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
}
