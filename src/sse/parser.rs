//! The SSE parser (WHATWG HTML, "event stream interpretation").
//!
//! What the judge reads is what a client reads: one leading UTF-8 BOM is
//! dropped, as spec-following clients drop it, and a line whose field name
//! the spec does not know (`Data:`, ` data:`) is left out of the event's
//! bytes, so a lenient client cannot read a call out of a line the judge
//! skipped.

use bytes::{Bytes, BytesMut};

/// One event: its fields and the bytes it arrived as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The event's bytes, through its terminating blank line, less any line
    /// with a field name the spec does not know.
    pub raw: Bytes,
    /// The `event:` field.
    pub event: Option<String>,
    /// The `data:` lines joined by `\n`; `None` when the event has none
    /// (comments, keep-alives, stray blank lines).
    pub data: Option<String>,
    /// The `id:` field.
    pub id: Option<String>,
    /// The `retry:` field.
    pub retry: Option<u64>,
}

impl SseEvent {
    /// Whether this is the OpenAI end-of-stream sentinel `data: [DONE]`.
    pub fn is_done(&self) -> bool {
        self.data.as_deref().is_some_and(|d| d.trim() == "[DONE]")
    }
}

/// An event larger than the parser holds.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("an upstream event exceeded {limit} bytes")]
pub struct SseError {
    /// The cap that was exceeded.
    pub limit: usize,
}

#[derive(Default)]
struct Fields {
    event: Option<String>,
    data: Option<String>,
    id: Option<String>,
    retry: Option<u64>,
    /// Where in the event's bytes lines with an unknown field name are.
    unknown: Vec<std::ops::Range<usize>>,
}

/// The byte order mark a stream may start with.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// An incremental parser; feeding the same bytes cut anywhere yields the same events.
pub struct SseParser {
    /// Bytes of the event being read (from its first byte).
    buf: BytesMut,
    /// How far into `buf` lines have been parsed.
    scanned: usize,
    fields: Fields,
    max_event: usize,
    /// Whether the stream's first bytes were checked for a BOM.
    started: bool,
}

impl SseParser {
    /// A parser holding events of at most `max_event` bytes.
    pub fn new(max_event: usize) -> SseParser {
        SseParser {
            buf: BytesMut::new(),
            scanned: 0,
            fields: Fields::default(),
            max_event,
            started: false,
        }
    }

    /// Feeds `bytes`, appending every event they complete to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        self.buf.extend_from_slice(bytes);
        if !self.started {
            if self.buf.len() < BOM.len() && BOM.starts_with(&self.buf) {
                return Ok(()); // Maybe the start of a BOM: wait for more.
            }
            self.drop_bom();
        }
        self.parse_lines(false, out);
        if self.buf.len() > self.max_event {
            return Err(SseError {
                limit: self.max_event,
            });
        }
        Ok(())
    }

    /// At end of stream: an event missing its blank line is still yielded,
    /// so nothing the upstream sent escapes judging.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if !self.started {
            self.drop_bom();
        }
        self.parse_lines(true, out);
        if !self.buf.is_empty() {
            if self.scanned < self.buf.len() {
                // A last line without any terminator.
                let (start, end) = (self.scanned, self.buf.len());
                self.field(start, end, end);
                self.scanned = self.buf.len();
            }
            // The event's bytes may go on to a client that reads more after
            // them (a repair round, the proxy's own events): they must end
            // the event, or its last line would join the next one. An extra
            // blank line is an empty event, which every client ignores.
            self.buf.extend_from_slice(b"\n\n");
            self.dispatch(self.buf.len(), out);
        }
    }

    fn parse_lines(&mut self, at_end: bool, out: &mut Vec<SseEvent>) {
        loop {
            let rest = &self.buf[self.scanned..];
            let Some(pos) = rest.iter().position(|&b| b == b'\n' || b == b'\r') else {
                return;
            };
            let term_len = if rest[pos] == b'\r' {
                match rest.get(pos + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    // A CR as the last byte may be the first half of CRLF.
                    None if at_end => 1,
                    None => return,
                }
            } else {
                1
            };
            let line_start = self.scanned;
            let line_end = line_start + pos;
            self.scanned = line_end + term_len;
            if pos == 0 {
                self.dispatch(self.scanned, out);
            } else {
                self.field(line_start, line_end, self.scanned);
            }
        }
    }

    /// The first bytes are checked once: a BOM there is no part of any event.
    fn drop_bom(&mut self) {
        self.started = true;
        if self.buf.starts_with(BOM) {
            let _ = self.buf.split_to(BOM.len());
        }
    }

    /// The line at `start..end` of the event's bytes, its terminator ending at `through`.
    fn field(&mut self, start: usize, end: usize, through: usize) {
        let line = self.buf[start..end].to_vec();
        let line = line.as_slice();
        if line.first() == Some(&b':') {
            return; // A comment: kept in `raw`, no field.
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match name {
            b"data" => match &mut self.fields.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(&value);
                }
                None => self.fields.data = Some(value.into_owned()),
            },
            b"event" => self.fields.event = Some(value.into_owned()),
            b"id" if !value.contains('\0') => self.fields.id = Some(value.into_owned()),
            b"id" => {}
            b"retry" => self.fields.retry = value.parse().ok(),
            _ => self.fields.unknown.push(start..through),
        }
    }

    fn dispatch(&mut self, end: usize, out: &mut Vec<SseEvent>) {
        let whole = self.buf.split_to(end).freeze();
        self.scanned = 0;
        let f = std::mem::take(&mut self.fields);
        let raw = if f.unknown.is_empty() {
            whole
        } else {
            let mut kept = Vec::with_capacity(whole.len());
            let mut at = 0;
            for line in &f.unknown {
                kept.extend_from_slice(&whole[at..line.start]);
                at = line.end;
            }
            kept.extend_from_slice(&whole[at..]);
            Bytes::from(kept)
        };
        out.push(SseEvent {
            raw,
            event: f.event,
            data: f.data,
            id: f.id,
            retry: f.retry,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_whole(input: &[u8]) -> Vec<SseEvent> {
        let mut p = SseParser::new(1 << 20);
        let mut out = Vec::new();
        p.push(input, &mut out).unwrap();
        p.finish(&mut out);
        out
    }

    fn parse_cut(input: &[u8], cut: usize) -> Vec<SseEvent> {
        let mut p = SseParser::new(1 << 20);
        let mut out = Vec::new();
        p.push(&input[..cut], &mut out).unwrap();
        p.push(&input[cut..], &mut out).unwrap();
        p.finish(&mut out);
        out
    }

    const MIXED: &[u8] = b": OPENROUTER PROCESSING\n\ndata: {\"a\":1}\r\n\r\ndata:{\"b\":2}\r\revent: error\ndata: x\ndata: y\nid: 7\nretry: 300\n\ndata: [DONE]\n\n";

    #[test]
    fn fields_line_endings_and_comments() {
        let ev = parse_whole(MIXED);
        assert_eq!(ev.len(), 5);
        assert_eq!(ev[0].data, None);
        assert_eq!(&ev[0].raw[..], b": OPENROUTER PROCESSING\n\n");
        assert_eq!(ev[1].data.as_deref(), Some("{\"a\":1}"));
        assert_eq!(
            ev[2].data.as_deref(),
            Some("{\"b\":2}"),
            "data: without a space, bare CR"
        );
        assert_eq!(ev[3].event.as_deref(), Some("error"));
        assert_eq!(ev[3].data.as_deref(), Some("x\ny"));
        assert_eq!(ev[3].id.as_deref(), Some("7"));
        assert_eq!(ev[3].retry, Some(300));
        assert!(ev[4].is_done());
    }

    #[test]
    fn raw_bytes_reassemble_the_input() {
        let ev = parse_whole(MIXED);
        let joined: Vec<u8> = ev.iter().flat_map(|e| e.raw.to_vec()).collect();
        assert_eq!(joined, MIXED);
    }

    #[test]
    fn any_cut_yields_the_same_events() {
        let whole = parse_whole(MIXED);
        for cut in 0..=MIXED.len() {
            assert_eq!(parse_cut(MIXED, cut), whole, "cut at {cut}");
        }
    }

    #[test]
    fn byte_at_a_time_yields_the_same_events() {
        let mut p = SseParser::new(1 << 20);
        let mut out = Vec::new();
        for b in MIXED {
            p.push(&[*b], &mut out).unwrap();
        }
        p.finish(&mut out);
        assert_eq!(out, parse_whole(MIXED));
    }

    #[test]
    fn an_unterminated_last_event_is_flushed_and_terminated_at_finish() {
        let ev = parse_whole(b"data: {\"x\":1}\n\ndata: tail");
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[1].data.as_deref(), Some("tail"));
        // Forwarded as it is, the tail would join whatever the client reads next.
        assert_eq!(&ev[1].raw[..], b"data: tail\n\n");
        let ev = parse_whole(b"data: half-ended\n");
        assert_eq!(&ev[0].raw[..], b"data: half-ended\n\n\n");
    }

    #[test]
    fn stray_blank_lines_are_empty_events_that_keep_their_bytes() {
        let ev = parse_whole(b"\n\ndata: a\n\n");
        assert_eq!(ev.len(), 3);
        assert_eq!(ev[0].data, None);
        assert_eq!(&ev[0].raw[..], b"\n");
    }

    #[test]
    fn a_leading_bom_is_dropped_at_any_cut() {
        let input = b"\xEF\xBB\xBFdata: {\"a\":1}\n\ndata: b\n\n";
        for cut in 0..=input.len() {
            let ev = parse_cut(input, cut);
            assert_eq!(ev.len(), 2, "cut at {cut}");
            assert_eq!(ev[0].data.as_deref(), Some("{\"a\":1}"), "cut at {cut}");
            assert_eq!(&ev[0].raw[..], b"data: {\"a\":1}\n\n", "cut at {cut}");
        }
        // Only the first: a BOM later is data.
        let ev = parse_whole(b"data: a\n\n\xEF\xBB\xBFdata: b\n\n");
        assert_eq!(ev[1].data, None);
        // A stream that is only part of a BOM is a line with no field.
        assert_eq!(parse_whole(b"\xEF\xBB")[0].data, None);
    }

    #[test]
    fn lines_with_unknown_field_names_are_left_out_of_the_bytes() {
        let input = b"Data: {\"tool_calls\":1}\n data: x\ndata: {\"a\":1}\nfoo\n\n";
        for cut in 0..=input.len() {
            let ev = parse_cut(input, cut);
            assert_eq!(ev.len(), 1);
            assert_eq!(ev[0].data.as_deref(), Some("{\"a\":1}"));
            assert_eq!(&ev[0].raw[..], b"data: {\"a\":1}\n\n", "cut at {cut}");
        }
        let ev = parse_whole(b"DATA: {\"tool_calls\":1}\n\n");
        assert_eq!((ev[0].data.as_deref(), &ev[0].raw[..]), (None, &b"\n"[..]));
    }

    #[test]
    fn oversized_events_are_an_error() {
        let mut p = SseParser::new(16);
        let mut out = Vec::new();
        let err = p.push(b"data: 0123456789abcdefghij", &mut out).unwrap_err();
        assert_eq!(err.limit, 16);
    }
}
