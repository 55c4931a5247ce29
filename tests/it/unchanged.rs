//! An answer the judge does not change reaches the client as the provider
//! wrote it, byte for byte (its spacing, key order and number spellings
//! included); one it changes is written anew, and no withheld call is in
//! either (issue 35: a judge that can say "unchanged").

use crate::common::*;
use serde_json::{json, Value};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn raw(body: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body.as_bytes().to_vec(), "application/json")
}

async fn chat_provider(answers: Vec<ResponseTemplate>) -> MockServer {
    let p = scripted::model_server(Script::new(answers)).await;
    p
}

fn chat_request() -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": "go"}],
           "tools": [tool("read", "Reads a file.", json!({"type": "object"})),
                     tool("run_code", "Runs a program.", json!({"type": "object"}))]})
}

/// A run_code call with its id, spelled as no serialiser here would.
const CHAT_PROGRAM: &str = r#"{ "id" : "c1", "object":"chat.completion",
  "choices" : [ { "index":0, "finish_reason":"tool_calls", "message" : { "role":"assistant", "content":null,
    "tool_calls":[ {"id":"call_1","type":"function","function":{"name":"run_code","arguments":"{\"code\":\"return 1\"}"}} ] } } ],
  "usage" : {"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}, "x_vendor_score" : 1.50000 }"#;

#[tokio::test]
async fn a_passed_turn_reaches_the_client_byte_for_byte_and_an_edited_one_anew() {
    let without_id = CHAT_PROGRAM.replace(r#""id":"call_1","#, "");
    let p = chat_provider(vec![raw(CHAT_PROGRAM), raw(&without_id)]).await;
    let proxy = start(&p, &[("CODEMODE_MODE", "code")]).await;

    let res = proxy
        .post("/v1/chat/completions", &chat_request(), &[])
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-codemode-mode"], "code");
    assert_eq!(res.text().await.unwrap(), CHAT_PROGRAM);

    // A call without an id gets one: the answer is written anew.
    let res = proxy
        .post("/v1/chat/completions", &chat_request(), &[])
        .await;
    let text = res.text().await.unwrap();
    assert_ne!(text, without_id);
    let v: Value = serde_json::from_str(&text).unwrap();
    let call = &v["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "run_code");
    assert!(is_minted_shape(call["id"].as_str().unwrap()), "{v}");
    assert_eq!(v["x_vendor_score"], 1.5);
}

#[tokio::test]
async fn a_withheld_call_never_goes_out_in_the_providers_bytes() {
    let denied = CHAT_PROGRAM.replace("run_code", "read");
    let text = r#"{"id":"c2","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Done."}}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}"#;
    let p = chat_provider(vec![raw(&denied), raw(text)]).await;
    let proxy = start(&p, &[("CODEMODE_MODE", "code")]).await;
    let res = proxy
        .post("/v1/chat/completions", &chat_request(), &[])
        .await;
    assert_eq!(res.headers()["x-codemode-repairs"], "1");
    let body = res.text().await.unwrap();
    assert!(!body.contains("\"read\""), "{body}");
    // The repaired round's answer carries both rounds' usage: written anew.
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "Done.");
    assert_eq!(v["usage"]["prompt_tokens"], 15);
}

#[tokio::test]
async fn a_gemini_answer_whose_calls_have_ids_goes_out_as_it_came() {
    let with_id = r#"{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"id": "g1", "name": "run_code", "args": {"code": "return 1"}}, "thoughtSignature": "c2ln"}]}, "finishReason": "STOP", "index": 0}],
 "usageMetadata": {"promptTokenCount": 10, "totalTokenCount": 12}, "modelVersion": "gemini-2.5-pro"}"#;
    let without_id = with_id.replace(r#""id": "g1", "#, "");
    let p = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path_regex(":generateContent$"))
        .respond_with(Script::new(vec![raw(with_id), raw(&without_id)]))
        .mount(&p)
        .await;
    let upstream = p.uri();
    let proxy = start(
        &p,
        &[
            ("CODEMODE_MODE", "code"),
            ("CODEMODE_GEMINI_UPSTREAM", &upstream),
        ],
    )
    .await;
    let request = json!({"contents": [{"role": "user", "parts": [{"text": "go"}]}],
        "tools": [{"functionDeclarations": [
            {"name": "read_file", "description": "Reads a file.", "parameters": {"type": "OBJECT"}},
            {"name": "run_code", "description": "Runs a program.", "parameters": {"type": "OBJECT"}}]}]});
    let url = "/v1beta/models/gemini-2.5-pro:generateContent";
    let headers = [("x-goog-api-key", "k")];
    let res = proxy.post(url, &request, &headers).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap(), with_id);
    let res = proxy.post(url, &request, &headers).await;
    let v: Value = res.json().await.unwrap();
    let call = &v["candidates"][0]["content"]["parts"][0]["functionCall"];
    assert!(call["id"].as_str().unwrap().starts_with("call_"), "{v}");
    assert_eq!(
        v["candidates"][0]["content"]["parts"][0]["thoughtSignature"],
        "c2ln"
    );
}

#[tokio::test]
async fn an_answer_repeating_a_key_is_written_from_the_reading_the_judge_saw() {
    // Two `tool_calls` keys: the judge reads the last (run_code, passed);
    // a client keeping the first would run `read`. Such bytes never go out.
    let repeated = r#"{"id":"c1","object":"chat.completion","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
      "tool_calls":[{"id":"call_r","type":"function","function":{"name":"read","arguments":"{}"}}],
      "tool_calls":[{"id":"call_1","type":"function","function":{"name":"run_code","arguments":"{\"code\":\"return 1\"}"}}]}}],
      "usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}"#;
    let p = chat_provider(vec![raw(repeated)]).await;
    let proxy = start(&p, &[("CODEMODE_MODE", "code")]).await;
    let res = proxy
        .post("/v1/chat/completions", &chat_request(), &[])
        .await;
    assert_eq!(res.status(), 200);
    let body = res.text().await.unwrap();
    assert!(!body.contains("\"read\""), "{body}");
    assert_eq!(body.matches("\"tool_calls\":").count(), 1, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "run_code"
    );
}

#[tokio::test]
async fn a_text_answer_of_every_dialect_goes_out_as_it_came_and_its_usage_counts() {
    // Spelled as no serialiser here would: a tree built and written again
    // could not give these bytes back.
    let cases = [
        (
            "/v1/chat/completions",
            chat_request(),
            r#"{ "id":"c3", "choices" : [ {"index":0, "message":{"role":"assistant","content":"Done.\u0021"}, "finish_reason":"stop"} ],
  "usage" : {"prompt_tokens":7, "completion_tokens":1, "total_tokens":8} }"#,
            (7, 1),
        ),
        (
            "/v1/responses",
            json!({"model": "m", "input": "go", "tools": [
                {"type": "function", "name": "read", "parameters": {"type": "object"}}]}),
            r#"{ "id":"resp_3", "object":"response", "status":"completed",
  "output":[ {"type":"reasoning","id":"rs_1","summary":[]}, {"type":"message","id":"m1","role":"assistant","content":[{"type":"output_text","text":"Done."}]} ],
  "usage":{ "input_tokens":11, "output_tokens":2 } }"#,
            (11, 2),
        ),
        (
            "/v1/messages",
            json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "go"}],
                   "tools": [{"name": "read", "input_schema": {"type": "object"}}]}),
            r#"{"id":"msg_3","type":"message","role":"assistant", "content":[ {"type":"text","text":"Done."} ],
  "stop_reason":"end_turn", "usage":{"input_tokens":13,"output_tokens":3}}"#,
            (13, 3),
        ),
        (
            "/v1beta/models/gemini-2.5-pro:generateContent",
            json!({"contents": [{"role": "user", "parts": [{"text": "go"}]}],
                   "tools": [{"functionDeclarations": [{"name": "read_file", "parameters": {"type": "OBJECT"}}]}]}),
            r#"{"candidates": [ {"content": {"role": "model", "parts": [{"text": "Done."}]}, "finishReason": "STOP", "index": 0} ],
  "usageMetadata": {"promptTokenCount": 17, "candidatesTokenCount": 4, "totalTokenCount": 21}}"#,
            (17, 4),
        ),
    ];
    let p = MockServer::start().await;
    for (route, _, answer, _) in &cases {
        Mock::given(method("POST"))
            .and(path(*route))
            .respond_with(raw(answer))
            .mount(&p)
            .await;
    }
    let upstream = p.uri();
    let anthropic = format!("{upstream}/v1");
    let proxy = start(
        &p,
        &[
            ("CODEMODE_MODE", "code"),
            ("CODEMODE_RUNTIME", "embedded"),
            ("CODEMODE_ANTHROPIC_UPSTREAM", &anthropic),
            ("CODEMODE_GEMINI_UPSTREAM", &upstream),
        ],
    )
    .await;
    // Each provider's own credential: a key reaches only its provider.
    let headers = |route: &str| match route {
        "/v1/messages" => vec![("x-api-key", "k"), ("anthropic-version", "2023-06-01")],
        r if r.starts_with("/v1beta/") => vec![("x-goog-api-key", "k")],
        _ => vec![("authorization", "Bearer k")],
    };
    for (route, request, answer, (input, output)) in &cases {
        let before = crate::metrics::scrape(&proxy).await;
        let res = proxy.post(route, request, &headers(route)).await;
        assert_eq!(res.status(), 200, "{route}");
        assert_eq!(res.headers()["x-codemode-mode"], "code", "{route}");
        assert_eq!(&res.text().await.unwrap(), answer, "{route}");
        let after = crate::metrics::scrape(&proxy).await;
        for (kind, n) in [("input", input), ("output", output)] {
            let series = format!(r#"codemode_upstream_tokens_total{{type="{kind}"}}"#);
            assert_eq!(
                crate::metrics::moved(&before, &after, &series),
                f64::from(*n),
                "{route}: {series}"
            );
        }
    }
}

fn sse(body: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body.as_bytes().to_vec(), "text/event-stream")
}

/// A stream event that repeats a key: serde (and the judge) keeps the last,
/// many clients the first. Whatever the dialect, the first reading's call
/// (`read`, denied in code mode) must not reach the client in the bytes.
async fn streamed_through(
    path_pattern: &str,
    url: &str,
    request: Value,
    stream: &str,
    after: &str,
    headers: &[(&str, &str)],
) -> String {
    let p = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path_regex(path_pattern))
        .respond_with(Script::new(vec![sse(stream), sse(after)]))
        .mount(&p)
        .await;
    let upstream = p.uri();
    // Anthropic's base holds the version, Gemini's does not.
    let anthropic = format!("{upstream}/v1");
    let proxy = start(
        &p,
        &[
            ("CODEMODE_MODE", "code"),
            ("CODEMODE_GEMINI_UPSTREAM", &upstream),
            ("CODEMODE_ANTHROPIC_UPSTREAM", &anthropic),
        ],
    )
    .await;
    let res = proxy.post(url, &request, headers).await;
    let status = res.status();
    let body = res.text().await.unwrap();
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test]
async fn a_chat_chunk_repeating_a_key_is_written_from_the_reading_the_judge_saw() {
    let stream = concat!(
        r#"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"}}]}"#,
        "\n\n",
        r#"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_r","type":"function","function":{"name":"read","arguments":"{}"}}],"tool_calls":[]}}]}"#,
        "\n\n",
        r#"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "\n\ndata: [DONE]\n\n"
    );
    let mut request = chat_request();
    request["stream"] = json!(true);
    let body = streamed_through(
        "/v1/chat/completions$",
        "/v1/chat/completions",
        request,
        stream,
        stream,
        &[],
    )
    .await;
    assert!(!body.contains("\"read\""), "{body}");
    assert!(body.contains("\"hi\""), "{body}");
}

#[tokio::test]
async fn a_gemini_chunk_repeating_a_key_is_written_from_the_reading_the_judge_saw() {
    let stream = concat!(
        r#"data: {"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"id":"g1","name":"read_file","args":{}}}],"parts":[{"text":"hi"}]},"index":0}]}"#,
        "\r\n\r\n",
        r#"data: {"candidates":[{"content":{"role":"model","parts":[{"text":"."}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"totalTokenCount":4}}"#,
        "\r\n\r\n"
    );
    let request = json!({"contents": [{"role": "user", "parts": [{"text": "go"}]}],
        "tools": [{"functionDeclarations": [
            {"name": "read_file", "description": "Reads a file.", "parameters": {"type": "OBJECT"}},
            {"name": "run_code", "description": "Runs a program.", "parameters": {"type": "OBJECT"}}]}]});
    let body = streamed_through(
        ":streamGenerateContent$",
        "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
        request,
        stream,
        stream,
        &[("x-goog-api-key", "k")],
    )
    .await;
    assert!(!body.contains("read_file"), "{body}");
    assert!(body.contains("\"hi\""), "{body}");
}

#[tokio::test]
async fn a_messages_event_repeating_a_key_is_written_from_the_reading_the_judge_saw() {
    let stream = concat!(
        "event: message_start\n",
        r#"data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":1}}}"#,
        "\n\nevent: content_block_start\n",
        r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_r","name":"read","input":{}},"content_block":{"type":"text","text":""}}"#,
        "\n\nevent: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#,
        "\n\nevent: content_block_stop\n",
        r#"data: {"type":"content_block_stop","index":0}"#,
        "\n\nevent: message_delta\n",
        r#"data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}"#,
        "\n\nevent: message_stop\n",
        r#"data: {"type":"message_stop"}"#,
        "\n\n"
    );
    let request = json!({"model": "m", "max_tokens": 100, "stream": true,
        "messages": [{"role": "user", "content": "go"}],
        "tools": [{"name": "read", "description": "Reads a file.", "input_schema": {"type": "object"}},
                  {"name": "run_code", "description": "Runs a program.", "input_schema": {"type": "object"}}]});
    let body = streamed_through(
        "/v1/messages$",
        "/v1/messages",
        request,
        stream,
        stream,
        &[],
    )
    .await;
    assert!(!body.contains("\"read\""), "{body}");
    assert!(body.contains("\"hi\""), "{body}");
}

#[tokio::test]
async fn a_responses_event_repeating_a_key_is_written_from_the_reading_the_judge_saw() {
    let stream = concat!(
        "event: response.created\n",
        r#"data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}"#,
        "\n\nevent: response.output_item.added\n",
        r#"data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"function_call","id":"fc_r","call_id":"call_r","name":"read","arguments":"{}","status":"completed"},"item":{"type":"message","id":"msg_1","role":"assistant","status":"in_progress","content":[]}}"#,
        "\n\nevent: response.output_text.delta\n",
        r#"data: {"type":"response.output_text.delta","sequence_number":2,"output_index":0,"item_id":"msg_1","content_index":0,"delta":"hi"}"#,
        "\n\nevent: response.output_item.done\n",
        r#"data: {"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"hi","annotations":[]}]}}"#,
        "\n\nevent: response.completed\n",
        r#"data: {"type":"response.completed","sequence_number":4,"response":{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"hi","annotations":[]}]}],"usage":{"input_tokens":3,"output_tokens":1,"total_tokens":4}}}"#,
        "\n\n"
    );
    let request = json!({"model": "m", "input": "go", "stream": true,
        "tools": [{"type": "function", "name": "read", "description": "Reads a file.", "parameters": {"type": "object"}},
                  {"type": "function", "name": "run_code", "description": "Runs a program.", "parameters": {"type": "object"}}]});
    let body = streamed_through(
        "/v1/responses$",
        "/v1/responses",
        request,
        stream,
        stream,
        &[],
    )
    .await;
    assert!(!body.contains("\"read\""), "{body}");
    assert!(body.contains("\"hi\""), "{body}");
}
