//! A scripted model behind the Gemini API's `generateContent` and
//! `streamGenerateContent` (any API version, any model): it answers each
//! request with the next list of parts, as a response or as the event
//! stream the API sends (one event per part), and enforces the API's rule
//! on what it gets (a 400 like Gemini's when it is broken): a model turn's
//! function calls are answered, as many function responses, by the next
//! user turn.
//!
//! A part `{"echo": true}` becomes the text "ANSWER: " and the last
//! function response it was sent (its `response` as JSON).

use serde_json::{json, Value};
use wiremock::{Request, ResponseTemplate};

use super::scripted_api::{path_and_query, ScriptedApi, ScriptedModel, State};

/// What the model got, and what it answered.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The path and query it was sent to.
    pub path: String,
    pub body: Value,
    /// 200, or 400 with the rule broken.
    pub status: u16,
    pub refusal: String,
}

/// What the model keeps besides its script: nothing.
#[derive(Default)]
pub struct Gemini;

pub type GeminiModel = ScriptedModel<Gemini>;

/// The API's rule on function calls; the first one broken.
pub fn gemini_rules(contents: &[Value]) -> Option<String> {
    let parts = |c: &Value| c["parts"].as_array().cloned().unwrap_or_default();
    for (i, c) in contents.iter().enumerate() {
        if c["role"] != "model" {
            continue;
        }
        let calls = parts(c)
            .iter()
            .filter(|p| p.get("functionCall").is_some())
            .count();
        if calls == 0 {
            continue;
        }
        let answers = contents
            .get(i + 1)
            .map(|n| {
                parts(n)
                    .iter()
                    .filter(|p| p.get("functionResponse").is_some())
                    .count()
            })
            .unwrap_or(0);
        if answers != calls {
            return Some("Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.".into());
        }
    }
    None
}

/// A model answer holding `parts`.
pub fn gemini_answer(parts: Value, finish: bool) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if finish {
        candidate["finishReason"] = json!("STOP");
    }
    json!({"candidates": [candidate],
           "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
           "modelVersion": "gemini-test", "responseId": "resp-model"})
}

impl ScriptedApi for Gemini {
    type Seen = Seen;
    const PATHS: &'static str = ":(stream)?[gG]enerateContent$";

    fn answer(st: &mut State<Gemini>, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let path = path_and_query(req);
        let mut seen = Seen {
            path: path.clone(),
            body: body.clone(),
            status: 200,
            refusal: String::new(),
        };
        let contents = body["contents"].as_array().cloned().unwrap_or_default();
        if let Some(rule) = gemini_rules(&contents) {
            seen.status = 400;
            seen.refusal = rule.clone();
            st.seen.push(seen);
            return ResponseTemplate::new(400).set_body_json(json!({"error": {
                "code": 400, "message": rule, "status": "INVALID_ARGUMENT"}}));
        }
        let Some(mut parts) = st.script.pop_front() else {
            seen.status = 500;
            seen.refusal = "script exhausted".into();
            st.seen.push(seen);
            return ResponseTemplate::new(500).set_body_string("script exhausted");
        };
        for part in parts.iter_mut().filter(|p| p["echo"] == true) {
            let last = contents
                .iter()
                .rev()
                .flat_map(|c| {
                    let mut parts = c["parts"].as_array().cloned().unwrap_or_default();
                    parts.reverse();
                    parts
                })
                .find_map(|p| p.get("functionResponse").cloned())
                .map(|r| r["response"].to_string())
                .unwrap_or_default();
            *part = json!({"text": format!("ANSWER: {last}")});
        }
        st.seen.push(seen);
        if !path.contains(":streamGenerateContent") {
            return ResponseTemplate::new(200).set_body_json(gemini_answer(json!(parts), true));
        }
        // One event per part, a turn's function calls together (a client
        // keeps each event's content as a turn of its own).
        let mut groups: Vec<Vec<Value>> = Vec::new();
        for p in parts {
            match groups.last_mut() {
                Some(g)
                    if p.get("functionCall").is_some() && g[0].get("functionCall").is_some() =>
                {
                    g.push(p)
                }
                _ => groups.push(vec![p]),
            }
        }
        let n = groups.len();
        let events: String = groups
            .into_iter()
            .enumerate()
            .map(|(i, g)| format!("data: {}\r\n\r\n", gemini_answer(json!(g), i + 1 == n)))
            .collect();
        ResponseTemplate::new(200).set_body_raw(events.into_bytes(), "text/event-stream")
    }
}

/// Every function declaration the tools of a Gemini request carry.
pub fn declarations(body: &Value) -> Vec<Value> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| {
            t["functionDeclarations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}
