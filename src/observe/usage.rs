//! Token usage read on the side of an upstream body, whatever the mode:
//! the bytes pass unchanged, the scanner only looks at them.
//!
//! Each API names its usage object and its counts in its own [`Shape`]
//! (its provider's: `usage` with `prompt_tokens`/`completion_tokens` or
//! `input_tokens`/`output_tokens` for OpenAI and Anthropic). The object sits
//! at the top of a JSON body or chat chunk, under `response` in a Responses
//! event and under `message` in a Messages `message_start`. The scanner
//! finds the last such key of a JSON body, or of each `data:` line of an
//! event stream, and parses that object alone. Within one body a later
//! count replaces an earlier one: a Messages stream reports input tokens in
//! `message_start` and the running output count in each `message_delta`.

use bytes::Bytes;
use memchr::memmem;
use serde_json::Value;

/// Bytes of a JSON body (or of one unfinished event line) kept for the
/// scan; a larger one is not read for usage.
pub const MAX_SCANNED_BYTES: usize = 8 << 20;

/// How an API names its token counts: the key of the object that holds
/// them, and the names of its input and output counts (a provider may use
/// either of several).
pub struct Shape {
    /// The object's key, quoted as it appears in JSON (`"usage"`).
    pub key: &'static str,
    /// The names of the prompt (input) count.
    pub input: &'static [&'static str],
    /// The names of the completion (output) count.
    pub output: &'static [&'static str],
    /// Searchers for the key, built once: building one costs more than a
    /// body's search.
    pub finders: std::sync::OnceLock<(memmem::Finder<'static>, memmem::FinderRev<'static>)>,
}

impl Shape {
    fn finders(&self) -> &(memmem::Finder<'static>, memmem::FinderRev<'static>) {
        self.finders.get_or_init(|| {
            (
                memmem::Finder::new(self.key.as_bytes()),
                memmem::FinderRev::new(self.key.as_bytes()),
            )
        })
    }
}

impl std::fmt::Debug for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key)
    }
}

/// OpenAI's and Anthropic's `usage`, in Chat's names or in the Responses
/// and Messages ones; what a body is read with when its API is not known.
pub static USAGE: Shape = Shape {
    key: "\"usage\"",
    input: &["prompt_tokens", "input_tokens"],
    output: &["completion_tokens", "output_tokens"],
    finders: std::sync::OnceLock::new(),
};

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
    shape: &'static Shape,
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
    /// A scanner for a body of `kind`, whose counts are in `shape`.
    pub fn new(kind: Kind, shape: &'static Shape) -> UsageScanner {
        UsageScanner {
            kind,
            shape,
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
        if self.shape.finders().0.find(lines).is_none() {
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
        let key = self.shape.key.len();
        while let Some(at) = self.shape.finders().1.rfind(&bytes[..end]) {
            // Earlier occurrences, overlapping ones included.
            end = at + key - 1;
            if let Some(found) = counts_at(&bytes[at + key..], self.shape) {
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

#[derive(Default)]
struct Found {
    input: Option<u64>,
    output: Option<u64>,
}

/// Reads the counts `Shape` names off a usage object; every other member
/// is skipped unparsed. A count that is not a whole number is left out, as
/// if absent; the first name of a shape's list that is present wins.
struct Counts(&'static Shape);

impl<'de> serde::de::DeserializeSeed<'de> for Counts {
    type Value = Found;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Found, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Counts {
    type Value = Found;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a usage object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Found, A::Error> {
        // The rank of the name each count was read under: a lower one wins.
        let (mut found, mut ranks) = (Found::default(), (usize::MAX, usize::MAX));
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let input = self.0.input.iter().position(|n| *n == key);
            let output = self.0.output.iter().position(|n| *n == key);
            let (slot, rank, at) = match (input, output) {
                (Some(at), _) => (&mut found.input, &mut ranks.0, at),
                (_, Some(at)) => (&mut found.output, &mut ranks.1, at),
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    continue;
                }
            };
            let count = map.next_value::<Value>()?.as_u64();
            if count.is_some() && at < *rank {
                (*slot, *rank) = (count, at);
            }
        }
        Ok(found)
    }
}

/// The counts of the object after a usage key (`rest` starts after the
/// key's closing quote), if it is one with a count.
fn counts_at(rest: &[u8], shape: &'static Shape) -> Option<Found> {
    let rest = skip_space(rest);
    let rest = skip_space(rest.strip_prefix(b":")?);
    if !rest.starts_with(b"{") {
        return None;
    }
    let mut de = serde_json::Deserializer::from_slice(rest);
    let found = serde::de::DeserializeSeed::deserialize(Counts(shape), &mut de).ok()?;
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
                let mut s = UsageScanner::new(kind, &USAGE);
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
        let mut s = UsageScanner::new(Kind::Json, &USAGE);
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

    /// Counts named as Gemini names them: a shape is the API's, not the
    /// scanner's.
    static METADATA: Shape = Shape {
        key: "\"usageMetadata\"",
        input: &["promptTokenCount"],
        output: &["candidatesTokenCount"],
        finders: std::sync::OnceLock::new(),
    };

    #[test]
    fn a_shape_names_the_key_and_counts_and_the_last_running_total_wins() {
        let body = b"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"usage\"}]}}],\"usageMetadata\":{\"promptTokenCount\":11,\"totalTokenCount\":11}}\r\n\r\n\
data: {\"candidates\":[],\"usageMetadata\":{\"promptTokenCount\":11,\"candidatesTokenCount\":6,\"promptTokensDetails\":[{\"modality\":\"TEXT\",\"tokenCount\":11}]},\"usage\":{\"prompt_tokens\":99}}\r\n\r\n";
        for at in 0..=body.len() {
            let mut s = UsageScanner::new(Kind::EventStream, &METADATA);
            s.push(&Bytes::copy_from_slice(&body[..at]));
            s.push(&Bytes::copy_from_slice(&body[at..]));
            s.finish();
            assert_eq!(
                s.tokens(),
                Tokens {
                    input: 11,
                    output: 6
                },
                "cut at {at}"
            );
        }
    }

    #[test]
    fn the_first_name_of_a_shape_wins_wherever_it_stands() {
        let body = br#"{"usage":{"input_tokens":1,"prompt_tokens":2,"output_tokens":"x","completion_tokens":3}}"#;
        let mut s = UsageScanner::new(Kind::Json, &USAGE);
        s.push(&Bytes::from_static(body));
        s.finish();
        assert_eq!(
            s.tokens(),
            Tokens {
                input: 2,
                output: 3
            }
        );
    }

    #[test]
    fn a_body_without_usage_reports_nothing() {
        let mut s = UsageScanner::new(Kind::Json, &USAGE);
        s.push(&Bytes::from_static(b"{\"error\":{\"message\":\"no\"}}"));
        assert!(!s.finish());
        assert_eq!(s.tokens(), Tokens::default());
    }
}
