//! Code Mode on the Responses API (docs/agents.md, "Codex and the Responses API"), through the
//! proxy as a client sees it: a scripted Responses model that enforces the
//! API's rules on every input it gets, the proxy in front of it, and a
//! client that runs the tools it is handed.

use crate::common::responses_model::*;
use crate::common::sse_client::payloads;
use crate::common::{error_message, start, Proxy};
use serde_json::{json, Value};

async fn proxy_for(server: &wiremock::MockServer, mode: &str) -> Proxy {
    start(
        server,
        &[("CODEMODE_RUNTIME", "embedded"), ("CODEMODE_MODE", mode)],
    )
    .await
}

fn body(input: &[Value], stream: bool) -> Value {
    json!({"model": "gpt-test", "input": input, "tools": fs_function_tools(), "store": false,
           "stream": stream, "include": ["reasoning.encrypted_content"]})
}

/// A client's turn: the response it got, read from JSON or from its events.
async fn ask(proxy: &Proxy, input: &[Value], stream: bool) -> Value {
    send(proxy, &body(input, stream), stream).await
}

/// Sends `body`; the response, read from JSON or from its events.
async fn send(proxy: &Proxy, body: &Value, stream: bool) -> Value {
    let res = proxy.post("/v1/responses", body, &[]).await;
    let status = res.status();
    let bytes = res.bytes().await.unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    if !stream {
        return serde_json::from_slice(&bytes).unwrap();
    }
    let events: Vec<Value> = payloads(&bytes)
        .into_iter()
        .filter_map(|p| serde_json::from_str(&p).ok())
        .collect();
    let seqs: Vec<u64> = events
        .iter()
        .filter_map(|e| e["sequence_number"].as_u64())
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "sequence numbers rise: {seqs:?}"
    );
    let done: Vec<Value> = events
        .iter()
        .filter(|e| e["type"] == "response.output_item.done")
        .map(|e| e["item"].clone())
        .collect();
    let completed: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "response.completed")
        .collect();
    assert_eq!(completed.len(), 1, "one response.completed: {events:?}");
    let mut response = completed[0]["response"].clone();
    assert_eq!(
        response["output"],
        json!(done),
        "the completed response lists the items the events gave"
    );
    response["events"] = json!(events.len());
    response
}

/// Runs the client's tools on the calls of `response`; true when there were any.
fn run_tools(response: &Value, input: &mut Vec<Value>, files: &[(&str, &str)]) -> bool {
    let mut ran = false;
    for item in response["output"].as_array().unwrap() {
        input.push(item.clone());
        if item["type"] == "function_call" {
            assert_ne!(item["name"], "run_code", "the proxy runs run_code itself");
            let args: Value = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
            let path = args["path"].as_str().unwrap_or("");
            let content = files
                .iter()
                .find(|(p, _)| *p == path)
                .map_or("no such file", |(_, c)| c);
            input.push(json!({"type": "function_call_output", "call_id": item["call_id"], "output": content}));
            ran = true;
        }
    }
    ran
}

fn text_of(response: &Value) -> String {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "message")
        .flat_map(|i| i["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect()
}

fn wire_tools(seen: &Seen) -> Vec<String> {
    seen.body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["name"].as_str().unwrap_or("?").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

const FILES: [(&str, &str); 2] = [("a.txt", "alpha-1"), ("b.txt", "bravo-2")];

async fn program_of_two_reads(stream: bool) {
    let code = "const a = await tools.read({path: 'a.txt'}); const b = await tools.read({path: 'b.txt'}); return a + ' ' + b;";
    let model = ResponsesModel::new([
        vec![
            reasoning("rs_1"),
            said("Let me run a program."),
            run_code_call("call_p", code),
        ],
        vec![said("The files say alpha-1 bravo-2.")],
    ]);
    let server = model.serve().await;
    let proxy = proxy_for(&server, "code").await;
    let mut input = vec![json!({"role": "user", "content": "Read a.txt and b.txt"})];
    let mut turns = 0;
    let answer = loop {
        let response = ask(&proxy, &input, stream).await;
        turns += 1;
        assert!(turns < 6, "the program ends");
        if !run_tools(&response, &mut input, &FILES) {
            break response;
        }
    };
    assert_eq!(text_of(&answer), "The files say alpha-1 bravo-2.");
    assert_eq!(turns, 3, "two nested turns, then the answer");
    let seen = model.seen();
    assert!(seen.iter().all(|s| s.status == 200), "{seen:?}");
    assert_eq!(
        seen.len(),
        2,
        "the model was asked twice: the program, then the answer"
    );
    for s in &seen {
        assert_eq!(
            wire_tools(s),
            vec!["run_code"],
            "code mode carries run_code only"
        );
        assert!(
            s.body["instructions"]
                .as_str()
                .unwrap_or("")
                .contains("declare const tools"),
            "the SDK is in the instructions: {}",
            s.body["instructions"]
        );
    }
    // The model saw its own turn (reasoning included) and the program's output.
    let last = seen[1].body["input"].as_array().unwrap();
    let types: Vec<&str> = last
        .iter()
        .map(|i| i["type"].as_str().unwrap_or("message"))
        .collect();
    assert_eq!(
        types,
        vec![
            "message",
            "reasoning",
            "message",
            "function_call",
            "function_call_output"
        ]
    );
    assert_eq!(last[3]["name"], "run_code");
    assert_eq!(last[4]["output"], "Result: \"alpha-1 bravo-2\"");
}

#[tokio::test]
async fn a_program_runs_through_nested_calls_json() {
    program_of_two_reads(false).await;
}

#[tokio::test]
async fn a_program_runs_through_nested_calls_streamed() {
    program_of_two_reads(true).await;
}

async fn denial_and_repair(stream: bool) {
    let model = ResponsesModel::new([
        vec![
            reasoning("rs_1"),
            fn_call("call_r", "read", "{\"path\":\"a.txt\"}"),
        ],
        vec![said("I will use run_code.")],
    ]);
    let server = model.serve().await;
    let proxy = proxy_for(&server, "code").await;
    let input = vec![json!({"role": "user", "content": "Read a.txt"})];
    let response = ask(&proxy, &input, stream).await;
    assert_eq!(text_of(&response), "I will use run_code.");
    assert!(
        response["output"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["type"] != "function_call"),
        "the denied call never reaches the client: {response}"
    );
    let seen = model.seen();
    assert_eq!(seen.len(), 2, "one repair");
    assert!(seen.iter().all(|s| s.status == 200), "{seen:?}");
    let repair = seen[1].body["input"].as_array().unwrap();
    let denial = repair.last().unwrap();
    assert_eq!(denial["type"], "function_call_output");
    assert_eq!(denial["call_id"], "call_r");
    let text = denial["output"].as_str().unwrap();
    assert!(
        text.starts_with("UNKNOWN_TOOL:")
            && text.contains("await tools.read({\"path\": \"a.txt\"})"),
        "{text}"
    );
    assert_eq!(
        response["usage"]["input_tokens"], 200,
        "usage summed over both rounds"
    );
}

#[tokio::test]
async fn a_direct_native_call_is_denied_and_repaired_json() {
    denial_and_repair(false).await;
}

#[tokio::test]
async fn a_direct_native_call_is_denied_and_repaired_streamed() {
    denial_and_repair(true).await;
}

#[tokio::test]
async fn native_mode_passes_the_request_through() {
    let model = ResponsesModel::new([vec![fn_call("call_r", "read", "{\"path\":\"a.txt\"}")]]);
    let server = model.serve().await;
    let proxy = proxy_for(&server, "native").await;
    let input = vec![json!({"role": "user", "content": "Read a.txt"})];
    let response = ask(&proxy, &input, false).await;
    assert_eq!(response["output"][0]["name"], "read");
    assert_eq!(wire_tools(&model.seen()[0]), vec!["read", "write"]);
}

#[tokio::test]
async fn a_minted_response_id_is_a_clear_404() {
    let server = ResponsesModel::new([]).serve().await;
    let proxy = proxy_for(&server, "code").await;
    let res = proxy.get("/v1/responses/resp_cm_1a2bx00x00_0", &[]).await;
    assert_eq!(res.status(), 404);
    let err: Value = res.json().await.unwrap();
    assert!(error_message(&err).contains("codemode-proxy"), "{err}");
}

/// A client that keeps its conversation at the provider (`store: true`,
/// `previous_response_id`) runs a program: each minted response id is a
/// valid `previous_response_id`, and the provider's conversation goes on
/// from the model's own `run_code` turn.
async fn program_with_previous_response_id(stream: bool) {
    let code = "const a = await tools.read({path: 'a.txt'}); const b = await tools.read({path: 'b.txt'}); return a + ' ' + b;";
    let model = ResponsesModel::new([
        vec![reasoning("rs_1"), run_code_call("call_p", code)],
        vec![said("Both read.")],
    ]);
    let server = model.serve().await;
    let proxy = proxy_for(&server, "code").await;
    let request = |previous: Option<String>, input: Vec<Value>| {
        let mut b = json!({"model": "gpt-test", "input": input, "tools": fs_function_tools(),
                           "store": true, "stream": stream});
        if let Some(p) = previous {
            b["previous_response_id"] = json!(p);
        }
        b
    };
    let first = request(
        None,
        vec![json!({"role": "user", "content": "Read a and b"})],
    );
    let mut response = send(&proxy, &first, stream).await;
    for _ in 0..2 {
        let id = response["id"].as_str().unwrap().to_owned();
        let calls: Vec<Value> = response["output"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["type"] == "function_call")
            .cloned()
            .collect();
        assert_eq!(calls.len(), 1, "{response}");
        let args: Value = serde_json::from_str(calls[0]["arguments"].as_str().unwrap()).unwrap();
        let content = FILES.iter().find(|(p, _)| *p == args["path"]).unwrap().1;
        let output = json!({"type": "function_call_output", "call_id": calls[0]["call_id"], "output": content});
        response = send(&proxy, &request(Some(id), vec![output]), stream).await;
    }
    assert_eq!(text_of(&response), "Both read.");
    let seen = model.seen();
    assert!(seen.iter().all(|s| s.status == 200), "{seen:?}");
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].body["previous_response_id"], "resp_model_1");
    assert_eq!(
        seen[1].body["input"],
        json!([{"type": "function_call_output", "call_id": "call_p", "output": "Result: \"alpha-1 bravo-2\""}])
    );
}

#[tokio::test]
async fn a_program_runs_with_previous_response_id_json() {
    program_with_previous_response_id(false).await;
}

#[tokio::test]
async fn a_program_runs_with_previous_response_id_streamed() {
    program_with_previous_response_id(true).await;
}

/// A program gets a tool's output, not the parts its client put it in
/// (docs/embedded-runtime.md, "What a program's call resolves to"): a
/// `function_call_output` whose output is `input_text` parts reaches
/// `await tools.read()` as their text; one holding another part (an
/// image) reaches it as it came, as JSON.
#[tokio::test]
async fn a_program_gets_the_text_of_an_outputs_input_text_parts() {
    let code = "return await tools.read({path: 'a.txt'});";
    let image = json!({"type": "input_image", "image_url": "data:image/png;base64,iVBO"});
    let cases = [
        (
            json!([{"type": "input_text", "text": "alpha-1\n"},
                   {"type": "input_text", "text": "bravo-2"}]),
            "alpha-1\nbravo-2".to_owned(),
        ),
        (
            json!([{"type": "input_text", "text": "a.png"}, image]),
            json!([{"type": "input_text", "text": "a.png"}, image]).to_string(),
        ),
    ];
    for stream in [false, true] {
        for (parts, output) in &cases {
            let model =
                ResponsesModel::new([vec![run_code_call("call_p", code)], vec![said("Read.")]]);
            let server = model.serve().await;
            let proxy = proxy_for(&server, "code").await;
            let mut input = vec![json!({"role": "user", "content": "Read a.txt"})];
            let response = ask(&proxy, &input, stream).await;
            let mut calls = 0;
            for item in response["output"].as_array().unwrap() {
                input.push(item.clone());
                if item["type"] == "function_call" {
                    calls += 1;
                    input.push(json!({"type": "function_call_output",
                                      "call_id": item["call_id"], "output": parts}));
                }
            }
            assert_eq!(calls, 1, "{response}");
            let answer = ask(&proxy, &input, stream).await;
            assert_eq!(text_of(&answer), "Read.");
            let seen = model.seen();
            assert_eq!(seen.len(), 2, "{seen:?}");
            let last = seen[1].body["input"].as_array().unwrap();
            let result = last
                .iter()
                .find(|i| i["type"] == "function_call_output")
                .unwrap();
            assert_eq!(
                result["output"],
                format!("Result: {}", json!(output)),
                "stream: {stream}, {parts}"
            );
        }
    }
}
