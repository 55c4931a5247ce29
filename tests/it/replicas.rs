//! Several replicas sharing one Redis (docs/replicas.md): any replica
//! continues any program, a replica killed mid-program loses nothing, two
//! resumes of one program at once stay consistent, and a Redis outage is a
//! clear 503 that heals by itself. Every test starts its own `redis-server`
//! (skipped where there is none, failing under CI: `common::needs`).

use crate::common::redis_server;

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::agent::{conversation, fs_body, tool_result};
use crate::common::binary::{spawn_proxy, Running};
use crate::common::replica_turns::{
    self, ask_with_retry, native_answers, started_on_a_continued_on_b, turn,
};
use crate::common::responses_model::*;
use crate::common::*;
use redis_server::RedisServer;
use serde_json::{json, Value};

fn run_code(id: &str, code: &str) -> Value {
    calls_completion(
        vec![call(id, "run_code", &json!({"code": code}).to_string())],
        usage(1, 1),
    )
}

const TWO_READS: &str = "const a = await tools.read({path: 'a.txt'}); \
                         const b = await tools.read({path: 'b.txt'}); return a + ' ' + b;";

/// A read whose second path is the first read's result: the next step
/// depends on the results sent.
const CHAINED_READS: &str =
    "const a = await tools.read({path: 'a.txt'}); return await tools.read({path: a});";

/// A replica: the proxy, embedded runtime, executions in `redis`.
async fn replica(p: &wiremock::MockServer, redis: &RedisServer, vars: &[(&str, &str)]) -> Proxy {
    let url = redis.url(0);
    let mut all = vec![("CODEMODE_RUNTIME", "embedded"), ("CODEMODE_STORE", &url)];
    all.extend_from_slice(vars);
    start(p, &all).await
}

async fn ask(proxy: &Proxy, messages: &[Value]) -> (u16, Value) {
    let (status, _, body) = ask_with_retry(proxy, messages).await;
    (status, body)
}

/// The read a turn hands out: its id and its `path` argument.
fn handed(turn: &Value) -> (Value, String) {
    let read = replica_turns::handed(turn);
    assert_eq!(turn["tool_calls"][0]["function"]["name"], "read");
    read
}

fn last_content(body: &Value) -> String {
    body["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// Every key in Redis expires (none without a TTL), and there are some.
fn assert_every_key_expires(redis: &RedisServer, prefix: &str) -> Vec<String> {
    let keys = redis.keys();
    assert!(!keys.is_empty(), "the proxy wrote nothing to Redis");
    for k in &keys {
        assert!(k.starts_with(prefix), "a key outside the prefix: {k}");
        let ttl: i64 = redis.cmd(&["PTTL", k]);
        assert!(ttl > 0, "key {k} has no TTL ({ttl})");
    }
    keys
}

#[tokio::test]
async fn a_program_started_on_one_replica_is_resumed_on_the_other() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let p = provider([
        run_code("c", TWO_READS),
        text_completion("alpha bravo", usage(1, 1)),
    ])
    .await;
    let a = replica(&p, &redis, &[]).await;
    let b = replica(&p, &redis, &[]).await;

    let messages = started_on_a_continued_on_b(&a, &b, "read both", handed).await;
    assert_eq!(turn(&a, &messages).await["content"], "alpha bravo");

    let sent = received(&p).await;
    assert_eq!(
        sent.len(),
        2,
        "the model was asked for the program and the answer"
    );
    assert_eq!(last_content(&sent[1]), "Result: \"alpha bravo\"");
    let keys = assert_every_key_expires(&redis, "codemode:");
    assert!(
        keys.iter().any(|k| k.starts_with("codemode:x:")),
        "{keys:?}"
    );
    assert!(
        keys.iter().any(|k| k.starts_with("codemode:a:")),
        "{keys:?}"
    );
}

/// agno's ids across replicas: each batch is sent back with an id of the
/// client's own, to the replica that did not hand it out, and is found by
/// what it calls in the shared store (its batch key, then its record).
#[tokio::test]
async fn a_batch_sent_back_with_rewritten_ids_is_found_on_the_other_replica() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let p = provider([
        run_code("c", TWO_READS),
        text_completion("alpha bravo", usage(1, 1)),
    ])
    .await;
    let a = replica(&p, &redis, &[]).await;
    let b = replica(&p, &redis, &[]).await;

    let mut messages = conversation("read both");
    let mut replicas = [&b, &a].into_iter();
    let mut answer = turn(&a, &messages).await;
    for (n, content) in ["alpha", "bravo"].into_iter().enumerate() {
        handed(&answer);
        let id = json!(format!("call_agno{n}"));
        answer["tool_calls"][0]["id"] = id.clone();
        messages.push(answer);
        messages.push(tool_result(&id, content));
        answer = turn(replicas.next().unwrap(), &messages).await;
    }
    assert_eq!(answer["content"], "alpha bravo");
    let sent = received(&p).await;
    assert_eq!(sent.len(), 2, "the program resumed each time");
    assert_eq!(last_content(&sent[1]), "Result: \"alpha bravo\"");
}

#[tokio::test]
async fn a_program_with_a_denied_call_beside_it_is_finished_on_the_other_replica() {
    // One model turn: run_code (allowed) and bash (denied). The client gets
    // the program's nested call from A and answers B; the model then sees
    // its denied call and the denial beside the program's result.
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let p = provider([
        calls_completion(
            vec![
                call(
                    "c",
                    "run_code",
                    &json!({"code": "return await tools.read({path: 'a.txt'});"}).to_string(),
                ),
                call(
                    "d",
                    "bash",
                    &json!({"command": "rm -rf DENIED"}).to_string(),
                ),
            ],
            usage(1, 1),
        ),
        text_completion("done", usage(1, 1)),
    ])
    .await;
    let a = replica(&p, &redis, &[]).await;
    let b = replica(&p, &redis, &[]).await;
    let mut messages = conversation("read it");
    let first = turn(&a, &messages).await;
    let (id, _) = handed(&first);
    assert!(
        !first.to_string().contains("DENIED"),
        "the client never sees the denied call"
    );
    messages.push(first);
    messages.push(tool_result(&id, "alpha"));
    assert_eq!(turn(&b, &messages).await["content"], "done");
    let sent = received(&p).await;
    let text = sent[1].to_string();
    assert!(
        text.contains("rm -rf DENIED"),
        "the denied call is shown: {text}"
    );
    assert!(text.contains("UNKNOWN_TOOL"), "with its denial: {text}");
    assert!(text.contains("Result: \\\"alpha\\\""), "{text}");
    assert_every_key_expires(&redis, "codemode:");
}

/// A client-runtime turn mixing an allowed `run_code` and a denied `bash`.
fn mixed(allowed: &str, denied_id: &str, command: &str) -> Value {
    calls_completion(
        vec![
            call(allowed, "run_code", r#"{"code":"1"}"#),
            call(denied_id, "bash", &json!({"command": command}).to_string()),
        ],
        usage(1, 1),
    )
}

#[tokio::test]
async fn a_mixed_turn_answered_on_one_replica_is_continued_on_the_other() {
    // The client runs run_code itself; the denied call waits in Redis (a
    // splice) for the request that returns run_code's result, on B.
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let p = provider([
        mixed("call_1", "call_2", "rm SPLICED"),
        text_completion("ok", usage(1, 1)),
    ])
    .await;
    let url = redis.url(0);
    let vars = [
        ("CODEMODE_RUNTIME", "client"),
        ("CODEMODE_STORE", url.as_str()),
    ];
    let a = start(&p, &vars).await;
    let b = start(&p, &vars).await;
    let first: Value = a.chat_json(&user_chat("go"), &[]).await;
    assert_eq!(call_names(&first), vec!["run_code"], "{first}");
    let assistant = first["choices"][0]["message"].clone();
    let messages = vec![
        json!({"role": "system", "content": "You are an agent."}),
        json!({"role": "user", "content": "go"}),
        assistant.clone(),
        tool_result(&assistant["tool_calls"][0]["id"], "1"),
    ];
    let res = b.chat(&chat_body(json!(messages)), &[]).await;
    assert_eq!(res.status(), 200);
    let sent = received(&p).await;
    let text = sent[1].to_string();
    assert!(
        text.contains("rm SPLICED"),
        "B spliced A's denial back: {text}"
    );
    let m = sent[1]["messages"].as_array().unwrap();
    assert!(
        m.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .starts_with("UNKNOWN_TOOL:"),
        "{text}"
    );
    let keys = assert_every_key_expires(&redis, "codemode:");
    assert!(
        keys.iter().any(|k| k.starts_with("codemode:s:")),
        "{keys:?}"
    );
}

#[tokio::test]
async fn a_responses_program_started_on_one_replica_is_resumed_on_the_other() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let model = ResponsesModel::new([
        vec![said("Running."), run_code_call("call_p", TWO_READS)],
        vec![said("alpha-1 bravo-2")],
    ]);
    let server = model.serve().await;
    let a = replica(&server, &redis, &[]).await;
    let b = replica(&server, &redis, &[]).await;
    let files = [("a.txt", "alpha-1"), ("b.txt", "bravo-2")];
    let mut input = vec![json!({"role": "user", "content": "Read a.txt and b.txt"})];
    let mut answer = Value::Null;
    for (n, proxy) in [&a, &b, &a].into_iter().enumerate() {
        let body = json!({"model": "gpt-test", "input": input, "tools": fs_function_tools(), "store": false});
        let res = proxy.post("/v1/responses", &body, &[]).await;
        assert_eq!(res.status(), 200, "turn {n}");
        let response: Value = res.json().await.unwrap();
        let mut ran = false;
        for item in response["output"].as_array().unwrap() {
            input.push(item.clone());
            if item["type"] == "function_call" {
                let args: Value =
                    serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
                let content = files
                    .iter()
                    .find(|(p, _)| *p == args["path"])
                    .map_or("no such file", |(_, c)| c);
                input.push(json!({"type": "function_call_output", "call_id": item["call_id"], "output": content}));
                ran = true;
            }
        }
        assert_eq!(ran, n < 2, "two nested turns, then the answer: {response}");
        answer = response;
    }
    assert!(answer.to_string().contains("alpha-1 bravo-2"), "{answer}");
    let seen = model.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|s| s.status == 200), "{seen:?}");
    let last = seen[1].body["input"].as_array().unwrap();
    assert_eq!(
        last.last().unwrap()["output"],
        "Result: \"alpha-1 bravo-2\""
    );
    assert_every_key_expires(&redis, "codemode:");
}

/// The built executable, killed with SIGKILL on drop.
fn spawn_binary(vars: &[(&str, &str)]) -> (Running, String) {
    spawn_proxy(vars, Stdio::null())
}

#[tokio::test]
async fn a_replica_killed_mid_program_loses_nothing() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let p = provider([
        run_code("c", TWO_READS),
        text_completion("alpha bravo", usage(1, 1)),
    ])
    .await;
    let upstream = format!("{}/v1", p.uri());
    let url = redis.url(0);
    let vars = [
        ("CODEMODE_LISTEN", "127.0.0.1:0"),
        ("CODEMODE_UPSTREAM", upstream.as_str()),
        ("CODEMODE_RUNTIME", "embedded"),
        ("CODEMODE_STORE", url.as_str()),
    ];
    let http = crate::common::http_client();
    let ask_at = |addr: String, messages: Vec<Value>| {
        let http = http.clone();
        async move {
            let res = http
                .post(format!("http://{addr}/v1/chat/completions"))
                .json(&fs_body(&messages))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200);
            let body: Value = res.json().await.unwrap();
            body["choices"][0]["message"].clone()
        }
    };

    let (mut first_replica, addr) = spawn_binary(&vars);
    let mut messages = conversation("read both");
    let first = ask_at(addr, messages.clone()).await;
    let (id, _) = handed(&first);
    messages.push(first);
    // The replica dies while the program waits on its client.
    first_replica.0.kill().unwrap();
    first_replica.0.wait().unwrap();

    let (_second_replica, addr) = spawn_binary(&vars);
    messages.push(tool_result(&id, "alpha"));
    let second = ask_at(addr.clone(), messages.clone()).await;
    let (id, path) = handed(&second);
    assert_eq!(path, "b.txt", "the new replica continued the program");
    messages.push(second);
    messages.push(tool_result(&id, "bravo"));
    assert_eq!(ask_at(addr, messages).await["content"], "alpha bravo");
    assert_eq!(
        last_content(&received(&p).await[1]),
        "Result: \"alpha bravo\""
    );
}

#[tokio::test]
async fn concurrent_resumes_with_the_same_results_get_the_same_next_step() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let p = provider([run_code("c", CHAINED_READS)]).await;
    let a = replica(&p, &redis, &[]).await;
    let b = replica(&p, &redis, &[]).await;
    let mut messages = conversation("follow the pointer");
    let first = turn(&a, &messages).await;
    let (id, _) = handed(&first);
    messages.push(first);
    messages.push(tool_result(&id, "x.txt"));
    let ((sa, ba), (sb, bb)) = tokio::join!(ask(&a, &messages), ask(&b, &messages));
    let mut next = Vec::new();
    for (status, body) in [(sa, &ba), (sb, &bb)] {
        match status {
            200 => next.push(handed(&body["choices"][0]["message"])),
            409 | 503 => assert!(
                error_message(body).contains("again"),
                "a retryable refusal says so: {body}"
            ),
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert!(
        !next.is_empty(),
        "one of them moved the program on: {ba} {bb}"
    );
    assert!(
        next.iter().all(|n| *n == next[0]),
        "the same next step: {next:?}"
    );
    assert_eq!(next[0].1, "x.txt");
    assert_eq!(received(&p).await.len(), 1, "no resume asked the model");
}

#[tokio::test]
async fn concurrent_resumes_with_different_results_one_wins_the_other_is_refused() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let p = provider([
        run_code("c", CHAINED_READS),
        text_completion("done", usage(1, 1)),
    ])
    .await;
    let a = replica(&p, &redis, &[]).await;
    let b = replica(&p, &redis, &[]).await;
    let mut messages = conversation("follow the pointer");
    let first = turn(&a, &messages).await;
    let (id, _) = handed(&first);
    messages.push(first);
    let mut with_x = messages.clone();
    with_x.push(tool_result(&id, "x.txt"));
    let mut with_y = messages.clone();
    with_y.push(tool_result(&id, "y.txt"));
    let ((sx, bx), (sy, by)) = tokio::join!(ask(&a, &with_x), ask(&b, &with_y));
    let (winner, loser, loser_status, loser_body) = match (sx, sy) {
        (200, s) => ((with_x, bx), "y", s, by),
        (s, 200) => ((with_y, by), "x", s, bx),
        _ => panic!("one of them must win: {sx} {bx} / {sy} {by}"),
    };
    assert!(
        matches!(loser_status, 400 | 409),
        "the other is refused, not moved on: {loser_status} {loser_body}"
    );
    let (mut history, body) = winner;
    let (next_id, path) = handed(&body["choices"][0]["message"]);
    assert_ne!(
        path,
        format!("{loser}.txt"),
        "the winner's result decided the next step"
    );
    // The record holds the winner's result: its client finishes the program.
    history.push(body["choices"][0]["message"].clone());
    history.push(tool_result(&next_id, "end"));
    assert_eq!(turn(&b, &history).await["content"], "done");
    assert_eq!(last_content(&received(&p).await[1]), "Result: \"end\"");
}

async fn get(proxy: &Proxy, path: &str) -> (u16, Option<String>, Value) {
    let res = proxy.get(path, &[]).await;
    let status = res.status().as_u16();
    let retry = res
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, retry, res.json().await.unwrap_or(Value::Null))
}

async fn wait_ready(proxy: &Proxy) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(proxy, "/readyz").await.0 != 200 {
        assert!(
            Instant::now() < deadline,
            "the replica never became ready again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_redis_outage_is_a_clear_503_and_heals_without_a_restart() {
    // Redis is killed mid-program and started again on the same port from
    // the snapshot taken just before (persistence is off; the SAVE stands
    // in for a Redis that persists). The replicas are not restarted: they
    // reconnect by themselves, and the program goes on where it waited.
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let p = provider([
        run_code("c", TWO_READS),
        text_completion("native answer", usage(1, 1)),
        text_completion("plain answer", usage(1, 1)),
        text_completion("alpha bravo", usage(1, 1)),
    ])
    .await;
    let a = replica(&p, &redis, &[]).await;
    assert_eq!(get(&a, "/readyz").await.0, 200);
    let mut messages = conversation("read both");
    let first = turn(&a, &messages).await;
    let (id, _) = handed(&first);
    messages.push(first);
    messages.push(tool_result(&id, "alpha"));

    redis.stop(true);
    // A resume needs the store: a retryable 503 naming it.
    let res = a.chat(&fs_body(&messages), &[]).await;
    assert_eq!(res.status(), 503);
    assert_eq!(res.headers()["retry-after"], "1");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
    let text = error_message(&body);
    assert!(
        text.contains("Redis at redis://127.0.0.1") && text.contains("send the same request again"),
        "{text}"
    );
    // Native traffic and requests that need no record keep flowing.
    native_answers(&a).await;
    let (status, _) = ask(&a, &conversation("no program here")).await;
    assert_eq!(status, 200);
    // Alive, not ready.
    assert_eq!(get(&a, "/healthz").await.0, 200);
    let (status, retry, body) = get(&a, "/readyz").await;
    assert_eq!((status, retry.as_deref()), (503, Some("1")), "{body}");
    assert!(error_message(&body).contains("Redis at"), "{body}");
    // A replica started while Redis is down starts, and is not ready.
    let b = replica(&p, &redis, &[]).await;
    assert_eq!(get(&b, "/healthz").await.0, 200);
    assert_eq!(get(&b, "/readyz").await.0, 503);
    assert_eq!(
        received(&p).await.len(),
        3,
        "the failed resume asked no model"
    );

    redis.restart();
    // Once one replica says ready, the other's first request is served:
    // its broken connection is remade inside the proxy, not shown as a 503.
    wait_ready(&b).await;
    let second = turn(&a, &messages).await;
    let (id, path) = handed(&second);
    assert_eq!(path, "b.txt");
    messages.push(second);
    messages.push(tool_result(&id, "bravo"));
    assert_eq!(turn(&b, &messages).await["content"], "alpha bravo");
    assert_eq!(
        last_content(&received(&p).await[3]),
        "Result: \"alpha bravo\""
    );
}

#[tokio::test]
async fn every_key_the_proxy_writes_has_a_ttl_and_the_prefix() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let p = provider([
        run_code("c", TWO_READS),
        text_completion("alpha bravo", usage(1, 1)),
    ])
    .await;
    let a = replica(&p, &redis, &[("CODEMODE_STORE_PREFIX", "team-a:")]).await;
    let mut messages = conversation("read both");
    for content in ["alpha", "bravo"] {
        let t = turn(&a, &messages).await;
        let (id, _) = handed(&t);
        messages.push(t);
        messages.push(tool_result(&id, content));
    }
    assert_eq!(turn(&a, &messages).await["content"], "alpha bravo");
    let keys = assert_every_key_expires(&redis, "team-a:");
    // One execution (ended: kept for the history), one alias per call,
    // one per batch handed out (its calls' key, for a client that echoes
    // them without ids) and one per call of a batch (its mark, that the
    // echo search asks for first).
    assert_eq!(
        keys.iter().filter(|k| k.starts_with("team-a:x:")).count(),
        1
    );
    let aliases: Vec<&String> = keys.iter().filter(|k| k.starts_with("team-a:a:")).collect();
    assert_eq!(aliases.len(), 6, "{aliases:?}");
    for kind in [":cb:", ":cc:"] {
        let count = aliases.iter().filter(|k| k.contains(kind)).count();
        assert_eq!(count, 2, "{kind} {aliases:?}");
    }
}

#[tokio::test]
async fn a_stalled_redis_is_a_503_not_a_hang_and_the_program_goes_on_after_it() {
    // SIGSTOP keeps the connection open and answers nothing: only the
    // store's own time limit turns the wait into a 503. Once Redis thaws,
    // the same resume goes on (nothing was lost).
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let p = provider([
        run_code("c", TWO_READS),
        text_completion("alpha bravo", usage(1, 1)),
    ])
    .await;
    let a = replica(&p, &redis, &[]).await;
    let mut messages = conversation("read both");
    let first = turn(&a, &messages).await;
    let (id, _) = handed(&first);
    messages.push(first);
    messages.push(tool_result(&id, "alpha"));

    redis.pause();
    let stalled = tokio::time::timeout(Duration::from_secs(30), ask(&a, &messages)).await;
    let ready = get(&a, "/readyz").await.0;
    redis.unpause();
    let (status, body) = stalled.expect("the proxy answered while Redis was frozen");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
    assert_eq!(ready, 503);

    wait_ready(&a).await;
    let second = turn(&a, &messages).await;
    let (id, path) = handed(&second);
    assert_eq!(path, "b.txt");
    messages.push(second);
    messages.push(tool_result(&id, "bravo"));
    assert_eq!(turn(&a, &messages).await["content"], "alpha bravo");
}

#[tokio::test]
async fn a_rediss_url_to_a_server_without_tls_is_not_ready_and_does_not_crash() {
    // rediss:// goes through rustls: against a plain-text Redis the
    // handshake fails, which must read as an unreachable store.
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let p = provider([]).await;
    let url = redis.url(0).replace("redis://", "rediss://");
    let a = start(
        &p,
        &[("CODEMODE_RUNTIME", "embedded"), ("CODEMODE_STORE", &url)],
    )
    .await;
    let (status, retry, body) = get(&a, "/readyz").await;
    assert_eq!((status, retry.as_deref()), (503, Some("1")), "{body}");
    assert!(
        error_message(&body).contains("rediss://127.0.0.1"),
        "{body}"
    );
    assert_eq!(get(&a, "/healthz").await.0, 200);
}

#[tokio::test]
async fn readyz_says_ready_with_either_store_and_takes_only_get() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let p = provider([]).await;
    let memory = start(&p, &[("CODEMODE_RUNTIME", "embedded")]).await;
    let shared = replica(&p, &redis, &[]).await;
    for proxy in [&memory, &shared] {
        let (status, _, body) = get(proxy, "/readyz").await;
        assert_eq!((status, body), (200, json!({"status": "ready"})));
        let res = proxy.http.post(proxy.url("/readyz")).send().await.unwrap();
        assert_eq!(res.status(), 405);
    }
}

/// Bytes Redis has sent its clients so far.
fn redis_sent(redis: &RedisServer) -> u64 {
    let info: String = redis.cmd(&["INFO", "stats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("total_net_output_bytes:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("INFO stats names total_net_output_bytes")
}

fn assert_record_too_large(status: u16, body: &Value, names: &str) {
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["code"], "store_record_too_large", "{body}");
    let text = error_message(body);
    assert!(text.contains(names), "{text}");
}

#[tokio::test]
async fn a_record_above_the_size_limit_is_neither_written_nor_read_whole() {
    // With a budget of 8 MiB a replica's record limit is its floor, 1 MiB;
    // the other replica, on the default budget, writes what the first one
    // then refuses to read.
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let p = provider([
        run_code("c", TWO_READS),
        run_code("d", TWO_READS),
        text_completion("hello", usage(1, 1)),
    ])
    .await;
    let roomy = replica(&p, &redis, &[]).await;
    let small = replica(&p, &redis, &[("CODEMODE_EXECUTION_STORE_MB", "8")]).await;
    let big = "x".repeat(3 << 19);

    // Written by the roomy replica with a 1.5 MiB result in it...
    let mut messages = conversation("read both");
    let first = turn(&roomy, &messages).await;
    let (id, _) = handed(&first);
    messages.push(first);
    messages.push(tool_result(&id, &big));
    let second = turn(&roomy, &messages).await;
    let (id, _) = handed(&second);
    messages.push(second);
    messages.push(tool_result(&id, "bravo"));
    // ...the small one refuses it, and Redis sent it its length only.
    let before = redis_sent(&redis);
    let (status, body) = ask(&small, &messages).await;
    assert_record_too_large(status, &body, "give every replica the same budgets");
    let sent = redis_sent(&redis) - before;
    assert!(
        sent < 64 << 10,
        "Redis sent {sent} bytes for a refused read"
    );

    // The small replica does not write a record above its limit either.
    let mut messages = conversation("read both again");
    let first = turn(&small, &messages).await;
    let (id, _) = handed(&first);
    messages.push(first);
    messages.push(tool_result(&id, &big));
    let (status, body) = ask(&small, &messages).await;
    assert_record_too_large(status, &body, "CODEMODE_EXECUTION_STORE_MB");
    assert_eq!(received(&p).await.len(), 2, "no refusal asked the model");
    // Both replicas go on serving.
    assert_eq!(get(&small, "/readyz").await.0, 200);
    assert_eq!(ask(&roomy, &conversation("hi")).await.0, 200);
}
