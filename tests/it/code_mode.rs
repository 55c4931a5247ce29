//! Code mode end to end: the wire collapse, the executor collapse and repair.

use crate::common::*;
use serde_json::{json, Value};

#[tokio::test]
async fn code_mode_wire_carries_only_run_code_and_the_prompt_carries_the_sdk() {
    let p = provider([calls_completion(
        vec![call("c1", "run_code", r#"{"code":"return 1"}"#)],
        usage(10, 5),
    )])
    .await;
    let proxy = start(&p, &[]).await;
    let res = proxy.chat(&user_chat("hi"), &[]).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-codemode-mode"], "code");
    let got: Value = res.json().await.unwrap();
    assert_eq!(call_names(&got), vec!["run_code"]);

    let sent = received(&p).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(wire_tool_names(&sent[0]), vec!["run_code"]);
    let system = sent[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You are an agent.\n\n# Tool mode: code"),
        "{system}"
    );
    assert!(system.contains("read(args: {"), "{system}");
    assert!(
        system.contains("/** Write a file. */"),
        "descriptions move into the SDK: {system}"
    );
    assert_eq!(sent[0]["model"], "test-model");
}

#[tokio::test]
async fn collapsed_native_call_never_reaches_the_client_and_is_repaired() {
    let p = provider([
        calls_completion(
            vec![call("c1", "read", r#"{"path":"a.txt"}"#)],
            usage(100, 10),
        ),
        calls_completion(
            vec![call(
                "c2",
                "run_code",
                r#"{"code":"return await tools.read({path:'a.txt'})"}"#,
            )],
            usage(130, 20),
        ),
    ])
    .await;
    let proxy = start(&p, &[]).await;
    let res = proxy.chat(&user_chat("read a.txt"), &[]).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-codemode-repairs"], "1");
    let got: Value = res.json().await.unwrap();
    assert_eq!(call_names(&got), vec!["run_code"]);
    assert_eq!(got["choices"][0]["message"]["tool_calls"][0]["id"], "c2");
    assert_eq!(
        got["usage"],
        json!({"prompt_tokens": 230, "completion_tokens": 30, "total_tokens": 260})
    );

    let sent = received(&p).await;
    assert_eq!(sent.len(), 2);
    let repair = sent[1]["messages"].as_array().unwrap();
    let n = repair.len();
    assert_eq!(repair[n - 2]["role"], "assistant");
    assert_eq!(repair[n - 2]["tool_calls"][0]["function"]["name"], "read");
    assert_eq!(repair[n - 1]["role"], "tool");
    assert_eq!(repair[n - 1]["tool_call_id"], "c1");
    let denial = repair[n - 1]["content"].as_str().unwrap();
    assert!(denial.starts_with("UNKNOWN_TOOL:"), "{denial}");
    assert!(denial.contains("run_code"), "{denial}");
    assert!(
        denial.contains(r#"await tools.read({"path": "a.txt"})"#),
        "{denial}"
    );
    assert_eq!(
        wire_tool_names(&sent[1]),
        vec!["run_code"],
        "the repair round keeps the request's mode"
    );
}

#[tokio::test]
async fn undeclared_name_in_code_mode_is_unknown_without_a_route() {
    let p = provider([
        calls_completion(vec![call("c1", "delete_everything", "{}")], usage(1, 1)),
        text_completion("ok", usage(1, 1)),
    ])
    .await;
    let proxy = start(&p, &[]).await;
    let got: Value = proxy.chat_json(&user_chat("go"), &[]).await;
    assert_eq!(got["choices"][0]["message"]["content"], "ok");
    let sent = received(&p).await;
    let denial = sent[1]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(denial.starts_with("UNKNOWN_TOOL:"), "{denial}");
    assert!(
        !denial.contains("await tools"),
        "no route for a name that exists nowhere: {denial}"
    );
}

#[tokio::test]
async fn collapsed_call_with_broken_arguments_is_invalid_args() {
    let p = provider([
        calls_completion(
            vec![call("c1", "write", r#"{"path": "a.txt", "content": "#)],
            usage(1, 1),
        ),
        text_completion("ok", usage(1, 1)),
    ])
    .await;
    let proxy = start(&p, &[]).await;
    let got: Value = proxy.chat_json(&user_chat("go"), &[]).await;
    assert!(call_names(&got).is_empty());
    let sent = received(&p).await;
    let denial = sent[1]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(denial.starts_with("INVALID_ARGS:"), "{denial}");
}

#[tokio::test]
async fn repairs_stop_at_the_bound_and_the_client_never_sees_a_denied_call() {
    let always_read = || calls_completion(vec![call("c", "read", r#"{"path":"x"}"#)], usage(10, 1));
    let p = provider((0..10).map(|_| always_read())).await;
    let proxy = start(&p, &[("CODEMODE_MAX_REPAIRS", "2")]).await;
    let res = proxy.chat(&user_chat("go"), &[]).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-codemode-repairs"], "2");
    let got: Value = res.json().await.unwrap();
    assert!(call_names(&got).is_empty());
    assert_eq!(got["choices"][0]["finish_reason"], "stop");
    let text = got["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(
        text.contains("read") && text.contains("CODEMODE_MAX_REPAIRS"),
        "{text}"
    );
    assert_eq!(got["usage"]["prompt_tokens"], 30);
    assert_eq!(received(&p).await.len(), 3, "one request plus two repairs");
}

#[tokio::test]
async fn zero_repairs_means_one_upstream_request() {
    let p = provider([calls_completion(
        vec![call("c", "bash", r#"{"command":"ls"}"#)],
        usage(1, 1),
    )])
    .await;
    let proxy = start(&p, &[("CODEMODE_MAX_REPAIRS", "0")]).await;
    let got: Value = proxy.chat_json(&user_chat("go"), &[]).await;
    assert!(call_names(&got).is_empty());
    assert_eq!(received(&p).await.len(), 1);
}

#[tokio::test]
async fn mixed_turn_sends_allowed_calls_and_splices_denials_into_the_next_request() {
    let p = provider([
        calls_completion(
            vec![
                call("ok1", "run_code", r#"{"code":"1"}"#),
                call("bad1", "bash", r#"{"command":"rm -rf /"}"#),
            ],
            usage(1, 1),
        ),
        text_completion("done", usage(1, 1)),
    ])
    .await;
    let proxy = start(&p, &[]).await;
    let first: Value = proxy.chat_json(&user_chat("go"), &[]).await;
    assert_eq!(call_names(&first), vec!["run_code"]);
    assert_eq!(received(&p).await.len(), 1, "a mixed turn is not repaired");

    // The client returns the result of the call it got, as agents do.
    let assistant = first["choices"][0]["message"].clone();
    let next = chat_body(json!([
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "go"},
        assistant,
        {"role": "tool", "tool_call_id": "ok1", "content": "1"}
    ]));
    let second: Value = proxy.chat_json(&next, &[]).await;
    assert_eq!(second["choices"][0]["message"]["content"], "done");

    let sent = received(&p).await;
    let m = sent[1]["messages"].as_array().unwrap();
    let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
    assert_eq!(roles, vec!["system", "user", "assistant", "tool", "tool"]);
    let ids: Vec<&str> = strs(&m[2]["tool_calls"], "id");
    assert_eq!(ids, vec!["ok1", "bad1"]);
    assert_eq!(m[3]["tool_call_id"], "ok1");
    assert_eq!(m[4]["tool_call_id"], "bad1");
    assert!(m[4]["content"]
        .as_str()
        .unwrap()
        .starts_with("UNKNOWN_TOOL:"));
}

#[tokio::test]
async fn both_mode_presents_native_tools_and_run_code_and_passes_native_calls() {
    let p = provider([calls_completion(
        vec![call("c1", "read", r#"{"path":"a"}"#)],
        usage(1, 1),
    )])
    .await;
    let proxy = start(&p, &[("CODEMODE_MODE", "both")]).await;
    let got: Value = proxy.chat_json(&user_chat("go"), &[]).await;
    assert_eq!(call_names(&got), vec!["read"]);
    let sent = received(&p).await;
    assert_eq!(
        wire_tool_names(&sent[0]),
        vec!["read", "write", "bash", "run_code"]
    );
    let system = sent[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("declare const tools"), "{system}");
    assert!(
        !system.contains("Tool mode: code"),
        "both renders the code-only rule empty: {system}"
    );
}

#[tokio::test]
async fn native_mode_is_byte_transparent_both_ways() {
    let upstream_body = r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"anything","arguments":"{}"}}]},"finish_reason":"tool_calls"}],  "vendor":true}"#;
    let p = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/v1/chat/completions"))
        .respond_with(
            wiremock::ResponseTemplate::new(200).set_body_raw(upstream_body, "application/json"),
        )
        .mount(&p)
        .await;
    let proxy = start(&p, &[("CODEMODE_MODE", "native")]).await;
    let client_body = "{\"model\": \"m\",\n \"messages\": [{\"role\":\"user\",\"content\":\"hi\"}], \"tools\": []}";
    let res = proxy
        .post_raw(
            "/v1/chat/completions",
            client_body,
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(res.headers()["x-codemode-mode"], "native");
    assert_eq!(res.text().await.unwrap(), upstream_body);
    let reqs = p.received_requests().await.unwrap();
    assert_eq!(
        String::from_utf8(reqs[0].body.clone()).unwrap(),
        client_body
    );
}

#[tokio::test]
async fn preset_deny_list_hides_a_tool_on_the_wire_and_at_the_executor() {
    let file = config_file(
        "deny",
        "[[preset]]\nname = \"no-shell\"\ntool_mode = \"native\"\ndeny = [\"bash\"]\n",
    );
    let p = provider([
        calls_completion(vec![call("c1", "bash", r#"{"command":"ls"}"#)], usage(1, 1)),
        calls_completion(vec![call("c2", "read", r#"{"path":"a"}"#)], usage(1, 1)),
    ])
    .await;
    let proxy = start(&p, &[("CODEMODE_CONFIG", &file)]).await;
    let got: Value = proxy
        .chat_json(&user_chat("go"), &[("x-codemode-preset", "no-shell")])
        .await;
    assert_eq!(call_names(&got), vec!["read"]);
    let sent = received(&p).await;
    assert_eq!(wire_tool_names(&sent[0]), vec!["read", "write", "run_code"]);
    let denial = sent[1]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        denial.starts_with("UNKNOWN_TOOL:") && !denial.contains("await tools"),
        "{denial}"
    );
}

#[tokio::test]
async fn forced_native_tool_choice_is_rewritten_to_run_code() {
    let p = provider([calls_completion(
        vec![call("c1", "run_code", "{}")],
        usage(1, 1),
    )])
    .await;
    let proxy = start(&p, &[]).await;
    let mut body = user_chat("go");
    body["tool_choice"] = json!({"type": "function", "function": {"name": "read"}});
    proxy.chat(&body, &[]).await;
    let sent = received(&p).await;
    assert_eq!(
        sent[0]["tool_choice"],
        json!({"type": "function", "function": {"name": "run_code"}})
    );
}

#[tokio::test]
async fn identical_requests_reach_the_provider_byte_identical() {
    let p = provider([
        text_completion("a", usage(1, 1)),
        text_completion("b", usage(1, 1)),
    ])
    .await;
    let proxy = start(&p, &[]).await;
    proxy.chat(&user_chat("same"), &[]).await;
    proxy.chat(&user_chat("same"), &[]).await;
    let reqs = p.received_requests().await.unwrap();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body, reqs[1].body);
}

#[tokio::test]
async fn unknown_fields_reach_the_provider_unchanged() {
    let p = provider([text_completion("a", usage(1, 1))]).await;
    let proxy = start(&p, &[]).await;
    let mut body = user_chat("go");
    body["temperature"] = json!(0.25);
    body["metadata"] = json!({"trace": [1, 2, {"deep": null}]});
    body["parallel_tool_calls"] = json!(false);
    proxy.chat(&body, &[]).await;
    let sent = received(&p).await;
    assert_eq!(sent[0]["temperature"], json!(0.25));
    assert_eq!(
        sent[0]["metadata"],
        json!({"trace": [1, 2, {"deep": null}]})
    );
    assert_eq!(sent[0]["parallel_tool_calls"], json!(false));
    assert_eq!(
        sent[0]["messages"][1],
        json!({"role": "user", "content": "go"})
    );
}

#[tokio::test]
async fn n_above_one_is_refused_where_calls_can_be_denied() {
    let p = provider([text_completion("a", usage(1, 1))]).await;
    let proxy = start(&p, &[]).await;
    let mut body = user_chat("go");
    body["n"] = json!(3);
    let res = proxy.chat(&body, &[]).await;
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["code"], "unsupported_n");
    assert!(received(&p).await.is_empty());
    // Native mode cannot deny anything, so n passes through.
    let res = proxy.chat(&body, &[("x-codemode-mode", "native")]).await;
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn legacy_functions_are_refused_in_code_mode() {
    let p = provider([]).await;
    let proxy = start(&p, &[]).await;
    let mut body = user_chat("go");
    body["functions"] = json!([{"name": "read", "parameters": {"type": "object"}}]);
    let res = proxy.chat(&body, &[]).await;
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert!(error_message(&err).contains("`functions`"));
    assert!(received(&p).await.is_empty());
}
