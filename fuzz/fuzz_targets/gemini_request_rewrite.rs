//! The Gemini request rewrite on any body: `GeminiRequest::parse` (on
//! `:generateContent`, `:streamGenerateContent` or `:countTokens`), the
//! tool plan (`ToolPlan::build_for(&codemode_proxy::internals::gemini::TOOLS, ...)`)
//! and `rewrite`, in every mode and runtime, under a preset that hides
//! `run_shell_command`.
//!
//! Invariant (design.md sections 5, 9 and 11): when the rewrite succeeds,
//! the output is a JSON object with no duplicate top-level key (a
//! `countTokens` body that wraps a request: nor inside the wrapper, where
//! the rest is read); in `code` mode the function declarations on the wire
//! (every `tools[].functionDeclarations[].name`, `function_declarations`
//! too) are `run_code` alone and
//! `toolConfig.functionCallingConfig.allowedFunctionNames` names nothing
//! but `run_code`; in `native`/`both` the hidden `run_shell_command` is
//! neither declared on the wire nor named in `allowedFunctionNames` (under
//! the allow-list preset, no function outside the list is). The REST API
//! takes every field name in camelCase and in snake_case, so each is read
//! in both spellings, and every spelling present is checked.
//!
//! Input: the first byte picks mode, runtime, preset, shape and method.
//! Shape 0 uses the rest as the whole body; shape 1 splits it on 0xFF into
//! `toolConfig` and extra top-level text, placed in a body that declares a
//! fixed gemini-cli-like tool set (function declarations in both
//! spellings, Google Search and code execution); on `countTokens` that
//! request is wrapped in `generateContentRequest`.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use codemode_proxy::internals::gemini::request::GeminiRequest;
use codemode_proxy::internals::mode::{Mode, Runtime, RUN_CODE};
use codemode_proxy::internals::plan::ToolPlan;
use codemode_proxy::internals::preset::{Catalog, ConfigFile, Preset, PresetSpec};
use codemode_proxy::internals::splice::{MemorySpliceStore, TenantSplices};
use codemode_proxy::internals::tenant::Tenant;
use codemode_proxy::internals::wire::RawObject;
use serde_json::Value;

const HIDDEN: &str = "run_shell_command";

/// The names the allow-list preset lets through.
const ALLOWED: [&str; 3] = ["read_file", "write_file", RUN_CODE];

/// The paths a body is sent to, by method.
const PATHS: [&str; 3] = [
    "/v1beta/models/gemini-2.5-pro:generateContent",
    "/v1beta/models/gemini-2.5-pro:streamGenerateContent",
    "/v1beta/models/gemini-2.5-pro:countTokens",
];

const TOOLS: &str = r#"[{"functionDeclarations":[{"name":"read_file","description":"Reads a file.","parametersJsonSchema":{"type":"object","properties":{"absolute_path":{"type":"string"}},"required":["absolute_path"]}},{"name":"run_shell_command","description":"Runs a shell command.","parametersJsonSchema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}},{"name":"write_file","description":"Writes a file.","parameters":{"type":"OBJECT","properties":{"file_path":{"type":"STRING"},"content":{"type":"STRING"}}}},{"name":"run_code","description":"Run a JavaScript program.","parametersJsonSchema":{"type":"object","properties":{"code":{"type":"string"}}}}]},{"function_declarations":[{"name":"mcp_github_create_issue","parameters":{"type":"OBJECT"}}],"google_search":{}},{"codeExecution":{}}]"#;

/// The spellings of each field the checks read.
const TOOL_CONFIG: [&str; 2] = ["toolConfig", "tool_config"];
const CALLING_CONFIG: [&str; 2] = ["functionCallingConfig", "function_calling_config"];
const ALLOWED_NAMES: [&str; 2] = ["allowedFunctionNames", "allowed_function_names"];
const DECLARATIONS: [&str; 2] = ["functionDeclarations", "function_declarations"];
const WRAPPER: [&str; 2] = ["generateContentRequest", "generate_content_request"];

struct Fixture {
    /// Hides `run_shell_command` by a deny list, and by an allow list.
    presets: [Arc<Preset>; 2],
    splices: TenantSplices,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let file = ConfigFile {
            presets: vec![
                PresetSpec {
                    name: "deny".into(),
                    deny: Some(vec![HIDDEN.into()]),
                    ..PresetSpec::default()
                },
                PresetSpec {
                    name: "allow".into(),
                    allow: Some(vec!["read_file".into(), "write_file".into()]),
                    ..PresetSpec::default()
                },
            ],
            ..ConfigFile::default()
        };
        let catalog = Catalog::build(Mode::Native, file).expect("valid presets");
        Fixture {
            presets: [
                catalog.get("deny").expect("deny").clone(),
                catalog.get("allow").expect("allow").clone(),
            ],
            splices: TenantSplices::new(
                Arc::new(MemorySpliceStore::new(Duration::from_secs(60), 1 << 20)),
                Tenant::anonymous("default"),
            ),
        }
    })
}

fn body(shape: u8, count_tokens: bool, data: &[u8]) -> Vec<u8> {
    if shape == 0 {
        return data.to_vec();
    }
    let mut parts = data.splitn(2, |b| *b == 0xff);
    let mut out = Vec::new();
    if count_tokens {
        out.extend_from_slice(br#"{"generateContentRequest":{"model":"models/gemini-2.5-pro","#);
    } else {
        out.push(b'{');
    }
    out.extend_from_slice(
        br#""contents":[{"role":"user","parts":[{"text":"hi"}]}],"systemInstruction":{"parts":[{"text":"You are gemini-cli."}]},"tools":"#,
    );
    out.extend_from_slice(TOOLS.as_bytes());
    match parts.next() {
        Some(p) if !p.is_empty() => {
            out.extend_from_slice(br#","toolConfig":"#);
            out.extend_from_slice(p);
        }
        _ => {}
    }
    if let Some(extra) = parts.next() {
        out.extend_from_slice(extra);
    }
    out.push(b'}');
    if count_tokens {
        out.push(b'}');
    }
    out
}

/// Reads an object with one reading (no key twice).
fn one_reading(bytes: &[u8], what: &str) -> RawObject {
    RawObject::parse(bytes).unwrap_or_else(|e| panic!("{what} has no single reading: {e}"))
}

/// The value of `key`, as JSON (`Null` when absent).
fn read(object: &RawObject, key: &str) -> Value {
    object.get(key).map_or(Value::Null, |raw| {
        serde_json::from_str(raw.get())
            .unwrap_or_else(|e| panic!("the rewritten `{key}` is not JSON: {e}"))
    })
}

/// Every `keys` spelling `value` (an object) holds.
fn each<'a>(value: &'a Value, keys: [&'static str; 2]) -> impl Iterator<Item = &'a Value> {
    keys.into_iter().filter_map(move |k| value.get(k))
}

/// The function declarations a request's wire announces, and the names
/// its `allowedFunctionNames` lists, in every spelling.
fn names_on_wire(request: &RawObject) -> (Vec<String>, Vec<String>) {
    let mut declared = Vec::new();
    for tool in read(request, "tools").as_array().into_iter().flatten() {
        for decls in each(tool, DECLARATIONS) {
            for decl in decls.as_array().into_iter().flatten() {
                let name = decl.get("name").and_then(Value::as_str).unwrap_or("");
                declared.push(name.to_owned());
            }
        }
    }
    let mut allowed = Vec::new();
    for key in TOOL_CONFIG {
        let config = read(request, key);
        for calling in each(&config, CALLING_CONFIG) {
            for names in each(calling, ALLOWED_NAMES) {
                let names = names.as_array().into_iter().flatten();
                allowed.extend(names.filter_map(Value::as_str).map(str::to_owned));
            }
        }
    }
    (declared, allowed)
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let mode = [Mode::Native, Mode::Code, Mode::Both][usize::from(selector % 3)];
    let runtime = [Runtime::Client, Runtime::Embedded][usize::from(selector / 3 % 2)];
    let f = fixture();
    let allow_list = selector / 6 % 2 == 1;
    let preset = &f.presets[usize::from(allow_list)];
    let method = usize::from(selector / 24 % 3);
    let count_tokens = method == 2;
    let body = body(selector / 12 % 2, count_tokens, rest);

    let Ok(mut request) = GeminiRequest::parse(&body, PATHS[method]) else {
        return;
    };
    let Ok(plan) = ToolPlan::build_for(
        &codemode_proxy::internals::gemini::TOOLS,
        request.field("tools"),
        preset,
        mode,
        runtime,
    ) else {
        return;
    };
    if request.rewrite(&plan, &f.splices).is_err() {
        return;
    }
    let out = request.to_bytes();

    // Bodies pass as the client's bytes and may hold what serde_json
    // cannot build a Value of (a number like 1e999): valid JSON all the
    // same. The keys that name tools are read one by one.
    let top = one_reading(&out, "the rewritten body");
    // A `countTokens` body counts the request it wraps (in either
    // spelling); one that wraps none is the request itself.
    let mut requests = Vec::new();
    if count_tokens {
        for key in WRAPPER {
            if let Some(inner) = top.get(key).filter(|r| r.get() != "null") {
                let what = format!("the rewritten `{key}`");
                requests.push(one_reading(inner.get().as_bytes(), &what));
            }
        }
    }
    if requests.is_empty() {
        requests.push(top);
    }
    for request in &requests {
        let (declared, allowed) = names_on_wire(request);
        match mode {
            Mode::Code => {
                assert!(
                    declared.iter().all(|n| n == RUN_CODE),
                    "code mode: `tools` declares {declared:?}"
                );
                assert!(
                    allowed.iter().all(|n| n == RUN_CODE),
                    "code mode: `allowedFunctionNames` names {allowed:?}"
                );
            }
            Mode::Native | Mode::Both => {
                let names: Vec<&str> = declared
                    .iter()
                    .chain(&allowed)
                    .map(String::as_str)
                    .collect();
                assert!(
                    !names.contains(&HIDDEN),
                    "{mode:?}: the hidden tool reached the wire: {names:?}"
                );
                // Under an allow list every other function is hidden too.
                assert!(
                    !allow_list || names.iter().all(|n| ALLOWED.contains(n)),
                    "{mode:?}: a tool outside the allow list reached the wire: {names:?}"
                );
            }
        }
    }
});
