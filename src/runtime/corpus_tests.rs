//! The corpus of programs as models write them (tests/programs/corpus.toml,
//! its README says where each shape was seen): each runs through the
//! sandbox as the embedded runtime runs it, its calls answered by a fixed
//! world and the program resumed until it ends. A program with a sound
//! reading must give the result its author meant and make the calls it
//! meant; any other must fail with an error naming the fix.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};

use super::sandbox::{self, CallRecord, RunOutcome};
use super::Limits;
use crate::sdk::{render_docs, ToolDocs, ToolSchema};

#[derive(Deserialize)]
struct Corpus {
    program: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    shape: String,
    #[allow(dead_code)]
    from: String,
    code: String,
    /// The result as JSON text; empty for `undefined`.
    result: Option<String>,
    /// The tools called, in the order the calls started.
    calls: Option<Vec<String>>,
    /// Text the error must hold, each piece.
    error: Option<Vec<String>>,
}

/// The tools every program of the corpus is shown (as the README says).
fn schemas() -> Vec<ToolSchema> {
    let tool = |name: &str, properties: Value, required: &[&str]| ToolSchema {
        name: name.to_owned(),
        description: None,
        parameters: json!({"type": "object", "properties": properties, "required": required}),
        freeform: false,
    };
    let s = json!({"type": "string"});
    let n = json!({"type": "number"});
    vec![
        tool(
            "read",
            json!({"path": s, "offset": n, "limit": n}),
            &["path"],
        ),
        tool(
            "write",
            json!({"path": s, "content": s}),
            &["path", "content"],
        ),
        tool(
            "edit",
            json!({"path": s, "old_string": s, "new_string": s}),
            &["path", "old_string", "new_string"],
        ),
        tool("bash", json!({"command": s, "timeout": n}), &["command"]),
        tool("grep", json!({"pattern": s, "path": s}), &["pattern"]),
        tool("glob", json!({"pattern": s}), &["pattern"]),
    ]
}

/// The fixed world's answer to one call.
fn answer(name: &str, args: &str) -> String {
    let args: HashMap<String, Value> = serde_json::from_str(args).unwrap_or_default();
    let text = |key: &str| {
        args.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    match name {
        "read" => match text("path").as_str() {
            "a.txt" => "hello".to_owned(),
            "README.md" => "# Demo\nA small project.\n".to_owned(),
            "package.json" => {
                r#"{"name":"demo","version":"1.2.3","scripts":{"test":"jest"}}"#.to_owned()
            }
            "src/index.ts" => "export const x = 1;\n".to_owned(),
            other => format!("Error: no such file: {other}"),
        },
        "write" => format!("wrote {} bytes to {}", text("content").len(), text("path")),
        "edit" => format!("edited {}", text("path")),
        "bash" => {
            let command = text("command");
            match command.as_str() {
                "ls" => "README.md\na.txt\npackage.json\nsrc\n".to_owned(),
                "pwd" => "/work/demo\n".to_owned(),
                "git status" => {
                    "On branch main\nnothing to commit, working tree clean\n".to_owned()
                }
                c => match c.strip_prefix("echo ") {
                    Some(x) => format!("{x}\n"),
                    None => "ok\n".to_owned(),
                },
            }
        }
        "grep" => "a.txt:1:hello\n".to_owned(),
        "glob" => "README.md\na.txt\npackage.json\nsrc/index.ts\n".to_owned(),
        other => panic!("the sandbox let a call to `{other}` through"),
    }
}

/// Runs `code` to its end: its value or its error, and the tools it called.
fn run_to_end(code: &str, docs: &Arc<ToolDocs>) -> (Result<String, String>, Vec<String>) {
    let tools: Vec<String> = schemas().into_iter().map(|t| t.name).collect();
    let limits = Limits {
        memory_bytes: 32 << 20,
        ..Limits::default()
    };
    let mut replay: Vec<CallRecord> = Vec::new();
    for _ in 0..64 {
        let outcome =
            sandbox::run_described(code, &tools, &[], docs.clone(), &replay, 1, 0, &limits);
        match outcome {
            RunOutcome::Finished { value, .. } => {
                return (Ok(value), replay.into_iter().map(|c| c.name).collect())
            }
            RunOutcome::Failed { error, .. } => {
                return (Err(error), replay.into_iter().map(|c| c.name).collect())
            }
            RunOutcome::Blocked { calls, .. } => {
                for mut call in calls {
                    call.result = Some(answer(&call.name, &call.args));
                    replay.push(call);
                }
            }
        }
    }
    panic!("the program never ended: {code}")
}

/// What went wrong with one entry, or nothing.
fn judge(entry: &Entry, docs: &Arc<ToolDocs>) -> Option<String> {
    let (outcome, calls) = run_to_end(&entry.code, docs);
    match (&entry.result, &entry.error, outcome) {
        (Some(want), None, Ok(got)) => {
            let parse = |t: &str| (!t.is_empty()).then(|| serde_json::from_str::<Value>(t));
            let (want_v, got_v) = (parse(want), parse(&got));
            let same = match (want_v, got_v) {
                (None, None) => true,
                (Some(Ok(a)), Some(Ok(b))) => a == b,
                _ => false,
            };
            if !same {
                return Some(format!("gave {got:?}, meant {want:?}"));
            }
            match &entry.calls {
                Some(want) if *want != calls => Some(format!("called {calls:?}, meant {want:?}")),
                _ => None,
            }
        }
        (Some(want), None, Err(error)) => Some(format!("failed ({error}), meant {want:?}")),
        (None, Some(pieces), Err(error)) => {
            let missing: Vec<&String> = pieces.iter().filter(|p| !error.contains(*p)).collect();
            (!missing.is_empty()).then(|| format!("error {error:?} lacks {missing:?}"))
        }
        (None, Some(_), Ok(got)) => Some(format!("gave {got:?}, meant to fail")),
        _ => Some("the entry needs `result` or `error`, one of them".to_owned()),
    }
}

#[test]
fn every_program_runs_as_meant_or_names_the_fix() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/programs/corpus.toml");
    let text = std::fs::read_to_string(path).expect("the corpus is in the repository");
    let corpus: Corpus = toml::from_str(&text).expect("the corpus parses");
    let docs = Arc::new(render_docs(&schemas()));
    let mut failures = Vec::new();
    let (mut sound, mut ran, mut unsound, mut named) = (0, 0, 0, 0);
    for entry in &corpus.program {
        let wrong = judge(entry, &docs);
        if entry.result.is_some() {
            sound += 1;
            ran += usize::from(wrong.is_none());
        } else {
            unsound += 1;
            named += usize::from(wrong.is_none());
        }
        if let Some(wrong) = wrong {
            failures.push(format!("{} ({}): {wrong}", entry.name, entry.shape));
        }
    }
    // BENCHMARKS.md reports these (`cargo test --lib corpus -- --nocapture`).
    println!(
        "corpus: {ran} of {sound} programs with a sound reading ran as meant; {named} of {unsound} others named the fix"
    );
    assert!(
        failures.is_empty(),
        "{} of {} programs did not run as meant:\n{}",
        failures.len(),
        corpus.program.len(),
        failures.join("\n")
    );
}
