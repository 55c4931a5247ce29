//! The Responses request rewrite on any body: `ResponsesRequest::parse`,
//! the tool plan (`ToolPlan::build_for(&codemode_proxy::internals::responses::TOOLS, ...)`) and
//! `rewrite`, in every mode and runtime, under a preset that hides `bash`.
//!
//! Invariant (design.md sections 5, 9 and 10): when the rewrite succeeds,
//! the output is JSON with no duplicate top-level key; in `code` mode the
//! client tools on the wire (`function`, `custom`, a `namespace`'s tools,
//! the client-executed `local_shell` and `apply_patch`) are `run_code`
//! alone and `tool_choice` names nothing else; in `native`/`both` the
//! hidden `bash` appears in neither `tools` nor `tool_choice` (under the
//! allow-list preset, no client tool outside the list does).
//!
//! Input: the first byte picks mode, runtime, preset and shape. Shape 0
//! uses the rest as the whole body; shape 1 splits it on 0xFF into
//! `tool_choice` and extra top-level text, placed in a body that declares
//! a fixed Codex-like tool set (functions, a custom tool, a namespace,
//! `local_shell`, the provider's `web_search`).
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use codemode_proxy::internals::mode::{Mode, Runtime, RUN_CODE};
use codemode_proxy::internals::plan::ToolPlan;
use codemode_proxy::internals::preset::{Catalog, ConfigFile, Preset, PresetSpec};
use codemode_proxy::internals::responses::request::ResponsesRequest;
use codemode_proxy::internals::splice::{MemorySpliceStore, TenantSplices};
use codemode_proxy::internals::tenant::Tenant;
use codemode_proxy::internals::wire::RawObject;
use serde_json::Value;

const HIDDEN: &str = "bash";

/// The names the allow-list preset lets through.
const ALLOWED: [&str; 3] = ["read", "apply_patch", RUN_CODE];

const TOOLS: &str = r#"[{"type":"function","name":"read","parameters":{"type":"object","properties":{"path":{"type":"string"}}}},{"type":"function","name":"bash","description":"Run a shell command.","parameters":{"type":"object"}},{"type":"custom","name":"apply_patch","format":{"type":"text"}},{"type":"namespace","name":"agents","tools":[{"type":"function","name":"spawn","parameters":{"type":"object"}}]},{"type":"local_shell"},{"type":"function","name":"run_code","parameters":{"type":"object","properties":{"code":{"type":"string"}}}},{"type":"web_search"}]"#;

/// Client tool types: on the wire in code mode only as `run_code`.
const CLIENT_TYPES: [&str; 5] = [
    "function",
    "custom",
    "namespace",
    "local_shell",
    "apply_patch",
];

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
                    allow: Some(vec!["read".into(), "apply_patch".into()]),
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
    let mut parts = data.splitn(2, |b| *b == 0xff);
    let mut out = br#"{"model":"gpt-5-codex","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"tools":"#.to_vec();
    out.extend_from_slice(TOOLS.as_bytes());
    match parts.next() {
        Some(p) if !p.is_empty() => {
            out.extend_from_slice(br#","tool_choice":"#);
            out.extend_from_slice(p);
        }
        _ => {}
    }
    if let Some(extra) = parts.next() {
        out.extend_from_slice(extra);
    }
    out.push(b'}');
    out
}

/// The client tools of a rewritten `tools`, by the names a client would
/// call them (`<namespace>.<name>` inside a namespace, the type of a
/// nameless built-in).
fn client_tools(tools: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for tool in tools.as_array().into_iter().flatten() {
        let kind = tool.get("type").and_then(Value::as_str).unwrap_or("");
        if !CLIENT_TYPES.contains(&kind) {
            continue;
        }
        let name = tool.get("name").and_then(Value::as_str).unwrap_or(kind);
        if kind == "namespace" {
            let inner = tool.get("tools").and_then(Value::as_array);
            for t in inner.into_iter().flatten() {
                let n = t.get("name").and_then(Value::as_str).unwrap_or("");
                names.push(format!("{name}.{n}"));
            }
        } else {
            names.push(name.to_owned());
        }
    }
    names
}

/// The names a request's `tools` declares as client tools: functions and
/// custom tools (`<namespace>.<name>` in a namespace), and the built-ins
/// `local_shell` and `apply_patch` by their type. (A `shell` tool may be
/// hosted: the provider's.)
fn declared(tools: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for tool in tools.as_array().into_iter().flatten() {
        let kind = tool.get("type").and_then(Value::as_str).unwrap_or("");
        let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
        match kind {
            "function" | "custom" => names.push(name.to_owned()),
            "namespace" => {
                for t in tool
                    .get("tools")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let n = t.get("name").and_then(Value::as_str).unwrap_or("");
                    names.push(format!("{name}.{n}"));
                }
            }
            "local_shell" | "apply_patch" => names.push(kind.to_owned()),
            _ => {}
        }
    }
    names
}

/// The client tools a `tool_choice` points the model at, in the shapes
/// the proxy reads (design.md section 10): a forced `function` or
/// `custom` tool (`<namespace>.<name>` in a namespace), a built-in by its
/// type when the client declared a tool of that name, and the same inside
/// `allowed_tools`. Other types are the provider's and pass as sent.
fn chosen(choice: &Value, declared: &[String]) -> Vec<String> {
    let refs: Vec<&Value> = match choice.get("type").and_then(Value::as_str) {
        Some("allowed_tools") => choice
            .get("tools")
            .and_then(Value::as_array)
            .map(|t| t.iter().collect())
            .unwrap_or_default(),
        _ => vec![choice],
    };
    refs.into_iter()
        .filter_map(|r| {
            let kind = r.get("type").and_then(Value::as_str)?;
            match kind {
                "function" | "custom" => {
                    let name = r.get("name").and_then(Value::as_str).unwrap_or("");
                    Some(match r.get("namespace").and_then(Value::as_str) {
                        Some(ns) => format!("{ns}.{name}"),
                        None => name.to_owned(),
                    })
                }
                "local_shell" | "shell" | "apply_patch" if declared.iter().any(|d| d == kind) => {
                    Some(kind.to_owned())
                }
                _ => None,
            }
        })
        .collect()
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

    let Ok(mut request) = ResponsesRequest::parse(&body) else {
        return;
    };
    let client_tools_declared = request
        .field("tools")
        .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
        .map_or_else(Vec::new, |tools| declared(&tools));
    let Ok(plan) = ToolPlan::build_for(
        &codemode_proxy::internals::responses::TOOLS,
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

    // Input items pass as the client's bytes and may hold what serde_json
    // cannot build a Value of (a number like 1e999): valid JSON all the
    // same. The keys that name tools are read one by one.
    let object = match RawObject::parse(&out) {
        Ok(o) => o,
        Err(e) => panic!("the rewritten body has no single reading: {e}"),
    };
    let read = |key: &str| -> Value {
        object.get(key).map_or(Value::Null, |raw| {
            serde_json::from_str(raw.get())
                .unwrap_or_else(|e| panic!("the rewritten `{key}` is not JSON: {e}"))
        })
    };
    let tools = read("tools");
    let choice = read("tool_choice");
    let named = chosen(&choice, &client_tools_declared);
    let offered = client_tools(&tools);
    match mode {
        Mode::Code => {
            assert!(
                offered.iter().all(|n| n == RUN_CODE),
                "code mode: `tools` offers {offered:?}"
            );
            assert!(
                named.iter().all(|n| n == RUN_CODE),
                "code mode: `tool_choice` names {named:?}"
            );
        }
        Mode::Native | Mode::Both => {
            for names in [&offered, &named] {
                assert!(
                    !names.iter().any(|n| n == HIDDEN),
                    "{mode:?}: the hidden tool reached the wire: {names:?}"
                );
                // Under an allow list every other client tool is hidden too.
                assert!(
                    !allow_list || names.iter().all(|n| ALLOWED.contains(&n.as_str())),
                    "{mode:?}: a tool outside the allow list reached the wire: {names:?}"
                );
            }
        }
    }
});
