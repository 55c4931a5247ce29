//! A scripted model behind Google's Interactions API (`POST
//! /{v1,v1beta,v1alpha}/interactions`, any model): it answers each create
//! with the next list of steps, as an interaction or as the event stream
//! the API sends (`stream: true`: `interaction.created`, `step.start` /
//! `step.delta` / `step.stop` per step, a call's arguments in two
//! `arguments_delta` pieces, `interaction.completed`, `data: [DONE]`), keeps
//! the interactions it gave (unless `store: false`), and enforces the API's
//! rules on what it gets (a 400 like Google's when one is broken, a 404 for
//! an interaction it never gave):
//! - `previous_interaction_id` names an interaction it stored, and never
//!   comes with `store: false`;
//! - the calls of that interaction are each answered by a `function_result`
//!   in `input`;
//! - every `function_result` answers a `function_call` earlier in `input`
//!   or pending in the interaction it continues;
//! - every `function_call` in `input` is answered later in `input`;
//! - a call the model made comes back (stateless) after the `thought` step
//!   holding the signature the model gave with it, as Gemini 3 requires.
//!
//! Every turn with calls starts with a `thought` step carrying a signature,
//! as Gemini 3's do. A step `{"type": "echo"}` becomes a `model_output` with
//! the text "ANSWER: " and the result of the last `function_result` it was
//! sent (a string as is, anything else as JSON).
//!
//! Wire shapes: google-genai 3.6.1's `_gaos/types/interactions` and the
//! captured traffic of both SDKs (docs/testing.md, "Interactions").

use std::collections::HashMap;

use serde_json::{json, Value};
use wiremock::{Request, ResponseTemplate};

use super::scripted_api::{ScriptedApi, ScriptedModel, State};

/// What the model got, and what it answered.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The path it was sent to.
    pub path: String,
    pub body: Value,
    /// 200, 400 with the rule broken, 404 for an unknown interaction.
    pub status: u16,
    pub refusal: String,
    /// The interaction it answered with ("" when it refused).
    pub id: String,
    /// The steps of its answer.
    pub steps: Vec<Value>,
}

#[derive(Default)]
struct Stored {
    /// Calls of the interaction not answered yet.
    pending: Vec<String>,
}

/// What the model keeps besides its script.
#[derive(Default)]
pub struct Interactions {
    stored: HashMap<String, Stored>,
    /// The thought signature each call the model made came with.
    signature_of: HashMap<String, String>,
}

pub type InteractionsModel = ScriptedModel<Interactions>;

impl InteractionsModel {
    /// The ids of the interactions it gave, in order.
    pub fn ids(&self) -> Vec<String> {
        self.seen()
            .into_iter()
            .filter(|s| !s.id.is_empty())
            .map(|s| s.id)
            .collect()
    }
}

/// A `function_call` step.
pub fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"type": "function_call", "id": id, "name": name, "arguments": arguments})
}

/// A `run_code` call running `program`.
pub fn run_code(id: &str, program: &str) -> Value {
    call(id, "run_code", json!({"code": program}))
}

/// A `model_output` step holding `text`.
pub fn text(text: &str) -> Value {
    json!({"type": "model_output", "content": [{"type": "text", "text": text}]})
}

/// The step echoing the last function result.
pub fn echo() -> Value {
    json!({"type": "echo"})
}

/// The steps of an `input`: a string or one content is the user's turn.
pub fn input_steps(input: &Value) -> Vec<Value> {
    match input {
        Value::Null => vec![],
        Value::String(s) => {
            vec![json!({"type": "user_input", "content": [{"type": "text", "text": s}]})]
        }
        Value::Array(items) => items.clone(),
        one => vec![json!({"type": "user_input", "content": [one]})],
    }
}

fn error(status: u16, message: &str) -> ResponseTemplate {
    let name = if status == 404 {
        "NOT_FOUND"
    } else {
        "INVALID_ARGUMENT"
    };
    ResponseTemplate::new(status)
        .set_body_json(json!({"error": {"code": status, "message": message, "status": name}}))
}

impl Interactions {
    /// The API's rules on a create; the first one broken, with its status.
    fn rules(&self, body: &Value) -> Option<(u16, String)> {
        let input = input_steps(&body["input"]);
        let mut pending: Vec<String> = Vec::new();
        if let Some(prev) = body.get("previous_interaction_id") {
            let prev = prev.as_str().unwrap_or("");
            if body["store"] == false {
                return Some((
                    400,
                    "previous_interaction_id cannot be used with store=false.".into(),
                ));
            }
            let Some(stored) = self.stored.get(prev) else {
                return Some((404, format!("Interaction {prev} not found.")));
            };
            pending = stored.pending.clone();
        }
        let id_of = |s: &Value, k: &str| s[k].as_str().unwrap_or("").to_owned();
        for (i, step) in input.iter().enumerate() {
            match step["type"].as_str().unwrap_or("") {
                "function_result" => {
                    let id = id_of(step, "call_id");
                    let placed = pending.contains(&id)
                        || input[..i]
                            .iter()
                            .any(|p| p["type"] == "function_call" && id_of(p, "id") == id);
                    if !placed {
                        return Some((
                            400,
                            format!("function_result call_id {id} matches no function_call."),
                        ));
                    }
                }
                "function_call" => {
                    let id = id_of(step, "id");
                    let answered = input[i + 1..]
                        .iter()
                        .any(|p| p["type"] == "function_result" && id_of(p, "call_id") == id);
                    if !answered {
                        return Some((400, format!("function_call {id} has no function_result.")));
                    }
                    if let Some(sig) = self.signature_of.get(&id) {
                        let signed = input[..i]
                            .iter()
                            .any(|p| p["type"] == "thought" && p["signature"] == sig.as_str());
                        if !signed {
                            return Some((
                                400,
                                format!("function_call {id} is missing its thought signature."),
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
        for id in &pending {
            let answered = input
                .iter()
                .any(|p| p["type"] == "function_result" && id_of(p, "call_id") == *id);
            if !answered {
                return Some((400, format!("function_call {id} has no function_result.")));
            }
        }
        None
    }
}

/// The events of an interaction `id` with `steps`, streamed.
fn events(id: &str, model: &str, status: &str, steps: &[Value]) -> String {
    let mut out: Vec<Value> = vec![
        json!({"event_type": "interaction.created", "interaction": {"id": id, "status": "in_progress",
            "object": "interaction", "model": model}}),
        json!({"event_type": "interaction.status_update", "interaction_id": id, "status": "in_progress"}),
    ];
    let halves = |s: &str| {
        let mut cut = s.len() / 2;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        [s[..cut].to_owned(), s[cut..].to_owned()]
    };
    for (index, step) in steps.iter().enumerate() {
        let deltas: Vec<Value> = match step["type"].as_str().unwrap_or("") {
            "thought" => {
                out.push(json!({"event_type": "step.start", "index": index, "step": {"type": "thought"}}));
                vec![json!({"type": "thought_signature", "signature": step["signature"]})]
            }
            "function_call" => {
                out.push(json!({"event_type": "step.start", "index": index, "step": {
                    "type": "function_call", "id": step["id"], "name": step["name"], "arguments": {}}}));
                halves(&step["arguments"].to_string())
                    .into_iter()
                    .map(|a| json!({"type": "arguments_delta", "arguments": a}))
                    .collect()
            }
            "model_output" => {
                out.push(json!({"event_type": "step.start", "index": index, "step": {"type": "model_output"}}));
                step["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["text"].as_str())
                    .flat_map(halves)
                    .map(|t| json!({"type": "text", "text": t}))
                    .collect()
            }
            _ => {
                out.push(json!({"event_type": "step.start", "index": index, "step": step}));
                vec![]
            }
        };
        for delta in deltas {
            out.push(json!({"event_type": "step.delta", "index": index, "delta": delta}));
        }
        out.push(json!({"event_type": "step.stop", "index": index}));
    }
    out.push(
        json!({"event_type": "interaction.status_update", "interaction_id": id, "status": status}),
    );
    out.push(
        json!({"event_type": "interaction.completed", "interaction": {"id": id, "status": status,
        "object": "interaction", "model": model, "usage": usage()}}),
    );
    let mut text: String = out
        .iter()
        .enumerate()
        .map(|(n, e)| {
            let mut e = e.clone();
            e["event_id"] = json!(format!("evt_{}", n + 1));
            format!(
                "event: {}\ndata: {e}\n\n",
                e["event_type"].as_str().unwrap()
            )
        })
        .collect();
    text.push_str("event: done\ndata: [DONE]\n\n");
    text
}

fn usage() -> Value {
    json!({"total_input_tokens": 100, "total_output_tokens": 10, "total_tokens": 110})
}

impl ScriptedApi for Interactions {
    type Seen = Seen;
    const PATHS: &'static str = "^/v1(beta|alpha)?/interactions$";

    fn answer(st: &mut State<Interactions>, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let mut seen = Seen {
            path: req.url.path().to_owned(),
            body: body.clone(),
            status: 200,
            refusal: String::new(),
            id: String::new(),
            steps: vec![],
        };
        if let Some((status, rule)) = st.kept.rules(&body) {
            seen.status = status;
            seen.refusal = rule.clone();
            st.seen.push(seen);
            return error(status, &rule);
        }
        let Some(script) = st.script.pop_front() else {
            seen.status = 500;
            seen.refusal = "script exhausted".into();
            st.seen.push(seen);
            return ResponseTemplate::new(500).set_body_string("script exhausted");
        };
        st.n += 1;
        let n = st.n;
        let id = format!("v1_ChdQcm92aWRlclR1cm4{n}");
        let input = input_steps(&body["input"]);
        let mut steps = Vec::new();
        let calls: Vec<String> = script
            .iter()
            .filter(|s| s["type"] == "function_call")
            .map(|s| s["id"].as_str().unwrap_or("").to_owned())
            .collect();
        if !calls.is_empty() {
            let signature = format!("c2lnbmF0dXJlLXR1cm4t{n}");
            steps.push(json!({"type": "thought", "signature": signature}));
            for c in &calls {
                st.kept.signature_of.insert(c.clone(), signature.clone());
            }
        }
        for step in script {
            if step["type"] == "echo" {
                let last = input
                    .iter()
                    .rev()
                    .find(|s| s["type"] == "function_result")
                    .map(|s| match &s["result"] {
                        Value::String(t) => t.clone(),
                        other => other.to_string(),
                    })
                    .unwrap_or_default();
                steps.push(text(&format!("ANSWER: {last}")));
            } else {
                steps.push(step);
            }
        }
        if body["store"] != false {
            st.kept.stored.insert(
                id.clone(),
                Stored {
                    pending: calls.clone(),
                },
            );
        }
        let status = if calls.is_empty() {
            "completed"
        } else {
            "requires_action"
        };
        let model = body["model"].as_str().unwrap_or("gemini-test").to_owned();
        seen.id = id.clone();
        seen.steps = steps.clone();
        st.seen.push(seen);
        if body["stream"] == true {
            return ResponseTemplate::new(200).set_body_raw(
                events(&id, &model, status, &steps).into_bytes(),
                "text/event-stream",
            );
        }
        ResponseTemplate::new(200).set_body_json(json!({"id": id, "object": "interaction",
            "status": status, "model": model, "created": "2026-06-09T12:00:00Z",
            "updated": "2026-06-09T12:00:01Z", "steps": steps, "usage": usage()}))
    }
}
