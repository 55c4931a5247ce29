#![no_main]
//! The SDK generator and prompt sections over any tool schemas.
//!
//! The first byte picks how the rest is read: as a raw `tools` array taken
//! through `ToolPlan::build` (the request path), as one tool's raw JSON
//! Schema, or as a recipe for a schema graph (`$defs` that refer to each
//! other, unions, nested objects, hostile text in every string). Whatever
//! the input: no panic or stack overflow, the SDK stays under its byte
//! budgets, rendering is byte-stable, and the prompt keeps its shape: one
//! opening and one closing fence, nothing after it, no schema text
//! starting a line of its own.

use arbitrary::{Result, Unstructured};
use codemode_proxy::internals::plan::ToolPlan;
use codemode_proxy::internals::preset::Catalog;
use codemode_proxy::internals::sdk::{
    render_compact, render_declarations, render_docs, ToolSchema, SDK_MAX_BYTES, TOOL_MAX_BYTES,
};
use codemode_proxy::internals::sections::{self, RenderedSection, CODE_ONLY_ID, SDK_ID};
use codemode_proxy::{Mode, Runtime};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&how, rest)) = data.split_first() else {
        return;
    };
    match how % 3 {
        0 => through_the_plan(rest),
        1 => {
            if let Ok(schema) = serde_json::from_slice::<Value>(rest) {
                check(&[ToolSchema {
                    name: "t".into(),
                    description: None,
                    parameters: schema,
                    freeform: false,
                }]);
            }
        }
        _ => {
            if let Ok(tools) = recipe(&mut Unstructured::new(rest)) {
                check(&tools);
            }
        }
    }
});

fn through_the_plan(bytes: &[u8]) {
    let Ok(raw) = serde_json::from_slice::<Box<RawValue>>(bytes) else {
        return;
    };
    let catalog = Catalog::builtin(Mode::Code);
    let Some(preset) = catalog.get("standard") else {
        return;
    };
    if let Ok(plan) = ToolPlan::build(Some(&raw), preset, Mode::Code, Runtime::Embedded) {
        check_sections(&plan.sections);
    }
}

fn check(tools: &[ToolSchema]) {
    let sdk = render_declarations(tools);
    assert!(sdk.len() <= SDK_MAX_BYTES, "SDK of {} bytes", sdk.len());
    assert_eq!(sdk, render_declarations(tools), "rendering is byte-stable");
    assert_declaration_lines(&sdk);
    for t in tools {
        let one = render_declarations(std::slice::from_ref(t));
        // The tool's budget plus the `declare` opening and closing lines.
        assert!(
            one.len() <= TOOL_MAX_BYTES + 32,
            "tool of {} bytes",
            one.len()
        );
    }
    let compact = render_compact(tools, true);
    assert!(compact.len() <= SDK_MAX_BYTES, "compact SDK of {} bytes", compact.len());
    assert_declaration_lines(&compact);
    let docs = render_docs(tools);
    assert_eq!(docs.block(), sdk, "describe's declarations are the full SDK's");
    let catalog = Catalog::builtin(Mode::Code);
    if let Some(preset) = catalog.get("standard") {
        for compact in [false, true] {
            let mut preset = (**preset).clone();
            if compact {
                preset.sdk = codemode_proxy::internals::sdk::SdkStyle::Compact;
            }
            let parts = sections::SdkParts {
                docs: &docs,
                runs_code: true,
            };
            check_sections(&sections::render(
                &preset,
                Mode::Code,
                tools,
                !tools.is_empty(),
                parts,
            ));
        }
    }
}

fn lines(text: &str) -> Vec<&str> {
    // CommonMark's line endings: `\n`, `\r\n` and a lone `\r`.
    text.split(['\n', '\r']).collect()
}

fn check_sections(sections: &[RenderedSection]) {
    for s in sections {
        if s.id == CODE_ONLY_ID && !s.text.is_empty() {
            // The rule's template has three lines; tool names add none.
            assert_eq!(lines(&s.text).len(), 3, "{}", s.text);
        }
        if s.id == SDK_ID {
            check_fence(&s.text);
        }
    }
}

fn check_fence(text: &str) {
    let lines = lines(text);
    let is_fence = |l: &str| {
        let t = l.trim_start();
        t.starts_with("```") || t.starts_with("~~~")
    };
    let fences: Vec<usize> = (0..lines.len()).filter(|&i| is_fence(lines[i])).collect();
    assert_eq!(fences.len(), 2, "one opening and one closing fence");
    let (open, close) = (lines[fences[0]], lines[fences[1]]);
    assert!(
        close.len() >= 3 && close.bytes().all(|b| b == b'`'),
        "{close}"
    );
    assert_eq!(open, format!("{close}typescript"));
    assert_eq!(
        fences[1],
        lines.len() - 1,
        "nothing after the closing fence"
    );
    let inner = &text[text.find("typescript\n").map_or(0, |i| i + 11)..];
    let inner = &inner[..inner.len() - close.len()];
    assert!(
        !inner.contains(close),
        "a backtick run as long as the fence"
    );
    assert_declaration_lines(inner);
}

/// Every line of the SDK is a piece of a declaration.
fn assert_declaration_lines(sdk: &str) {
    for line in lines(sdk) {
        let t = line.trim_start();
        let ok = t.is_empty()
            || t.starts_with("declare const tools: {")
            || t.starts_with("/**")
            || t.starts_with('*')
            || t.starts_with('}')
            || t.starts_with("[key: string]")
            || t.starts_with("// ")
            || t.starts_with('"')
            || t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '$');
        assert!(ok, "line `{line}` is not part of a declaration");
        if t.starts_with('*') || t.starts_with("/**") {
            let body = t.strip_suffix("*/").unwrap_or(t);
            assert!(!body.contains("*/"), "comment closed early: `{line}`");
        }
    }
    assert!(!sdk.contains(['\u{2028}', '\u{2029}']));
}

// ---- Schema recipes ----

/// Text built from hostile fragments and arbitrary strings.
fn text(u: &mut Unstructured) -> Result<String> {
    const PIECES: [&str; 14] = [
        "\n", "\r", "```", "````````", "*/", "/*", "\u{2028}", "`", "~~~", "INJECTED", "a", "~1",
        "\u{85}", " ",
    ];
    let mut s = String::new();
    for _ in 0..u.int_in_range(0..=5)? {
        if u.ratio(1, 4)? {
            s.push_str(u.arbitrary::<&str>()?);
        } else {
            s.push_str(u.choose(&PIECES)?);
        }
    }
    Ok(s)
}

fn pointer_to(name: &str) -> String {
    format!("#/$defs/{}", name.replace('~', "~0").replace('/', "~1"))
}

fn node(u: &mut Unstructured, defs: &[String], depth: u32) -> Result<Value> {
    let leaf = depth >= 5;
    let kind = if leaf {
        u.int_in_range(0..=3)?
    } else {
        u.int_in_range(0..=11)?
    };
    Ok(match kind {
        0 if !defs.is_empty() => json!({"$ref": pointer_to(u.choose(defs)?)}),
        0 | 1 => json!({"type": "string", "pattern": text(u)?, "format": text(u)?,
                        "default": text(u)?, "description": text(u)?}),
        2 => json!({"enum": [text(u)?, u.arbitrary::<i64>()?, text(u)?]}),
        3 => json!({"const": text(u)?, "nullable": u.arbitrary::<bool>()?}),
        4 | 5 => {
            let key = if kind == 4 { "anyOf" } else { "allOf" };
            let n = u.int_in_range(0..=4)?;
            let mut members = Vec::new();
            for _ in 0..n {
                members.push(node(u, defs, depth + 1)?);
            }
            json!({ key: members })
        }
        6 | 7 => {
            let mut props = Map::new();
            let mut required = Vec::new();
            for _ in 0..u.int_in_range(0..=4)? {
                let name = text(u)?;
                if u.arbitrary::<bool>()? {
                    required.push(Value::String(name.clone()));
                }
                props.insert(name, node(u, defs, depth + 1)?);
            }
            json!({"type": "object", "properties": props, "required": required,
                   "additionalProperties": u.arbitrary::<bool>()?})
        }
        8 => json!({"type": "array", "items": node(u, defs, depth + 1)?}),
        9 => json!({"prefixItems": [node(u, defs, depth + 1)?, node(u, defs, depth + 1)?],
                    "type": "array"}),
        10 => json!({"type": ["object", text(u)?, "null", "string"],
                     "properties": {"p": node(u, defs, depth + 1)?}}),
        _ => json!({"type": "object", "additionalProperties": node(u, defs, depth + 1)?}),
    })
}

fn recipe(u: &mut Unstructured) -> Result<Vec<ToolSchema>> {
    let mut tools = Vec::new();
    for _ in 0..u.int_in_range(1..=3)? {
        let names: Vec<String> = (0..u.int_in_range(0..=12)?)
            .map(|_| text(u))
            .collect::<Result<_>>()?;
        let mut defs = Map::new();
        for name in &names {
            defs.insert(name.clone(), node(u, &names, 0)?);
        }
        let root = node(u, &names, 0)?;
        let mut parameters = json!({"type": "object", "properties": {"root": root}});
        parameters["$defs"] = Value::Object(defs);
        tools.push(ToolSchema {
            name: text(u)?,
            description: Some(text(u)?),
            parameters,
            freeform: false,
        });
    }
    Ok(tools)
}
