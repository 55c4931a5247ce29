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
    let p = MockServer::start().await;
    Mock::given(path("/v1/chat/completions"))
        .respond_with(Script::new(answers))
        .mount(&p)
        .await;
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
    assert!(call["id"].as_str().unwrap().starts_with("call_cm"), "{v}");
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
    assert!(call["id"].as_str().unwrap().starts_with("call_cm"), "{v}");
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
