//! How a round ends: its terminal event decided, the give-up note and a
//! program's calls written as items, a failure reported; and the judge's
//! [`RoundJudge`] side, whose round bookkeeping is [`StreamTurn`]'s.

use super::*;

impl ResponsesJudge {
    /// The round's terminal event: the turn is decided here.
    pub(super) fn on_terminal(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        self.take_id(&event);
        if let Some(usage) = event
            .get("response")
            .and_then(|r| r.get("usage"))
            .filter(|u| u.is_object())
        {
            self.turn.usage = Some(usage.clone());
        }
        self.decide();
        if self.turn.hides_end() {
            return; // Another round follows in the same client stream.
        }
        if self.turn.wants_note() {
            self.give_up_note(out);
        }
        let response = event
            .entry("response")
            .or_insert_with(|| json!({"object": "response"}));
        if let Value::Object(response) = response {
            self.finish_response(response);
        }
        self.emit(event, out);
    }

    /// Decides the round once its calls are as whole as they will be.
    pub(super) fn decide(&mut self) -> Decision {
        for slot in &mut self.turn.round.items {
            if slot.done || slot.client.is_some() {
                continue;
            }
            // A withheld call whose whole item never came: judged on what
            // streamed of it.
            if let Some(call) = items::judge_item(&slot.item, &self.plan) {
                slot.call = Some(refine(slot.call.take(), call));
            }
        }
        let calls = self.turn.round.calls();
        self.turn.decide(&calls)
    }

    /// The client gets no call of this turn: a message item tells why.
    pub(super) fn give_up_note(&mut self, out: &mut Vec<Bytes>) {
        let note = turn::give_up_note(&self.turn.round.calls());
        // Named from the response and round, not at random: a stream cut
        // anywhere must read the same.
        let upstream = self.turn.round.upstream_id.as_deref().unwrap_or("");
        let round = self.turn.rounds.before().to_string();
        let hash = crate::tenant::hash_parts("note item", &[upstream.as_bytes(), round.as_bytes()]);
        let id = format!("msg_{}", &crate::tenant::hex(&hash)[..50]);
        let item = json!({"type": "message", "id": id, "status": "completed", "role": "assistant",
                          "content": [{"type": "output_text", "text": note, "annotations": []}]});
        self.emit_whole_item(item, out);
        self.turn.emitted_text = true;
    }

    pub(super) fn emit_item(
        &mut self,
        kind: &str,
        client: usize,
        item: Value,
        out: &mut Vec<Bytes>,
    ) {
        let mut event = Map::new();
        event.insert("type".into(), json!(kind));
        event.insert("sequence_number".into(), Value::Null);
        event.insert("output_index".into(), json!(client));
        event.insert("item".into(), item);
        self.emit(event, out);
    }

    /// An item the proxy writes, streamed as providers stream one (its
    /// text or arguments as deltas), at the client's next `output_index`.
    pub(super) fn emit_whole_item(&mut self, item: Value, out: &mut Vec<Bytes>) {
        let client = self.seen.len();
        self.seen.push(Some(item.clone()));
        for event in events::item_events(client, &item) {
            self.emit(event, out);
        }
    }

    /// The upstream's failed terminal: it reaches the client and ends the
    /// round; no repair follows.
    pub(super) fn on_failed(&mut self, mut event: Map<String, Value>, out: &mut Vec<Bytes>) {
        self.turn.failed();
        self.take_id(&event);
        if let Some(Value::Object(response)) = event.get_mut("response") {
            self.finish_response(response);
        }
        self.emit(event, out);
    }

    /// An event after an `error`: the round is over, but the
    /// `response.failed` that carries the same error still goes out (Codex
    /// reads the error's code there: quota stops it, anything else is
    /// retried).
    pub(super) fn after_error(
        &mut self,
        data: &str,
        out: &mut Vec<Bytes>,
    ) -> Result<(), Unreadable> {
        if let Ok(Value::Object(event)) = serde_json::from_str::<Value>(data) {
            if event.get("type").and_then(Value::as_str) == Some("response.failed") {
                check_event(&event)?;
                self.on_failed(event, out);
            }
        }
        Ok(())
    }

    /// The client stream is complete: a `[DONE]` that came goes out last.
    fn close(&mut self, out: &mut Vec<Bytes>) {
        if std::mem::take(&mut self.done_sentinel) {
            out.push(Bytes::from_static(b"data: [DONE]\n\n"));
        }
    }

    /// A `response.completed` the proxy writes, holding `response`.
    fn emit_completed(&mut self, mut response: Map<String, Value>, out: &mut Vec<Bytes>) {
        response.insert("status".into(), json!("completed"));
        self.finish_response(&mut response);
        let mut event = Map::new();
        event.insert("type".into(), json!("response.completed"));
        event.insert("sequence_number".into(), Value::Null);
        event.insert("response".into(), Value::Object(response));
        self.emit(event, out);
    }
}

impl RoundJudge for ResponsesJudge {
    fn on_event(&mut self, ev: SseEvent, out: &mut Vec<Bytes>) -> Result<(), Unreadable> {
        self.judge_event(ev, out)
    }

    fn end_round(&mut self, out: &mut Vec<Bytes>) -> RoundEnd {
        if self.turn.decision.is_none() {
            // No terminal event came: decided as at one. A client that got
            // no call is still told why, and gets its terminal.
            if self.decide() == Decision::GiveUp {
                if self.turn.wants_note() {
                    self.give_up_note(out);
                }
                let response = self
                    .template
                    .clone()
                    .and_then(|t| t.as_object().cloned())
                    .unwrap_or_default();
                self.emit_completed(response, out);
            }
        }
        let text = self.turn.round.text();
        let turn = ModelTurn {
            calls: self.turn.round.calls(),
            replay: Value::Array(self.turn.round.model_items()),
            text: (!text.is_empty()).then_some(text),
            response_id: self.turn.round.upstream_id.clone(),
        };
        let end = self.turn.end::<Responses>(turn);
        if matches!(end, RoundEnd::Done { .. }) {
            self.close(out);
        }
        end
    }

    fn start_repair_round(&mut self) {
        self.turn.start_repair_round();
    }

    fn start_program_round(&mut self) {
        self.turn.start_program_round();
    }

    /// `turn` is a response object whose `output` holds the program's
    /// calls: each goes out as an item the client opens and completes,
    /// then the response.
    fn hand_off(&mut self, turn: &Value, out: &mut Vec<Bytes>) {
        let calls: Vec<Value> = turn
            .get("output")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for item in calls {
            self.emit_whole_item(item, out);
        }
        // The round that held the program was summed when it ended.
        self.turn.usage = None;
        self.emit_completed(turn.as_object().cloned().unwrap_or_default(), out);
        self.close(out);
    }

    fn upstream_failed(&mut self, message: &str, code: &str, out: &mut Vec<Bytes>) {
        self.turn.failed();
        let event = crate::responses::provider::stream_error_event(message, code);
        self.emit(event, out);
    }

    fn repairs(&self) -> u32 {
        self.turn.rounds.repairs
    }

    fn round_usage(&self) -> Option<&Value> {
        self.turn.usage.as_ref()
    }
}
