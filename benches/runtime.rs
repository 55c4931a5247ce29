//! The embedded runtime: a fresh execution's start-up, a TypeScript
//! program's against the same in JavaScript, a resume that replays ten
//! calls, the same two in a sandbox worker process (what
//! `CODEMODE_SANDBOX=process` adds: the frames both ways and the worker's
//! JSON), and the history rewrite of a conversation holding a program's
//! nested traffic.
//!
//! `cargo bench --features bench-internals --bench runtime`

use std::hint::black_box;
use std::time::Duration;

use codemode_proxy::internals::chat;
use codemode_proxy::internals::runtime::history::Transcript;
use codemode_proxy::internals::runtime::{
    prepare, sandbox, worker, CallRecord, Execution, ExecutionLookup, Limits, MemoryExecutionStore,
};
use codemode_proxy::internals::sdk::ToolDocs;
use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, value::RawValue};

const TEN_FILES: &str = "const files = (await tools.list({})).split('\\n'); const texts = await Promise.all(files.map(path => tools.read({path}))); return texts.map(t => t.length).reduce((a, b) => a + b, 0);";

/// A program in the shape models write: types, a `main()`, a final call.
const TYPESCRIPT: &str = r#"interface Entry { path: string; size: number }
type Summary = { total: number; largest: Entry | undefined };

async function sizes(paths: string[]): Promise<Entry[]> {
  const texts: string[] = await Promise.all(paths.map((path: string) => tools.read({ path })));
  return texts.map((t: string, i: number): Entry => ({ path: paths[i]!, size: t.length }));
}

function summarise(entries: Entry[]): Summary {
  let largest: Entry | undefined;
  for (const e of entries) {
    if (!largest || e.size > largest.size) largest = e;
  }
  const total = entries.reduce((a: number, e: Entry) => a + e.size, 0);
  return { total, largest } as Summary;
}

async function main(): Promise<Summary> {
  const files = (await tools.list({})).split("\n") as string[];
  return summarise(await sizes(files));
}
main();
"#;

/// [`TYPESCRIPT`] as JavaScript: its annotations and declarations gone.
fn strip_by_hand(ts: &str) -> String {
    let mut js = String::new();
    for line in ts.lines() {
        if line.starts_with("interface") || line.starts_with("type ") {
            continue;
        }
        js.push_str(line);
        js.push('\n');
    }
    for (from, to) in [
        (": Promise<Entry[]>", ""),
        (": Promise<Summary>", ""),
        ("(paths: string[])", "(paths)"),
        ("(entries: Entry[]): Summary", "(entries)"),
        ("const texts: string[]", "const texts"),
        ("(path: string)", "(path)"),
        ("(t: string, i: number): Entry", "(t, i)"),
        ("paths[i]!", "paths[i]"),
        ("let largest: Entry | undefined;", "let largest;"),
        ("(a: number, e: Entry)", "(a, e)"),
        (" as Summary", ""),
        (" as string[]", ""),
    ] {
        js = js.replace(from, to);
    }
    js
}

fn recorded() -> Vec<CallRecord> {
    let files: Vec<String> = (0..10).map(|i| format!("f{i}")).collect();
    let mut calls = vec![CallRecord {
        name: "list".into(),
        args: "{}".into(),
        result: Some(files.join("\n")),
    }];
    calls.extend(files.iter().map(|f| CallRecord {
        name: "read".into(),
        args: json!({"path": f}).to_string(),
        result: Some("x".repeat(2000)),
    }));
    calls
}

fn runtime(c: &mut Criterion) {
    let tools = vec!["list".to_owned(), "read".to_owned()];
    let limits = Limits::default();
    let mut group = c.benchmark_group("runtime");
    group.bench_function("fresh_execution_return_1", |b| {
        b.iter(|| black_box(sandbox::run("return 1;", &tools, &[], 1, 0, &limits)))
    });
    // The same program as a model writes it in TypeScript, and with its
    // types taken out by hand: the difference is what stripping costs.
    group.bench_function("fresh_typescript_20_lines", |b| {
        b.iter(|| black_box(sandbox::run(TYPESCRIPT, &tools, &[], 1, 0, &limits)))
    });
    let javascript = strip_by_hand(TYPESCRIPT);
    assert_eq!(
        sandbox::run(TYPESCRIPT, &tools, &[], 1, 0, &limits),
        sandbox::run(&javascript, &tools, &[], 1, 0, &limits),
        "the two programs are the same program"
    );
    group.bench_function("fresh_javascript_20_lines", |b| {
        b.iter(|| black_box(sandbox::run(&javascript, &tools, &[], 1, 0, &limits)))
    });
    // What preparing costs each run (a resume prepares the program again).
    group.bench_function("prepare_typescript_20_lines", |b| {
        b.iter(|| black_box(prepare(TYPESCRIPT, &tools)))
    });
    group.bench_function("prepare_javascript_20_lines", |b| {
        b.iter(|| black_box(prepare(&javascript, &tools)))
    });
    let calls = recorded();
    group.bench_function("resume_replaying_11_calls", |b| {
        b.iter(|| black_box(sandbox::run(TEN_FILES, &tools, &calls, 1, 0, &limits)))
    });

    // The worker is the binary this bench was built beside, warm (started
    // before the first iteration, as the proxy keeps its pool).
    let workers = worker::Workers::new(env!("CARGO_BIN_EXE_codemode-proxy").into(), &limits, 1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let no_docs = ToolDocs::default();
    let bench_tenant = codemode_proxy::internals::tenant::Tenant::anonymous("default");
    // A full SDK's worth of declarations (Claude Code's tools are ~60 KB),
    // sent with every run.
    let docs: ToolDocs =
        serde_json::from_value(json!({"text": "x".repeat(60_000), "index": {}, "params": {}}))
            .expect("docs");
    let in_worker = |code: &str, calls: &[CallRecord], docs: &ToolDocs| {
        rt.block_on(workers.run(&bench_tenant, code, &tools, &[], docs, calls, 1, 0, &limits))
    };
    group.bench_function("in_worker_fresh_execution_return_1", |b| {
        b.iter(|| black_box(in_worker("return 1;", &[], &no_docs)))
    });
    group.bench_function("in_worker_fresh_execution_return_1_60KB_docs", |b| {
        b.iter(|| black_box(in_worker("return 1;", &[], &docs)))
    });
    group.bench_function("in_worker_resume_replaying_11_calls", |b| {
        b.iter(|| black_box(in_worker(TEN_FILES, &calls, &no_docs)))
    });

    let store =
        MemoryExecutionStore::new(Duration::from_secs(60), Duration::from_secs(60), 1 << 20);
    let tenant = codemode_proxy::internals::tenant::Tenant::anonymous("default");
    let mut exec = Execution::new(
        tenant,
        "call_p".into(),
        TEN_FILES.into(),
        None,
        tools.clone(),
    );
    exec.calls = calls.clone();
    exec.outcome = Some("Result: 20000".into());
    let mut messages = vec![json!({"role": "user", "content": "count"})];
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": exec.call_id(0), "type": "function", "function": {"name": "list", "arguments": "{}"}}]}));
    messages
        .push(json!({"role": "tool", "tool_call_id": exec.call_id(0), "content": calls[0].result}));
    let reads: Vec<_> = (1..11).map(|n| json!({"id": exec.call_id(n), "type": "function", "function": {"name": "read", "arguments": calls[n].args}})).collect();
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": reads}));
    for (n, call) in calls.iter().enumerate().skip(1) {
        messages
            .push(json!({"role": "tool", "tool_call_id": exec.call_id(n), "content": call.result}));
    }
    messages.push(json!({"role": "assistant", "content": "20000 bytes."}));
    let bytes: usize = exec.code.len()
        + exec
            .calls
            .iter()
            .map(|c| c.name.len() + c.args.len() + c.result.as_ref().map_or(0, String::len))
            .sum::<usize>();
    println!("a suspended ten-file execution holds {bytes} bytes of record (code, calls, results)");
    ExecutionLookup::put(&store, std::sync::Arc::new(exec));
    let raw: Vec<Box<RawValue>> = messages
        .iter()
        .map(|m| serde_json::value::to_raw_value(m).unwrap())
        .collect();
    let limits = codemode_proxy::internals::runtime::Limits::default();
    group.bench_function("history_rewrite_13_messages_22KB", |b| {
        b.iter(|| {
            let mut m = raw.clone();
            chat::history::Reader::new(&store, &tenant).rewrite(&mut m, &limits);
            black_box(m)
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = runtime
}
criterion_main!(benches);
