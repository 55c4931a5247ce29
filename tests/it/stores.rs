//! The stores (docs/security.md): executions and stored denials belong
//! to their tenant (credential and scope), are bounded by bytes, and a
//! record lost before its time reaches the model as an error it can act on.

use crate::common;
use crate::common::agent::{conversation, fs_body, tool_result, FsAgent};
use crate::common::*;
use codemode_proxy::store::{Execution, StoreFuture, Tenant};
use serde_json::{json, Value};
use std::sync::Arc;

const ALICE: &[(&str, &str)] = &[("authorization", "Bearer sk-alice")];
const MALLORY: &[(&str, &str)] = &[("authorization", "Bearer sk-mallory")];
const BOB_KEY: &[(&str, &str)] = &[("x-api-key", "sk-bob")];

fn run_code(id: &str, code: &str) -> Value {
    calls_completion(
        vec![call(id, "run_code", &json!({"code": code}).to_string())],
        usage(1, 1),
    )
}

async fn embedded(p: &wiremock::MockServer, vars: &[(&str, &str)]) -> Proxy {
    let mut all = vec![("CODEMODE_RUNTIME", "embedded")];
    all.extend_from_slice(vars);
    start(p, &all).await
}

/// Asks with `headers`; returns the status and the body.
async fn ask(proxy: &Proxy, messages: &[Value], headers: &[(&str, &str)]) -> (u16, Value) {
    let res = proxy.chat(&fs_body(messages), headers).await;
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// The assistant message of a 200 answer.
async fn turn(proxy: &Proxy, messages: &[Value], headers: &[(&str, &str)]) -> Value {
    let (status, body) = ask(proxy, messages, headers).await;
    assert_eq!(status, 200, "{body}");
    body["choices"][0]["message"].clone()
}

fn last_content(body: &Value) -> String {
    body["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[tokio::test]
async fn another_credential_naming_an_execution_gets_the_unknown_id_400_and_the_owner_still_finishes(
) {
    let p = provider([
        run_code("c", "return await tools.read({path: 'a.txt'});"),
        text_completion("It says hello.", usage(1, 1)),
    ])
    .await;
    let proxy = embedded(&p, &[]).await;
    let mut alice = conversation("read it");
    let nested = turn(&proxy, &alice, ALICE).await;
    let id = nested["tool_calls"][0]["id"].clone();
    let exec = common::exec_of(id.as_str().unwrap()).to_owned();
    alice.push(nested.clone());

    // Mallory returns a result for Alice's call, and for a call the proxy never minted.
    let mut foreign = alice.clone();
    foreign.push(tool_result(&id, "evil"));
    // A well-formed id of an execution this proxy never held: minted by
    // another proxy (its own store) for another key.
    let elsewhere = provider([run_code("c", "return await tools.read({path: 'a.txt'});")]).await;
    let other_proxy = embedded(&elsewhere, &[]).await;
    let other = turn(&other_proxy, &conversation("read it"), BOB_KEY).await;
    let never_id = other["tool_calls"][0]["id"].clone();
    assert_ne!(common::exec_of(never_id.as_str().unwrap()), exec);
    let mut unknown = conversation("read it");
    let mut forged_turn = nested.clone();
    forged_turn["tool_calls"][0]["id"] = never_id.clone();
    unknown.push(forged_turn);
    unknown.push(tool_result(&never_id, "evil"));

    let mut messages = Vec::new();
    for (history, headers) in [
        (&foreign, MALLORY),
        (&foreign, &[][..]),
        (&foreign, BOB_KEY),
        (&unknown, MALLORY),
    ] {
        let (status, body) = ask(&proxy, history, headers).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        let text = error_message(&body).to_owned();
        let (id, never_id) = (id.as_str().unwrap(), never_id.as_str().unwrap());
        messages.push(text.replace(id, "ID").replace(never_id, "ID"));
    }
    assert!(
        messages.iter().all(|m| *m == messages[0]),
        "a foreign id and an unknown one read alike: {messages:?}"
    );
    assert_eq!(received(&p).await.len(), 1, "nothing reached the model");

    // Alice's own results still resume her program.
    alice.push(tool_result(&id, "hello"));
    let answer = turn(&proxy, &alice, ALICE).await;
    assert_eq!(answer["content"], "It says hello.");
    let sent = received(&p).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(last_content(&sent[1]), "Result: \"hello\"");
    assert!(!sent[1].to_string().contains("evil"));
}

#[tokio::test]
async fn another_tenants_execution_in_history_splices_nothing_of_its_owner() {
    let p = provider([
        run_code(
            "c",
            "/* SECRET_CODE */ return await tools.read({path: 's'});",
        ),
        text_completion("done", usage(1, 1)),
        text_completion("for mallory", usage(1, 1)),
        text_completion("for alice", usage(1, 1)),
    ])
    .await;
    let proxy = embedded(&p, &[]).await;
    let mut alice = conversation("read it");
    let nested = turn(&proxy, &alice, ALICE).await;
    let id = nested["tool_calls"][0]["id"].clone();
    alice.push(nested.clone());
    alice.push(tool_result(&id, "SECRET_RESULT"));
    let answer = turn(&proxy, &alice, ALICE).await;
    alice.push(answer);
    alice.push(json!({"role": "user", "content": "and now?"}));

    // Mallory names Alice's execution in an earlier turn of her own history.
    let mut mallory = alice.clone();
    mallory[3] = tool_result(&id, "whatever");
    assert_eq!(
        turn(&proxy, &mallory, MALLORY).await["content"],
        "for mallory"
    );
    let sent = received(&p).await;
    let text = sent[2].to_string();
    assert!(
        !text.contains("SECRET_CODE") && !text.contains("SECRET_RESULT"),
        "{text}"
    );
    assert!(!text.contains("whatever"), "the nested traffic is replaced");
    assert!(text.contains("not available"), "{text}");

    // Alice's own history shows her program and its result.
    assert_eq!(turn(&proxy, &alice, ALICE).await["content"], "for alice");
    let text = received(&p).await[3].to_string();
    assert!(text.contains("SECRET_CODE") && text.contains("SECRET_RESULT"));
}

fn mixed(allowed: &[&str], denied_id: &str, command: &str) -> Value {
    let mut calls: Vec<Value> = allowed
        .iter()
        .map(|id| call(id, "run_code", r#"{"code":"1"}"#))
        .collect();
    calls.push(call(
        denied_id,
        "bash",
        &json!({"command": command}).to_string(),
    ));
    calls_completion(calls, usage(1, 1))
}

/// The client's next request after a mixed turn: the allowed calls' results.
fn follow_up(first: &Value) -> Value {
    let assistant = first["choices"][0]["message"].clone();
    let mut messages = vec![
        json!({"role": "system", "content": "You are an agent."}),
        json!({"role": "user", "content": "go"}),
        assistant.clone(),
    ];
    for c in assistant["tool_calls"].as_array().unwrap() {
        messages.push(tool_result(&c["id"], "1"));
    }
    chat_body(json!(messages))
}

#[tokio::test]
async fn conversations_reusing_call_1_in_mixed_turns_keep_their_own_denials() {
    let p = provider([
        mixed(&["call_1"], "call_2", "rm ALICE"),
        mixed(&["call_1"], "call_2", "rm MALLORY"),
        mixed(&["call_1", "call_4"], "call_2", "rm SECOND"),
        text_completion("a", usage(1, 1)),
        text_completion("m", usage(1, 1)),
        text_completion("s", usage(1, 1)),
    ])
    .await;
    let proxy = start(&p, &[]).await;
    let a: Value = proxy.chat_json(&user_chat("go"), ALICE).await;
    let m: Value = proxy.chat_json(&user_chat("go"), MALLORY).await;
    // Alice's second conversation, reusing the same ids.
    let s: Value = proxy.chat_json(&user_chat("go"), ALICE).await;
    assert_eq!(call_names(&a), vec!["run_code"]);

    for (first, headers, own) in [
        (&a, ALICE, "ALICE"),
        (&m, MALLORY, "MALLORY"),
        (&s, ALICE, "SECOND"),
    ] {
        let res = proxy.chat(&follow_up(first), headers).await;
        assert_eq!(res.status(), 200);
        let sent = received(&p).await;
        let text = sent.last().unwrap().to_string();
        for other in ["ALICE", "MALLORY", "SECOND"] {
            assert_eq!(
                text.contains(&format!("rm {other}")),
                other == own,
                "{own}'s history must carry its own denial only: {text}"
            );
        }
        let m = sent.last().unwrap()["messages"].as_array().unwrap().clone();
        assert!(m.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .starts_with("UNKNOWN_TOOL:"));
    }
}

#[tokio::test]
async fn storing_a_turn_again_evicts_no_other_stored_turn() {
    // The old store counted a refresh against CODEMODE_SPLICE_CAPACITY;
    // the variable is deprecated now and bounds nothing.
    let p = provider([
        mixed(&["x1"], "x2", "rm X"),
        mixed(&["y1"], "y2", "rm Y"),
        mixed(&["y1"], "y2", "rm Y"),
        mixed(&["y1"], "y2", "rm Y"),
        text_completion("x", usage(1, 1)),
    ])
    .await;
    let proxy = start(&p, &[("CODEMODE_SPLICE_CAPACITY", "2")]).await;
    let x: Value = proxy.chat_json(&user_chat("go"), &[]).await;
    for _ in 0..3 {
        proxy.chat_bytes(&user_chat("go"), &[]).await;
    }
    let res = proxy.chat(&follow_up(&x), &[]).await;
    assert_eq!(res.status(), 200);
    let text = received(&p).await.last().unwrap().to_string();
    assert!(text.contains("rm X"), "{text}");
}

#[tokio::test]
async fn a_flood_of_programs_that_end_at_once_does_not_evict_a_waiting_one() {
    // 1 MiB for executions; forty 30 KB programs are more than that.
    let big = format!("/* {} */ return 1;", "x".repeat(30_000));
    let mut script = vec![run_code("w", "return await tools.read({path: 'a.txt'});")];
    for _ in 0..5 {
        for _ in 0..8 {
            script.push(run_code("f", &big));
        }
        script.push(text_completion("flooded", usage(1, 1)));
    }
    script.push(text_completion("It says hello.", usage(1, 1)));
    let p = provider(script).await;
    let proxy = embedded(&p, &[("CODEMODE_EXECUTION_STORE_MB", "1")]).await;

    let mut waiting = conversation("read it");
    let nested = turn(&proxy, &waiting, &[]).await;
    let id = nested["tool_calls"][0]["id"].clone();
    waiting.push(nested);
    for _ in 0..5 {
        let t = turn(&proxy, &conversation("flood"), &[]).await;
        assert_eq!(t["content"], "flooded");
    }
    waiting.push(tool_result(&id, "hello"));
    assert_eq!(
        turn(&proxy, &waiting, &[]).await["content"],
        "It says hello."
    );
    let sent = received(&p).await;
    assert_eq!(last_content(sent.last().unwrap()), "Result: \"hello\"");
}

#[tokio::test]
async fn executions_pushed_out_by_the_budget_reach_the_model_as_errors_not_400s() {
    // Four waiting 200 KB programs in a 1 MiB store (half for waiting ones).
    let big = |i: usize| {
        format!(
            "/* {} */ return await tools.read({{path: 'f{i}'}});",
            "x".repeat(200_000)
        )
    };
    let mut script: Vec<Value> = (0..4)
        .map(|i| run_code(&format!("r{i}"), &big(i)))
        .collect();
    script.extend((0..4).map(|_| text_completion("ok", usage(1, 1))));
    let p = provider(script).await;
    let proxy = embedded(&p, &[("CODEMODE_EXECUTION_STORE_MB", "1")]).await;
    let mut conversations = Vec::new();
    for i in 0..4 {
        let mut c = conversation(&format!("read f{i}"));
        let nested = turn(&proxy, &c, &[]).await;
        let id = nested["tool_calls"][0]["id"].clone();
        c.push(nested);
        c.push(tool_result(&id, &format!("content {i}")));
        conversations.push(c);
    }
    for (i, c) in conversations.iter().enumerate() {
        assert_eq!(turn(&proxy, c, &[]).await["content"], "ok");
        let last = last_content(received(&p).await.last().unwrap());
        assert!(
            last == format!("Result: \"content {i}\"") || last.contains("Run the program again"),
            "{last}"
        );
    }
}

#[tokio::test]
async fn an_execution_lost_to_a_restart_reaches_the_model_as_a_run_code_error() {
    let p = provider([
        run_code("call_prog", "return await tools.read({path: 'a.txt'});"),
        text_completion("I will run it again.", usage(1, 1)),
    ])
    .await;
    let first = embedded(&p, &[]).await;
    let mut messages = conversation("read it");
    let nested = turn(&first, &messages, ALICE).await;
    let id = nested["tool_calls"][0]["id"].clone();
    messages.push(nested);
    messages.push(tool_result(&id, "hello"));
    drop(first);

    let second = embedded(&p, &[]).await;
    let answer = turn(&second, &messages, ALICE).await;
    assert_eq!(answer["content"], "I will run it again.");
    let sent = received(&p).await;
    let m = sent[1]["messages"].as_array().unwrap();
    let n = m.len();
    assert_eq!(m[n - 2]["tool_calls"][0]["function"]["name"], "run_code");
    assert_eq!(m[n - 1]["tool_call_id"], m[n - 2]["tool_calls"][0]["id"]);
    let error = m[n - 1]["content"].as_str().unwrap();
    assert!(
        error.starts_with("Error:")
            && error.contains("lost the record")
            && error.contains("Run the program again"),
        "{error}"
    );

    // Another credential naming the same id after the restart is still refused.
    let (status, _) = ask(&second, &messages, MALLORY).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn results_that_differ_from_the_recorded_ones_after_the_program_ended_are_refused() {
    let p = provider([
        run_code("c", "return await tools.read({path: 'a.txt'});"),
        text_completion("It says hello.", usage(1, 1)),
        text_completion("Again: hello.", usage(1, 1)),
    ])
    .await;
    let proxy = embedded(&p, &[]).await;
    let mut agent = FsAgent::with_files(&[("a.txt", "hello")]);
    let mut messages = conversation("read it");
    agent.run(&proxy, &mut messages).await;
    // The request that carried the results, resent as it was: fine.
    let resent = &messages[..4];
    assert_eq!(resent[3]["role"], "tool");
    assert_eq!(turn(&proxy, resent, &[]).await["content"], "Again: hello.");

    let mut changed = resent.to_vec();
    changed[3]["content"] = json!("goodbye");
    let (status, body) = ask(&proxy, &changed, &[]).await;
    assert_eq!(status, 400, "{body}");
    assert!(error_message(&body).contains("differs"), "{body}");
    assert_eq!(
        received(&p).await.len(),
        3,
        "nothing more reached the model"
    );
}

/// An execution store under memory pressure: it keeps nothing.
struct Forgetful;

impl codemode_proxy::store::ExecutionStore for Forgetful {
    fn put(&self, _: Arc<Execution>) -> StoreFuture<'_, ()> {
        Box::pin(std::future::ready(Ok(())))
    }
    fn replace(&self, _: Arc<Execution>, _: u64) -> StoreFuture<'_, bool> {
        Box::pin(std::future::ready(Ok(true)))
    }
    fn get<'a>(&'a self, _: &'a Tenant, _: &'a str) -> StoreFuture<'a, Option<Arc<Execution>>> {
        Box::pin(std::future::ready(Ok(None)))
    }
    fn alias<'a>(&'a self, _: &'a Tenant, _: &'a str) -> StoreFuture<'a, Option<String>> {
        Box::pin(std::future::ready(Ok(None)))
    }
}

#[tokio::test]
async fn an_execution_evicted_before_its_lifetime_reaches_the_model_as_a_run_code_error() {
    use tower::Layer;
    let p = provider([
        run_code("call_prog", "return await tools.read({path: 'a.txt'});"),
        text_completion("I will run it again.", usage(1, 1)),
    ])
    .await;
    let config = common::config(
        &format!("{}/v1", p.uri()),
        &[("CODEMODE_RUNTIME", "embedded")],
    );
    let splices = std::sync::Arc::new(codemode_proxy::store::MemorySpliceStore::new(
        config.splice_ttl,
        1 << 20,
    ));
    let client = codemode_proxy::server::http_client(&config).unwrap();
    let service = codemode_proxy::CodeModeLayer::builder(config)
        .splice_store(splices)
        .execution_store(std::sync::Arc::new(Forgetful))
        .build()
        .layer(client);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/v1/chat/completions",
        listener.local_addr().unwrap()
    );
    tokio::spawn(codemode_proxy::server::serve(
        listener,
        service,
        std::future::pending(),
    ));
    let http = crate::common::http_client();
    let post = |messages: Vec<Value>| {
        let req = http
            .post(&url)
            .header("authorization", "Bearer sk-alice")
            .json(&fs_body(&messages));
        async move {
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 200);
            res.json::<Value>().await.unwrap()["choices"][0]["message"].clone()
        }
    };
    let mut messages = conversation("read it");
    let nested = post(messages.clone()).await;
    let id = nested["tool_calls"][0]["id"].clone();
    assert!(common::is_minted_shape(id.as_str().unwrap()));
    messages.push(nested);
    messages.push(tool_result(&id, "hello"));
    assert_eq!(post(messages).await["content"], "I will run it again.");
    let sent = received(&p).await;
    let error = last_content(&sent[1]);
    assert!(
        error.contains("lost the record") && error.contains("Run the program again"),
        "{error}"
    );
}

#[tokio::test]
async fn a_streamed_mixed_turn_splices_only_into_its_own_tenants_history() {
    let sse = |command: &str| {
        let mut s = sse_chunk("mx", json!({"role": "assistant", "content": null}), None);
        s += &sse_chunk(
            "mx",
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "run_code", "arguments": "{}"}}]}),
            None,
        );
        s += &sse_chunk(
            "mx",
            json!({"tool_calls": [{"index": 1, "id": "call_2", "type": "function", "function": {"name": "bash", "arguments": json!({"command": command}).to_string()}}]}),
            None,
        );
        s += &sse_chunk("mx", json!({}), Some("tool_calls"));
        s + "data: [DONE]\n\n"
    };
    let answer = sse_chunk("n", json!({"content": "ok"}), Some("stop")) + "data: [DONE]\n\n";
    let p = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/v1/chat/completions"))
        .respond_with(Script::new(
            [sse("rm ALICE"), answer.clone(), answer]
                .into_iter()
                .map(|b| wiremock::ResponseTemplate::new(200).set_body_raw(b, "text/event-stream")),
        ))
        .mount(&p)
        .await;
    let proxy = start(&p, &[]).await;
    let mut body = user_chat("go");
    body["stream"] = json!(true);
    proxy.chat_bytes(&body, ALICE).await;

    let mut next = chat_body(json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "run_code", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "done"}
    ]));
    next["stream"] = json!(true);
    proxy.chat_bytes(&next, MALLORY).await;
    proxy.chat_bytes(&next, ALICE).await;
    let sent = received(&p).await;
    assert!(
        !sent[1].to_string().contains("rm ALICE"),
        "another tenant's denial: {}",
        sent[1]
    );
    assert!(sent[2].to_string().contains("rm ALICE"), "{}", sent[2]);
}

/// One dialect's wire for the two-conversation test: the model's mixed
/// turn (the client's own `run_code`, which passes, and a direct `read`,
/// denied in code mode, with numbered ids), its final answer, and the
/// client's first and next requests.
struct MixedWire {
    route: &'static str,
    headers: &'static [(&'static str, &'static str)],
    mixed: fn(&str) -> Value,
    done: Value,
    first: fn(&str) -> Value,
    next: fn(&str) -> Value,
}

fn chat_wire() -> MixedWire {
    MixedWire {
        route: "/v1/chat/completions",
        headers: ALICE,
        mixed: |target| {
            calls_completion(
                vec![
                    call("call_0", "run_code", r#"{"code":"1"}"#),
                    call("call_1", "read", &json!({ "path": target }).to_string()),
                ],
                usage(1, 1),
            )
        },
        done: text_completion("done", usage(1, 1)),
        first: |task| chat_body(json!([{"role": "user", "content": task}])),
        next: |task| {
            chat_body(json!([
                {"role": "user", "content": task},
                {"role": "assistant", "content": null, "tool_calls": [call("call_0", "run_code", r#"{"code":"1"}"#)]},
                {"role": "tool", "tool_call_id": "call_0", "content": "content of a"}
            ]))
        },
    }
}

fn responses_wire() -> MixedWire {
    use common::responses_model::{fn_call, response, responses_usage, said};
    fn tools() -> Value {
        json!([{"type": "function", "name": "read", "parameters": {"type": "object"}},
               {"type": "function", "name": "run_code", "parameters": {"type": "object"}}])
    }
    MixedWire {
        route: "/v1/responses",
        headers: ALICE,
        mixed: |target| {
            response(
                "resp_mixed",
                &[
                    fn_call("call_0", "run_code", r#"{"code":"1"}"#),
                    fn_call("call_1", "read", &json!({ "path": target }).to_string()),
                ],
                responses_usage(1, 1),
            )
        },
        done: response("resp_done", &[said("done")], responses_usage(1, 1)),
        first: |task| json!({"model": "m", "tools": tools(), "input": [{"role": "user", "content": task}]}),
        next: |task| {
            json!({"model": "m", "tools": tools(), "input": [
                {"role": "user", "content": task},
                {"type": "function_call", "call_id": "call_0", "name": "run_code", "arguments": r#"{"code":"1"}"#},
                {"type": "function_call_output", "call_id": "call_0", "output": "content of a"}
            ]})
        },
    }
}

fn messages_wire() -> MixedWire {
    use common::messages_model::{anthropic_usage, tool_use};
    fn tools() -> Value {
        json!([{"name": "read", "input_schema": {"type": "object"}},
               {"name": "run_code", "input_schema": {"type": "object"}}])
    }
    MixedWire {
        route: "/v1/messages",
        headers: &[
            ("authorization", "Bearer sk-alice"),
            ("anthropic-version", "2023-06-01"),
        ],
        mixed: |target| {
            json!({"id": "msg_mixed", "type": "message", "role": "assistant", "model": "m",
                   "content": [tool_use("call_0", "run_code", json!({"code": "1"})),
                               tool_use("call_1", "read", json!({"path": target}))],
                   "stop_reason": "tool_use", "stop_sequence": null, "usage": anthropic_usage(1, 1)})
        },
        done: json!({"id": "msg_done", "type": "message", "role": "assistant", "model": "m",
                     "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn",
                     "stop_sequence": null, "usage": anthropic_usage(1, 1)}),
        first: |task| {
            json!({"model": "m", "max_tokens": 100, "tools": tools(),
                   "messages": [{"role": "user", "content": task}]})
        },
        next: |task| {
            json!({"model": "m", "max_tokens": 100, "tools": tools(), "messages": [
                {"role": "user", "content": task},
                {"role": "assistant", "content": [tool_use("call_0", "run_code", json!({"code": "1"}))]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_0", "content": "content of a"}]}
            ]})
        },
    }
}

/// Two conversations of one tenant whose mixed turns carry the same call
/// ids (a provider that numbers them) each get their own denials spliced
/// back, in every dialect.
#[tokio::test]
async fn denials_stay_in_their_conversation_when_call_ids_repeat() {
    for wire in [chat_wire(), responses_wire(), messages_wire()] {
        let route = wire.route;
        let p = wiremock::MockServer::start().await;
        wiremock::Mock::given(wiremock::matchers::path(route))
            .respond_with(Script::new(
                [
                    (wire.mixed)("alpha-target"),
                    (wire.mixed)("beta-target"),
                    wire.done.clone(),
                    wire.done.clone(),
                ]
                .into_iter()
                .map(|b| wiremock::ResponseTemplate::new(200).set_body_json(b)),
            ))
            .mount(&p)
            .await;
        let upstream = format!("{}/v1", p.uri());
        let proxy = start(&p, &[("CODEMODE_ANTHROPIC_UPSTREAM", upstream.as_str())]).await;
        for task in ["fix the alpha bug", "fix the beta bug"] {
            let res = proxy.post(route, &(wire.first)(task), wire.headers).await;
            let text = res.text().await.unwrap();
            assert!(
                text.contains("call_0") && !text.contains("-target"),
                "{route}: the client gets the allowed call only: {text}"
            );
        }
        for task in ["fix the beta bug", "fix the alpha bug"] {
            let res = proxy.post(route, &(wire.next)(task), wire.headers).await;
            assert_eq!(res.status(), 200, "{route}: {}", res.text().await.unwrap());
        }
        let sent: Vec<Value> = p
            .received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect();
        assert_eq!(sent.len(), 4, "{route}");
        let (beta, alpha) = (sent[2].to_string(), sent[3].to_string());
        assert!(
            beta.contains("beta-target") && !beta.contains("alpha-target"),
            "{route}: the beta conversation gets its own denial only: {beta}"
        );
        assert!(
            alpha.contains("alpha-target") && !alpha.contains("beta-target"),
            "{route}: the alpha conversation gets its own denial only: {alpha}"
        );
    }
}
