use std::time::Duration;

use super::batch::batch_key;
use super::*;

fn tools() -> Vec<String> {
    vec![
        "read".into(),
        "write".into(),
        "list".into(),
        "github.create_issue".into(),
    ]
}

fn limits() -> Limits {
    Limits {
        slice: Duration::from_millis(300),
        memory_bytes: 16 << 20,
        ..Limits::default()
    }
}

fn run(code: &str, replay: &[CallRecord]) -> RunOutcome {
    sandbox::run(code, &tools(), replay, 7, 1_700_000_000_000, &limits())
}

fn answered(name: &str, args: &str, result: &str) -> CallRecord {
    CallRecord {
        name: name.into(),
        args: args.into(),
        result: Some(result.into()),
    }
}

#[test]
fn parallel_calls_block_together() {
    let code = r#"const [a, b, c] = await Promise.all(["a", "b", "c"].map(p => tools.read({path: p}))); return a + b + c;"#;
    let RunOutcome::Blocked { calls, .. } = run(code, &[]) else {
        panic!()
    };
    let args: Vec<&str> = calls.iter().map(|c| c.args.as_str()).collect();
    assert_eq!(
        args,
        vec![r#"{"path":"a"}"#, r#"{"path":"b"}"#, r#"{"path":"c"}"#]
    );
    let replay = vec![
        answered("read", r#"{"path":"a"}"#, "1"),
        answered("read", r#"{"path":"b"}"#, "2"),
        answered("read", r#"{"path":"c"}"#, "3"),
    ];
    assert_eq!(
        run(code, &replay),
        RunOutcome::Finished {
            output: String::new(),
            value: "\"123\"".into()
        }
    );
}

#[test]
fn sequential_calls_block_one_at_a_time() {
    let code = r#"let n = 0; for (const p of ["x", "y"]) { n += (await tools.read({path: p})).length; console.log("read", p); } return n;"#;
    let RunOutcome::Blocked { calls, .. } = run(code, &[]) else {
        panic!()
    };
    assert_eq!(calls.len(), 1);
    let r1 = vec![answered("read", r#"{"path":"x"}"#, "four")];
    let RunOutcome::Blocked { calls, output } = run(code, &r1) else {
        panic!()
    };
    assert_eq!((calls.len(), output.as_str()), (1, "read x"));
    let r2 = vec![r1[0].clone(), answered("read", r#"{"path":"y"}"#, "22")];
    assert_eq!(
        run(code, &r2),
        RunOutcome::Finished {
            output: "read x\nread y".into(),
            value: "6".into()
        }
    );
}

#[test]
fn a_changed_call_on_replay_is_refused() {
    let code = r#"return await tools.read({path: String(Math.random())});"#;
    let RunOutcome::Blocked { calls, .. } = run(code, &[]) else {
        panic!()
    };
    // The same seed makes the same call: replay works.
    let replay = vec![CallRecord {
        result: Some("ok".into()),
        ..calls[0].clone()
    }];
    assert!(matches!(run(code, &replay), RunOutcome::Finished { .. }));
    let wrong = vec![answered("read", r#"{"path":"other"}"#, "ok")];
    let RunOutcome::Failed { error, .. } = run(code, &wrong) else {
        panic!()
    };
    assert!(error.contains("same calls"), "{error}");
}

#[test]
fn throws_and_syntax_errors_are_reported() {
    let RunOutcome::Failed { error, .. } = run("throw new RangeError('nope')", &[]) else {
        panic!()
    };
    assert_eq!(
        error,
        "RangeError: nope (line 1, column 11: `throw new RangeError('nope')`)"
    );
    let RunOutcome::Failed { error, .. } = run("return {", &[]) else {
        panic!()
    };
    assert!(error.starts_with("SyntaxError"), "{error}");
    assert!(error.contains("(line 1, column 9: `return {`)"), "{error}");
}

#[test]
fn unknown_tools_throw_inside_the_program_naming_the_tools() {
    let code = "try { await tools.delete_all({}); } catch (e) { return e.message; }";
    let RunOutcome::Finished { value, .. } = run(code, &[]) else {
        panic!()
    };
    assert!(
        value.contains("delete_all") && value.contains("read, write, list"),
        "{value}"
    );
}

#[test]
fn unserialisable_arguments_throw_a_type_error_and_send_nothing() {
    for args in [
        "{f: () => 1}",
        "{n: 10n}",
        "(() => { const o = {}; o.o = o; return o; })()",
        "'a string'",
        "[1]",
    ] {
        let code = format!(
            "try {{ await tools.write({args}); return 'sent'; }} catch (e) {{ return e.name; }}"
        );
        let RunOutcome::Finished { value, .. } = run(&code, &[]) else {
            panic!("{args}")
        };
        assert_eq!(value, "\"TypeError\"", "{args}");
    }
}

#[test]
fn bracket_access_reaches_non_identifier_names() {
    let RunOutcome::Blocked { calls, .. } =
        run(r#"await tools["github.create_issue"]({title: "x"});"#, &[])
    else {
        panic!()
    };
    assert_eq!(calls[0].name, "github.create_issue");
}

#[test]
fn busy_loops_are_interrupted() {
    let RunOutcome::Failed { error, .. } = run("while (true) {}", &[]) else {
        panic!()
    };
    assert!(error.contains("CODEMODE_RUN_SLICE_MS"), "{error}");
}

#[test]
fn allocation_bombs_hit_the_memory_limit() {
    let RunOutcome::Failed { error, .. } = run(
        "const a = []; while (true) a.push('x'.repeat(1 << 20));",
        &[],
    ) else {
        panic!()
    };
    assert!(
        error.contains("CODEMODE_RUN_MEMORY_MB") || error.contains("memory"),
        "{error}"
    );
}

#[test]
fn deep_recursion_fails_cleanly() {
    let RunOutcome::Failed { error, .. } =
        run("function f(n) { return f(n + 1) + 1; } return f(0);", &[])
    else {
        panic!()
    };
    assert!(
        error.contains("stack") || error.contains("Range"),
        "{error}"
    );
}

#[test]
fn the_call_limit_throws_inside_the_program() {
    let l = Limits {
        max_calls: 3,
        ..limits()
    };
    let code = "try { await Promise.all([1,2,3,4].map(i => tools.read({i}))); } catch (e) { return e.message; }";
    // The three calls made before the refused fourth still go to the
    // agent (started, never awaited); the program's value is its catch.
    let RunOutcome::Blocked { calls, .. } = sandbox::run(code, &tools(), &[], 1, 0, &l) else {
        panic!()
    };
    assert_eq!(calls.len(), 3);
    let replay: Vec<CallRecord> = calls
        .into_iter()
        .map(|c| CallRecord {
            result: Some("r".into()),
            ..c
        })
        .collect();
    let RunOutcome::Finished { value, .. } = sandbox::run(code, &tools(), &replay, 1, 0, &l) else {
        panic!()
    };
    assert!(value.contains("CODEMODE_RUN_MAX_CALLS"), "{value}");
}

#[test]
fn huge_outputs_are_truncated_with_a_note() {
    let outcome = run(
        "console.log('y'.repeat(100000)); return 'z'.repeat(100000);",
        &[],
    );
    let text = render_outcome(&outcome, &limits());
    assert!(text.len() < limits().max_output_bytes + 200);
    assert!(
        text.contains("CODEMODE_RUN_MAX_OUTPUT"),
        "{}",
        &text[text.len() - 120..]
    );
}

#[test]
fn programs_cannot_reach_the_host_or_other_executions() {
    let code = "return [typeof require, typeof process, typeof fetch, typeof std, typeof os, typeof globalThis.__leak].join(',');";
    let RunOutcome::Finished { value, .. } = run(code, &[]) else {
        panic!()
    };
    assert_eq!(
        value,
        "\"undefined,undefined,undefined,undefined,undefined,undefined\""
    );
    // State set by one run is gone in the next: every run has a fresh runtime.
    let _ = run("globalThis.__leak = 1; return 1;", &[]);
    let RunOutcome::Finished { value, .. } = run("return typeof globalThis.__leak;", &[]) else {
        panic!()
    };
    assert_eq!(value, "\"undefined\"");
}

#[test]
fn the_clock_and_random_are_fixed_per_execution() {
    let code = "return [Date.now(), new Date().getTime(), Math.random()].join(',');";
    let a = run(code, &[]);
    assert_eq!(a, run(code, &[]));
    let RunOutcome::Finished { value, .. } = a else {
        panic!()
    };
    assert!(
        value.starts_with("\"1700000000000,1700000000000,"),
        "{value}"
    );
}

#[test]
fn call_ids_name_their_execution() {
    let tenant = crate::tenant::Tenant::anonymous("s");
    let e = Execution::new(tenant, "call_1".into(), "return 1".into(), None, tools());
    let id = e.call_id(3);
    assert_eq!(parse_call_id(&id), Some((e.id.as_str(), 3)));
    assert!(minted_for(&e.id, &tenant).is_some());
    assert_eq!(parse_call_id("call_abc"), None);
    // An id whose alias was changed is not one the proxy minted.
    let forged = format!("call_aaaaa{}", &id[10..]);
    assert_ne!(forged, id);
    assert_eq!(parse_call_id(&forged), None);
}

#[test]
fn shortened_call_ids_stay_distinct_and_are_found_again() {
    use std::collections::HashSet;
    let tenant = crate::tenant::Tenant::anonymous("s");
    let store = MemoryExecutionStore::new(
        std::time::Duration::from_secs(60),
        std::time::Duration::from_secs(60),
        1 << 20,
    );
    let mut e = Execution::new(tenant, "call_1".into(), "x".into(), None, tools());
    e.calls = (0..100)
        .map(|n| CallRecord {
            name: "read".into(),
            args: format!("{{\"n\":{n}}}"),
            result: None,
        })
        .collect();
    ExecutionLookup::put(&store, std::sync::Arc::new(e.clone()));
    let mut seen = HashSet::new();
    for n in 0..100 {
        let id = e.call_id(n);
        // opencode for Mistral models: the first 9 letters and digits.
        let short: String = id
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(9)
            .collect();
        assert!(seen.insert(short.clone()), "call {n} collides: {short}");
        assert_eq!(
            resolve_call_id(&short, &tenant, &store),
            Some((e.id.clone(), n))
        );
        // The whole id without its underscore too.
        let whole: String = id.chars().filter(char::is_ascii_alphanumeric).collect();
        assert_eq!(
            resolve_call_id(&whole, &tenant, &store),
            Some((e.id.clone(), n))
        );
    }
    let other = crate::tenant::Tenant::anonymous("t");
    let short: String = e
        .call_id(0)
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(9)
        .collect();
    assert_eq!(
        resolve_call_id(&short, &other, &store),
        None,
        "another tenant finds nothing"
    );
    assert_eq!(resolve_call_id("cm1234567", &tenant, &store), None);
    assert_eq!(resolve_call_id("call12345", &tenant, &store), None);
}

#[test]
fn execution_ids_are_unguessable_and_bound_to_their_tenant() {
    let a = crate::tenant::Tenant::anonymous("a");
    let b = crate::tenant::Tenant::anonymous("b");
    let mut seen = std::collections::HashSet::new();
    for _ in 0..10_000 {
        let id = mint_execution_id(&a);
        // 12 random letters and digits, then a 4-character tag.
        assert_eq!(id.len(), 16, "{id}");
        assert!(id.bytes().all(|c| c.is_ascii_alphanumeric()), "{id}");
        assert!(minted_for(&id, &a).is_some());
        assert_eq!(minted_for(&id, &b), None, "another tenant's id is unknown");
        assert!(seen.insert(id[..12].to_owned()), "a random part repeated");
    }
    let id = mint_execution_id(&a);
    let last = if id.ends_with('0') { '1' } else { '0' };
    let forged = format!("{}{last}", &id[..id.len() - 1]);
    assert_eq!(minted_for(&forged, &a), None);
    assert_eq!(minted_for(&format!("f{id}"), &a), None);
    assert_eq!(minted_for("18c0x1234", &a), None);
}

// The host's own checks, independent of the prelude.

fn host() -> sandbox::State {
    sandbox::State::new(&tools(), &[], &[], &limits())
}

#[test]
fn the_host_refuses_a_tool_outside_the_list_and_records_nothing() {
    let mut s = host();
    for name in ["bash", "", "READ", "read ", "__proto__"] {
        assert_eq!(
            s.call(name.into(), "{}".into()),
            sandbox::CallKind::Invalid,
            "{name}"
        );
    }
    assert!(s.pending().is_empty());
}

#[test]
fn the_host_refuses_arguments_that_are_not_a_json_object() {
    let mut s = host();
    for args in [
        "[1]",
        "\"x\"",
        "1",
        "null",
        "",
        "{",
        "{} {}",
        "{\"a\":1}x",
        "undefined",
    ] {
        assert_eq!(
            s.call("read".into(), args.into()),
            sandbox::CallKind::Invalid,
            "{args}"
        );
    }
    assert!(s.pending().is_empty());
    assert_eq!(
        s.call("read".into(), " {\"path\": \"a\"} ".into()),
        sandbox::CallKind::Pending
    );
    assert_eq!(s.pending().len(), 1);
}

#[test]
fn the_first_finish_wins() {
    let mut s = host();
    s.finish(false, "1".into(), String::new());
    s.finish(true, "Error: forged".into(), String::new());
    let end = s.finished().expect("finished");
    assert!(!end.failed);
    assert_eq!(end.text, "1");
}

#[test]
fn calls_after_a_return_still_go_and_after_a_throw_are_refused() {
    // A call started and not awaited still reaches the agent, as in a script.
    let mut s = host();
    s.finish(false, "1".into(), String::new());
    assert_eq!(
        s.call("read".into(), "{}".into()),
        sandbox::CallKind::Pending
    );
    assert_eq!(s.pending().len(), 1);
    let mut s = host();
    s.finish(true, "Error: boom".into(), String::new());
    assert_eq!(
        s.call("read".into(), "{}".into()),
        sandbox::CallKind::Refused
    );
    assert!(s.pending().is_empty());
}

#[test]
fn refusals_reach_the_program_as_type_errors() {
    let code = r#"const out = [];
        for (const args of [{toJSON() { return [1]; }}, {toJSON() { return "s"; }}, {toJSON() { return undefined; }}]) {
            try { await tools.read(args); out.push("sent"); } catch (e) { out.push(e.name); }
        }
        Array.prototype.includes = () => true;
        try { await tools.bash({}); out.push("sent"); } catch (e) { out.push(e.name); }
        return out;"#;
    let RunOutcome::Finished { value, .. } = run(code, &[]) else {
        panic!()
    };
    assert_eq!(
        value,
        r#"["TypeError","TypeError","TypeError","TypeError"]"#
    );
}

#[test]
fn no_host_function_is_left_where_a_program_can_reach_it() {
    let code = r#"const names = Object.getOwnPropertyNames(globalThis).filter(n => n.startsWith("__cm"));
        const g = Function("return this")();
        return [names.length, typeof g.__cm_call, typeof __cm_finish === "undefined"];"#;
    let RunOutcome::Finished { value, .. } = run(code, &[]) else {
        panic!()
    };
    assert_eq!(value, "[0,\"undefined\",true]");
}

#[test]
fn stack_frames_cannot_hand_out_the_host_functions() {
    let code = r#"Error.prepareStackTrace = (e, sites) => sites.map(s => s.getFunction());
        let thrown = null;
        try { console.log("\ud800 is well formed now"); } catch (e) { thrown = e; }
        const e = new Error("x");
        return [typeof Error.prepareStackTrace, typeof e.stack, thrown === null];"#;
    let RunOutcome::Finished { value, output } = run(code, &[]) else {
        panic!()
    };
    assert_eq!(value, r#"["undefined","string",true]"#);
    assert_eq!(output, "\u{fffd} is well formed now");
}

/// Keeps the calling thread on the first CPU it may use, so that the
/// threads of a test share one core however many the host has.
#[cfg(target_os = "linux")]
fn pin_to_one_cpu() {
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let allowed = sched_getaffinity(Pid::from_raw(0)).unwrap();
    let first = (0..CpuSet::count()).find(|&c| allowed.is_set(c).unwrap_or(false));
    let mut one = CpuSet::new();
    one.set(first.unwrap()).unwrap();
    sched_setaffinity(Pid::from_raw(0), &one).unwrap();
}

#[cfg(target_os = "linux")]
#[test]
fn the_slice_counts_cpu_time_not_time_spent_off_the_cpu() {
    use nix::time::{clock_gettime, ClockId};
    let cpu = || Duration::from(clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).unwrap());
    let code = "let x = 0; for (let i = 0; i < 1000000; i++) { x = (x + i) % 7919; } return x;";
    // What one program costs here, measured rather than assumed: a slow or
    // oversubscribed host (whose stolen time a VM may count as CPU time)
    // must not turn a finished program into a timeout.
    let alone = std::thread::spawn(move || {
        pin_to_one_cpu();
        let start = cpu();
        let generous = Limits {
            slice: Duration::from_secs(60),
            ..limits()
        };
        let outcome = sandbox::run(code, &tools(), &[], 1, 0, &generous);
        assert!(
            matches!(outcome, RunOutcome::Finished { .. }),
            "{outcome:?}"
        );
        cpu() - start
    })
    .join()
    .unwrap();
    // Twelve programs share one core, so each takes about twelve times its
    // CPU time in wall time: three times the slice. Counted in wall time,
    // every one would run out.
    let l = Limits {
        slice: alone * 4,
        ..limits()
    };
    let threads: Vec<_> = (0..12)
        .map(|_| {
            let l = l.clone();
            std::thread::spawn(move || {
                pin_to_one_cpu();
                sandbox::run(code, &tools(), &[], 1, 0, &l)
            })
        })
        .collect();
    for t in threads {
        let outcome = t.join().unwrap();
        assert!(
            matches!(outcome, RunOutcome::Finished { .. }),
            "{outcome:?} (one program alone used {alone:?} of CPU)"
        );
    }
}

#[test]
fn wall_ceiling_is_generous_and_never_wraps() {
    let l = Limits::default();
    assert!(l.wall_ceiling() >= l.slice * 10);
    let huge = Limits {
        slice: Duration::MAX,
        ..Limits::default()
    };
    assert_eq!(huge.wall_ceiling(), Duration::MAX);
}

#[test]
fn freeform_tools_take_one_string() {
    let tools = vec!["apply_patch".to_owned(), "read".to_owned()];
    let freeform = vec!["apply_patch".to_owned()];
    let run = |code: &str, replay: &[CallRecord]| {
        sandbox::run_with(code, &tools, &freeform, replay, 1, 0, &limits())
    };
    let RunOutcome::Blocked { calls, .. } = run(
        r#"return await tools.apply_patch("*** Begin Patch\n*** End Patch");"#,
        &[],
    ) else {
        panic!("the call goes out")
    };
    assert_eq!(calls[0].name, "apply_patch");
    assert_eq!(calls[0].args, r#""*** Begin Patch\n*** End Patch""#);
    let replay = [answered("apply_patch", &calls[0].args, "Done!")];
    let RunOutcome::Finished { value, .. } = run(
        r#"return await tools.apply_patch("*** Begin Patch\n*** End Patch");"#,
        &replay,
    ) else {
        panic!("the result resumes it")
    };
    assert_eq!(value, "\"Done!\"");
    let RunOutcome::Finished { value, .. } = run(
        "try { await tools.apply_patch({patch: 'x'}); } catch (e) { return e.name + ': ' + e.message; }",
        &[],
    ) else {
        panic!()
    };
    assert!(
        value.contains("TypeError") && value.contains("one string"),
        "{value}"
    );
    let RunOutcome::Finished { value, .. } = run(
        "try { await tools.read('a.txt'); } catch (e) { return e.name; }",
        &[],
    ) else {
        panic!()
    };
    assert_eq!(value, "\"TypeError\"", "other tools still take an object");
}

#[test]
fn describe_returns_a_tools_declaration_without_a_call() {
    use crate::sdk::{render_docs, ToolSchema};
    let schemas = vec![
        ToolSchema {
            name: "read".into(),
            description: Some("Read a file. Whole lines, numbered.".into()),
            parameters: serde_json::json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "Absolute path."}
            }}),
            freeform: false,
        },
        ToolSchema {
            name: "describe".into(),
            description: Some("The client's own describe.".into()),
            parameters: serde_json::json!({}),
            freeform: false,
        },
    ];
    let docs = std::sync::Arc::new(render_docs(&schemas));
    let run = |code: &str, tools: &[String]| {
        sandbox::run_described(code, tools, &[], docs.clone(), &[], 1, 0, &limits())
    };
    let tools = vec!["read".to_owned(), "write".to_owned()];
    let RunOutcome::Finished { value, .. } = run(
        r#"const d = tools.describe("read"); return (await d) + "|" + typeof tools.describe;"#,
        &tools,
    ) else {
        panic!("describe answers at once")
    };
    let value: String = serde_json::from_str(&value).unwrap();
    assert!(value.starts_with("/** Read a file. Whole lines, numbered. */\nread(args?: {\n  /** Absolute path. */\n  path?: string;\n}): Promise<string>;\n"), "{value}");
    assert!(value.ends_with("|function"), "{value}");
    // A tool of the execution the docs do not hold, and one it does not have.
    let RunOutcome::Finished { value, .. } = run(
        r#"let out = tools.describe("write"); try { tools.describe("rm"); } catch (e) { out += "|" + e.name + ": " + e.message; } return out;"#,
        &tools,
    ) else {
        panic!()
    };
    assert!(value.contains("tools.write: no documentation"), "{value}");
    assert!(
        value.contains(r#"TypeError: tools.describe: there is no tool named \"rm\"; the tools are: read, write"#),
        "{value}"
    );
    // A client tool called `describe` is called, not answered.
    let own = vec!["read".to_owned(), "describe".to_owned()];
    let RunOutcome::Blocked { calls, .. } = run(r#"return await tools.describe({q: 1});"#, &own)
    else {
        panic!("the client's describe is a tool call")
    };
    assert_eq!(calls[0].name, "describe");
}

#[test]
fn a_batch_is_keyed_by_its_calls_whatever_order_they_or_their_arguments_come_in() {
    let key = |calls: &[(&str, &str)]| batch_key(calls.iter().copied()).unwrap();
    let a = key(&[
        ("read", r#"{"path":"a","limit":5}"#),
        ("bash", r#"{"cmd":"ls"}"#),
    ]);
    assert!(a.starts_with("cb:") && a.len() == 35, "{a}");
    assert_eq!(
        a,
        key(&[
            ("read", r#"{ "limit": 5, "path": "a" }"#),
            ("bash", r#"{"cmd": "ls"}"#)
        ])
    );
    assert_eq!(
        a,
        key(&[
            ("bash", r#"{"cmd":"ls"}"#),
            ("read", r#"{"path":"a","limit":5}"#)
        ])
    );
    assert_ne!(
        a,
        key(&[
            ("read", r#"{"path":"a","limit":6}"#),
            ("bash", r#"{"cmd":"ls"}"#)
        ])
    );
    assert_ne!(key(&[("read", "{}")]), key(&[("reads", "{}")]));
    assert_eq!(batch_key(std::iter::empty()), None);
}

/// A store holding one program that handed out `batch` as its first batch.
fn handed(batch: &[(&str, &str)]) -> (MemoryExecutionStore, Execution) {
    let tenant = crate::tenant::Tenant::anonymous("s");
    let store =
        MemoryExecutionStore::new(Duration::from_secs(60), Duration::from_secs(60), 1 << 20);
    let mut e = Execution::new(tenant, "call_1".into(), "x".into(), None, tools());
    e.batches.push(0);
    e.calls = batch
        .iter()
        .map(|(name, args)| CallRecord {
            name: (*name).into(),
            args: (*args).into(),
            result: None,
        })
        .collect();
    ExecutionLookup::put(&store, std::sync::Arc::new(e.clone()));
    (store, e)
}

fn echoed<'a>(calls: &[(&'a str, &'a str, &'a str)]) -> Vec<EchoedCall<'a>> {
    calls
        .iter()
        .map(|&(id, name, args)| EchoedCall {
            id: (!id.is_empty()).then_some(id),
            name,
            args: args.into(),
        })
        .collect()
}

fn results<'a>(results: &[(&'a str, &'a str)]) -> Vec<EchoedResult<'a>> {
    results
        .iter()
        .map(|&(id, content)| EchoedResult {
            id: (!id.is_empty()).then_some(id),
            content,
        })
        .collect()
}

#[test]
fn a_batch_sent_back_with_other_ids_in_another_order_is_paired_by_the_clients_ids() {
    let (store, e) = handed(&[("read", r#"{"path":"a"}"#), ("list", r#"{"dir":"b"}"#)]);
    let calls = echoed(&[
        ("call_x", "list", r#"{ "dir": "b" }"#),
        ("call_y", "read", r#"{"path":"a"}"#),
    ]);
    let found = echoed_batch(
        &store,
        &e.tenant,
        &calls,
        &results(&[("call_y", "A"), ("call_x", "B"), ("call_z", "C")]),
    );
    assert_eq!(
        found,
        Ok(Some(batch::Echo {
            calls: vec![e.call_id(1), e.call_id(0)],
            results: vec![Some(e.call_id(0)), Some(e.call_id(1)), None],
        }))
    );
    // Calls without ids are answered in order by results without ids.
    let calls = echoed(&[
        ("", "read", r#"{"path":"a"}"#),
        ("", "list", r#"{"dir":"b"}"#),
    ]);
    let found = echoed_batch(&store, &e.tenant, &calls, &results(&[("", "A"), ("", "B")]));
    assert_eq!(
        found.unwrap().unwrap().results,
        vec![Some(e.call_id(0)), Some(e.call_id(1))]
    );
    // Another tenant, other arguments, the model's own call: no batch.
    let other = crate::tenant::Tenant::anonymous("t");
    let calls = echoed(&[
        ("call_y", "read", r#"{"path":"a"}"#),
        ("call_x", "list", r#"{"dir":"b"}"#),
    ]);
    assert_eq!(echoed_batch(&store, &other, &calls, &[]), Ok(None));
    let calls = echoed(&[
        ("call_y", "read", r#"{"path":"c"}"#),
        ("call_x", "list", r#"{"dir":"b"}"#),
    ]);
    assert_eq!(echoed_batch(&store, &e.tenant, &calls, &[]), Ok(None));
    let calls = echoed(&[("call_y", crate::mode::RUN_CODE, r#"{"code":"1"}"#)]);
    assert_eq!(echoed_batch(&store, &e.tenant, &calls, &[]), Ok(None));
}

#[test]
fn identical_calls_sent_back_reordered_with_differing_results_are_refused() {
    let batch = [
        ("read", r#"{"path":"a"}"#),
        ("read", r#"{"path":"a"}"#),
        ("list", "{}"),
    ];
    let (store, e) = handed(&batch);
    // In the order handed out: each is where it stands.
    let in_order = echoed(&[
        ("call_1", "read", r#"{"path":"a"}"#),
        ("call_2", "read", r#"{"path":"a"}"#),
        ("call_3", "list", "{}"),
    ]);
    let r = results(&[("call_2", "two"), ("call_1", "one"), ("call_3", "three")]);
    let found = echoed_batch(&store, &e.tenant, &in_order, &r)
        .unwrap()
        .unwrap();
    assert_eq!(
        found.results,
        vec![Some(e.call_id(1)), Some(e.call_id(0)), Some(e.call_id(2))]
    );
    // Reordered: the two reads cannot be told apart.
    let reordered = echoed(&[
        ("call_3", "list", "{}"),
        ("call_1", "read", r#"{"path":"a"}"#),
        ("call_2", "read", r#"{"path":"a"}"#),
    ]);
    let err = echoed_batch(&store, &e.tenant, &reordered, &r).unwrap_err();
    assert!(
        err.contains("two `read` calls") && err.contains(&e.call_id(0)),
        "{err}"
    );
    // Unless their results agree.
    let same = results(&[("call_2", "one"), ("call_1", "one"), ("call_3", "three")]);
    assert!(echoed_batch(&store, &e.tenant, &reordered, &same).is_ok());
}

#[test]
fn each_call_of_a_handed_out_batch_is_noted_by_its_name_and_arguments_and_no_other() {
    let (store, e) = handed(&[
        ("read", r#"{"path":"a","limit":5}"#),
        ("bash", r#"{"cmd":"ls"}"#),
    ]);
    let noted = |tenant: &crate::tenant::Tenant, name: &str, args: &str| {
        handed_out(&store, tenant, name, args)
    };
    assert!(noted(&e.tenant, "read", r#"{ "limit": 5, "path": "a" }"#));
    assert!(noted(&e.tenant, "bash", r#"{"cmd":"ls"}"#));
    assert!(!noted(&e.tenant, "bash", r#"{"cmd":"pwd"}"#));
    assert!(!noted(&e.tenant, "grep", r#"{"cmd":"ls"}"#));
    let other = crate::tenant::Tenant::anonymous("t");
    assert!(!noted(&other, "bash", r#"{"cmd":"ls"}"#));
}
