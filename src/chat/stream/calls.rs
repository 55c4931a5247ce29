//! Tool calls of one streamed turn, reassembled from their deltas.
//!
//! Providers disagree on how deltas name their call: by `index` (OpenAI),
//! by `id` with no `index` (Gemini), with `id` repeated on every delta, with
//! several calls sharing one `index` but not one `id` (gateways), with
//! indices starting at 1 or -1 (Bedrock translators), or with neither
//! (continuations of the last call). [`CallTracker::slot`] maps all of them
//! to one call each.

use serde_json::{json, Map, Value};

use crate::classify::{classify, Verdict};
use crate::plan::ToolPlan;
use crate::turn::mint_call_id;
use crate::turn::{fate, judge_names, JudgedCall, Obj, Shape};

/// One call of the turn.
#[derive(Debug, Default)]
pub struct Call {
    up_index: Option<i64>,
    up_id: Option<String>,
    /// The id a withheld call without one is answered under.
    minted: Option<String>,
    /// The name it was judged by, once a name arrived.
    pub name: String,
    /// The arguments (a custom call's input) so far.
    pub arguments: String,
    /// Decided when the name first arrives.
    pub verdict: Option<Verdict>,
    /// How the call is written.
    pub shape: Shape,
    /// For a call that passes: its index and id as the client sees them.
    client: Option<(u32, String)>,
    /// A `run_code` call the proxy runs itself: it passes, but never reaches the client.
    pub held: bool,
    /// Every delta of the call merged, provider fields included, for a
    /// replay of the model's turn.
    raw: Map<String, Value>,
}

impl Call {
    /// The id the client sees (allowed calls), or the upstream's (withheld calls).
    pub fn id(&self) -> String {
        match &self.client {
            Some((_, id)) => id.clone(),
            None => self
                .up_id
                .clone()
                .or_else(|| self.minted.clone())
                .unwrap_or_default(),
        }
    }

    /// The call, judged, with complete arguments.
    pub fn judged(&self, plan: &ToolPlan) -> JudgedCall {
        JudgedCall {
            raw: (self.shape != Shape::Legacy).then(|| self.whole()),
            id: self.id(),
            name: self.name.clone(),
            arguments: self.arguments.clone(),
            shape: self.shape,
            fate: fate(
                self.verdict.unwrap_or(Verdict::Pass),
                &self.name,
                &self.arguments,
                plan,
            ),
        }
    }
}

impl Call {
    /// The call as one `tool_calls` entry: its merged deltas, under the name
    /// it was judged by and with its whole arguments (a continuation the
    /// fast path recorded is not in the merged deltas).
    fn whole(&self) -> Map<String, Value> {
        let mut call = self.raw.clone();
        call.remove("index");
        let (kind, body_key, args_key) = match self.shape {
            Shape::Custom => ("custom", "custom", "input"),
            Shape::Function | Shape::Legacy => ("function", "function", "arguments"),
        };
        call.insert("type".into(), json!(kind));
        let body = call
            .entry(body_key)
            .or_insert_with(|| Value::Object(Map::new()));
        if !body.is_object() {
            *body = Value::Object(Map::new());
        }
        body["name"] = json!(self.name);
        body[args_key] = json!(self.arguments);
        call
    }
}

/// All calls of one turn.
#[derive(Debug, Default)]
pub struct CallTracker {
    calls: Vec<Call>,
    /// The slot of the legacy `function_call`, once one started.
    legacy: Option<usize>,
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

    /// Applies one upstream `tool_calls` delta; returns the delta to forward,
    /// if any.
    pub fn on_delta(&mut self, delta: Value, plan: &ToolPlan) -> Option<Value> {
        // A client reads no call out of anything but an object.
        let Value::Object(mut delta) = delta else {
            return None;
        };
        let index = delta.get("index").and_then(Value::as_i64);
        let id = non_empty(delta.get("id")).map(str::to_owned);
        let custom = delta.get("type").and_then(Value::as_str) == Some("custom")
            || (delta.contains_key("custom") && !delta.contains_key("function"));
        let args = fragment(&delta);
        let slot = self.slot(index, id.as_deref());
        let call = &mut self.calls[slot];
        super::accumulate::accumulate(&mut call.raw, &delta);
        if call.up_index.is_none() {
            call.up_index = index;
        }
        if call.up_id.is_none() {
            call.up_id = id;
        }
        call.arguments.push_str(&args);
        match call.verdict {
            None => {
                let names = names(&delta);
                let (name, verdict) = judge_names(&names, plan)?;
                call.name = name.to_owned();
                call.verdict = Some(verdict);
                call.shape = if custom {
                    Shape::Custom
                } else {
                    Shape::Function
                };
                if verdict.is_denied() {
                    return None;
                }
                if plan.runs_code && call.name == crate::mode::RUN_CODE {
                    call.held = true;
                    return None;
                }
                let client_id = call.up_id.clone().unwrap_or_else(mint_call_id);
                let client_index = self.next_client_index;
                call.client = Some((client_index, client_id.clone()));
                self.next_client_index += 1;
                // The first delta the client sees carries everything so far.
                let (kind, other, body_key, args_key) = match call.shape {
                    Shape::Custom => ("custom", "function", "custom", "input"),
                    Shape::Function | Shape::Legacy => {
                        ("function", "custom", "function", "arguments")
                    }
                };
                let complete = index == Some(i64::from(client_index))
                    && delta.get("id").and_then(Value::as_str) == Some(client_id.as_str())
                    && delta.get("type").and_then(Value::as_str) == Some(kind)
                    && !delta.contains_key(other)
                    && names.len() == 1
                    && args.len() == call.arguments.len();
                if complete {
                    return Some(Value::Object(delta));
                }
                delta.remove(other);
                delta.insert("index".into(), json!(client_index));
                delta.insert("id".into(), json!(client_id));
                delta.insert("type".into(), json!(kind));
                let mut body = match delta.remove(body_key) {
                    Some(Value::Object(body)) => body,
                    _ => Map::new(),
                };
                body.insert("name".into(), json!(call.name));
                body.insert(args_key.into(), json!(call.arguments));
                delta.insert(body_key.into(), Value::Object(body));
                Some(Value::Object(delta))
            }
            Some(v) if v.is_denied() || call.held => None,
            Some(_) => {
                let (client_index, client_id) = call.client.as_ref()?;
                // Only the name the call was judged by ever reaches the client:
                // a later name would be appended, or replace it.
                strip_names(&mut delta);
                delta.insert("index".into(), json!(client_index));
                if delta.contains_key("id") {
                    delta.insert("id".into(), json!(client_id));
                }
                Some(Value::Object(delta))
            }
        }
    }

    /// Applies one upstream legacy `function_call` delta (one such call per
    /// turn, no index, no id); returns what to forward as the client's
    /// `function_call`.
    pub fn on_legacy(&mut self, fc: Value, plan: &ToolPlan) -> Option<Value> {
        let Value::Object(mut fc) = fc else {
            return None;
        };
        let slot = match self.legacy {
            Some(slot) => slot,
            None => {
                self.calls.push(Call {
                    shape: Shape::Legacy,
                    ..Call::default()
                });
                self.legacy = Some(self.calls.len() - 1);
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[slot];
        let args = fc.get("arguments").and_then(Value::as_str).unwrap_or("");
        call.arguments.push_str(args);
        let whole = args.len() == call.arguments.len();
        match call.verdict {
            None => {
                let name = non_empty(fc.get("name"))?;
                let (name, verdict) = judge_names(&[name], plan)?;
                call.name = name.to_owned();
                call.verdict = Some(verdict);
                if verdict.is_denied() {
                    tracing::info!(target: "codemode::denial", tool = %call.name, "streamed function_call denied");
                    return None;
                }
                if plan.runs_code && call.name == crate::mode::RUN_CODE {
                    call.held = true;
                    return None;
                }
                // Legacy calls take no client index; ids are the proxy's own.
                call.client = Some((u32::MAX, mint_call_id()));
                if !whole {
                    fc.insert("arguments".into(), json!(call.arguments));
                }
                Some(Value::Object(fc))
            }
            Some(v) if v.is_denied() || call.held => None,
            Some(_) => {
                fc.remove("name");
                Some(Value::Object(fc))
            }
        }
    }

    /// Records `deltas` when each continues a call the client already has,
    /// under the index and id the client knows; then the chunk can go out
    /// as it came. Nothing is recorded (false) when any delta needs more.
    pub fn continue_unchanged(&mut self, deltas: &[Obj<DeltaView<'_>>]) -> bool {
        let mut slots = Vec::with_capacity(deltas.len());
        for Obj(d) in deltas {
            if d.custom.is_some() || d.kind.as_deref().is_some_and(|k| k != "function") {
                return false;
            }
            let id = d.id.as_deref().filter(|s| !s.is_empty());
            let named = d
                .function
                .as_ref()
                .and_then(|Obj(f)| f.name.as_deref())
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
        for (Obj(d), slot) in deltas.iter().zip(slots) {
            if let Some(args) = d
                .function
                .as_ref()
                .and_then(|Obj(f)| f.arguments.as_deref())
            {
                self.calls[slot].arguments.push_str(args);
            }
        }
        true
    }

    /// Judges calls whose name never arrived, at the end of the turn, and
    /// gives withheld calls without an id one to be answered under.
    pub fn close(&mut self, plan: &ToolPlan) {
        for call in &mut self.calls {
            if call.verdict.is_none() {
                call.verdict = Some(classify(&call.name, plan.visibility(&call.name), plan.mode));
            }
            if call.up_id.is_none() && call.client.is_none() && call.minted.is_none() {
                call.minted = Some(mint_call_id());
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
            // A legacy `function_call` is never continued by a `tool_calls` delta.
            (None, None) => self.calls.iter().rposition(|c| c.shape != Shape::Legacy),
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
    function: Option<Obj<FunctionView<'a>>>,
    /// A custom call's body: never continued unparsed.
    #[serde(borrow)]
    custom: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, rename = "type")]
    kind: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Debug, serde::Deserialize)]
struct FunctionView<'a> {
    #[serde(borrow)]
    name: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<std::borrow::Cow<'a, str>>,
}

/// Every name a client could read off a delta.
fn names(delta: &Map<String, Value>) -> Vec<&str> {
    ["function", "custom"]
        .into_iter()
        .filter_map(|k| non_empty(delta.get(k).and_then(|f| f.get("name"))))
        .collect()
}

/// The arguments (or custom input) a delta adds.
fn fragment(delta: &Map<String, Value>) -> String {
    let mut out = String::new();
    for (k, field) in [("function", "arguments"), ("custom", "input")] {
        if let Some(s) = delta
            .get(k)
            .and_then(|f| f.get(field))
            .and_then(Value::as_str)
        {
            out.push_str(s);
        }
    }
    out
}

/// Removes the names a continuation delta carries; true when there were any.
fn strip_names(delta: &mut Map<String, Value>) {
    for k in ["function", "custom"] {
        if let Some(Value::Object(f)) = delta.get_mut(k) {
            f.remove("name");
        }
    }
}

fn non_empty(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}
