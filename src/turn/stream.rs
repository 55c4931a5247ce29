//! What every dialect's stream judge keeps across the rounds of one
//! client stream, and what it decides about a round the same way on every
//! dialect: the decision, taken once; whether the client sees the round's
//! end; whether it gets the give-up note; the usage its visible terminal
//! carries; what the round's end leads to; the next round's start; a
//! failure.
//!
//! A dialect's judge holds a [`StreamTurn`] with its own per-round state
//! in it (`R`) and writes only what is in its shapes: the note, its
//! terminal with [`StreamTurn::visible_usage`], its error event.

use serde_json::Value;

use super::effect::{round_end, RoundEnd};
use super::{Decision, Dialect, JudgedCall, ModelTurn, Rounds};

/// The rounds of one client stream, and the current one.
#[derive(Debug)]
pub struct StreamTurn<R> {
    /// The bounds and the usage of the rounds that ended.
    pub rounds: Rounds,
    /// The upstream reported an error in-band, or the stream failed: no
    /// repair follows, and nothing more is judged.
    pub errored: bool,
    /// The current round's decision, once its calls are as whole as they
    /// will be.
    pub decision: Option<Decision>,
    /// The provider's usage for the current round so far.
    pub usage: Option<Value>,
    /// The client got text in the current round: a give-up note is not
    /// needed, and a later round's text starts a new paragraph.
    pub emitted_text: bool,
    /// The dialect's own state of the current round.
    pub round: R,
}

impl<R: Default> StreamTurn<R> {
    /// The first round of a stream repairing at most `max_repairs` times.
    pub fn new(max_repairs: u32) -> StreamTurn<R> {
        StreamTurn {
            rounds: Rounds::new(max_repairs),
            errored: false,
            decision: None,
            usage: None,
            emitted_text: false,
            round: R::default(),
        }
    }

    /// Decides the current round on `calls` (counted and told to the
    /// ledger once, by [`Rounds::decide`]).
    pub fn decide(&mut self, calls: &[JudgedCall]) -> Decision {
        let decision = self.rounds.decide(calls, self.errored);
        self.decision = Some(decision);
        decision
    }

    /// Whether the current round's end (its terminal, its usage, a
    /// `[DONE]`) is hidden from the client: another round follows in the
    /// same client stream.
    pub fn hides_end(&self) -> bool {
        matches!(self.decision, Some(Decision::Repair | Decision::Program))
    }

    /// Whether the client gets the give-up note: the turn gave up and the
    /// client saw no text of it.
    pub fn wants_note(&self) -> bool {
        self.decision == Some(Decision::GiveUp) && !self.emitted_text
    }

    /// The usage the client's visible terminal carries: every round's of
    /// this client stream, the current one's included.
    pub fn visible_usage(&self) -> Option<Value> {
        self.rounds.total(self.usage.as_ref())
    }

    /// The end of the current round's body, `turn` being the model's turn
    /// as the dialect read it: what comes next. A round without a decision
    /// (the upstream failed before one) is final; a hidden round's usage
    /// joins the sum the next rounds' terminals carry.
    pub fn end<D: Dialect>(&mut self, turn: ModelTurn) -> RoundEnd {
        let decision = self.decision.unwrap_or(Decision::Final);
        if matches!(decision, Decision::Repair | Decision::Program) {
            self.rounds.close(self.usage.as_ref());
        }
        round_end::<D>(decision, turn)
    }

    /// A repair round's upstream stream begins.
    pub fn start_repair_round(&mut self) {
        self.rounds.repaired();
        self.next_round();
    }

    /// The round after a program that ended begins.
    pub fn start_program_round(&mut self) {
        self.rounds.program_ended();
        self.next_round();
    }

    fn next_round(&mut self) {
        self.decision = None;
        self.usage = None;
        self.emitted_text = false;
        self.round = R::default();
    }

    /// The upstream broke off or failed: the round is final, and no repair
    /// follows. The dialect writes its error event.
    pub fn failed(&mut self) {
        self.errored = true;
        self.decision = Some(Decision::Final);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::Fate;

    fn denied() -> JudgedCall {
        JudgedCall {
            id: "c1".into(),
            name: "bash".into(),
            arguments: "{}".into(),
            shape: Default::default(),
            fate: Fate::Denied(
                crate::classify::Denial::for_call(crate::classify::Verdict::Unknown, "bash", "{}")
                    .expect("an unknown tool is denied"),
            ),
            raw: None,
        }
    }

    #[test]
    fn a_repaired_round_is_hidden_summed_and_forgotten_when_the_next_begins() {
        let mut t: StreamTurn<u8> = StreamTurn::new(1);
        t.usage = Some(serde_json::json!({"prompt_tokens": 3}));
        t.emitted_text = true;
        t.round = 7;
        assert_eq!(t.decide(&[denied()]), Decision::Repair);
        assert!(t.hides_end());
        let end = t.end::<crate::chat::Chat>(ModelTurn::default());
        assert!(matches!(end, RoundEnd::Repair { .. }));
        t.start_repair_round();
        assert_eq!(
            (t.decision, t.usage.clone(), t.emitted_text, t.round),
            (None, None, false, 0)
        );
        t.usage = Some(serde_json::json!({"prompt_tokens": 4}));
        assert_eq!(
            t.visible_usage(),
            Some(serde_json::json!({"prompt_tokens": 7}))
        );
        // Past the bound the turn gives up, visibly, with the note.
        assert_eq!(t.decide(&[denied()]), Decision::GiveUp);
        assert!(!t.hides_end());
        assert!(t.wants_note());
    }

    #[test]
    fn a_failed_round_is_final_and_ends_the_stream() {
        let mut t: StreamTurn<()> = StreamTurn::new(2);
        t.failed();
        assert!(t.errored && !t.hides_end() && !t.wants_note());
        let end = t.end::<crate::chat::Chat>(ModelTurn::default());
        assert!(matches!(end, RoundEnd::Done { splice: None }));
    }
}
