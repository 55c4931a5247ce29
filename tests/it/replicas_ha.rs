//! Replicas sharing a Redis that fails over (issue 24): a Redis Cluster
//! (`redis+cluster://`) and a master managed by Redis Sentinel
//! (`redis+sentinel://`). In each, a program started on one replica
//! finishes on the other; a master killed mid-conversation (after its
//! replica has the record) costs a window of 503 `store_unavailable` with
//! `retry-after`, `/readyz` says so until the new master answers, and then
//! the same conversation finishes, with no restart; a conversation started
//! after the failover works too. Every test starts its own Redis processes
//! (skipped where there are none, failing under CI: `common::needs`).

use crate::common::redis_ha;

use std::time::{Duration, Instant};

use crate::common::agent::{conversation, tool_result};
use crate::common::replica_turns::{
    ask_with_retry as ask, handed, native_answers, retry_after, started_on_a_continued_on_b, turn,
};
use crate::common::*;
use redis_ha::RedisHa;
use serde_json::{json, Value};

const TWO_READS: &str = "const a = await tools.read({path: 'a.txt'}); \
                         const b = await tools.read({path: 'b.txt'}); return a + ' ' + b;";

fn run_code(id: &str) -> Value {
    calls_completion(
        vec![call(
            id,
            "run_code",
            &json!({"code": TWO_READS}).to_string(),
        )],
        usage(1, 1),
    )
}

async fn readyz(proxy: &Proxy) -> (u16, Option<String>) {
    let res = proxy.get("/readyz", &[]).await;
    (res.status().as_u16(), retry_after(&res))
}

async fn wait_ready(proxy: &Proxy) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while readyz(proxy).await.0 != 200 {
        assert!(
            Instant::now() < deadline,
            "the replica never became ready again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A 503 a store outage gives: `store_unavailable`, to be sent again after `retry-after`.
fn assert_store_unavailable(status: u16, retry: Option<&str>, body: &Value) {
    assert_eq!((status, retry), (503, Some("1")), "{body}");
    assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
}

/// The whole story against `ha`: a program moves between replicas, the
/// master holding it dies, the failover is waited out, the program ends.
async fn failover_mid_conversation(mut ha: RedisHa) {
    let started = Instant::now();
    let p = provider([
        run_code("c"),
        text_completion("native answer", usage(1, 1)),
        text_completion("alpha bravo", usage(1, 1)),
        run_code("c2"),
        text_completion("after failover", usage(1, 1)),
    ])
    .await;
    let url = ha.store_url();
    let vars = [("CODEMODE_RUNTIME", "embedded"), ("CODEMODE_STORE", &url)];
    let a = start(&p, &vars).await;
    let b = start(&p, &vars).await;
    assert_eq!(readyz(&a).await.0, 200);

    // Started on A, its first result handed to B: B continues it.
    let messages = started_on_a_continued_on_b(&a, &b, "read both", handed).await;

    // The master holding the waiting execution dies once its replica has it.
    let replica = tokio::task::block_in_place(|| {
        let master = ha.master_holding("codemode:x:*");
        ha.kill_master(master)
    });
    let killed = Instant::now();
    // No replica can have seen the new master yet: the cluster waits a
    // node timeout, the sentinels their down-after, before anything moves.
    let (status, retry) = readyz(&a).await;
    assert_eq!((status, retry.as_deref()), (503, Some("1")));
    // What does not need the store keeps flowing.
    native_answers(&a).await;
    // What needs it is a retryable 503, until the new master answers.
    let (status, retry, body) = ask(&b, &messages).await;
    let mut answer = None;
    if status == 503 {
        assert_store_unavailable(status, retry.as_deref(), &body);
    } else {
        // Only if the failover outran this request: then it moved on.
        assert_eq!(status, 200, "{body}");
        eprintln!("the failover finished before the resume; no 503 window seen");
        answer = Some(body["choices"][0]["message"].clone());
    }

    let ha = tokio::task::block_in_place(move || {
        ha.wait_promoted(replica);
        ha
    });
    wait_ready(&a).await;
    wait_ready(&b).await;
    eprintln!(
        "failover: ready again {} ms after the kill",
        killed.elapsed().as_millis()
    );
    // The same request, sent again, finishes the program: nothing was lost.
    let answer = match answer {
        Some(a) => a,
        None => turn(&b, &messages).await,
    };
    assert_eq!(answer["content"], "alpha bravo");
    let sent = received(&p).await;
    assert_eq!(sent.len(), 3, "the failed resume asked no model");
    let last = sent[2]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"], "Result: \"alpha bravo\"");

    // A conversation started after the failover, across both replicas.
    let mut messages = conversation("read both again");
    for (proxy, content) in [(&b, "one"), (&a, "two")] {
        let t = turn(proxy, &messages).await;
        let (id, _) = handed(&t);
        messages.push(t);
        messages.push(tool_result(&id, content));
    }
    assert_eq!(turn(&b, &messages).await["content"], "after failover");
    let sent = received(&p).await;
    let last = sent[4]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"], "Result: \"one two\"");
    let aliases = tokio::task::block_in_place(|| ha.keys("codemode:a:*"));
    assert!(!aliases.is_empty(), "aliases were written");
    eprintln!("whole test: {} ms", started.elapsed().as_millis());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_master_killed_mid_program_costs_a_503_window_and_nothing_else() {
    if !redis_ha::cluster_runs_here() {
        return;
    }
    let ha = tokio::task::spawn_blocking(RedisHa::cluster).await.unwrap();
    failover_mid_conversation(ha).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_mid_program_costs_a_503_window_and_nothing_else() {
    if !redis_ha::sentinel_runs_here() {
        return;
    }
    let ha = tokio::task::spawn_blocking(RedisHa::sentinel)
        .await
        .unwrap();
    failover_mid_conversation(ha).await;
}

/// A replica that used the store before a failover and not since: its
/// connection is to the dead master. Once the new master answers (another
/// replica says ready), its first request is answered as if nothing
/// happened: the broken connection is remade and the read tried once more
/// inside the proxy, not handed to the user as a 503.
async fn idle_replica_across_a_failover(mut ha: RedisHa) {
    let p = provider([run_code("c"), text_completion("alpha bravo", usage(1, 1))]).await;
    let url = ha.store_url();
    let vars = [("CODEMODE_RUNTIME", "embedded"), ("CODEMODE_STORE", &url)];
    let idle = start(&p, &vars).await;
    let watcher = start(&p, &vars).await;

    let mut messages = conversation("read both");
    let first = turn(&idle, &messages).await;
    let (id, _) = handed(&first);
    messages.push(first);
    messages.push(tool_result(&id, "alpha"));

    let ha = tokio::task::block_in_place(move || {
        let master = ha.master_holding("codemode:x:*");
        let replica = ha.kill_master(master);
        ha.wait_promoted(replica);
        ha
    });
    // Only the other replica is asked whether the store is back.
    wait_ready(&watcher).await;
    let (status, _, body) = ask(&idle, &messages).await;
    assert_eq!(status, 200, "the first request after the failover: {body}");
    let (_, path) = handed(&body["choices"][0]["message"]);
    assert_eq!(path, "b.txt", "the program went on where it waited");
    drop(ha);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_idle_across_a_cluster_failover_answers_its_first_request() {
    if !redis_ha::cluster_runs_here() {
        return;
    }
    let ha = tokio::task::spawn_blocking(RedisHa::cluster).await.unwrap();
    idle_replica_across_a_failover(ha).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_idle_across_a_sentinel_failover_answers_its_first_request() {
    if !redis_ha::sentinel_runs_here() {
        return;
    }
    let ha = tokio::task::spawn_blocking(RedisHa::sentinel)
        .await
        .unwrap();
    idle_replica_across_a_failover(ha).await;
}
