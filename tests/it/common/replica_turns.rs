//! An agent's turns against proxy replicas sharing a store
//! (replicas.rs, replicas_ha.rs): a Chat Completions conversation with the
//! agent's file tools, each answer read as the client does.

use serde_json::Value;

use super::agent::{conversation, fs_body, tool_result};
use super::Proxy;

/// The proxy's answer to `messages`: status, `retry-after`, body.
pub async fn ask_with_retry(proxy: &Proxy, messages: &[Value]) -> (u16, Option<String>, Value) {
    let res = proxy.chat(&fs_body(messages), &[]).await;
    let status = res.status().as_u16();
    let retry = retry_after(&res);
    (status, retry, res.json().await.unwrap_or(Value::Null))
}

pub fn retry_after(res: &reqwest::Response) -> Option<String> {
    res.headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned())
}

/// The assistant message of a 200 answer to `messages`.
pub async fn turn(proxy: &Proxy, messages: &[Value]) -> Value {
    let (status, _, body) = ask_with_retry(proxy, messages).await;
    assert_eq!(status, 200, "{body}");
    body["choices"][0]["message"].clone()
}

/// The nested call a turn hands out: its id and its `path` argument.
pub fn handed(turn: &Value) -> (Value, String) {
    let calls = turn["tool_calls"].as_array().expect("tool calls");
    assert_eq!(calls.len(), 1, "{turn}");
    let args: Value =
        serde_json::from_str(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap();
    (
        calls[0]["id"].clone(),
        args["path"].as_str().unwrap().to_owned(),
    )
}

/// A program of two reads started on `a` and continued on `b`: `a` hands
/// out the read of a.txt, `b` (given its result, "alpha") the read of
/// b.txt, each read as `handed` reads a turn. The conversation with
/// b.txt's result ("bravo") last.
pub async fn started_on_a_continued_on_b(
    a: &Proxy,
    b: &Proxy,
    prompt: &str,
    handed: fn(&Value) -> (Value, String),
) -> Vec<Value> {
    let mut messages = conversation(prompt);
    let first = turn(a, &messages).await;
    let (id, path) = handed(&first);
    assert_eq!(path, "a.txt");
    messages.push(first);
    messages.push(tool_result(&id, "alpha"));
    let second = turn(b, &messages).await;
    let (id, path) = handed(&second);
    assert_eq!(path, "b.txt", "replica B continued A's program");
    messages.push(second);
    messages.push(tool_result(&id, "bravo"));
    messages
}

/// Asserts `proxy` answers a native-mode request (one that needs no
/// record in the store) with a 200.
pub async fn native_answers(proxy: &Proxy) {
    let native = proxy
        .chat(
            &fs_body(&conversation("hi")),
            &[("x-codemode-mode", "native")],
        )
        .await;
    assert_eq!(native.status(), 200);
}
