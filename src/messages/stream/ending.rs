//! How a round ends: its `message_delta` decided (usage summed, the give-up
//! note written as a text block), a program's calls handed out as
//! `tool_use` blocks, the next round started, a failure reported.

use super::*;

impl MessagesJudge {
    /// The round's end (`message_delta`, or a `message_stop` or the end of
    /// the body without one): the turn is decided here, and when the client
    /// sees it end, its `message_delta` goes out with usage summed.
    pub(super) fn end_message(&mut self, delta: Option<Map<String, Value>>, out: &mut Vec<Bytes>) {
        if self.round.decision.is_some() {
            return;
        }
        let mut usage = self.round.start_usage.clone();
        if let Some(Value::Object(late)) = delta.as_ref().and_then(|d| d.get("usage")) {
            // `message_delta`'s counts are the round's so far: they replace
            // the start's.
            let mut merged = usage
                .and_then(|u| u.as_object().cloned())
                .unwrap_or_default();
            for (k, v) in late {
                if !v.is_null() {
                    merged.insert(k.clone(), v.clone());
                }
            }
            usage = Some(Value::Object(merged));
        }
        self.round.usage = usage;
        let decision = self.decide();
        let mut delta = match (decision, delta) {
            (Decision::Repair | Decision::Program, _) => return,
            (Decision::GiveUp, delta) => {
                if !self.round.emitted_text {
                    self.give_up_note(out);
                }
                let mut delta = delta.unwrap_or_else(|| {
                    let mut d = Map::new();
                    d.insert("type".into(), json!("message_delta"));
                    d
                });
                let mut inner = match delta.remove("delta") {
                    Some(Value::Object(inner)) => inner,
                    _ => Map::new(),
                };
                inner.insert("stop_reason".into(), json!("end_turn"));
                inner.insert("stop_sequence".into(), Value::Null);
                delta.insert("delta".into(), Value::Object(inner));
                delta
            }
            (Decision::Final | Decision::Splice, Some(delta)) => delta,
            // A message_stop with no message_delta before it: the upstream
            // gave none, the proxy writes none.
            (Decision::Final | Decision::Splice, None) => return,
        };
        if self.rounds.usage.is_some() || !delta.contains_key("usage") {
            if let Some(total) = self.rounds.total(self.round.usage.as_ref()) {
                delta.insert("usage".into(), total);
            }
        }
        self.emit(delta, out);
        self.round.delta_sent = true;
    }

    /// The client's `message_stop`, once, after its `message_delta`.
    pub(super) fn send_stop(&mut self, out: &mut Vec<Bytes>) {
        let visible = matches!(
            self.round.decision,
            Some(Decision::Final | Decision::Splice | Decision::GiveUp)
        );
        if !visible || self.errored || self.round.stop_sent {
            return;
        }
        self.round.stop_sent = true;
        out.push(Bytes::from_static(
            b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        ));
    }

    /// Decides the round once its calls are as whole as they will be.
    pub(super) fn decide(&mut self) -> Decision {
        for block in &mut self.round.blocks {
            if block.done || block.client.is_some() {
                continue;
            }
            // A withheld call whose stop never came: judged on what
            // streamed of it.
            if let Some(call) = block.judge(&self.plan) {
                block.call = Some(refine(block.call.take(), call));
            }
        }
        let calls = self.round.calls();
        let decision = self.rounds.decide(&calls, self.errored);
        self.round.decision = Some(decision);
        decision
    }

    /// The client gets no call of this turn: a text block tells why.
    pub(super) fn give_up_note(&mut self, out: &mut Vec<Bytes>) {
        let note = turn::give_up_note(&self.round.calls());
        self.emit_block(&json!({"type": "text", "text": note}), out);
        self.round.emitted_text = true;
    }

    /// The end of an upstream round's body.
    pub fn end_round(&mut self, out: &mut Vec<Bytes>) -> RoundEnd {
        if self.round.decision.is_none() {
            // No message_delta came: decided as at one. A client that got
            // no call is still told why, and gets its message's end.
            self.end_message(None, out);
        }
        if self.round.delta_sent {
            self.send_stop(out);
        }
        let decision = self.round.decision.unwrap_or(Decision::Final);
        if matches!(decision, Decision::Repair | Decision::Program) {
            self.rounds.close(self.round.usage.as_ref());
        }
        let text = self.round.text();
        let turn = ModelTurn {
            calls: self.round.calls(),
            replay: self.round.assistant(),
            text: (!text.is_empty()).then_some(text),
            response_id: None,
        };
        turn::round_end::<Messages>(decision, turn)
    }

    /// Starts the next round after a repair was sent upstream.
    pub fn start_repair_round(&mut self) {
        self.rounds.repaired();
        self.round = Round::default();
    }

    /// Starts the next round after a program ended and the model was asked again.
    pub fn start_program_round(&mut self) {
        self.rounds.program_ended();
        self.round = Round::default();
    }

    /// A program waits on the client: `turn` (an assistant message whose
    /// `content` holds the program's calls as `tool_use` blocks) ends the
    /// client stream, each call as a block the client opens, fills and
    /// closes, then the message's `message_delta` and `message_stop`.
    pub fn hand_off(&mut self, turn: &Value, out: &mut Vec<Bytes>) {
        let blocks = turn.get("content").and_then(Value::as_array);
        for block in blocks
            .into_iter()
            .flatten()
            .filter(|b| items::is_call_block(b))
        {
            self.emit_block(block, out);
        }
        // The round that held the program was summed when it ended.
        let usage = self
            .rounds
            .usage
            .clone()
            .or_else(|| turn.get("usage").cloned())
            .unwrap_or_else(|| json!({"output_tokens": 0}));
        self.emit_json(
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                   "usage": usage}),
            out,
        );
        self.round.decision = Some(Decision::Final);
        self.round.delta_sent = true;
        self.send_stop(out);
    }

    /// The upstream broke off or failed: the client gets a final error event.
    pub fn upstream_failed(&mut self, message: &str, code: &str, out: &mut Vec<Bytes>) {
        self.errored = true;
        self.round.decision = Some(Decision::Final);
        let kind = crate::error::anthropic_stream_error_type(code);
        self.emit_json(
            json!({"type": "error", "error": {"type": kind, "message": message}}),
            out,
        );
    }
}
