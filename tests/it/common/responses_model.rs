//! A scripted model behind `POST /v1/responses`: it answers each request
//! with the next list of output items, as a response object or as the
//! event stream the API sends, and enforces the API's rules on the input
//! it gets (a 400 like OpenAI's when one is broken):
//! - every `*_output` item answers a call item earlier in the input;
//! - every call item in the input has its output;
//! - a call the model made with a reasoning item comes back with that item.

use std::collections::HashMap;

use serde_json::{json, Value};
use wiremock::{Request, ResponseTemplate};

use super::scripted_api::{ScriptedApi, ScriptedModel, State};

/// What the model got, and what it answered.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The request body.
    pub body: Value,
    /// Its status: 200, or 400 with the rule broken.
    pub status: u16,
    /// The rule broken, if any.
    pub refusal: String,
}

/// What the model keeps besides its script.
#[derive(Default)]
pub struct Responses {
    /// Reasoning item id each call the model made came with.
    reasoning_of: HashMap<String, String>,
    /// The calls of each response it gave, with the one it continued
    /// (`previous_response_id`): the conversations it stores.
    stored: HashMap<String, (Vec<String>, Option<String>)>,
}

pub type ResponsesModel = ScriptedModel<Responses>;

/// The API's rules on an input; the first one broken.
pub fn responses_rules(
    input: &[Value],
    reasoning_of: &HashMap<String, String>,
    stored_calls: &[String],
) -> Option<String> {
    let is_call = |t: &str| {
        matches!(
            t,
            "function_call"
                | "custom_tool_call"
                | "local_shell_call"
                | "shell_call"
                | "apply_patch_call"
        )
    };
    for (i, item) in input.iter().enumerate() {
        let t = item["type"].as_str().unwrap_or("");
        let id = item["call_id"].as_str().unwrap_or("");
        if t.ends_with("_output") {
            let placed = stored_calls.iter().any(|c| c == id)
                || input[..i]
                    .iter()
                    .any(|p| is_call(p["type"].as_str().unwrap_or("")) && p["call_id"] == id);
            if !placed {
                return Some(format!(
                    "No tool call found for function call output with call_id {id}."
                ));
            }
        } else if is_call(t) {
            let answered = input[i + 1..].iter().any(|p| {
                p["type"].as_str().unwrap_or("").ends_with("_output") && p["call_id"] == id
            });
            if !answered {
                return Some(format!("No tool output found for function call {id}."));
            }
            if let Some(rs) = reasoning_of.get(id) {
                let with_reasoning = input[..i]
                    .iter()
                    .any(|p| p["type"] == "reasoning" && p["id"] == *rs);
                if !with_reasoning {
                    return Some(format!("Item '{}' of type '{t}' was provided without its required 'reasoning' item: '{rs}'.", item["id"].as_str().unwrap_or(id)));
                }
            }
        }
    }
    None
}

/// A model's response object holding `output`.
pub fn response(id: &str, output: &[Value], usage: Value) -> Value {
    json!({"id": id, "object": "response", "created_at": 1, "status": "completed",
           "model": "test-model", "output": output, "usage": usage})
}

/// Usage as the Responses API reports it.
pub fn responses_usage(input: u64, output: u64) -> Value {
    json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": 0},
           "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
           "total_tokens": input + output})
}

/// The event stream of `response`, as the API sends it: created, each
/// item added (text and arguments in deltas) and done, completed.
pub fn response_events(response: &Value) -> String {
    let mut seq = 0;
    let mut out = String::new();
    let mut push = |mut data: Value| {
        data["sequence_number"] = json!(seq);
        seq += 1;
        out += &format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap()
        );
    };
    let mut head = response.clone();
    head["status"] = json!("in_progress");
    head["output"] = json!([]);
    push(json!({"type": "response.created", "response": head}));
    push(json!({"type": "response.in_progress", "response": head}));
    for (i, item) in response["output"].as_array().unwrap().iter().enumerate() {
        let id = item["id"].clone();
        let mut added = item.clone();
        match item["type"].as_str().unwrap_or("") {
            "function_call" => {
                added["arguments"] = json!("");
                push(
                    json!({"type": "response.output_item.added", "output_index": i, "item": added}),
                );
                let args = item["arguments"].as_str().unwrap_or("");
                let (a, b) = args.split_at(args.len() / 2);
                for d in [a, b] {
                    push(
                        json!({"type": "response.function_call_arguments.delta", "output_index": i, "item_id": id, "delta": d}),
                    );
                }
                push(
                    json!({"type": "response.function_call_arguments.done", "output_index": i, "item_id": id, "arguments": args}),
                );
            }
            "message" => {
                added["content"] = json!([]);
                push(
                    json!({"type": "response.output_item.added", "output_index": i, "item": added}),
                );
                let text = item["content"][0]["text"].as_str().unwrap_or("");
                let part = json!({"type": "output_text", "text": "", "annotations": []});
                push(
                    json!({"type": "response.content_part.added", "output_index": i, "item_id": id, "content_index": 0, "part": part}),
                );
                push(
                    json!({"type": "response.output_text.delta", "output_index": i, "item_id": id, "content_index": 0, "delta": text}),
                );
                push(
                    json!({"type": "response.output_text.done", "output_index": i, "item_id": id, "content_index": 0, "text": text}),
                );
                push(
                    json!({"type": "response.content_part.done", "output_index": i, "item_id": id, "content_index": 0, "part": item["content"][0]}),
                );
            }
            _ => push(
                json!({"type": "response.output_item.added", "output_index": i, "item": added}),
            ),
        }
        push(json!({"type": "response.output_item.done", "output_index": i, "item": item}));
    }
    push(json!({"type": "response.completed", "response": response}));
    out
}

impl ScriptedApi for Responses {
    type Seen = Seen;
    const PATHS: &'static str = "^/v1/responses$";

    fn answer(st: &mut State<Responses>, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let input = body["input"].as_array().cloned().unwrap_or_default();
        let previous = body["previous_response_id"].as_str().map(str::to_owned);
        let mut stored_calls = Vec::new();
        let mut at = previous.clone();
        while let Some(id) = at {
            let Some((calls, before)) = st.kept.stored.get(&id) else {
                let rule = format!("Previous response with id '{id}' not found.");
                st.seen.push(Seen {
                    body,
                    status: 400,
                    refusal: rule.clone(),
                });
                return ResponseTemplate::new(400).set_body_json(json!({"error": {
                    "message": rule, "type": "invalid_request_error", "param": "previous_response_id", "code": "previous_response_not_found"}}));
            };
            stored_calls.extend(calls.iter().cloned());
            at = before.clone();
        }
        if let Some(rule) = responses_rules(&input, &st.kept.reasoning_of, &stored_calls) {
            st.seen.push(Seen {
                body,
                status: 400,
                refusal: rule.clone(),
            });
            return ResponseTemplate::new(400).set_body_json(json!({"error": {
                "message": rule, "type": "invalid_request_error", "param": "input", "code": null}}));
        }
        let Some(mut output) = st.script.pop_front() else {
            st.seen.push(Seen {
                body,
                status: 500,
                refusal: "script exhausted".into(),
            });
            return ResponseTemplate::new(500).set_body_string("script exhausted");
        };
        st.n += 1;
        // `{"type": "echo"}` stands for a message quoting the last output the model got.
        for item in output.iter_mut().filter(|i| i["type"] == "echo") {
            let last = input
                .iter()
                .rev()
                .find(|i| i["type"].as_str().unwrap_or("").ends_with("_output"))
                .map(|i| match &i["output"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .unwrap_or_default();
            *item = said(&format!("ANSWER: {last}"));
        }
        let mut reasoning = None;
        for item in &output {
            match item["type"].as_str().unwrap_or("") {
                "reasoning" => reasoning = item["id"].as_str().map(str::to_owned),
                t if t.ends_with("_call") => {
                    if let (Some(r), Some(c)) = (&reasoning, item["call_id"].as_str()) {
                        st.kept.reasoning_of.insert(c.to_owned(), r.clone());
                    }
                }
                _ => {}
            }
        }
        let r = response(
            &format!("resp_model_{}", st.n),
            &output,
            responses_usage(100, 10),
        );
        let calls: Vec<String> = output
            .iter()
            .filter_map(|i| i["call_id"].as_str().map(str::to_owned))
            .collect();
        let key = format!("resp_model_{}", st.n);
        st.kept.stored.insert(key, (calls, previous));
        let stream = body["stream"] == true;
        st.seen.push(Seen {
            body,
            status: 200,
            refusal: String::new(),
        });
        if stream {
            ResponseTemplate::new(200)
                .set_body_raw(response_events(&r).into_bytes(), "text/event-stream")
        } else {
            ResponseTemplate::new(200).set_body_json(r)
        }
    }
}

/// A function call item the model makes.
pub fn fn_call(call_id: &str, name: &str, arguments: &str) -> Value {
    json!({"type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id,
           "name": name, "arguments": arguments, "status": "completed"})
}

/// A reasoning item the model makes (stateless: with encrypted content).
pub fn reasoning(id: &str) -> Value {
    json!({"type": "reasoning", "id": id, "summary": [], "encrypted_content": format!("enc-{id}")})
}

/// A message item the model writes.
pub fn said(text: &str) -> Value {
    json!({"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// The model's `run_code` call with this program.
pub fn run_code_call(call_id: &str, code: &str) -> Value {
    fn_call(call_id, "run_code", &json!({ "code": code }).to_string())
}

/// Function tools as a Responses request declares them.
pub fn fs_function_tools() -> Vec<Value> {
    vec![
        json!({"type": "function", "name": "read", "description": "Read a file.",
               "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}),
        json!({"type": "function", "name": "write", "description": "Write a file.",
               "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}}),
    ]
}
