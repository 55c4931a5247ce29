//! How a round ends: its `message_delta` decided (usage summed, the give-up
//! note written as a text block), a program's calls handed out as
//! `tool_use` blocks, a failure reported; and the judge's [`RoundJudge`]
//! side, whose round bookkeeping is [`StreamTurn`]'s.

use super::*;

impl MessagesJudge {
    /// The round's end (`message_delta`, or a `message_stop` or the end of
    /// the body without one): the turn is decided here, and when the client
    /// sees it end, its `message_delta` goes out with usage summed.
    pub(super) fn end_message(&mut self, delta: Option<Map<String, Value>>, out: &mut Vec<Bytes>) {
        if self.turn.decision.is_some() {
            return;
        }
        let mut usage = self.turn.round.start_usage.clone();
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
        self.turn.usage = usage;
        let decision = self.decide();
        let mut delta = match (decision, delta) {
            (Decision::Repair | Decision::Program, _) => return,
            (Decision::GiveUp, delta) => {
                if self.turn.wants_note() {
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
        if self.turn.rounds.usage.is_some() || !delta.contains_key("usage") {
            if let Some(total) = self.turn.visible_usage() {
                delta.insert("usage".into(), total);
            }
        }
        self.emit(delta, out);
        self.turn.round.delta_sent = true;
    }

    /// The client's `message_stop`, once, after its `message_delta`.
    pub(super) fn send_stop(&mut self, out: &mut Vec<Bytes>) {
        let visible = matches!(
            self.turn.decision,
            Some(Decision::Final | Decision::Splice | Decision::GiveUp)
        );
        if !visible || self.turn.errored || self.turn.round.stop_sent {
            return;
        }
        self.turn.round.stop_sent = true;
        out.push(Bytes::from_static(
            b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        ));
    }

    /// Decides the round once its calls are as whole as they will be.
    pub(super) fn decide(&mut self) -> Decision {
        for block in &mut self.turn.round.blocks {
            if block.done || block.client.is_some() {
                continue;
            }
            // A withheld call whose stop never came: judged on what
            // streamed of it.
            if let Some(call) = block.judge(&self.plan) {
                block.call = Some(refine(block.call.take(), call));
            }
        }
        let calls = self.turn.round.calls();
        self.turn.decide(&calls)
    }

    /// The client gets no call of this turn: a text block tells why.
    pub(super) fn give_up_note(&mut self, out: &mut Vec<Bytes>) {
        let note = turn::give_up_note(&self.turn.round.calls());
        self.emit_block(&json!({"type": "text", "text": note}), out);
        self.turn.emitted_text = true;
    }
}

impl RoundJudge for MessagesJudge {
    fn on_event(&mut self, ev: SseEvent, out: &mut Vec<Bytes>) -> Result<(), Unreadable> {
        self.judge_event(ev, out)
    }

    fn end_round(&mut self, out: &mut Vec<Bytes>) -> RoundEnd {
        if self.turn.decision.is_none() {
            // No message_delta came: decided as at one. A client that got
            // no call is still told why, and gets its message's end.
            self.end_message(None, out);
        }
        if self.turn.round.delta_sent {
            self.send_stop(out);
        }
        let text = self.turn.round.text();
        let turn = ModelTurn {
            calls: self.turn.round.calls(),
            replay: self.turn.round.assistant(),
            text: (!text.is_empty()).then_some(text),
            response_id: None,
        };
        self.turn.end::<Messages>(turn)
    }

    fn start_repair_round(&mut self) {
        self.turn.start_repair_round();
    }

    fn start_program_round(&mut self) {
        self.turn.start_program_round();
    }

    /// `turn` is an assistant message whose `content` holds the program's
    /// calls as `tool_use` blocks: each goes out as a block the client
    /// opens, fills and closes, then the message's `message_delta` and
    /// `message_stop`.
    fn hand_off(&mut self, turn: &Value, out: &mut Vec<Bytes>) {
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
            .turn
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
        self.turn.decision = Some(Decision::Final);
        self.turn.round.delta_sent = true;
        self.send_stop(out);
    }

    /// The client gets a final `error` event, typed as the code's status
    /// would be on a Messages route.
    fn upstream_failed(&mut self, message: &str, code: &str, out: &mut Vec<Bytes>) {
        self.turn.failed();
        self.emit_json(
            crate::messages::provider::stream_error_event(message, code),
            out,
        );
    }

    fn repairs(&self) -> u32 {
        self.turn.rounds.repairs
    }

    fn round_usage(&self) -> Option<&Value> {
        self.turn.usage.as_ref()
    }
}
