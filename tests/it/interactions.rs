//! Google's Interactions API through the proxy (docs/agents.md, "The
//! Interactions API"): what only this dialect has, beyond the scenario
//! table: a program continued through the provider's stored interaction
//! (`previous_interaction_id`) or the whole history (`store: false`), what
//! it refuses, its error shapes and its route label.

use crate::common::all_bodies;
use crate::common::{self, error_message, mount, start, Script};
use serde_json::{json, Value};
use wiremock::{MockServer, ResponseTemplate};

const ROUTE: &str = "/v1/interactions";

/// A Google provider answering `POST /v1/interactions` with `answers` in
/// order.
async fn provider(answers: Vec<Value>) -> MockServer {
    let server = MockServer::start().await;
    let json = Script::new(
        answers
            .into_iter()
            .map(|a| ResponseTemplate::new(200).set_body_json(a)),
    );
    mount(&server, "POST", ROUTE, json).await;
    server
}

async fn code_proxy(server: &MockServer) -> common::Proxy {
    start(
        server,
        &[
            ("CODEMODE_GEMINI_UPSTREAM", &server.uri()),
            ("CODEMODE_MODE", "code"),
            ("CODEMODE_RUNTIME", "embedded"),
        ],
    )
    .await
}

fn interaction(id: &str, status: &str, steps: Value) -> Value {
    json!({"id": id, "object": "interaction", "status": status, "model": "gemini-3-flash-preview",
           "steps": steps,
           "usage": {"total_input_tokens": 10, "total_output_tokens": 2, "total_tokens": 12}})
}

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"type": "function_call", "id": id, "name": name, "arguments": args})
}

fn words(text: &str) -> Value {
    json!({"type": "model_output", "content": [{"type": "text", "text": text}]})
}

fn tools() -> Value {
    json!([{"type": "function", "name": "get_weather", "description": "The weather.",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                           "required": ["location"]}}])
}

async fn post(proxy: &common::Proxy, body: Value) -> (u16, Value) {
    let res = proxy
        .post(ROUTE, &body, &[("x-goog-api-key", "g-key")])
        .await;
    let status = res.status().as_u16();
    (status, res.json().await.unwrap())
}

const PROGRAM: &str =
    "const w = await tools.get_weather({location: 'Paris'}); return 'It is ' + w;";

/// The model's program calls the client's tool: the client gets a
/// `function_call` step in an interaction the proxy minted; sending its
/// result with `previous_interaction_id` set to that id resumes the
/// program, and the provider is asked to continue its own interaction,
/// answered with the program's result.
#[tokio::test]
async fn a_program_resumes_through_the_providers_stored_interaction() {
    let server = provider(vec![
        interaction(
            "v1_upstream1",
            "requires_action",
            json!([{"type": "thought", "signature": "c2ln"},
                   call("m1", "run_code", json!({"code": PROGRAM}))]),
        ),
        interaction(
            "v1_upstream2",
            "completed",
            json!([words("Sunny in Paris.")]),
        ),
    ])
    .await;
    let proxy = code_proxy(&server).await;
    let (status, handed) = post(
        &proxy,
        json!({"model": "gemini-3-flash-preview", "input": "Weather in Paris?", "tools": tools()}),
    )
    .await;
    assert_eq!(status, 200, "{handed}");
    assert_eq!(handed["status"], "requires_action");
    let minted = handed["id"].as_str().unwrap();
    assert!(
        minted.starts_with("v1_") && minted != "v1_upstream1",
        "{minted}"
    );
    let steps = handed["steps"].as_array().unwrap();
    let nested = steps.last().unwrap();
    assert_eq!(nested["type"], "function_call");
    assert_eq!(nested["name"], "get_weather");
    assert_eq!(nested["arguments"], json!({"location": "Paris"}));
    let call_id = nested["id"].as_str().unwrap();
    assert!(call_id.starts_with("call_"), "{call_id}");
    assert!(
        !handed.to_string().contains("run_code"),
        "the client never sees the program's own call: {handed}"
    );

    let (status, end) = post(
        &proxy,
        json!({"model": "gemini-3-flash-preview", "previous_interaction_id": minted,
               "tools": tools(),
               "input": [{"type": "function_result", "call_id": call_id, "name": "get_weather",
                          "result": "sunny"}]}),
    )
    .await;
    assert_eq!(status, 200, "{end}");
    assert_eq!(end["id"], "v1_upstream2");
    assert_eq!(end["steps"][0]["content"][0]["text"], "Sunny in Paris.");

    let sent = all_bodies(&server).await;
    assert_eq!(sent.len(), 2);
    let names: Vec<&str> = sent[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["run_code"]);
    assert!(sent[0]["system_instruction"]
        .as_str()
        .unwrap()
        .contains("get_weather"));
    assert_eq!(sent[1]["previous_interaction_id"], "v1_upstream1");
    assert_eq!(
        sent[1]["input"],
        json!([{"type": "function_result", "call_id": "m1", "name": "run_code",
                "result": "Result: \"It is sunny\""}])
    );
}

/// `store: false`: the client sends the whole history back, the nested
/// call and its result included; the provider gets the model's own turn
/// (its thought's signature with it) and the program's result instead.
#[tokio::test]
async fn a_program_resumes_from_the_whole_history_when_nothing_is_stored() {
    let thought = json!({"type": "thought", "signature": "c2ln"});
    let server = provider(vec![
        interaction(
            "v1_u1",
            "requires_action",
            json!([
                thought.clone(),
                call("m1", "run_code", json!({"code": PROGRAM}))
            ]),
        ),
        interaction("v1_u2", "completed", json!([words("Sunny.")])),
    ])
    .await;
    let proxy = code_proxy(&server).await;
    let user = json!({"type": "user_input", "content": [{"type": "text", "text": "Weather?"}]});
    let (_, handed) = post(
        &proxy,
        json!({"model": "m", "store": false, "input": [user.clone()], "tools": tools()}),
    )
    .await;
    let mut history = vec![user.clone()];
    history.extend(handed["steps"].as_array().unwrap().iter().cloned());
    let call_id = history.last().unwrap()["id"].as_str().unwrap().to_owned();
    history.push(json!({"type": "function_result", "call_id": call_id,
                        "name": "get_weather", "result": {"result": "sunny"}}));
    let (status, end) = post(
        &proxy,
        json!({"model": "m", "store": false, "input": history, "tools": tools()}),
    )
    .await;
    assert_eq!(status, 200, "{end}");
    let sent = all_bodies(&server).await;
    assert_eq!(
        sent[1]["input"],
        json!([user, thought, call("m1", "run_code", json!({"code": PROGRAM})),
               {"type": "function_result", "call_id": "m1", "name": "run_code",
                "result": "Result: \"It is sunny\""}])
    );
}

/// A native call the model makes directly in code mode never reaches the
/// client: the model is told the route through `run_code` and asked again,
/// with its own steps replayed.
#[tokio::test]
async fn a_direct_native_call_is_answered_to_the_model_and_asked_again() {
    let server = provider(vec![
        interaction(
            "v1_u1",
            "requires_action",
            json!([call("m1", "get_weather", json!({"location": "Paris"}))]),
        ),
        interaction("v1_u2", "completed", json!([words("Let me use run_code.")])),
    ])
    .await;
    let proxy = code_proxy(&server).await;
    let (status, end) = post(
        &proxy,
        json!({"model": "m", "input": "Hi", "tools": tools()}),
    )
    .await;
    assert_eq!(status, 200, "{end}");
    assert!(!end.to_string().contains("\"get_weather\""), "{end}");
    assert_eq!(end["id"], "v1_u2", "the interaction that holds every step");
    let sent = all_bodies(&server).await;
    let input = sent[1]["input"].as_array().unwrap();
    assert_eq!(input[0]["type"], "user_input");
    assert_eq!(input[1]["name"], "get_weather");
    assert_eq!(input[2]["type"], "function_result");
    assert!(input[2]["result"]
        .as_str()
        .unwrap()
        .starts_with("UNKNOWN_TOOL"));
}

/// What the proxy cannot judge is a 400 in Google's shape naming the way
/// out; nothing reaches the provider.
#[tokio::test]
async fn background_agents_and_bad_bodies_are_refused_in_googles_shape() {
    let server = provider(vec![]).await;
    let proxy = code_proxy(&server).await;
    for body in [
        json!({"model": "m", "input": "Hi", "background": true, "tools": tools()}),
        json!({"agent": "deep-research-preview-04-2026", "input": "Hi"}),
    ] {
        let (status, err) = post(&proxy, body.clone()).await;
        assert_eq!(status, 400, "{body}: {err}");
        assert_eq!(err["error"]["status"], "INVALID_ARGUMENT", "{err}");
        assert!(error_message(&err).contains("native mode"), "{err}");
    }
    let res = proxy
        .post_raw(ROUTE, "{not json", &[("x-goog-api-key", "g-key")])
        .await;
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["status"], "INVALID_ARGUMENT", "{err}");
    assert!(all_bodies(&server).await.is_empty());
}

/// Requests are counted under the API's own name.
#[tokio::test]
async fn requests_are_counted_under_the_interactions_route() {
    let server = provider(vec![interaction(
        "v1_u1",
        "completed",
        json!([words("Hi.")]),
    )])
    .await;
    let proxy = code_proxy(&server).await;
    let (status, _) = post(
        &proxy,
        json!({"model": "m", "input": "Hi", "tools": tools()}),
    )
    .await;
    assert_eq!(status, 200);
    let metrics = proxy.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("codemode_requests_total")
                && l.contains("route=\"interactions\"")),
        "{metrics}"
    );
    // The interaction's own token counts, not the Gemini API's names.
    for (kind, tokens) in [("input", 10), ("output", 2)] {
        let series = format!("codemode_upstream_tokens_total{{type=\"{kind}\"}} {tokens}");
        assert!(metrics.lines().any(|l| l == series), "{series}\n{metrics}");
    }
}

/// The same program streamed: the client reads the nested call as step
/// events and one `interaction.completed` naming the minted interaction,
/// `requires_action`; the model's `run_code` never shows.
#[tokio::test]
async fn a_streamed_program_hands_its_call_out_as_step_events() {
    let server = MockServer::start().await;
    let stream = concat!(
        "event: interaction.created\n",
        "data: {\"event_type\":\"interaction.created\",\"interaction\":{\"id\":\"v1_u1\",\"status\":\"in_progress\",\"object\":\"interaction\",\"model\":\"m\"}}\n\n",
        "event: step.start\n",
        "data: {\"event_type\":\"step.start\",\"index\":0,\"step\":{\"type\":\"function_call\",\"id\":\"m1\",\"name\":\"run_code\",\"arguments\":{}}}\n\n",
        "event: step.delta\n",
        "data: {\"event_type\":\"step.delta\",\"index\":0,\"delta\":{\"type\":\"arguments_delta\",\"arguments\":\"{\\\"code\\\":\\\"return await tools.get_weather({location: 'Paris'})\\\"}\"}}\n\n",
        "event: step.stop\n",
        "data: {\"event_type\":\"step.stop\",\"index\":0}\n\n",
        "event: interaction.completed\n",
        "data: {\"event_type\":\"interaction.completed\",\"interaction\":{\"id\":\"v1_u1\",\"status\":\"requires_action\",\"usage\":{\"total_input_tokens\":10,\"total_output_tokens\":3,\"total_tokens\":13}}}\n\n",
        "data: [DONE]\n\n",
    );
    mount(
        &server,
        "POST",
        ROUTE,
        ResponseTemplate::new(200).set_body_raw(stream, "text/event-stream"),
    )
    .await;
    let proxy = code_proxy(&server).await;
    let text = proxy
        .post(
            ROUTE,
            &json!({"model": "m", "input": "Weather?", "tools": tools(), "stream": true}),
            &[("x-goog-api-key", "g-key")],
        )
        .await
        .text()
        .await
        .unwrap();
    assert!(!text.contains("run_code"), "{text}");
    let events: Vec<Value> = text
        .split("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds[0], "interaction.created");
    assert_eq!(*kinds.last().unwrap(), "interaction.completed");
    let start = events
        .iter()
        .find(|e| e["event_type"] == "step.start")
        .unwrap();
    assert_eq!(start["index"], 0);
    assert_eq!(start["step"]["name"], "get_weather");
    let end = &events.last().unwrap()["interaction"];
    assert_eq!(end["status"], "requires_action");
    assert!(end["id"].as_str().unwrap().starts_with("v1_01"), "{end}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert_eq!(text.matches("[DONE]").count(), 1, "{text}");
}

/// A client that continues a minted interaction with a result under an id
/// it changed gets a 400 naming the id (Google's shape); the provider hears
/// nothing of it, and the original id still resumes the program.
#[tokio::test]
async fn a_result_under_a_changed_id_is_refused_with_the_id_named() {
    let server = provider(vec![
        interaction(
            "v1_upstream1",
            "requires_action",
            json!([call("m1", "run_code", json!({"code": PROGRAM}))]),
        ),
        interaction("v1_upstream2", "completed", json!([words("Sunny.")])),
    ])
    .await;
    let proxy = code_proxy(&server).await;
    let (_, handed) = post(
        &proxy,
        json!({"model": "m", "input": "Weather in Paris?", "tools": tools()}),
    )
    .await;
    let minted = handed["id"].as_str().unwrap();
    let call_id = handed["steps"][0]["id"].as_str().unwrap();
    let result = |id: &str| {
        json!({"model": "m", "previous_interaction_id": minted, "tools": tools(),
               "input": [{"type": "function_result", "call_id": id, "name": "get_weather",
                          "result": "sunny"}]})
    };
    let (status, err) = post(&proxy, result("my_own_id_1")).await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["error"]["status"], "INVALID_ARGUMENT");
    assert!(error_message(&err).contains("my_own_id_1"), "{err}");
    assert_eq!(
        all_bodies(&server).await.len(),
        1,
        "the provider heard nothing"
    );
    let (status, end) = post(&proxy, result(call_id)).await;
    assert_eq!(status, 200, "{end}");
    assert_eq!(end["id"], "v1_upstream2");
}
