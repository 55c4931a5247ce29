//! The SDK over real-world tool shapes: golden files in fixtures/sdk.
//!
//! Regenerate after an intended change with
//! `CODEMODE_BLESS=1 cargo test --lib sdk::fixtures_tests` and review the diff.

use std::path::Path;

use serde_json::Value;

use super::{render_declarations, ToolSchema};

fn schemas(tools: &[Value]) -> Vec<ToolSchema> {
    tools
        .iter()
        .map(|t| ToolSchema {
            name: t["function"]["name"].as_str().unwrap().to_owned(),
            description: t["function"]["description"].as_str().map(str::to_owned),
            parameters: t["function"]
                .get("parameters")
                .cloned()
                .unwrap_or(Value::Object(Default::default())),
            freeform: false,
        })
        .collect()
}

/// Every description and property name the client wrote appears in the SDK.
fn assert_nothing_lost(sdk: &str, schema: &Value, at: &str) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::String(d)) = map.get("description") {
                for line in d.lines() {
                    let line = line.replace("*/", "*\\/");
                    assert!(sdk.contains(line.trim()), "{at}: description `{line}` lost");
                }
            }
            if let Some(Value::Object(props)) = map.get("properties") {
                for name in props.keys() {
                    assert!(sdk.contains(name.as_str()), "{at}: property `{name}` lost");
                }
            }
            for (k, v) in map {
                assert_nothing_lost(sdk, v, &format!("{at}.{k}"));
            }
        }
        Value::Array(items) => items.iter().for_each(|v| assert_nothing_lost(sdk, v, at)),
        _ => {}
    }
}

#[test]
fn real_world_tool_sets_render_to_their_golden_declarations() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let bless = std::env::var_os("CODEMODE_BLESS").is_some();
    let mut checked = 0;
    let mut entries: Vec<_> = std::fs::read_dir(root.join("tools"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let tools: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let sdk = render_declarations(&schemas(&tools));
        for t in &tools {
            assert_nothing_lost(
                &sdk,
                &t["function"],
                path.file_name().unwrap().to_str().unwrap(),
            );
        }
        assert_eq!(
            sdk,
            render_declarations(&schemas(&tools)),
            "rendering is byte-stable"
        );
        let golden = root
            .join("sdk")
            .join(path.file_stem().unwrap())
            .with_extension("d.ts");
        if bless {
            std::fs::write(&golden, &sdk).unwrap();
        } else {
            let want = std::fs::read_to_string(&golden).unwrap_or_else(|_| {
                panic!("{} is missing; run with CODEMODE_BLESS=1", golden.display())
            });
            assert_eq!(sdk, want, "{} changed", golden.display());
        }
        checked += 1;
    }
    assert!(checked >= 5);
}
