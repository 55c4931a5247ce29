//! A shape the judge cannot read where a call could stand is refused,
//! never forwarded (docs/security.md, "Fail closed"; issue 47): a whole
//! answer is a 502 `upstream_invalid_response`, a stream ends with the
//! dialect's error event, and the provider's bytes of it never reach the
//! client. Each test locks the proxy (`code`, client selection denied) in
//! front of a provider that answers with such a shape around a call to a
//! tool the lock denies.

use crate::common::{start, Proxy};
use serde_json::{json, Value};
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The call every answer here hides: a tool the lock denies.
const DENIED: &str = "read_file";

/// A provider answering every request on a path matching `route` with
/// `body`, as JSON or as an event stream; and the proxy, locked, in front
/// of it (every dialect's upstream is the provider).
async fn locked(route: &str, body: &str, stream: bool) -> (MockServer, Proxy) {
    let provider = MockServer::start().await;
    let kind = if stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    Mock::given(method("POST"))
        .and(path_regex(route))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body.as_bytes().to_vec(), kind))
        .mount(&provider)
        .await;
    let upstream = provider.uri();
    // Anthropic's base holds the version, Gemini's does not.
    let anthropic = format!("{upstream}/v1");
    let proxy = start(
        &provider,
        &[
            ("CODEMODE_MODE", "code"),
            ("CODEMODE_CLIENT_SELECT", "deny"),
            ("CODEMODE_GEMINI_UPSTREAM", &upstream),
            ("CODEMODE_ANTHROPIC_UPSTREAM", &anthropic),
        ],
    )
    .await;
    (provider, proxy)
}

const GOOGLE: &[(&str, &str)] = &[("x-goog-api-key", "k")];

/// A whole answer the proxy refused: a 502 naming the shape, without the
/// denied call.
async fn assert_refused(res: reqwest::Response, why: &str) {
    let status = res.status();
    let body = res.text().await.unwrap();
    assert_eq!(status, 502, "{body}");
    assert!(!body.contains(DENIED), "{body}");
    // The code where the dialect's error shape has one (Anthropic's has
    // none: its message says why).
    assert!(
        body.contains("upstream_invalid_response") || body.contains("\"api_error\""),
        "{body}"
    );
    assert!(body.contains("cannot be judged"), "{body}");
    assert!(body.contains(why), "{body}");
}

/// A stream the proxy ended at the event it could not read: what came
/// before (`before`) went out, then the dialect's error event, and
/// nothing of the event or after it.
async fn assert_ended(res: reqwest::Response, before: &str, why: &str) {
    let status = res.status();
    let body = res.text().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains(DENIED), "{body}");
    assert!(body.contains(before), "{body}");
    assert!(
        !body.contains("After."),
        "nothing after it goes out: {body}"
    );
    // Anthropic's error event names no code: every dialect's says why.
    let error = body
        .find("cannot be judged")
        .unwrap_or_else(|| panic!("no error event: {body}"));
    assert!(body.find(before) < Some(error), "{body}");
    assert!(body.contains(why), "{body}");
}

// ---- Gemini ----

const GENERATE: &str = "/v1beta/models/gemini-2.5-pro:generateContent";
const STREAM: &str = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse";

fn gemini_request() -> Value {
    json!({"contents": [{"role": "user", "parts": [{"text": "go"}]}],
           "tools": [{"functionDeclarations": [
               {"name": DENIED, "description": "Reads a file.", "parameters": {"type": "OBJECT"}},
               {"name": "run_code", "description": "Runs a program.", "parameters": {"type": "OBJECT"}}]}]})
}

/// The first candidate, keyed "0" as `@google/genai` reads it.
fn gemini_keyed() -> Value {
    json!({"candidates": {"0": {"content": {"role": "model", "parts": [
        {"functionCall": {"name": DENIED, "args": {"path": "a"}}}]},
        "finishReason": "STOP", "index": 0}},
        "usageMetadata": {"promptTokenCount": 3, "totalTokenCount": 4}})
}

#[tokio::test]
async fn a_gemini_answer_whose_candidates_is_an_object_is_refused() {
    let (_p, proxy) = locked(":generateContent$", &gemini_keyed().to_string(), false).await;
    let res = proxy.post(GENERATE, &gemini_request(), GOOGLE).await;
    assert_refused(res, "`candidates` is an object, not a list").await;
}

#[tokio::test]
async fn a_gemini_chunk_whose_candidates_is_an_object_ends_the_stream() {
    let text = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Before."}]},
                      "index": 0}]});
    let after = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "After."}]},
                       "finishReason": "STOP", "index": 0}]});
    let stream = format!(
        "data: {text}\r\n\r\ndata: {}\r\n\r\ndata: {after}\r\n\r\n",
        gemini_keyed()
    );
    let (_p, proxy) = locked(":streamGenerateContent$", &stream, true).await;
    let res = proxy.post(STREAM, &gemini_request(), GOOGLE).await;
    assert_ended(res, "Before.", "`candidates` is an object, not a list").await;
}

// ---- Chat Completions ----

fn chat_request(stream: bool) -> Value {
    json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "go"}],
           "tools": [
               {"type": "function", "function": {"name": DENIED, "parameters": {"type": "object"}}},
               {"type": "function", "function": {"name": "run_code", "parameters": {"type": "object"}}}]})
}

fn chat_call() -> Value {
    json!({"index": 0, "id": "call_1", "type": "function",
           "function": {"name": DENIED, "arguments": "{\"path\":\"a\"}"}})
}

#[tokio::test]
async fn a_chat_completion_whose_tool_calls_is_an_object_is_refused() {
    let answer = json!({"id": "c1", "object": "chat.completion", "choices": [{"index": 0,
        "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null, "tool_calls": {"0": chat_call()}}}]});
    let (_p, proxy) = locked("/v1/chat/completions$", &answer.to_string(), false).await;
    let res = proxy.chat(&chat_request(false), &[]).await;
    assert_refused(
        res,
        "`choices[0].message.tool_calls` is an object, not a list",
    )
    .await;
}

#[tokio::test]
async fn a_chat_chunk_whose_tool_calls_is_an_object_ends_the_stream() {
    let chunk = |delta: Value| {
        let c = json!({"id": "c1", "object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
        format!("data: {c}\n\n")
    };
    let stream = chunk(json!({"role": "assistant", "content": "Before."}))
        + &chunk(json!({"tool_calls": {"0": chat_call()}}))
        + &chunk(json!({"content": "After."}))
        + "data: [DONE]\n\n";
    let (_p, proxy) = locked("/v1/chat/completions$", &stream, true).await;
    let res = proxy.chat(&chat_request(true), &[]).await;
    assert_ended(
        res,
        "Before.",
        "`choices[0].delta.tool_calls` is an object, not a list",
    )
    .await;
}

// ---- Responses ----

fn responses_request(stream: bool) -> Value {
    json!({"model": "m", "input": "go", "stream": stream, "tools": [
        {"type": "function", "name": DENIED, "parameters": {"type": "object"}},
        {"type": "function", "name": "run_code", "parameters": {"type": "object"}}]})
}

fn responses_call() -> Value {
    json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": DENIED,
           "arguments": "{\"path\":\"a\"}", "status": "completed"})
}

#[tokio::test]
async fn a_response_whose_output_is_an_object_is_refused() {
    let answer = json!({"id": "resp_1", "object": "response", "status": "completed",
                        "output": {"0": responses_call()}});
    let (_p, proxy) = locked("/v1/responses$", &answer.to_string(), false).await;
    let res = proxy
        .post("/v1/responses", &responses_request(false), &[])
        .await;
    assert_refused(res, "`output` is an object, not a list").await;
}

#[tokio::test]
async fn a_responses_event_whose_item_is_a_list_ends_the_stream() {
    let event = |kind: &str, mut e: Value| {
        e["type"] = json!(kind);
        format!("event: {kind}\ndata: {e}\n\n")
    };
    let text = json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": "Before.", "annotations": []}]});
    let after = json!({"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": "After.", "annotations": []}]});
    let stream = event(
        "response.created",
        json!({"sequence_number": 0,
            "response": {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}}),
    ) + &event(
        "response.output_item.done",
        json!({"sequence_number": 1, "output_index": 0, "item": text}),
    ) + &event(
        "response.output_item.added",
        json!({"sequence_number": 2, "output_index": 1,
            "item": [responses_call()]}),
    ) + &event(
        "response.output_item.done",
        json!({"sequence_number": 3, "output_index": 2, "item": after}),
    ) + &event(
        "response.completed",
        json!({"sequence_number": 4,
            "response": {"id": "resp_1", "object": "response", "status": "completed", "output": []}}),
    );
    let (_p, proxy) = locked("/v1/responses$", &stream, true).await;
    let res = proxy
        .post("/v1/responses", &responses_request(true), &[])
        .await;
    assert_ended(res, "Before.", "`item` is a list, not an object").await;
}

// ---- Messages ----

const ANTHROPIC: &[(&str, &str)] = &[("x-api-key", "k"), ("anthropic-version", "2023-06-01")];

fn messages_request(stream: bool) -> Value {
    json!({"model": "m", "max_tokens": 100, "stream": stream,
           "messages": [{"role": "user", "content": "go"}],
           "tools": [{"name": DENIED, "input_schema": {"type": "object"}},
                     {"name": "run_code", "input_schema": {"type": "object"}}]})
}

fn messages_call() -> Value {
    json!({"type": "tool_use", "id": "toolu_1", "name": DENIED, "input": {"path": "a"}})
}

#[tokio::test]
async fn a_message_whose_content_is_an_object_is_refused() {
    let answer = json!({"id": "msg_1", "type": "message", "role": "assistant",
                        "content": {"0": messages_call()}, "stop_reason": "tool_use",
                        "usage": {"input_tokens": 3, "output_tokens": 1}});
    let (_p, proxy) = locked("/v1/messages$", &answer.to_string(), false).await;
    let res = proxy
        .post("/v1/messages", &messages_request(false), ANTHROPIC)
        .await;
    assert_refused(res, "`content` is an object, not a list").await;
}

#[tokio::test]
async fn a_message_start_whose_content_is_an_object_ends_the_stream() {
    let event = |e: Value| {
        let kind = e["type"].as_str().unwrap().to_owned();
        format!("event: {kind}\ndata: {e}\n\n")
    };
    let start = |id: &str, content: Value| {
        json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
               "model": "m", "content": content, "stop_reason": null,
               "usage": {"input_tokens": 3, "output_tokens": 1}}})
    };
    let stream = event(start("msg_1", json!([])))
        + &event(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        )
        + &event(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Before."}}),
        )
        + &event(json!({"type": "content_block_stop", "index": 0}))
        + &event(start("msg_1", json!({"0": messages_call()})))
        + &event(
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": "After."}}),
        )
        + &event(json!({"type": "message_stop"}));
    let (_p, proxy) = locked("/v1/messages$", &stream, true).await;
    let res = proxy
        .post("/v1/messages", &messages_request(true), ANTHROPIC)
        .await;
    assert_ended(res, "Before.", "`message.content` is an object, not a list").await;
}
