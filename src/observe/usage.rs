//! Token usage read on the side of an upstream body, whatever the mode:
//! the bytes pass unchanged, the scanner only looks at them.
//!
//! Every dialect names its usage object `usage` and its counts
//! `prompt_tokens`/`completion_tokens` (chat completions) or
//! `input_tokens`/`output_tokens` (Responses, Messages). The object sits at
//! the top of a JSON body or chat chunk, under `response` in a Responses
//! event and under `message` in a Messages `message_start`. The scanner
//! finds the last `"usage": {...}` of a JSON body, or of each `data:` line
//! of an event stream, and parses that object alone. Within one body a later
//! count replaces an earlier one: a Messages stream reports input tokens in
//! `message_start` and the running output count in each `message_delta`.

use bytes::Bytes;
use memchr::memmem;
use serde_json::Value;

/// Bytes of a JSON body (or of one unfinished event line) kept for the
/// scan; a larger one is not read for usage.
pub const MAX_SCANNED_BYTES: usize = 8 << 20;

const KEY: &[u8] = b"\"usage\"";

/// Searchers for [`KEY`], built once: building one costs more than a
/// body's search.
fn finders() -> &'static (memmem::Finder<'static>, memmem::FinderRev<'static>) {
    static FINDERS: std::sync::OnceLock<(memmem::Finder<'static>, memmem::FinderRev<'static>)> =
        std::sync::OnceLock::new();
    FINDERS.get_or_init(|| (memmem::Finder::new(KEY), memmem::FinderRev::new(KEY)))
}

/// Counts one upstream body reported so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Prompt (input) tokens.
    pub input: u64,
    /// Completion (output) tokens.
    pub output: u64,
}

/// What the scanner reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A whole JSON document: scanned once, at its end.
    Json,
    /// An event stream: each `data:` line as it completes.
    EventStream,
}

/// Reads usage off a body's chunks as they pass.
#[derive(Debug)]
pub struct UsageScanner {
    kind: Kind,
    /// A JSON body's chunks (shared with the body, not copied) and their length.
    chunks: Vec<Bytes>,
    chunks_len: usize,
    /// An event stream's unfinished line.
    held: Vec<u8>,
    /// The held bytes went past [`MAX_SCANNED_BYTES`]: skip to the next line
    /// (an event stream) or give up (JSON).
    overflowed: bool,
    tokens: Tokens,
}

impl UsageScanner {
    /// A scanner for a body of `kind`.
    pub fn new(kind: Kind) -> UsageScanner {
        UsageScanner {
            kind,
            chunks: Vec::new(),
            chunks_len: 0,
            held: Vec::new(),
            overflowed: false,
            tokens: Tokens::default(),
        }
    }

    /// The counts read so far.
    pub fn tokens(&self) -> Tokens {
        self.tokens
    }

    /// Feeds a chunk; returns whether the counts changed.
    pub fn push(&mut self, chunk: &Bytes) -> bool {
        match self.kind {
            Kind::Json => {
                if !self.overflowed {
                    if self.chunks_len + chunk.len() > MAX_SCANNED_BYTES {
                        self.overflowed = true;
                        self.chunks = Vec::new();
                    } else {
                        self.chunks_len += chunk.len();
                        self.chunks.push(chunk.clone());
                    }
                }
                false
            }
            Kind::EventStream => self.push_lines(chunk),
        }
    }

    /// The body ended; returns whether the counts changed.
    pub fn finish(&mut self) -> bool {
        let held = std::mem::take(&mut self.held);
        let chunks = std::mem::take(&mut self.chunks);
        if self.overflowed {
            return false;
        }
        match self.kind {
            Kind::Json => match chunks.as_slice() {
                [one] => self.scan(one),
                many => self.scan(&many.concat()),
            },
            Kind::EventStream => self.scan_lines(&held),
        }
    }

    fn push_lines(&mut self, chunk: &[u8]) -> bool {
        let Some(last) = memchr::memrchr(b'\n', chunk) else {
            self.hold(chunk);
            return false;
        };
        let (done, rest) = chunk.split_at(last + 1);
        let mut changed = false;
        if self.held.is_empty() && !self.overflowed {
            changed |= self.scan_lines(done);
        } else {
            // The first line of `done` finishes the held one.
            let first_end = memchr::memchr(b'\n', done).unwrap_or(done.len() - 1) + 1;
            if !self.overflowed {
                let mut line = std::mem::take(&mut self.held);
                line.extend_from_slice(&done[..first_end]);
                changed |= self.scan_lines(&line);
            }
            self.held.clear();
            self.overflowed = false;
            changed |= self.scan_lines(&done[first_end..]);
        }
        self.hold(rest);
        changed
    }

    fn hold(&mut self, bytes: &[u8]) {
        if self.overflowed {
            return;
        }
        if self.held.len() + bytes.len() > MAX_SCANNED_BYTES {
            self.overflowed = true;
            self.held = Vec::new();
        } else {
            self.held.extend_from_slice(bytes);
        }
    }

    /// Scans whole lines; only a line that holds a usage object is parsed.
    fn scan_lines(&mut self, lines: &[u8]) -> bool {
        if finders().0.find(lines).is_none() {
            return false;
        }
        let mut changed = false;
        for line in lines.split(|&b| b == b'\n') {
            if line.starts_with(b"data:") {
                changed |= self.scan(line);
            }
        }
        changed
    }

    /// Reads the last usage object of `bytes` that has a count.
    fn scan(&mut self, bytes: &[u8]) -> bool {
        let mut end = bytes.len();
        while let Some(at) = finders().1.rfind(&bytes[..end]) {
            // Earlier occurrences, overlapping ones included.
            end = at + KEY.len() - 1;
            if let Some(found) = counts_at(&bytes[at + KEY.len()..]) {
                let before = self.tokens;
                if let Some(input) = found.input {
                    self.tokens.input = input;
                }
                if let Some(output) = found.output {
                    self.tokens.output = output;
                }
                return self.tokens != before;
            }
        }
        false
    }
}

/// The counts a usage object may hold, in either dialect's names. A count
/// that is not a whole number is left out, as if absent.
#[derive(serde::Deserialize)]
struct Usage {
    #[serde(default, deserialize_with = "count")]
    prompt_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    completion_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    output_tokens: Option<u64>,
}

fn count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    use serde::Deserialize;
    Ok(Value::deserialize(d)?.as_u64())
}

struct Found {
    input: Option<u64>,
    output: Option<u64>,
}

/// The counts of the object after a `"usage"` key (`rest` starts after the
/// key's closing quote), if it is one with a count.
fn counts_at(rest: &[u8]) -> Option<Found> {
    let rest = skip_space(rest);
    let rest = skip_space(rest.strip_prefix(b":")?);
    if !rest.starts_with(b"{") {
        return None;
    }
    // Only the counts are built; every other member is skipped unparsed.
    let usage: Usage = serde_json::Deserializer::from_slice(rest)
        .into_iter::<Usage>()
        .next()?
        .ok()?;
    let found = Found {
        input: usage.prompt_tokens.or(usage.input_tokens),
        output: usage.completion_tokens.or(usage.output_tokens),
    };
    (found.input.is_some() || found.output.is_some()).then_some(found)
}

fn skip_space(b: &[u8]) -> &[u8] {
    let n = b
        .iter()
        .take_while(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
        .count();
    &b[n..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_split(kind: Kind, body: &[u8]) -> Vec<Tokens> {
        (0..=body.len())
            .map(|at| {
                let mut s = UsageScanner::new(kind);
                s.push(&Bytes::copy_from_slice(&body[..at]));
                s.push(&Bytes::copy_from_slice(&body[at..]));
                s.finish();
                s.tokens()
            })
            .collect()
    }

    #[test]
    fn chat_completion_json_usage_is_read_at_the_end() {
        let body = br#"{"id":"x","choices":[{"message":{"content":"the \"usage\": {\"prompt_tokens\": 99}"}}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}"#;
        for t in every_split(Kind::Json, body) {
            assert_eq!(
                t,
                Tokens {
                    input: 12,
                    output: 5
                }
            );
        }
    }

    #[test]
    fn responses_json_usage_after_echoed_tools_wins() {
        let body = br#"{"id":"r","tools":[{"parameters":{"properties":{"usage":{"type":"string"}}}}],"usage":{"input_tokens":30,"output_tokens":4}}"#;
        let mut s = UsageScanner::new(Kind::Json);
        s.push(&Bytes::from_static(body));
        assert!(s.finish());
        assert_eq!(
            s.tokens(),
            Tokens {
                input: 30,
                output: 4
            }
        );
    }

    #[test]
    fn chat_stream_reads_the_usage_chunk_and_skips_nulls() {
        let body = b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n\
data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n";
        for t in every_split(Kind::EventStream, body) {
            assert_eq!(
                t,
                Tokens {
                    input: 7,
                    output: 3
                }
            );
        }
    }

    #[test]
    fn messages_stream_takes_input_from_start_and_output_from_the_last_delta() {
        let body = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":15}}\n\n";
        for t in every_split(Kind::EventStream, body) {
            assert_eq!(
                t,
                Tokens {
                    input: 25,
                    output: 15
                }
            );
        }
    }

    #[test]
    fn responses_stream_reads_response_completed() {
        let body = b"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n\
event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":40,\"output_tokens\":8}}}\n\n";
        for t in every_split(Kind::EventStream, body) {
            assert_eq!(
                t,
                Tokens {
                    input: 40,
                    output: 8
                }
            );
        }
    }

    #[test]
    fn a_body_without_usage_reports_nothing() {
        let mut s = UsageScanner::new(Kind::Json);
        s.push(&Bytes::from_static(b"{\"error\":{\"message\":\"no\"}}"));
        assert!(!s.finish());
        assert_eq!(s.tokens(), Tokens::default());
    }
}
