//! A stream judge over several rounds (a repair's, a program's), driven
//! as the body drives it: by hand, cut anywhere, to compare the client's
//! bytes; and through the stream body itself, with a scripted upstream.
//! Each dialect's stream tests check their own client view on top.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::{json, Value};

use crate::layer::drivers::stream_body::{
    intercept_stream, Next, RepairFuture, RepairTarget, StreamLimits,
};
use crate::splice::{MemorySpliceStore, Splice, TenantSplices};
use crate::sse::SseParser;
use crate::tenant::Tenant;
use crate::turn::{HeldProgram, RoundEnd, RoundJudge};

/// What the client got over every round, and how each round ended.
pub struct Run {
    pub bytes: Vec<u8>,
    pub ends: Vec<RoundEnd>,
}

/// Feeds `rounds` to `judge`, each cut into pieces by `cut`, starting each
/// round after the first as the previous round's end asks; then hands
/// `hand_off` to the client, when given, after a program's round.
pub fn drive<J: RoundJudge>(
    mut judge: J,
    rounds: &[Vec<u8>],
    hand_off: Option<&Value>,
    cut: &dyn Fn(&[u8]) -> Vec<Vec<u8>>,
) -> Run {
    let mut out = Vec::new();
    let mut ends: Vec<RoundEnd> = Vec::new();
    for bytes in rounds {
        match ends.last() {
            None => {}
            Some(RoundEnd::Repair { .. }) => judge.start_repair_round(),
            Some(RoundEnd::Program(_)) => judge.start_program_round(),
            Some(RoundEnd::Done { .. }) => panic!("a round after the stream ended"),
        }
        let mut parser = SseParser::new(1 << 20);
        let mut events = Vec::new();
        for piece in cut(bytes) {
            parser.push(&piece, &mut events).unwrap();
            for ev in events.drain(..) {
                judge.on_event(ev, &mut out).expect("a readable event");
            }
        }
        parser.finish(&mut events);
        for ev in events.drain(..) {
            judge.on_event(ev, &mut out).expect("a readable event");
        }
        ends.push(judge.end_round(&mut out));
    }
    if let Some(turn) = hand_off {
        assert!(matches!(ends.last(), Some(RoundEnd::Program(_))));
        judge.hand_off(turn, &mut out);
    }
    Run {
        bytes: out.iter().flat_map(|b| b.to_vec()).collect(),
        ends,
    }
}

/// Each round in one piece.
pub fn whole(b: &[u8]) -> Vec<Vec<u8>> {
    vec![b.to_vec()]
}

/// Drives fresh judges from `judge` over `rounds` whole, then cut at every
/// offset and byte by byte: the client's bytes and the rounds' ends never
/// change. Returns the whole run.
pub fn every_cut<J: RoundJudge>(
    judge: impl Fn() -> J,
    rounds: &[Vec<u8>],
    hand_off: Option<&Value>,
) -> Run {
    let reference = drive(judge(), rounds, hand_off, &whole);
    let longest = rounds.iter().map(Vec::len).max().unwrap_or(0);
    let same = |run: &Run, how: &str| {
        assert_eq!(
            String::from_utf8_lossy(&run.bytes),
            String::from_utf8_lossy(&reference.bytes),
            "the client's view changed when cut {how}"
        );
        assert_eq!(
            format!("{:?}", run.ends),
            format!("{:?}", reference.ends),
            "the rounds' ends changed when cut {how}"
        );
    };
    for k in 0..=longest {
        let cut = move |b: &[u8]| {
            let k = k.min(b.len());
            vec![b[..k].to_vec(), b[k..].to_vec()]
        };
        same(&drive(judge(), rounds, hand_off, &cut), &format!("at {k}"));
    }
    let bytewise = |b: &[u8]| b.iter().map(|x| vec![*x]).collect();
    same(&drive(judge(), rounds, hand_off, &bytewise), "byte by byte");
    reference
}

/// The splice a round that ended the stream left, if any.
pub fn done_splice(end: &RoundEnd) -> &Option<(Vec<String>, Splice)> {
    match end {
        RoundEnd::Done { splice } => splice,
        other => panic!("expected the end of the stream, got {other:?}"),
    }
}

/// An upstream that answers each re-ask with the next round, and a
/// program with `hand_off` (once) or the next round; it notes what it was
/// asked: a re-ask's messages, a program's id.
struct Script {
    rounds: VecDeque<Vec<u8>>,
    hand_off: Option<Value>,
    asked: Arc<Mutex<Vec<Vec<Value>>>>,
}

impl Script {
    fn next(&mut self) -> RepairFuture {
        let next = self.rounds.pop_front().unwrap_or_default();
        Box::pin(async move { Ok(Next::Stream(http::Response::new(crate::body::full(next)))) })
    }
}

impl RepairTarget for Script {
    fn reask(&mut self, messages: Vec<Value>) -> RepairFuture {
        self.asked.lock().unwrap().push(messages);
        self.next()
    }
    fn run_program(&mut self, program: HeldProgram) -> RepairFuture {
        self.asked.lock().unwrap().push(vec![json!(program.id)]);
        match self.hand_off.take() {
            Some(turn) => Box::pin(async move { Ok(Next::HandOff(turn)) }),
            None => self.next(),
        }
    }
}

/// `rounds` through the stream body the proxy serves, a judge from
/// `judge` judging: the client's bytes, and what the body asked the
/// upstream for. The bytes are asserted to be those [`drive`] gives for
/// the same rounds whole: the body drives the judge as the tests do.
pub async fn through_body<J: RoundJudge>(
    judge: impl Fn() -> J,
    rounds: &[Vec<u8>],
    hand_off: Option<Value>,
) -> (Vec<u8>, Vec<Vec<Value>>) {
    let pure = drive(judge(), rounds, hand_off.as_ref(), &whole);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let script = Script {
        rounds: rounds[1..].iter().cloned().collect(),
        hand_off,
        asked: asked.clone(),
    };
    let store = Arc::new(MemorySpliceStore::new(Duration::from_secs(60), 1 << 20));
    let splices = TenantSplices::new(store, Tenant::anonymous("t"));
    let first = http::Response::new(crate::body::full(rounds[0].clone()));
    let res = intercept_stream(
        first,
        judge(),
        Box::new(script),
        splices,
        StreamLimits {
            max_event: 1 << 20,
            max_state: usize::MAX,
            keepalive: None,
        },
    );
    let bytes = res.into_body().collect().await.unwrap().to_bytes().to_vec();
    assert_eq!(
        String::from_utf8_lossy(&bytes),
        String::from_utf8_lossy(&pure.bytes)
    );
    let asked = asked.lock().unwrap().clone();
    (bytes, asked)
}

/// `judge` fed `first` (a round's opening events, whole), then told the
/// upstream broke off: the client's bytes, and whether the judge counts
/// it as an error.
pub fn broken_off_after<J: super::Judge>(mut judge: J, first: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut parser = SseParser::new(1 << 20);
    let mut events = Vec::new();
    parser.push(first, &mut events).unwrap();
    for ev in events.drain(..) {
        judge.on_event(ev, &mut out).expect("a readable event");
    }
    judge.upstream_failed(
        "the upstream stream broke off",
        "upstream_stream_broken",
        &mut out,
    );
    let bytes = out.iter().flat_map(|b| b.to_vec()).collect();
    (bytes, judge.errored())
}
