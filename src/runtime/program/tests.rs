use std::sync::Arc;

use super::*;
use crate::runtime::sandbox::{self, CallRecord, RunOutcome};
use crate::runtime::Limits;
use crate::sdk::{render_docs, ToolSchema};

fn tools() -> Vec<String> {
    vec!["read".to_owned(), "write".to_owned(), "bash".to_owned()]
}

fn text(code: &str) -> String {
    prepare(code, &tools()).expect("prepares").text
}

fn refusal(code: &str) -> String {
    prepare(code, &tools()).expect_err("refused")
}

/// Runs `code` to its end, every call answered `ok:<name>`: the value or
/// the error, and the calls.
fn run(code: &str) -> (Result<String, String>, Vec<CallRecord>) {
    let schema = |name: &str, properties: serde_json::Value, required: &[&str]| ToolSchema {
        name: name.to_owned(),
        description: None,
        parameters: serde_json::json!({"type": "object", "properties": properties, "required": required}),
        freeform: false,
    };
    let s = serde_json::json!({"type": "string"});
    let docs = Arc::new(render_docs(&[
        schema("read", serde_json::json!({"path": s}), &["path"]),
        schema(
            "write",
            serde_json::json!({"path": s, "content": s}),
            &["path", "content"],
        ),
        schema("bash", serde_json::json!({"command": s}), &[]),
    ]));
    let mut replay = Vec::new();
    loop {
        let outcome = sandbox::run_described(
            code,
            &tools(),
            &[],
            docs.clone(),
            &replay,
            1,
            0,
            &Limits::default(),
        );
        match outcome {
            RunOutcome::Finished { value, .. } => return (Ok(value), replay),
            RunOutcome::Failed { error, .. } => return (Err(error), replay),
            RunOutcome::Blocked { calls, .. } => {
                assert!(replay.len() < 50, "the program never ends");
                for mut call in calls {
                    call.result = Some(format!("ok:{}", call.name));
                    replay.push(call);
                }
            }
        }
    }
}

#[test]
fn types_are_blanked_where_they_stand() {
    let code = "const t: string = await tools.read({ path: \"a\" }) as string;\nreturn t!;";
    let out = text(code);
    assert_eq!(out.len(), code.len());
    assert_eq!(
        out,
        "const t         = await tools.read({ path: \"a\" })          ;\nreturn t ;"
    );
}

#[test]
fn typescript_as_models_write_it_runs() {
    let code = r#"
interface File { path: string; size?: number }
type Paths = Array<string>;
import type { Foo } from "./foo";
declare const seen: Set<string>;
function first<T>(xs: T[]): T | undefined { return xs[0]; }
function over(a: string): string;
function over(a: number): number;
function over(a: any): any { return a; }
const pick = <T,>(x: T): T => x;
abstract class Base { abstract name(): string; protected n: number = 1; }
class Reader extends Base implements File {
  public path: string;
  private readonly cache!: Map<string, string>;
  declare extra: string;
  static count?: number;
  constructor(path: string) { super(); this.path = path; }
  name(this: Reader): string { return this.path; }
}
function opt(a?: number, b: string = "x"): string { return `${a ?? 0}${b}`; }
let later!: number;
later = 2;
const conf = { retries: 3 } satisfies Record<string, number>;
const text = <string>(await tools.read({ path: first<string>(["a.txt"])! }));
const r = new Reader("p");
export function shout(s: string): string { return s.toUpperCase(); }
return [text, r.name(), pick<number>(later), opt(), conf.retries, over("o") as const, shout("x")];
"#;
    let (value, calls) = run(code);
    assert_eq!(value.unwrap(), r#"["ok:read","p",2,"0x",3,"o","X"]"#);
    assert_eq!(calls[0].args, r#"{"path":"a.txt"}"#);
}

#[test]
fn a_blanked_statement_never_joins_its_neighbours() {
    // Without the `;` left where the type was, `1\n(async ...)()` would call 1.
    let code = "let x = 1\ntype A = string\n(async () => { x = 2 })()\nreturn x";
    assert_eq!(run(code).0.unwrap(), "2");
}

#[test]
fn constructs_that_need_a_transform_are_refused_with_the_fix() {
    let e = refusal("enum Color { Red, Green }\nreturn Color.Red;");
    assert!(e.starts_with("SyntaxError: TypeScript enums"), "{e}");
    assert!(e.contains("`const Color = {"), "{e}");
    assert!(
        e.ends_with("(line 1, column 1: `enum Color { Red, Green }`)"),
        "{e}"
    );
    let e = refusal("namespace N { export const a = 1; }");
    assert!(e.contains("namespaces"), "{e}");
    let e = refusal("class A {\n  @log m() {}\n}");
    assert!(
        e.contains("decorators") && e.contains("line 2, column 3"),
        "{e}"
    );
    let e = refusal("class P { constructor(private x: number) {} }");
    assert!(e.contains("parameter properties"), "{e}");
    // A declared enum is a type only: blanked.
    assert_eq!(
        text("declare enum E { A }\nreturn 1;"),
        format!(";{}\nreturn 1;", " ".repeat(19))
    );
}

#[test]
fn modules_and_host_apis_are_refused_before_anything_runs() {
    for (code, what) in [
        (
            "import fs from \"fs\";\nreturn 1;",
            "cannot import modules (`fs`)",
        ),
        ("const m = await import(\"os\");", "cannot import modules"),
        ("const fs = require(\"fs\");", "`require` is not available"),
        (
            "await tools.read({path: \"a\"});\nconst r = await fetch(\"https://x\");",
            "`fetch` is not available",
        ),
        ("return process.env.HOME;", "`process` is not available"),
    ] {
        let e = refusal(code);
        assert!(e.contains(what), "{code}: {e}");
        assert!(
            e.contains("only through tools") && e.contains("the tools are: read, write, bash"),
            "{e}"
        );
    }
    // The program's own `fetch`, and a `typeof` probe, are the program's.
    assert_eq!(
        run("const fetch = (p) => tools.read({ path: p });\nreturn await fetch(\"a\");")
            .0
            .unwrap(),
        "\"ok:read\""
    );
    assert_eq!(
        run("return typeof process === \"undefined\" ? 1 : 2;")
            .0
            .unwrap(),
        "1"
    );
}

#[test]
fn fences_go_and_lines_keep_their_numbers() {
    let code = "```ts\nconst a: number = 1;\nnull.x;\n```";
    let (Err(e), _) = run(code) else { panic!() };
    assert!(
        e.starts_with("TypeError: cannot read property 'x' of null"),
        "{e}"
    );
    assert!(e.ends_with("(line 3, column 1: `null.x;`)"), "{e}");
    assert_eq!(run("```javascript\nreturn 1\n```\n").0.unwrap(), "1");
    assert_eq!(run("```\n1 + 1\n```").0.unwrap(), "2");
}

#[test]
fn script_shaped_programs_run_to_their_end() {
    // `main()` not awaited: its calls still go, and its value is the result.
    let (value, calls) = run(
        "async function main() {\n  const a = await tools.read({ path: \"a\" });\n  await tools.write({ path: \"b\", content: a });\n  return a.length;\n}\nmain();",
    );
    assert_eq!(value.unwrap(), "7");
    assert_eq!(calls.len(), 2);
    let (value, calls) =
        run("(async () => {\n  await tools.bash({ command: \"ls\" });\n  return \"done\";\n})()");
    assert_eq!(value.unwrap(), "\"done\"");
    assert_eq!(calls.len(), 1);
    // A final expression is the result; a call started and never awaited
    // still reaches the agent.
    let (value, calls) =
        run("tools.write({ path: \"log\", content: \"x\" });\nconst t = \"abc\";\nt.length");
    assert_eq!(value.unwrap(), "3");
    assert_eq!(calls.len(), 1);
    // A declared main that nothing calls runs nothing, as in Node.
    let (value, calls) = run("async function main() { await tools.read({ path: \"a\" }); }");
    assert_eq!(value.unwrap(), "");
    assert!(calls.is_empty());
}

#[test]
fn an_error_on_the_final_line_points_at_the_models_column() {
    let (Err(e), _) = run("const o = null;\n  o.f") else {
        panic!()
    };
    assert!(e.ends_with("(line 2, column 3: `o.f`)"), "{e}");
}

#[test]
fn syntax_errors_name_their_line() {
    let e = refusal("const a = 1;\nconst b = ;\n");
    assert!(e.starts_with("SyntaxError: "), "{e}");
    assert!(e.ends_with("(line 2, column 11: `const b = ;`)"), "{e}");
}

#[test]
fn other_languages_are_named() {
    let e = refusal("import os\ndef main():\n    print(open('a.txt').read())\n");
    assert!(
        e.contains("looks like Python, but run_code runs JavaScript or TypeScript"),
        "{e}"
    );
    let e = refusal("ls -la src/ | head");
    assert!(
        e.contains("looks like a shell command") && e.contains("tools.bash"),
        "{e}"
    );
    // Python that parses as JavaScript fails at its first Python name.
    let (Err(e), _) = run("content = await tools.read({ path: \"a\" })\nprint(content)") else {
        panic!()
    };
    assert!(
        e.contains("run_code runs JavaScript or TypeScript, not Python"),
        "{e}"
    );
    assert!(e.contains("line 2"), "{e}");
    // A tool called without `tools.`.
    let (Err(e), _) = run("const t = await read({ path: \"a\" });") else {
        panic!()
    };
    assert!(e.contains("as `await tools.read({ ... })`"), "{e}");
}

#[test]
fn a_positional_argument_is_the_tools_one_parameter() {
    let (value, calls) = run("return await tools.read(\"a.txt\");");
    assert_eq!(value.unwrap(), "\"ok:read\"");
    assert_eq!(calls[0].args, r#"{"path":"a.txt"}"#);
    let (Err(e), _) = run("await tools.write(\"a.txt\", \"x\");") else {
        panic!()
    };
    assert!(e.contains("tools.write: takes one argument, an object of named arguments: tools.write({ path, content })"), "{e}");
    let (Err(e), _) = run("await tools.write(\"a.txt\");") else {
        panic!()
    };
    assert!(
        e.contains("not string: tools.write({ path, content })"),
        "{e}"
    );
}
