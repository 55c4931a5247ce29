//! Programs run in sandbox worker processes (`CODEMODE_SANDBOX=process`):
//! the kernel refuses a worker what a program that broke out of QuickJS
//! would try first, and a worker that crashes, hangs, runs out of memory
//! or breaks the protocol fails its run with a named error, is replaced,
//! and the next program runs.
#![cfg(target_os = "linux")]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::agent::{conversation, FsAgent};
use crate::common::*;
use serde_json::{json, Value};

const BINARY: &str = env!("CARGO_BIN_EXE_codemode-proxy");

fn run_code(id: &str, code: &str) -> Value {
    calls_completion(
        vec![call(id, "run_code", &json!({"code": code}).to_string())],
        usage(100, 20),
    )
}

/// What `sandbox-worker --probe` prints, started as the proxy starts a
/// worker (empty environment, pipes).
fn probe(extra: &[&str]) -> Vec<String> {
    let out = Command::new(BINARY)
        .arg("sandbox-worker")
        .arg("--probe")
        .args(extra)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("the binary starts");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_confined_worker_is_refused_files_sockets_processes_and_other_memory() {
    let lines = probe(&[]);
    let names: Vec<&str> = lines.iter().filter_map(|l| l.split(':').next()).collect();
    assert_eq!(
        names,
        [
            "open",
            "socket",
            "spawn",
            "ptrace",
            "process_vm_readv",
            "exec"
        ],
        "{lines:?}"
    );
    for line in &lines {
        assert!(
            line.contains("refused (EPERM"),
            "not refused by the filter: {line}"
        );
    }
    // The same calls unconfined reach the kernel and succeed (exec would
    // replace the process, so it is the last line there is).
    let open = probe(&["--no-confine"]);
    for allowed in [
        "open: allowed",
        "socket: allowed",
        "process_vm_readv: allowed",
    ] {
        assert!(open.iter().any(|l| l == allowed), "{allowed} in {open:?}");
    }
    assert!(
        open.iter().any(|l| l.starts_with("ptrace: refused (ESRCH")),
        "{open:?}"
    );
}

/// A script that starts the real worker with its test faults on.
fn faulty_worker(name: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cm-worker-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("worker.sh");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The `run_code` result the model read in upstream request `i`.
fn result(sent: &[Value], i: usize) -> String {
    sent[i]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The proxy in code mode with the embedded runtime, its programs run by
/// `worker`, with `more` settings.
async fn proxy_with(p: &wiremock::MockServer, worker: &Path, more: &[(&str, &str)]) -> Proxy {
    let mut vars = vec![
        ("CODEMODE_RUNTIME", "embedded"),
        ("CODEMODE_SANDBOX", "process"),
        ("CODEMODE_SANDBOX_WORKER", worker.to_str().unwrap()),
    ];
    vars.extend_from_slice(more);
    start(p, &vars).await
}

#[tokio::test]
async fn a_broken_worker_fails_its_run_is_replaced_and_the_next_program_runs() {
    let worker = faulty_worker("faults", &format!("exec {BINARY} \"$@\" --faults"));
    let p = provider([
        run_code("c1", "// fault: crash\nreturn 1;"),
        run_code("c2", "// fault: garbage\nreturn 1;"),
        run_code("c3", "// fault: memory\nreturn 1;"),
        run_code("c4", "// fault: hang\nreturn 1;"),
        run_code("c5", "return 6 * 7;"),
        text_completion("done", usage(1, 1)),
    ])
    .await;
    let proxy = proxy_with(
        &p,
        &worker,
        &[
            ("CODEMODE_RUN_CONCURRENCY", "1"),
            // The hang is cut at the wall ceiling (10 s past the slice) plus 5 s.
            ("CODEMODE_RUN_SLICE_MS", "100"),
            ("CODEMODE_RUN_MEMORY_MB", "16"),
        ],
    )
    .await;
    FsAgent::default()
        .run(&proxy, &mut conversation("go"))
        .await;
    let sent = received(&p).await;
    assert_eq!(sent.len(), 6, "every program got its answer");
    let crash = result(&sent, 1);
    assert!(
        crash.starts_with("Error: Error: the program's sandbox worker crashed and was replaced"),
        "{crash}"
    );
    let garbage = result(&sent, 2);
    assert!(
        garbage.contains("answered out of protocol and was replaced"),
        "{garbage}"
    );
    let memory = result(&sent, 3);
    assert!(
        memory.starts_with("Error: RangeError: the program's sandbox worker ran out of memory")
            && memory.contains("CODEMODE_RUN_MEMORY_MB"),
        "{memory}"
    );
    let hang = result(&sent, 4);
    assert!(
        hang.starts_with(
            "Error: TimeoutError: the program's sandbox worker did not answer within 15 s"
        ) && hang.contains("CODEMODE_RUN_SLICE_MS"),
        "{hang}"
    );
    assert_eq!(result(&sent, 5), "Result: 42");
    for reason in ["crash", "protocol", "memory", "timeout"] {
        let series = format!("codemode_sandbox_worker_failures_total{{reason=\"{reason}\"}}");
        assert_eq!(proxy.metric(&series).await, 1.0, "{series}");
    }
    let _ = std::fs::remove_dir_all(worker.parent().unwrap());
}

/// A worker a program took over answers whatever it likes: a call to a
/// tool the execution does not have (`bash`, which the agent never
/// declared) never reaches the client; the run fails, the worker is replaced.
#[tokio::test]
async fn a_worker_that_forges_a_call_is_refused_in_the_proxy() {
    let worker = faulty_worker("forged", &format!("exec {BINARY} \"$@\" --faults"));
    let p = provider([
        run_code("c1", "// fault: forged\nreturn 1;"),
        text_completion("done", usage(1, 1)),
    ])
    .await;
    let proxy = proxy_with(&p, &worker, &[]).await;
    let mut agent = FsAgent::default();
    agent.run(&proxy, &mut conversation("go")).await;
    assert!(agent.executed.is_empty(), "{:?}", agent.executed);
    let sent = received(&p).await;
    let forged = result(&sent, 1);
    assert!(
        forged.contains("answered out of protocol and was replaced"),
        "{forged}"
    );
    let series = "codemode_sandbox_worker_failures_total{reason=\"protocol\"}";
    assert_eq!(proxy.metric(series).await, 1.0);
    let _ = std::fs::remove_dir_all(worker.parent().unwrap());
}

#[tokio::test]
async fn a_worker_path_that_is_no_worker_fails_the_program_naming_the_fix() {
    let worker = faulty_worker("garbage", "echo garbage");
    let p = provider([
        run_code("c1", "return 1;"),
        run_code("c2", "return 2;"),
        text_completion("done", usage(1, 1)),
    ])
    .await;
    let proxy = proxy_with(&p, &worker, &[]).await;
    FsAgent::default()
        .run(&proxy, &mut conversation("go"))
        .await;
    let sent = received(&p).await;
    assert_eq!(sent.len(), 3, "the proxy kept answering");
    for i in [1, 2] {
        let text = result(&sent, i);
        assert!(
            text.contains("its sandbox worker did not start")
                && text.contains("CODEMODE_SANDBOX_WORKER")
                && text.contains("CODEMODE_SANDBOX=in-process"),
            "{text}"
        );
    }
    assert!(
        proxy
            .metric("codemode_sandbox_worker_failures_total{reason=\"spawn\"}")
            .await
            >= 2.0
    );
    let _ = std::fs::remove_dir_all(worker.parent().unwrap());
}

#[tokio::test]
async fn a_worker_serves_one_tenant_and_another_tenant_gets_another_process() {
    let worker = faulty_worker("tenants", &format!("exec {BINARY} \"$@\" --faults"));
    let pid_turn = || run_code("c", "// fault: pid\nreturn 0;");
    let p = provider([
        pid_turn(),
        text_completion("a1", usage(1, 1)),
        pid_turn(),
        text_completion("a2", usage(1, 1)),
        pid_turn(),
        text_completion("b1", usage(1, 1)),
        pid_turn(),
        text_completion("a3", usage(1, 1)),
    ])
    .await;
    // Room for both tenants' workers and the fresh one kept ready: with
    // less, a full pool lets the first tenant's worker go to make room for
    // the second's (by design), and whether it is full when the second
    // tenant's run ends depends on how fast the fresh worker starts.
    let proxy = proxy_with(&p, &worker, &[("CODEMODE_RUN_CONCURRENCY", "3")]).await;
    let alice = [("authorization", "Bearer sk-alice")];
    let bob = [("authorization", "Bearer sk-bob")];
    for who in [&alice, &alice, &bob, &alice] {
        let res = proxy.chat(&user_chat("go"), who).await;
        assert_eq!(res.status(), 200);
    }
    let sent = received(&p).await;
    let pid = |i: usize| result(&sent, i).trim_start_matches("Result: ").to_owned();
    let (a1, a2, b1, a3) = (pid(1), pid(3), pid(5), pid(7));
    assert!(a1.parse::<u32>().is_ok(), "{a1}");
    assert_eq!(a1, a2, "one tenant's runs share its warm worker");
    assert_ne!(b1, a1, "another tenant's run never reaches that worker");
    assert_ne!(
        a3, b1,
        "the first tenant's run never reaches the second's worker"
    );
    assert_eq!(a3, a1, "the first tenant's worker is still its own");
    let _ = std::fs::remove_dir_all(worker.parent().unwrap());
}
