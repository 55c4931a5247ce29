//! The embedded runtime end to end: a scripted model, the proxy, and an
//! agent that runs its own tools and has never heard of run_code.

use crate::common;
use crate::common::agent::{self, conversation, fs_tools, FsAgent};
use crate::common::*;
use serde_json::{json, Value};

fn run_code(id: &str, code: &str) -> Value {
    calls_completion(
        vec![call(id, "run_code", &json!({"code": code}).to_string())],
        usage(100, 20),
    )
}

async fn proxy_for(p: &wiremock::MockServer, vars: &[(&str, &str)]) -> Proxy {
    let mut all = vec![("CODEMODE_RUNTIME", "embedded")];
    all.extend_from_slice(vars);
    start(p, &all).await
}

/// Upstream never sees a minted id or a nested call; returns the bodies.
async fn upstream_saw(p: &wiremock::MockServer) -> Vec<Value> {
    let sent = received(p).await;
    for body in &sent {
        let text = body.to_string();
        assert_eq!(
            minted_ids_in(&text),
            Vec::<String>::new(),
            "a minted id reached the upstream: {text}"
        );
        assert_eq!(
            wire_tool_names(body),
            vec!["run_code"],
            "code mode carries the proxy's run_code only"
        );
    }
    sent
}

#[tokio::test]
async fn parallel_reads_go_to_the_client_in_one_turn_and_the_model_sees_one_run_code() {
    let code = "const names = ['a.txt', 'b.txt', 'c.txt']; const parts = await Promise.all(names.map(path => tools.read({path}))); console.log('read', parts.length); return parts.join('|');";
    let p = provider([
        run_code("call_prog", code),
        text_completion("The files say one, two, three.", usage(150, 10)),
    ])
    .await;
    let proxy = proxy_for(&p, &[]).await;
    let mut agent = FsAgent::with_files(&[("a.txt", "one"), ("b.txt", "two"), ("c.txt", "three")]);
    let mut messages = conversation("Summarise the files");
    let answer = agent.run(&proxy, &mut messages).await;
    assert_eq!(answer["content"], "The files say one, two, three.");

    let names: Vec<&str> = agent.executed.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(names, vec!["read", "read", "read"]);
    assert!(
        agent.executed.iter().all(|(id, _, _)| is_minted_shape(id)),
        "ids name the execution"
    );
    let turns_with_calls = messages
        .iter()
        .filter(|m| m["tool_calls"].is_array())
        .count();
    assert_eq!(turns_with_calls, 1, "the three reads came in one turn");

    let sent = upstream_saw(&p).await;
    assert_eq!(sent.len(), 2);
    let system = sent[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("read(args: {"),
        "the SDK describes the agent's tools"
    );
    let m = sent[1]["messages"].as_array().unwrap();
    let n = m.len();
    assert_eq!(m[n - 2]["tool_calls"][0]["id"], "call_prog");
    assert_eq!(m[n - 2]["tool_calls"][0]["function"]["name"], "run_code");
    assert_eq!(m[n - 1]["tool_call_id"], "call_prog");
    assert_eq!(
        m[n - 1]["content"],
        "Output:\nread 3\n\nResult: \"one|two|three\""
    );
}

#[tokio::test]
async fn sequential_calls_take_one_client_turn_each() {
    let code = "const files = (await tools.list({})).split('\\n'); let total = 0; for (const path of files) { total += (await tools.read({path})).length; } await tools.write({path: 'total.txt', content: String(total)}); return total;";
    let p = provider([
        run_code("call_seq", code),
        text_completion("Total written.", usage(1, 1)),
    ])
    .await;
    let proxy = proxy_for(&p, &[]).await;
    let mut agent = FsAgent::with_files(&[("x", "abc"), ("y", "de")]);
    let mut messages = conversation("Count");
    agent.run(&proxy, &mut messages).await;
    let names: Vec<&str> = agent.executed.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(names, vec!["list", "read", "read", "write"]);
    assert_eq!(agent.files["total.txt"], "5");
    let sent = upstream_saw(&p).await;
    assert_eq!(
        sent.len(),
        2,
        "the model is asked once more, after the program ended"
    );
    assert_eq!(
        sent[1]["messages"].as_array().unwrap().last().unwrap()["content"],
        "Result: 5"
    );
}

#[tokio::test]
async fn a_program_that_calls_no_tool_is_answered_in_the_same_request() {
    let p = provider([
        run_code("c", "return 6 * 7;"),
        text_completion("42", usage(1, 1)),
    ])
    .await;
    let proxy = proxy_for(&p, &[]).await;
    let mut agent = FsAgent::default();
    let answer = agent.run(&proxy, &mut conversation("Compute")).await;
    assert_eq!(answer["content"], "42");
    assert!(agent.executed.is_empty());
    let sent = upstream_saw(&p).await;
    assert_eq!(
        sent[1]["messages"].as_array().unwrap().last().unwrap()["content"],
        "Result: 42"
    );
}

#[tokio::test]
async fn errors_and_unknown_tools_reach_the_model_as_run_code_errors() {
    let p = provider([
        run_code("c1", "await tools.delete_everything({}); return 1;"),
        run_code("c2", "throw new Error('bad input');"),
        text_completion("Gave up.", usage(1, 1)),
    ])
    .await;
    let proxy = proxy_for(&p, &[]).await;
    FsAgent::default()
        .run(&proxy, &mut conversation("go"))
        .await;
    let sent = upstream_saw(&p).await;
    let r1 = sent[1]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        r1.starts_with("Error: TypeError:") && r1.contains("read, write, list"),
        "{r1}"
    );
    let r2 = sent[2]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        r2,
        "Error: Error: bad input (line 1, column 11: `throw new Error('bad input');`)"
    );
}

#[tokio::test]
async fn a_fenced_typescript_script_runs_as_its_author_meant() {
    // TypeScript in a fence, shaped as a script: `main()` never awaited,
    // a positional argument, a write started and never awaited.
    let code = "```ts\ninterface Note { path: string }\nasync function main(): Promise<number> {\n  const files: string[] = (await tools.list({})).split('\\n');\n  const texts = await Promise.all(files.map((f) => tools.read(f)));\n  tools.write({ path: 'n.txt', content: texts.join('+') } satisfies Note & { content: string });\n  return texts.length;\n}\nmain();\n```";
    let p = provider([
        run_code("call_ts", code),
        text_completion("Done.", usage(1, 1)),
    ])
    .await;
    let proxy = proxy_for(&p, &[]).await;
    let mut agent = FsAgent::with_files(&[("x", "abc"), ("y", "de")]);
    agent.run(&proxy, &mut conversation("Note the files")).await;
    let names: Vec<&str> = agent.executed.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(names, vec!["list", "read", "read", "write"]);
    assert_eq!(
        agent.files["n.txt"], "abc+de",
        "the un-awaited write still ran"
    );
    let sent = upstream_saw(&p).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[1]["messages"].as_array().unwrap().last().unwrap()["content"],
        "Result: 2"
    );
    let tool = &sent[0]["tools"][0]["function"];
    assert!(
        tool["description"]
            .as_str()
            .unwrap()
            .contains("JavaScript or TypeScript"),
        "{tool}"
    );
}

#[tokio::test]
async fn a_program_that_cannot_run_is_answered_with_the_fix_before_any_call() {
    let p = provider([
        run_code(
            "c1",
            "await tools.read({ path: 'x' });\nconst fs = require('fs');",
        ),
        run_code("c2", "enum Mode { A, B }\nreturn Mode.A;"),
        text_completion("Gave up.", usage(1, 1)),
    ])
    .await;
    let proxy = proxy_for(&p, &[]).await;
    let mut agent = FsAgent::with_files(&[("x", "abc")]);
    agent.run(&proxy, &mut conversation("go")).await;
    assert!(
        agent.executed.is_empty(),
        "nothing ran: {:?}",
        agent.executed
    );
    let sent = upstream_saw(&p).await;
    let result = |i: usize| {
        sent[i]["messages"].as_array().unwrap().last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        result(1),
        "Error: ReferenceError: `require` is not available: programs reach files, the network and the shell only through tools, as `await tools.<name>({ ... })` (the tools are: read, write, list) (line 2, column 12: `const fs = require('fs');`)"
    );
    assert!(result(2).starts_with("Error: SyntaxError: TypeScript enums need a transform that run_code does not make: use a plain object"), "{}", result(2));
}

#[tokio::test]
async fn limits_reach_the_model_with_their_names() {
    let p = provider([
        run_code("c1", "while (true) {}"),
        run_code(
            "c2",
            "await Promise.all([1,2,3].map(i => tools.read({path: String(i)})));",
        ),
        run_code("c3", "return 'x'.repeat(5000);"),
        text_completion("done", usage(1, 1)),
    ])
    .await;
    let proxy = proxy_for(
        &p,
        &[
            ("CODEMODE_RUN_SLICE_MS", "200"),
            ("CODEMODE_RUN_MAX_CALLS", "2"),
            ("CODEMODE_RUN_MAX_OUTPUT", "1000"),
        ],
    )
    .await;
    FsAgent::default()
        .run(&proxy, &mut conversation("go"))
        .await;
    let sent = upstream_saw(&p).await;
    let result = |i: usize| {
        sent[i]["messages"].as_array().unwrap().last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(result(1).contains("CODEMODE_RUN_SLICE_MS"), "{}", result(1));
    assert!(
        result(2).contains("CODEMODE_RUN_MAX_CALLS"),
        "{}",
        result(2)
    );
    assert!(
        result(3).contains("CODEMODE_RUN_MAX_OUTPUT") && result(3).len() < 1200,
        "{}",
        result(3)
    );
}

#[tokio::test]
async fn streaming_clients_get_text_as_it_comes_and_the_nested_turn_in_the_same_stream() {
    let program = json!({"code": "return await tools.read({path: 'a.txt'});"}).to_string();
    let answer = sse_chunk(
        "s2",
        json!({"role": "assistant", "content": "It says hello."}),
        Some("stop"),
    ) + "data: [DONE]\n\n";
    let p = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/v1/chat/completions"))
        .respond_with(Script::new([
            wiremock::ResponseTemplate::new(200).set_body_raw(
                sse_call_turn("s1", "Let me read it. ", "run_code", &program, 40),
                "text/event-stream",
            ),
            wiremock::ResponseTemplate::new(200).set_body_raw(answer, "text/event-stream"),
        ]))
        .mount(&p)
        .await;
    let proxy = proxy_for(&p, &[]).await;
    let mut agent = FsAgent::with_files(&[("a.txt", "hello")]);
    agent.stream = true;
    let mut messages = conversation("read it");
    let answer = agent.run(&proxy, &mut messages).await;
    assert_eq!(answer["content"], "It says hello.");
    assert_eq!(agent.executed.len(), 1);
    assert_eq!(
        messages[2]["content"], "Let me read it. ",
        "the model's text streamed before the hand-off"
    );
    assert!(is_minted_shape(
        messages[2]["tool_calls"][0]["id"].as_str().unwrap()
    ));
    let sent = upstream_saw(&p).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[0]["stream"],
        json!(true),
        "the model streams; the proxy judges it event by event"
    );
    let m = sent[1]["messages"].as_array().unwrap();
    assert_eq!(m[m.len() - 2]["content"], "Let me read it. ");
    assert_eq!(m[m.len() - 1]["content"], "Result: \"hello\"");
}

/// A program's parallel calls reach a streaming client as OpenAI streams
/// calls: one call per chunk, its id, type and name with empty arguments
/// first, then its arguments. Clients that read one call a chunk
/// (llama-index) would otherwise run only the first.
#[tokio::test]
async fn a_programs_parallel_calls_stream_one_call_per_chunk() {
    let program = json!({"code": "const [a, b, c] = await Promise.all(['a', 'b', 'c'].map(path => tools.read({path}))); return a + b + c;"}).to_string();
    {
        let p = wiremock::MockServer::start().await;
        let first = wiremock::ResponseTemplate::new(200).set_body_raw(
            sse_call_turn("s1", "", "run_code", &program, 10),
            "text/event-stream",
        );
        wiremock::Mock::given(wiremock::matchers::path("/v1/chat/completions"))
            .respond_with(Script::new([first]))
            .mount(&p)
            .await;
        let proxy = proxy_for(&p, &[]).await;
        let body = json!({"model": "m", "messages": conversation("go"), "tools": fs_tools(),
                          "stream": true});
        let bytes = proxy.chat_bytes(&body, &[]).await;
        let chunks: Vec<Value> = common::sse_client::payloads(&bytes)
            .iter()
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect();
        let deltas: Vec<&Value> = chunks
            .iter()
            .filter_map(|c| c.pointer("/choices/0/delta/tool_calls"))
            .collect();
        assert_eq!(
            deltas.len(),
            6,
            "two deltas a call: {}",
            String::from_utf8_lossy(&bytes)
        );
        for (n, delta) in deltas.iter().enumerate() {
            let calls = delta.as_array().unwrap();
            assert_eq!(calls.len(), 1, "one call a chunk: {delta}");
            let call = &calls[0];
            assert_eq!(call["index"], n / 2, "{delta}");
            if n % 2 == 0 {
                assert!(is_minted_shape(call["id"].as_str().unwrap()), "{delta}");
                assert_eq!(call["type"], "function");
                assert_eq!(call["function"]["name"], "read");
                assert_eq!(call["function"]["arguments"], "", "{delta}");
            } else {
                assert!(call.get("id").is_none() && call["function"].get("name").is_none());
            }
        }
        let view = common::sse_client::reassemble(&bytes);
        let args: Vec<Value> = view
            .calls
            .iter()
            .map(|c| serde_json::from_str(&c.arguments).unwrap())
            .collect();
        assert_eq!(
            args,
            [
                json!({"path": "a"}),
                json!({"path": "b"}),
                json!({"path": "c"})
            ]
        );
        assert_eq!(view.finish_reasons, vec!["tool_calls"]);
    }
}

#[tokio::test]
async fn a_streamed_program_that_calls_no_tool_continues_the_same_stream() {
    let program = json!({"code": "return 6 * 7;"}).to_string();
    let answer = sse_chunk("b", json!({"content": "42"}), Some("stop")) + "data: [DONE]\n\n";
    let p = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/v1/chat/completions"))
        .respond_with(Script::new([
            wiremock::ResponseTemplate::new(200).set_body_raw(
                sse_call_turn("a", "Computing. ", "run_code", &program, 10),
                "text/event-stream",
            ),
            wiremock::ResponseTemplate::new(200).set_body_raw(answer, "text/event-stream"),
        ]))
        .mount(&p)
        .await;
    let proxy = proxy_for(&p, &[]).await;
    let mut body =
        json!({"model": "m", "messages": conversation("go"), "tools": fs_tools(), "stream": true});
    body["stream_options"] = json!({"include_usage": true});
    let bytes = proxy.chat_bytes(&body, &[]).await;
    let view = common::sse_client::reassemble(&bytes);
    assert!(view.calls.is_empty(), "{:?}", view.calls);
    assert_eq!(
        view.text, "Computing. \n\n42",
        "the answer starts a new paragraph"
    );
    assert_eq!(view.ids, vec!["a"], "one completion id across the program");
    assert_eq!(view.finish_reasons, vec!["stop"]);
    assert_eq!(view.done, 1);
    let sent = upstream_saw(&p).await;
    assert_eq!(
        sent[1]["messages"].as_array().unwrap().last().unwrap()["content"],
        "Result: 42"
    );
}

#[tokio::test]
async fn the_history_rewrite_holds_across_later_turns() {
    let p = provider([
        run_code("first", "return await tools.read({path: 'a.txt'});"),
        text_completion("It says hello.", usage(1, 1)),
        text_completion("You are welcome.", usage(1, 1)),
    ])
    .await;
    let proxy = proxy_for(&p, &[]).await;
    let mut agent = FsAgent::with_files(&[("a.txt", "hello")]);
    let mut messages = conversation("read it");
    agent.run(&proxy, &mut messages).await;
    messages.push(json!({"role": "user", "content": "thanks"}));
    agent.run(&proxy, &mut messages).await;
    let sent = upstream_saw(&p).await;
    let m = sent[2]["messages"].as_array().unwrap();
    let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        vec!["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert_eq!(m[2]["tool_calls"][0]["function"]["name"], "run_code");
    assert_eq!(m[3]["content"], "Result: \"hello\"");
}

#[tokio::test]
async fn results_for_executions_or_calls_the_proxy_does_not_hold_are_refused() {
    let program = || run_code("c", "return await tools.read({path: 'a'});");
    let p = provider([program(), program()]).await;
    let proxy = proxy_for(&p, &[]).await;
    let agent = FsAgent::default();
    let mut messages = conversation("go");
    let turn = agent.ask(&proxy, &messages).await;
    let real = turn["tool_calls"][0]["id"].as_str().unwrap().to_owned();
    messages.push(turn.clone());
    // A call another tenant (another key) was handed: a whole, well-formed
    // id of an execution this tenant does not own.
    let body = json!({"model": "m", "messages": conversation("go"), "tools": fs_tools()});
    let res = proxy
        .chat(&body, &[("authorization", "Bearer another-key")])
        .await;
    let theirs: Value = res.json().await.unwrap();
    let theirs = theirs["choices"][0]["message"]["tool_calls"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(is_minted_shape(&theirs) && theirs != real);
    // And an id in the older shape, naming this execution, that the proxy
    // did not mint.
    let damaged = format!("cm_abcdefg_{}_0", common::exec_of(&real));
    for id in [theirs, damaged] {
        let mut m = messages.clone();
        m.last_mut().unwrap()["tool_calls"][0]["id"] = json!(id);
        m.push(json!({"role": "tool", "tool_call_id": id, "content": "x"}));
        let body = json!({"model": "m", "messages": m, "tools": fs_tools()});
        let res = proxy.chat(&body, &[]).await;
        assert_eq!(res.status(), 400, "{id}");
        let err: Value = res.json().await.unwrap();
        assert_eq!(err["error"]["type"], "invalid_request_error");
    }
    assert_eq!(received(&p).await.len(), 2, "nothing was fed to the model");
}

#[tokio::test]
async fn run_code_with_other_calls_in_one_turn_is_refused_and_repaired() {
    let p = provider([
        calls_completion(
            vec![
                call("a", "run_code", "{\"code\":\"return 1\"}"),
                call("b", "run_code", "{\"code\":\"return 2\"}"),
            ],
            usage(1, 1),
        ),
        run_code("c", "return 3;"),
        text_completion("3", usage(1, 1)),
    ])
    .await;
    let proxy = proxy_for(&p, &[]).await;
    let answer = FsAgent::default()
        .run(&proxy, &mut conversation("go"))
        .await;
    assert_eq!(answer["content"], "3");
    let sent = upstream_saw(&p).await;
    let denial = sent[1]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(denial.starts_with("ONE_PROGRAM:"), "{denial}");
}

#[tokio::test]
async fn native_mode_never_executes_run_code() {
    let p = provider([calls_completion(
        vec![call("x", "run_code", "{\"code\":\"return 1\"}")],
        usage(1, 1),
    )])
    .await;
    let proxy = proxy_for(&p, &[("CODEMODE_MODE", "native")]).await;
    let body = json!({"model": "m", "messages": conversation("go"), "tools": fs_tools()});
    let got: Value = proxy.chat_json(&body, &[]).await;
    assert_eq!(
        call_names(&got),
        vec!["run_code"],
        "native mode is transparent"
    );
}

/// A program gets a tool's output, not the parts its client put it in
/// (docs/embedded-runtime.md, "What a program's call resolves to"): a
/// `tool` message whose content is text parts reaches `await tools.read()`
/// as their text; one holding another part reaches it as it came, as JSON.
#[tokio::test]
async fn a_program_gets_the_text_of_a_tool_messages_text_parts() {
    let code = "return await tools.read({path: 'a.txt'});";
    let image = json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}});
    let cases = [
        (
            json!([{"type": "text", "text": "alpha-1\n"}, {"type": "text", "text": "bravo-2"}]),
            "alpha-1\nbravo-2".to_owned(),
        ),
        (
            json!([{"type": "text", "text": "a.png"}, image]),
            json!([{"type": "text", "text": "a.png"}, image]).to_string(),
        ),
    ];
    for (content, output) in &cases {
        let p = provider([
            run_code("call_prog", code),
            text_completion("Read.", usage(1, 1)),
        ])
        .await;
        let proxy = proxy_for(&p, &[]).await;
        let mut messages = conversation("Read a.txt");
        let res = proxy
            .post("/v1/chat/completions", &agent::fs_body(&messages), &[])
            .await;
        let got: Value = res.json().await.unwrap();
        let turn = got["choices"][0]["message"].clone();
        let id = turn["tool_calls"][0]["id"].clone();
        assert_eq!(turn["tool_calls"].as_array().unwrap().len(), 1, "{got}");
        messages.push(turn);
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
        let res = proxy
            .post("/v1/chat/completions", &agent::fs_body(&messages), &[])
            .await;
        let got: Value = res.json().await.unwrap();
        assert_eq!(got["choices"][0]["message"]["content"], "Read.");
        let sent = upstream_saw(&p).await;
        assert_eq!(
            sent[1]["messages"].as_array().unwrap().last().unwrap()["content"],
            format!("Result: {}", json!(output)),
            "{content}"
        );
    }
}
