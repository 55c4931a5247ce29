//! The request rewrite on any body: `ChatRequest::parse`, the tool plan and
//! `rewrite`, in every mode and runtime, under a preset that hides `bash`.
//!
//! Invariant (design.md sections 5 and 9): when the rewrite succeeds, the
//! output is JSON with no duplicate top-level key; in `code` mode `tools`,
//! `tool_choice` and `function_call` name nothing but `run_code` and
//! `functions` is absent or null; in `native`/`both` the hidden `bash`
//! appears in none of `tools`, `functions`, `tool_choice`, `function_call`
//! (under the allow-list preset, nothing outside the list does).
//!
//! Input: the first byte picks mode, runtime, preset and shape. Shape 0 uses
//! the rest as the whole body; shape 1 splits it on 0xFF into `tool_choice`,
//! `functions`, `function_call` and extra top-level text, placed in a body
//! that declares the fixed tool set (read, write, bash, run_code).
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use codemode_proxy::internals::mode::{Mode, Runtime, RUN_CODE};
use codemode_proxy::internals::plan::ToolPlan;
use codemode_proxy::internals::preset::{Catalog, ConfigFile, Preset, PresetSpec};
use codemode_proxy::internals::rewrite::ChatRequest;
use codemode_proxy::internals::splice::{MemorySpliceStore, TenantSplices};
use codemode_proxy::internals::tenant::Tenant;
use codemode_proxy::internals::wire::RawObject;
use serde_json::Value;

const HIDDEN: &str = "bash";

const TOOLS: &str = r#"[{"type":"function","function":{"name":"read","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}},{"type":"function","function":{"name":"write"}},{"type":"function","function":{"name":"bash","description":"Run a shell command."}},{"type":"function","function":{"name":"run_code","parameters":{"type":"object","properties":{"code":{"type":"string"}}}}}]"#;

struct Fixture {
    /// Hides `bash` by a deny list, and by an allow list.
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
                    allow: Some(vec!["read".into(), "write".into()]),
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

fn body(shape: u8, data: &[u8]) -> Vec<u8> {
    if shape == 0 {
        return data.to_vec();
    }
    let mut parts = data.splitn(4, |b| *b == 0xff);
    let mut out = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":"#.to_vec();
    out.extend_from_slice(TOOLS.as_bytes());
    for key in ["tool_choice", "functions", "function_call"] {
        match parts.next() {
            Some(p) if !p.is_empty() => {
                out.extend_from_slice(format!(r#","{key}":"#).as_bytes());
                out.extend_from_slice(p);
            }
            _ => {}
        }
    }
    if let Some(extra) = parts.next() {
        out.extend_from_slice(extra);
    }
    out.push(b'}');
    out
}

/// The names a tool entry gives itself, however it spells them.
fn tool_names(tool: &Value) -> Vec<&str> {
    let mut names = Vec::new();
    for nested in ["function", "custom"] {
        if let Some(n) = tool.get(nested).and_then(|f| f.get("name")).and_then(Value::as_str) {
            names.push(n);
        }
    }
    if let Some(n) = tool.get("name").and_then(Value::as_str) {
        names.push(n);
    }
    names
}

/// Every string under a `name` key, at any depth.
fn all_names<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                match x {
                    Value::String(s) if k == "name" => out.push(s),
                    _ => all_names(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| all_names(x, out)),
        _ => {}
    }
}

/// The names `key` of `request` points the model at.
fn named_by(request: &Value, key: &str) -> Vec<String> {
    let Some(v) = request.get(key) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    match key {
        "tools" | "functions" => {
            for t in v.as_array().into_iter().flatten() {
                names.extend(tool_names(t));
            }
        }
        _ => all_names(v, &mut names),
    }
    names.into_iter().map(str::to_owned).collect()
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
    let body = body(selector / 12 % 2, rest);

    let Ok(mut chat) = ChatRequest::parse(&body) else {
        return;
    };
    let Ok(plan) = ToolPlan::build(chat.field("tools"), preset, mode, runtime) else {
        return;
    };
    if chat.rewrite(&plan, &f.splices).is_err() {
        return;
    }
    let out = chat.to_bytes();

    // Messages pass as the client's bytes and may hold what serde_json
    // cannot build a Value of (a number like 1e999): valid JSON all the
    // same. The keys that name tools are read one by one.
    let object = match RawObject::parse(&out) {
        Ok(o) => o,
        Err(e) => panic!("the rewritten body has no single reading: {e}"),
    };
    let mut request = serde_json::Map::new();
    for key in ["tools", "tool_choice", "functions", "function_call"] {
        if let Some(raw) = object.get(key) {
            let v: Value = serde_json::from_str(raw.get())
                .unwrap_or_else(|e| panic!("the rewritten `{key}` is not JSON: {e}"));
            request.insert(key.to_owned(), v);
        }
    }
    let request = Value::Object(request);
    match mode {
        Mode::Code => {
            for key in ["tools", "tool_choice", "function_call"] {
                let names = named_by(&request, key);
                assert!(
                    names.iter().all(|n| n == RUN_CODE),
                    "code mode: `{key}` names {names:?}"
                );
            }
            assert!(
                request.get("functions").is_none_or(Value::is_null),
                "code mode: `functions` reached the wire"
            );
        }
        Mode::Native | Mode::Both => {
            for key in ["tools", "functions", "tool_choice", "function_call"] {
                let names = named_by(&request, key);
                assert!(
                    !names.iter().any(|n| n == HIDDEN),
                    "{mode:?}: `{key}` names the hidden tool: {names:?}"
                );
                // Under an allow list every other name is hidden too.
                assert!(
                    !allow_list
                        || names.iter().all(|n| ["read", "write", RUN_CODE].contains(&n.as_str())),
                    "{mode:?}: `{key}` names a tool outside the allow list: {names:?}"
                );
            }
        }
    }
});
