#![no_main]
//! The sandbox's host boundary: whatever a program does, every call it
//! leaves pending names a tool of the execution's list and carries a JSON
//! object, and nothing panics.
//!
//! Input: the first line is the tool list (names separated by commas), the
//! rest is the program. Each run's pending calls are answered and the
//! program replayed, a few rounds deep, as the proxy would.

use std::time::Duration;

use codemode_proxy::internals::runtime::{sandbox, CallRecord, Limits, RunOutcome};
use libfuzzer_sys::fuzz_target;

fn limits() -> Limits {
    Limits {
        slice: Duration::from_millis(50),
        memory_bytes: 8 << 20,
        max_calls: 20,
        max_output_bytes: 2000,
        ..Limits::default()
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (head, code) = text.split_once('\n').unwrap_or(("read,write", &text));
    let mut tools: Vec<String> = Vec::new();
    for name in head.split(',').take(8) {
        if !tools.iter().any(|t| t == name) {
            tools.push(name.to_owned());
        }
    }
    let limits = limits();
    let mut replay: Vec<CallRecord> = Vec::new();
    for round in 0..4 {
        match sandbox::run(code, &tools, &replay, 7, 1_700_000_000_000, &limits) {
            RunOutcome::Blocked { calls, .. } => {
                assert!(!calls.is_empty(), "blocked on no call");
                assert!(
                    replay.len() + calls.len() <= limits.max_calls,
                    "more calls than the limit"
                );
                for c in calls {
                    assert!(
                        tools.contains(&c.name),
                        "a pending call names `{}`, not one of {tools:?}",
                        c.name
                    );
                    let args: Result<serde_json::Map<String, serde_json::Value>, _> =
                        serde_json::from_str(&c.args);
                    assert!(
                        args.is_ok(),
                        "a pending call to `{}` carries `{}`, not a JSON object",
                        c.name,
                        c.args
                    );
                    assert!(c.result.is_none());
                    replay.push(CallRecord {
                        result: Some(format!("{{\"round\":{round}}}")),
                        ..c
                    });
                }
            }
            RunOutcome::Finished { .. } | RunOutcome::Failed { .. } => return,
        }
    }
});
