//! What a shared store adds to a resume: the same resume request through
//! the proxy (HTTP on loopback, embedded runtime) with executions in memory
//! and in Redis, and the Redis memory a waiting execution takes.
//!
//! Each iteration resumes a fresh waiting program (written to the store
//! before the timed request): the client returns ten `read` results, the
//! proxy reads the record, replays the program (`list`, ten reads), saves
//! the new step with the compare-and-set and hands out the next call. The
//! difference between the two medians is the store's share.
//!
//! `cargo bench --features bench-internals --bench store` (needs `redis-server`; it starts its own).

#[path = "../tests/it/common/needs.rs"]
#[allow(dead_code)]
mod needs;
#[path = "../tests/it/common/redis_server.rs"]
mod redis_server;

use std::sync::Arc;
use std::time::Duration;

use codemode_proxy::internals::runtime::{CallRecord, Execution, ExecutionStore};
use codemode_proxy::internals::splice::MemorySpliceStore;
use codemode_proxy::internals::store_redis::{Keys, RecordLimits, RedisStore};
use codemode_proxy::internals::tenant::Tenant;
use codemode_proxy::store::{MemoryExecutionStore, StoreFuture};
use codemode_proxy::{server, CodeModeLayer, Config};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use serde_json::{json, Value};
use tower::Layer;

const PROGRAM: &str = "const files = (await tools.list({})).split('\\n'); \
    const texts = await Promise.all(files.map(path => tools.read({path}))); \
    await tools.done({n: texts.length}); return 1;";

fn tools() -> Vec<Value> {
    ["list", "read", "done"]
        .iter()
        .map(|n| json!({"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object"}}}))
        .collect()
}

/// A program waiting on its ten reads, `list` answered.
fn waiting() -> Execution {
    let mut e = Execution::new(
        Tenant::anonymous("default"),
        "call_p".into(),
        PROGRAM.into(),
        None,
        vec!["list".into(), "read".into(), "done".into()],
    );
    let files: Vec<String> = (0..10).map(|i| format!("src/file_{i}.rs")).collect();
    e.calls.push(CallRecord {
        name: "list".into(),
        args: "{}".into(),
        result: Some(files.join("\n")),
    });
    e.calls.extend(files.iter().map(|f| CallRecord {
        name: "read".into(),
        args: json!({"path": f}).to_string(),
        result: None,
    }));
    e
}

/// The client's request returning the ten results (2 KB each).
fn resume_body(e: &Execution) -> Value {
    let call = |n: usize, name: &str, args: &str| json!({"id": e.call_id(n), "type": "function", "function": {"name": name, "arguments": args}});
    let mut messages = vec![
        json!({"role": "user", "content": "sum the file sizes"}),
        json!({"role": "assistant", "content": null, "tool_calls": [call(0, "list", "{}")]}),
        json!({"role": "tool", "tool_call_id": e.call_id(0), "content": e.calls[0].result}),
    ];
    let reads: Vec<Value> = (1..=10)
        .map(|n| call(n, "read", &e.calls[n].args))
        .collect();
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": reads}));
    for n in 1..=10 {
        messages.push(
            json!({"role": "tool", "tool_call_id": e.call_id(n), "content": "x".repeat(2000)}),
        );
    }
    json!({"model": "m", "messages": messages, "tools": tools()})
}

/// The memory store behind the shared-store path (`local()` is `None`):
/// requests read ahead exactly as with Redis, without its I/O.
struct ReadAhead(Arc<MemoryExecutionStore>);

impl ExecutionStore for ReadAhead {
    fn get<'a>(&'a self, t: &'a Tenant, id: &'a str) -> StoreFuture<'a, Option<Arc<Execution>>> {
        ExecutionStore::get(&*self.0, t, id)
    }
    fn alias<'a>(&'a self, t: &'a Tenant, short: &'a str) -> StoreFuture<'a, Option<String>> {
        ExecutionStore::alias(&*self.0, t, short)
    }
    fn put(&self, exec: Arc<Execution>) -> StoreFuture<'_, ()> {
        ExecutionStore::put(&*self.0, exec)
    }
    fn replace(&self, exec: Arc<Execution>, expected: u64) -> StoreFuture<'_, bool> {
        self.0.replace(exec, expected)
    }
}

fn config(store: &str) -> Config {
    let vars = [
        ("CODEMODE_LISTEN", "127.0.0.1:0"),
        ("CODEMODE_UPSTREAM", "http://127.0.0.1:9/v1"),
        ("CODEMODE_RUNTIME", "embedded"),
        ("CODEMODE_STORE", store),
    ];
    Config::from_lookup(|k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    })
    .expect("a valid config")
}

/// Serves a proxy with `executions` on loopback; its address.
async fn serve(config: Config, executions: Arc<dyn ExecutionStore>) -> String {
    let splices = Arc::new(MemorySpliceStore::new(Duration::from_secs(60), 1 << 20));
    let client = server::http_client(&config).expect("TLS roots");
    let service = CodeModeLayer::builder(config)
        .splice_store(splices)
        .execution_store(executions)
        .build()
        .layer(client);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(server::serve(listener, service, std::future::pending()));
    format!("http://{addr}/v1/chat/completions")
}

fn resume(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Without redis-server: a note saying how to install it, no figures.
    let Some(redis) = redis_server::RedisServer::start() else {
        return;
    };
    let http = reqwest::Client::new();
    let in_memory = || {
        Arc::new(MemoryExecutionStore::new(
            Duration::from_secs(600),
            Duration::from_secs(3600),
            // Room for every execution criterion makes (thousands of 25 KB
            // records): a full store would refuse new ones and the resume
            // would ask the (absent) model.
            4 << 30,
        ))
    };
    let memory: Arc<dyn ExecutionStore> = in_memory();
    let read_ahead: Arc<dyn ExecutionStore> = Arc::new(ReadAhead(in_memory()));
    let url = redis.url(0);
    let shared: Arc<dyn ExecutionStore> = Arc::new(RedisStore::new(
        &url,
        url.clone(),
        "codemode:",
        Duration::from_secs(600),
        Duration::from_secs(3600),
        Duration::from_secs(3600),
        RecordLimits {
            execution: 64 << 20,
            splice: 64 << 20,
        },
    ));
    let mut group = c.benchmark_group("resume_ten_results");
    let memory_store = memory.clone();
    let mut endpoints = Vec::new();
    let mut redis_endpoint = None;
    for (name, store, kind) in [
        ("memory", memory, "memory"),
        ("memory_read_ahead", read_ahead, "memory"),
        ("redis", shared.clone(), url.as_str()),
    ] {
        let endpoint = rt.block_on(serve(config(kind), store.clone()));
        if name == "redis" {
            redis_endpoint = Some(endpoint.clone());
        }
        endpoints.push((name, store.clone(), endpoint.clone()));
        group.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let e = Arc::new(waiting());
                    rt.block_on(store.put(e.clone())).expect("stored");
                    resume_body(&e)
                },
                |body| {
                    rt.block_on(async {
                        let res = http.post(&endpoint).json(&body).send().await.unwrap();
                        let status = res.status();
                        let v: Value = res.json().await.unwrap();
                        assert_eq!(status, 200, "{v}");
                        let name = &v["choices"][0]["message"]["tool_calls"][0]["function"]["name"];
                        assert_eq!(name, "done", "{v}");
                    })
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();

    // The same, interleaved (memory, Redis, memory, ...), so the machine's
    // load drifts alike for both: p50 of each and the difference.
    const ROUNDS: usize = 1000;
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(ROUNDS); endpoints.len()];
    for _ in 0..ROUNDS {
        for (i, (_, store, endpoint)) in endpoints.iter().enumerate() {
            let e = Arc::new(waiting());
            rt.block_on(store.put(e.clone())).expect("stored");
            let body = resume_body(&e);
            let took = rt.block_on(async {
                let start = std::time::Instant::now();
                let res = http.post(endpoint).json(&body).send().await.unwrap();
                assert_eq!(res.status(), 200);
                res.bytes().await.unwrap();
                start.elapsed()
            });
            times[i].push(took);
        }
    }
    let pct = |t: &mut Vec<Duration>, p: f64| {
        t.sort_unstable();
        t[((t.len() - 1) as f64 * p) as usize]
    };
    let mut p50 = Vec::new();
    for (i, (name, _, _)) in endpoints.iter().enumerate() {
        let (m, n) = (pct(&mut times[i], 0.5), pct(&mut times[i], 0.9));
        eprintln!("interleaved resume {name}: p50 {m:?} p90 {n:?} ({ROUNDS} requests)");
        p50.push(m);
    }
    eprintln!(
        "interleaved: reading ahead adds {:?} at p50, Redis {:?} more",
        p50[1].saturating_sub(p50[0]),
        p50[2].saturating_sub(p50[1])
    );

    // The store's own operations a resume makes, without HTTP or the program.
    let mut group = c.benchmark_group("store_get_and_replace");
    for (name, store) in [("memory", memory_store.clone()), ("redis", shared.clone())] {
        let e = Arc::new(waiting());
        rt.block_on(store.put(e.clone())).expect("stored");
        let at = Arc::new(std::sync::atomic::AtomicU64::new(0));
        // On a runtime worker, as a request handler runs them.
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let (store, e, at) = (store.clone(), e.clone(), at.clone());
                rt.block_on(rt.spawn(async move {
                    let start = std::time::Instant::now();
                    for _ in 0..iters {
                        let held = store.get(&e.tenant, &e.id).await.unwrap().unwrap();
                        let mut next = (*held).clone();
                        let read_at = at.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        next.revision = read_at + 1;
                        assert!(store.replace(Arc::new(next), read_at).await.unwrap());
                    }
                    start.elapsed()
                }))
                .unwrap()
            })
        });
    }
    group.finish();

    // Redis commands one resume sends.
    let _: () = redis.cmd(&["CONFIG", "RESETSTAT"]);
    let redis_endpoint = redis_endpoint.expect("served");
    const RESUMES: usize = 100;
    for _ in 0..RESUMES {
        let e = Arc::new(waiting());
        rt.block_on(shared.put(e.clone())).expect("stored");
        let body = resume_body(&e);
        rt.block_on(async {
            let res = http.post(&redis_endpoint).json(&body).send().await.unwrap();
            assert_eq!(res.status(), 200);
        });
    }
    let stats: String = redis.cmd(&["INFO", "commandstats"]);
    for line in stats.lines().filter(|l| l.starts_with("cmdstat_")) {
        let calls: Option<u64> = line
            .split_once("calls=")
            .and_then(|(_, r)| r.split(',').next())
            .and_then(|n| n.parse().ok());
        if let Some(calls) = calls {
            // The put before each resume is one EVALSHA of the RESUMES.
            eprintln!(
                "per resume: {} {:.2}",
                &line[8..line.find(':').unwrap_or(8)],
                calls as f64 / RESUMES as f64
            );
        }
    }

    // Redis memory per waiting execution: one record and its eleven aliases.
    let _: () = redis.cmd(&["FLUSHALL"]);
    let before: u64 = used_memory(&redis);
    const N: usize = 1000;
    let mut last = None;
    for _ in 0..N {
        let e = Arc::new(waiting());
        rt.block_on(shared.put(e.clone())).expect("stored");
        last = Some(e);
    }
    let after: u64 = used_memory(&redis);
    let e = last.unwrap();
    let keys = Keys {
        prefix: "codemode:".into(),
    };
    let record: u64 = redis.cmd(&["MEMORY", "USAGE", &keys.execution(&e.tenant, &e.id)]);
    let alias: u64 = redis.cmd(&[
        "MEMORY",
        "USAGE",
        &keys.alias(
            &e.tenant,
            &codemode_proxy::internals::runtime::alias_key(&e.call_id(1)),
        ),
    ]);
    eprintln!(
        "redis memory per waiting ten-call execution: {} bytes (INFO used_memory over {N}); \
         MEMORY USAGE: record {record} B, one alias {alias} B, record + 11 aliases {} B; \
         record value {} B",
        (after - before) / N as u64,
        record + 11 * alias,
        codemode_proxy::internals::store_redis::encode_execution(&e).len()
    );
}

fn used_memory(redis: &redis_server::RedisServer) -> u64 {
    let info: String = redis.cmd(&["INFO", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO")
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(200).measurement_time(Duration::from_secs(8));
    targets = resume
}
criterion_main!(benches);
