//! The Messages request rewrite on any body: `MessagesRequest::parse`, the
//! tool plan (`ToolPlan::build_for(&codemode_proxy::internals::messages::TOOLS, ...)`) and `rewrite`,
//! in every mode and runtime, under a preset that hides `Bash`.
//!
//! Invariant (design.md sections 5, 9 and 11): when the rewrite succeeds,
//! the output is JSON with no duplicate top-level key; in `code` mode the
//! client tools on the wire (untyped or `custom`, the client-executed
//! `bash_*` and `text_editor_*`) are `run_code` alone and `tool_choice`
//! names nothing but `run_code` or a server tool still on the wire; in
//! `native`/`both` the hidden `Bash` is neither a client tool on the wire
//! nor named by `tool_choice` (under the allow-list preset, no client
//! tool outside the list is).
//!
//! Input: the first byte picks mode, runtime, preset and shape. Shape 0
//! uses the rest as the whole body; shape 1 splits it on 0xFF into
//! `tool_choice` and extra top-level text, placed in a body that declares
//! a fixed Claude Code-like tool set (client tools, a `text_editor_*`
//! tool, the provider's web search).
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use codemode_proxy::internals::messages::request::MessagesRequest;
use codemode_proxy::internals::mode::{Mode, Runtime, RUN_CODE};
use codemode_proxy::internals::plan::ToolPlan;
use codemode_proxy::internals::preset::{Catalog, ConfigFile, Preset, PresetSpec};
use codemode_proxy::internals::splice::{MemorySpliceStore, TenantSplices};
use codemode_proxy::internals::tenant::Tenant;
use codemode_proxy::internals::wire::RawObject;
use serde_json::Value;

const HIDDEN: &str = "Bash";

/// The names the allow-list preset lets through.
const ALLOWED: [&str; 3] = ["Read", "str_replace_based_edit_tool", RUN_CODE];

const TOOLS: &str = r#"[{"name":"Read","description":"Reads a file.","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}},{"name":"Bash","description":"Runs a command.","input_schema":{"type":"object","properties":{"command":{"type":"string"}}}},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},{"name":"mcp__github__create_issue","input_schema":{"type":"object"}},{"name":"run_code","input_schema":{"type":"object","properties":{"code":{"type":"string"}}}},{"type":"web_search_20250305","name":"web_search","max_uses":3,"cache_control":{"type":"ephemeral"}}]"#;

struct Fixture {
    /// Hides `Bash` by a deny list, and by an allow list.
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
                    allow: Some(vec!["Read".into(), "str_replace_based_edit_tool".into()]),
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
    let mut out = br#"{"model":"claude-sonnet-4-5","max_tokens":32000,"messages":[{"role":"user","content":"hi"}],"tools":"#.to_vec();
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

/// Whether a tool of this `type` is one the client executes.
fn is_client_kind(kind: Option<&str>) -> bool {
    match kind {
        None | Some("custom") => true,
        Some(k) => k.starts_with("bash_") || k.starts_with("text_editor_"),
    }
}

/// The names of a rewritten `tools`' client tools, and of its server tools.
fn tools_on_wire(tools: &Value) -> (Vec<String>, Vec<String>) {
    let (mut client, mut server) = (Vec::new(), Vec::new());
    for tool in tools.as_array().into_iter().flatten() {
        let name = tool
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if is_client_kind(tool.get("type").and_then(Value::as_str)) {
            client.push(name);
        } else {
            server.push(name);
        }
    }
    (client, server)
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

    let Ok(mut request) = MessagesRequest::parse(&body) else {
        return;
    };
    let Ok(plan) = ToolPlan::build_for(
        &codemode_proxy::internals::messages::TOOLS,
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

    // Messages pass as the client's bytes and may hold what serde_json
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
    let (client, server) = tools_on_wire(&read("tools"));
    // `{"type": "tool", "name": ...}` forces one tool: a client tool unless
    // a server tool on the wire has the name.
    let choice = read("tool_choice");
    let forced = choice
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !server.iter().any(|s| s == n));
    match mode {
        Mode::Code => {
            assert!(
                client.iter().all(|n| n == RUN_CODE),
                "code mode: `tools` offers {client:?}"
            );
            assert!(
                forced.is_none_or(|n| n == RUN_CODE),
                "code mode: `tool_choice` forces {forced:?}"
            );
        }
        Mode::Native | Mode::Both => {
            let names: Vec<&str> = client.iter().map(String::as_str).chain(forced).collect();
            assert!(
                !names.contains(&HIDDEN),
                "{mode:?}: the hidden tool reached the wire: {names:?}"
            );
            // Under an allow list every other client tool is hidden too.
            assert!(
                !allow_list || names.iter().all(|n| ALLOWED.contains(n)),
                "{mode:?}: a tool outside the allow list reached the wire: {names:?}"
            );
        }
    }
});
