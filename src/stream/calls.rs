//! Tool calls of one streamed turn, reassembled from their deltas.
//!
//! Providers disagree on how deltas name their call: by `index` (OpenAI),
//! by `id` with no `index` (Gemini), with `id` repeated on every delta, with
//! several calls sharing one `index` but not one `id` (gateways), with
//! indices starting at 1 or -1 (Bedrock translators), or with neither
//! (continuations of the last call). [`CallTracker::slot`] maps all of them
//! to one call each.

use serde_json::{json, Value};

use crate::classify::{classify, Denial, Verdict};
use crate::intercept::mint_call_id;
use crate::plan::ToolPlan;

/// One call of the turn.
#[derive(Debug, Default)]
pub struct Call {
    up_index: Option<i64>,
    up_id: Option<String>,
    /// The name, once it arrived.
    pub name: String,
    /// The arguments so far.
    pub arguments: String,
    /// Decided when the name first arrives.
    pub verdict: Option<Verdict>,
    /// For a call that passes: its index and id as the client sees them.
    client: Option<(u32, String)>,
    /// A `run_code` call the proxy runs itself: it passes, but never reaches the client.
    pub held: bool,
}

impl Call {
    /// The id the client sees (allowed calls), or the upstream's (denied calls).
    pub fn id(&self) -> String {
        match &self.client {
            Some((_, id)) => id.clone(),
            None => self.up_id.clone().unwrap_or_default(),
        }
    }

    /// The call as a complete tool-call object.
    pub fn to_tool_call(&self) -> Value {
        json!({"id": self.id(), "type": "function",
               "function": {"name": self.name, "arguments": self.arguments}})
    }

    /// The denial for a denied call (arguments complete).
    pub fn denial(&self) -> Option<Denial> {
        Denial::for_call(
            self.verdict.unwrap_or(Verdict::Pass),
            &self.name,
            &self.arguments,
        )
    }

    /// Whether the call is withheld from the client. A call whose name never
    /// arrived is judged by the empty name.
    pub fn is_denied(&self) -> bool {
        self.verdict.is_some_and(Verdict::is_denied)
    }

    /// Whether the client got this call.
    pub fn is_forwarded(&self) -> bool {
        !self.is_denied() && !self.held
    }
}

/// All calls of one turn.
#[derive(Debug, Default)]
pub struct CallTracker {
    calls: Vec<Call>,
    next_client_index: u32,
}

impl CallTracker {
    /// The calls in arrival order.
    pub fn calls(&self) -> &[Call] {
        &self.calls
    }

    /// Whether no call has started.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Applies one upstream delta; returns the delta to forward, if any,
    /// and whether it differs from what the upstream sent.
    pub fn on_delta(&mut self, mut delta: Value, plan: &ToolPlan) -> Option<(Value, bool)> {
        let index = delta.get("index").and_then(Value::as_i64);
        let id = non_empty(delta.get("id")).map(str::to_owned);
        let name = non_empty(delta.pointer("/function/name")).map(str::to_owned);
        let args = delta
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let slot = self.slot(index, id.as_deref());
        let call = &mut self.calls[slot];
        if call.up_index.is_none() {
            call.up_index = index;
        }
        if call.up_id.is_none() {
            call.up_id = id;
        }
        call.arguments.push_str(&args);
        match call.verdict {
            None => {
                let name = name?;
                let verdict = classify(&name, plan.visibility(&name), plan.mode);
                call.name = name;
                call.verdict = Some(verdict);
                if verdict.is_denied() {
                    tracing::info!(target: "codemode::denial", tool = %call.name, "streamed tool call denied");
                    return None;
                }
                if plan.runs_code && call.name == crate::mode::RUN_CODE {
                    call.held = true;
                    return None;
                }
                let client_id = call.up_id.clone().unwrap_or_else(mint_call_id);
                call.client = Some((self.next_client_index, client_id.clone()));
                self.next_client_index += 1;
                // The first delta the client sees carries everything so far.
                let client_index = self.next_client_index - 1;
                let complete = index == Some(i64::from(client_index))
                    && delta.get("id").and_then(Value::as_str) == Some(client_id.as_str())
                    && delta.get("type").and_then(Value::as_str) == Some("function")
                    && args.len() == call.arguments.len();
                if complete {
                    return Some((delta, false));
                }
                delta["index"] = json!(client_index);
                delta["id"] = json!(client_id);
                delta["type"] = json!("function");
                delta["function"]["name"] = json!(call.name);
                delta["function"]["arguments"] = json!(call.arguments);
                Some((delta, true))
            }
            Some(v) if v.is_denied() || call.held => None,
            Some(_) => {
                let (client_index, client_id) = call.client.as_ref()?;
                let same_index = index == Some(i64::from(*client_index));
                let same_id = match delta.get("id") {
                    None => true,
                    Some(v) => v.as_str() == Some(client_id.as_str()),
                };
                if same_index && same_id {
                    return Some((delta, false));
                }
                delta["index"] = json!(client_index);
                if delta.get("id").is_some() {
                    delta["id"] = json!(client_id);
                }
                Some((delta, true))
            }
        }
    }

    /// Records `deltas` when each continues a call the client already has,
    /// under the index and id the client knows; then the chunk can go out
    /// as it came. Nothing is recorded (false) when any delta needs more.
    pub fn continue_unchanged(&mut self, deltas: &[DeltaView<'_>]) -> bool {
        let mut slots = Vec::with_capacity(deltas.len());
        for d in deltas {
            let id = d.id.as_deref().filter(|s| !s.is_empty());
            let named = d
                .function
                .as_ref()
                .and_then(|f| f.name.as_deref())
                .is_some_and(|n| !n.is_empty());
            let found = match (id, d.index) {
                (Some(id), _) => self
                    .calls
                    .iter()
                    .rposition(|c| c.up_id.as_deref() == Some(id)),
                (None, Some(i)) => self.calls.iter().rposition(|c| c.up_index == Some(i)),
                (None, None) => None,
            };
            let Some(slot) = found else { return false };
            let call = &self.calls[slot];
            let same = match &call.client {
                Some((ci, cid)) => {
                    d.index == Some(i64::from(*ci)) && id.is_none_or(|id| id == cid) && !named
                }
                None => false,
            };
            if !same || call.held || call.verdict.is_none_or(Verdict::is_denied) {
                return false;
            }
            slots.push(slot);
        }
        for (d, slot) in deltas.iter().zip(slots) {
            if let Some(args) = d.function.as_ref().and_then(|f| f.arguments.as_deref()) {
                self.calls[slot].arguments.push_str(args);
            }
        }
        true
    }

    /// Judges calls whose name never arrived, at the end of the turn.
    pub fn close(&mut self, plan: &ToolPlan) {
        for call in &mut self.calls {
            if call.verdict.is_none() {
                call.verdict = Some(classify(&call.name, plan.visibility(&call.name), plan.mode));
            }
        }
    }

    fn slot(&mut self, index: Option<i64>, id: Option<&str>) -> usize {
        let found = match (id, index) {
            // A known id continues its call. A new id names a call that began
            // without one at the same index (arguments before the name), or
            // else starts a call, even at an index already used.
            (Some(id), index) => self
                .calls
                .iter()
                .rposition(|c| c.up_id.as_deref() == Some(id))
                .or_else(|| {
                    self.calls
                        .iter()
                        .rposition(|c| c.up_id.is_none() && index.is_some() && c.up_index == index)
                }),
            (None, Some(i)) => self.calls.iter().rposition(|c| c.up_index == Some(i)),
            (None, None) => self.calls.len().checked_sub(1),
        };
        match found {
            Some(i) => i,
            None => {
                self.calls.push(Call::default());
                self.calls.len() - 1
            }
        }
    }
}

/// A tool-call delta, borrowed from the chunk's text.
#[derive(Debug, serde::Deserialize)]
pub struct DeltaView<'a> {
    index: Option<i64>,
    #[serde(borrow)]
    id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    function: Option<FunctionView<'a>>,
}

#[derive(Debug, serde::Deserialize)]
struct FunctionView<'a> {
    #[serde(borrow)]
    name: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<std::borrow::Cow<'a, str>>,
}

fn non_empty(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}
