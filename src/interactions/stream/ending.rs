//! How a round ends: its `interaction.completed` decided, the give-up
//! note and a program's calls written as steps, the client's end; and the
//! judge's [`RoundJudge`] side, whose round bookkeeping is [`StreamTurn`]'s.

use super::*;

impl InteractionsJudge {
    /// The round's end: the turn is decided here.
    pub(super) fn on_completed(&mut self, event: Map<String, Value>, out: &mut Vec<Bytes>) {
        if let Some(interaction) = event.get("interaction").and_then(Value::as_object) {
            self.take_id(interaction);
            if let Some(usage) = interaction.get("usage").filter(|u| u.is_object()) {
                self.turn.usage = Some(usage.clone());
            }
            let mut completed = interaction.clone();
            completed.remove("steps");
            self.turn.round.completed = Some(completed);
        }
        self.decide();
        if self.turn.hides_end() {
            return; // Another round follows in the same client stream.
        }
        if self.turn.wants_note() {
            self.give_up_note(out);
        }
        self.emit_end(None, out);
    }

    /// Decides the round once its calls are as whole as they will be.
    fn decide(&mut self) -> Decision {
        for slot in &mut self.turn.round.steps {
            if slot.done || slot.client.is_some() {
                continue;
            }
            // A withheld call whose stop never came: judged on what
            // streamed of it.
            if let Some(call) = steps::judge_step(&slot.whole(), &self.plan) {
                slot.call = Some(refine(slot.call.take(), call));
            }
        }
        let calls = self.turn.round.calls();
        self.turn.decide(&calls)
    }

    /// The client gets no call of this turn: a step of words tells why.
    fn give_up_note(&mut self, out: &mut Vec<Bytes>) {
        let note = turn::give_up_note(&self.turn.round.calls());
        self.emit_step(&steps::text_step(&note), out);
        self.turn.emitted_text = true;
    }

    /// A step the proxy writes, at the client's next index.
    fn emit_step(&mut self, step: &Value, out: &mut Vec<Bytes>) {
        let index = self.next_index;
        self.next_index += 1;
        for e in events::step_events(index, step) {
            out.push(frame(&e));
        }
    }

    /// The client stream's end: the final status, the interaction (the
    /// last round's id, or `handed`'s: a program's minted one), usage
    /// summed over every round.
    fn emit_end(&mut self, handed: Option<&Value>, out: &mut Vec<Bytes>) {
        let mut interaction = self.template.clone();
        if let Some(completed) = &self.turn.round.completed {
            interaction.extend(completed.clone());
        }
        let status = match handed {
            Some(turn) => {
                if let Some(o) = turn.as_object() {
                    interaction.extend(o.clone());
                }
                "requires_action"
            }
            None if self.turn.round.passed_a_call() => "requires_action",
            None => match interaction.get("status").and_then(Value::as_str) {
                Some(s) if !matches!(s, "requires_action" | "in_progress") => s,
                _ => "completed",
            },
        }
        .to_owned();
        if handed.is_none() {
            if let Some(id) = &self.turn.round.upstream_id {
                interaction.insert("id".into(), json!(id));
            }
        }
        interaction.insert("status".into(), json!(status));
        interaction.remove("steps");
        if let Some(total) = self.turn.visible_usage() {
            interaction.insert("usage".into(), total);
        }
        let end = events::completed(&Value::Object(interaction));
        out.push(Bytes::from(end));
        // The client's stream ends with the marker, once, whether the
        // provider's came or not.
        self.done_sentinel = true;
    }

    /// The client stream is complete: a `[DONE]` that came goes out last.
    fn close(&mut self, out: &mut Vec<Bytes>) {
        if std::mem::take(&mut self.done_sentinel) {
            out.push(Bytes::from_static(events::DONE));
        }
    }
}

impl RoundJudge for InteractionsJudge {
    fn on_event(&mut self, ev: SseEvent, out: &mut Vec<Bytes>) -> Result<(), Unreadable> {
        self.judge_event(ev, out)
    }

    fn end_round(&mut self, out: &mut Vec<Bytes>) -> RoundEnd {
        if self.turn.decision.is_none() && !self.turn.errored {
            // No end event came: decided as at one. A client that got no
            // call is still told why, and gets its end.
            if self.decide() == Decision::GiveUp {
                if self.turn.wants_note() {
                    self.give_up_note(out);
                }
                self.emit_end(None, out);
            }
        }
        let text = self.turn.round.text();
        let turn = ModelTurn {
            calls: self.turn.round.calls(),
            replay: Value::Array(self.turn.round.steps.iter().map(RoundStep::whole).collect()),
            text: (!text.is_empty()).then_some(text),
            response_id: self.turn.round.upstream_id.clone(),
        };
        let end = self.turn.end::<Interactions>(turn);
        if matches!(end, RoundEnd::Done { .. }) {
            self.close(out);
        }
        end
    }

    fn start_repair_round(&mut self) {
        self.text_before |= self.turn.emitted_text;
        self.turn.start_repair_round();
    }

    fn start_program_round(&mut self) {
        self.text_before |= self.turn.emitted_text;
        self.turn.start_program_round();
    }

    /// `turn` is the interaction whose `steps` hold the program's calls:
    /// each goes out as a step, then the interaction's end.
    fn hand_off(&mut self, turn: &Value, out: &mut Vec<Bytes>) {
        for step in turn["steps"].as_array().into_iter().flatten() {
            self.emit_step(step, out);
        }
        // The round that held the program was summed when it ended.
        self.turn.usage = None;
        self.emit_end(Some(turn), out);
        self.close(out);
    }

    fn upstream_failed(&mut self, message: &str, code: &str, out: &mut Vec<Bytes>) {
        self.turn.failed();
        out.push((crate::interactions::provider::ERRORS.stream)(
            message, code,
        ));
    }

    fn repairs(&self) -> u32 {
        self.turn.rounds.repairs
    }

    fn round_usage(&self) -> Option<&Value> {
        self.turn.usage.as_ref()
    }
}
