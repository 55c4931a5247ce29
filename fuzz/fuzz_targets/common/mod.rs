//! What the stream-judge targets share: the input layout, a judge driven
//! as the body drives it, and the client's events.
//!
//! Input layout: byte 0 picks the plan (client or embedded runtime); byte 1
//! is the number of cut points, then two bytes each; the rest is the
//! upstream body, rounds separated by two NUL bytes.
#![allow(dead_code)]

use bytes::Bytes;
use codemode_proxy::internals::sse::{SseEvent, SseParser};
use codemode_proxy::internals::stream::{RoundEnd, RoundJudge};

/// The input, read: which plan, where to cut, the rounds' bodies.
pub struct Input<'a> {
    /// Byte 0: the plan (`pick & 1`: client or embedded runtime).
    pub pick: u8,
    /// Cut points, sorted; each applies to every round.
    pub cuts: Vec<usize>,
    /// At most three upstream rounds.
    pub rounds: Vec<&'a [u8]>,
}

impl<'a> Input<'a> {
    /// Reads `data`; `None` when it is too short for its own cut count.
    pub fn read(data: &'a [u8]) -> Option<Input<'a>> {
        let [pick, ncuts, rest @ ..] = data else {
            return None;
        };
        let ncuts = usize::from(*ncuts % 16);
        if rest.len() < ncuts * 2 {
            return None;
        }
        let (cut_bytes, body) = rest.split_at(ncuts * 2);
        let mut cuts: Vec<usize> = cut_bytes
            .chunks(2)
            .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])))
            .collect();
        cuts.sort_unstable();
        Some(Input {
            pick: *pick,
            cuts,
            rounds: split_rounds(body),
        })
    }
}

/// Splits the body into at most three rounds at double NUL bytes.
fn split_rounds(body: &[u8]) -> Vec<&[u8]> {
    let mut rounds = Vec::new();
    let mut rest = body;
    while rounds.len() < 2 {
        match rest.windows(2).position(|w| w == [0, 0]) {
            Some(i) => {
                rounds.push(&rest[..i]);
                rest = &rest[i + 2..];
            }
            None => break,
        }
    }
    rounds.push(rest);
    rounds
}

/// Judges `evs` as the body does: an event the judge cannot read ends the
/// stream with the dialect's error event, and nothing of it goes out;
/// false then.
fn judge_all<J: RoundJudge>(judge: &mut J, evs: &mut Vec<SseEvent>, out: &mut Vec<Bytes>) -> bool {
    for ev in evs.drain(..) {
        let before = out.len();
        if judge.on_event(ev, out).is_err() {
            out.truncate(before);
            judge.upstream_failed("unreadable", "upstream_invalid_response", out);
            return false;
        }
    }
    true
}

/// Feeds every round through a fresh parser and `judge`, as the body does
/// (a repair or a program continues the stream); returns the client's bytes.
pub fn drive<J: RoundJudge>(mut judge: J, input: &Input<'_>) -> Vec<u8> {
    let mut out: Vec<Bytes> = Vec::new();
    let mut evs = Vec::new();
    for (n, round) in input.rounds.iter().enumerate() {
        let mut parser = SseParser::new(1 << 16);
        let mut last = 0;
        let mut failed = false;
        for &cut in input.cuts.iter().chain([&round.len()]) {
            let cut = cut.min(round.len());
            if cut < last {
                continue;
            }
            let pushed = parser.push(&round[last..cut], &mut evs);
            if !judge_all(&mut judge, &mut evs, &mut out) {
                failed = true;
                break;
            }
            last = cut;
            if pushed.is_err() {
                judge.upstream_failed("too large", "upstream_event_too_large", &mut out);
                failed = true;
                break;
            }
        }
        if failed {
            break;
        }
        parser.finish(&mut evs);
        if !judge_all(&mut judge, &mut evs, &mut out) {
            break;
        }
        match judge.end_round(&mut out) {
            RoundEnd::Done { .. } => break,
            RoundEnd::Repair { messages } => {
                assert!(!messages.is_empty());
                if n + 1 < input.rounds.len() {
                    judge.start_repair_round();
                }
            }
            RoundEnd::Program(_) => {
                if n + 1 < input.rounds.len() {
                    judge.start_program_round();
                }
            }
        }
    }
    let client: Vec<u8> = out.iter().flat_map(|b| b.iter().copied()).collect();
    if std::env::var_os("FUZZ_DEBUG").is_some() {
        // What the client got, for reading a finding: FUZZ_DEBUG=1 cargo fuzz run ...
        eprintln!("client stream: {}", String::from_utf8_lossy(&client));
    }
    client
}

/// The data of every event in `bytes`, as an SSE client splits them.
pub fn events(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    text.split("\n\n")
        .filter_map(|block| {
            let data: Vec<&str> = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .collect()
}
