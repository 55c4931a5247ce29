use super::types::parenthesize;
use super::*;
use serde_json::json;

fn tool(name: &str, description: &str, parameters: Value) -> ToolSchema {
    ToolSchema {
        name: name.into(),
        description: Some(description.into()),
        parameters,
        freeform: false,
    }
}

#[test]
fn required_and_optional_properties_with_docs() {
    let sdk = render_declarations(&[tool(
        "read",
        "Read a file.",
        json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "File to read."},
            "offset": {"type": "integer", "default": 0}
        }, "required": ["path"]}),
    )]);
    let want = "declare const tools: {\n  /** Read a file. */\n  read(args: {\n    \
                /** File to read. */\n    path: string;\n    /** @default 0 */\n    \
                offset?: number;\n  }): Promise<string>;\n};\n";
    assert_eq!(sdk, want);
}

#[test]
fn enums_unions_arrays_and_nullable_types() {
    let schema = json!({"type": "object", "properties": {
        "mode": {"enum": ["a", "b", 3]},
        "tags": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "number"}]}},
        "maybe": {"type": ["string", "null"]},
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}]},
        "old": {"type": "string", "nullable": true}
    }});
    let sdk = render_declarations(&[tool("t", "", schema)]);
    assert!(sdk.contains(r#"mode?: "a" | "b" | 3;"#), "{sdk}");
    assert!(sdk.contains("tags?: (string | number)[];"), "{sdk}");
    assert!(sdk.contains("maybe?: string | null;"), "{sdk}");
    assert!(sdk.contains("pair?: [string, boolean];"), "{sdk}");
    assert!(sdk.contains("old?: string | null;"), "{sdk}");
    assert!(
        sdk.contains("t(args?: {"),
        "no required property makes args optional: {sdk}"
    );
}

#[test]
fn local_refs_resolve_and_recursion_stops() {
    let schema = json!({
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "required": ["root"],
        "$defs": {"Node": {"type": "object", "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
        }, "required": ["name"]}}
    });
    let sdk = render_declarations(&[tool("tree", "", schema)]);
    assert!(sdk.contains("name: string;"), "{sdk}");
    assert!(
        sdk.contains("children?: unknown /* recursive Node */[];"),
        "{sdk}"
    );
}

#[test]
fn additional_properties_and_free_objects() {
    let schema = json!({"type": "object", "properties": {
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "meta": {"type": "object"},
        "closed": {"type": "object", "additionalProperties": false},
        "open": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": true}
    }});
    let sdk = render_declarations(&[tool("t", "", schema)]);
    assert!(sdk.contains("env?: Record<string, string>;"), "{sdk}");
    assert!(sdk.contains("meta?: Record<string, unknown>;"), "{sdk}");
    assert!(sdk.contains("closed?: Record<string, never>;"), "{sdk}");
    assert!(sdk.contains("[key: string]: unknown;"), "{sdk}");
}

#[test]
fn non_identifier_names_are_quoted_and_explained() {
    let sdk = render_declarations(&[tool("github.create_issue", "Open an issue.", json!({}))]);
    assert!(
        sdk.contains(r#""github.create_issue"(args?: Record<string, unknown>)"#),
        "{sdk}"
    );
    assert!(
        sdk.contains(r#"tools["github.create_issue"](args)"#),
        "{sdk}"
    );
}

#[test]
fn comment_terminators_in_descriptions_are_escaped() {
    let sdk = render_declarations(&[tool("t", "ends */ here", json!({}))]);
    assert!(sdk.contains("ends *\\/ here"), "{sdk}");
}

#[test]
fn hostile_depth_is_cut() {
    let mut schema = json!({"type": "string"});
    for _ in 0..100 {
        schema = json!({"type": "object", "properties": {"x": schema}});
    }
    let sdk = render_declarations(&[tool("deep", "", schema)]);
    assert!(sdk.contains("unknown"));
    assert!(sdk.len() < 20_000);
}

#[test]
fn only_top_level_unions_are_parenthesized() {
    assert_eq!(parenthesize("a | b".into()), "(a | b)");
    assert_eq!(
        parenthesize("{\n  s: \"x | y\" | \"z\";\n}".into()),
        "{\n  s: \"x | y\" | \"z\";\n}"
    );
    assert_eq!(parenthesize("\"a | b\"".into()), "\"a | b\"");
    assert_eq!(
        parenthesize("Record<string, a | b>".into()),
        "Record<string, a | b>"
    );
}

/// `$defs` `D0..Dn` where each refers to the next twice (a diamond):
/// unbounded, the rendering doubles with every level.
fn diamond(levels: usize) -> Value {
    let mut defs = Map::new();
    for i in 0..levels {
        let next = format!("#/$defs/D{}", i + 1);
        defs.insert(
            format!("D{i}"),
            json!({"type": "object", "properties": {
                "a": {"$ref": next}, "b": {"$ref": next}
            }}),
        );
    }
    defs.insert(format!("D{levels}"), json!({"type": "string"}));
    json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": defs})
}

/// `$defs` `C0..Cn` where each is only a `$ref` to the next.
fn ref_chain(hops: usize) -> Value {
    let mut defs = Map::new();
    for i in 0..hops {
        defs.insert(
            format!("C{i}"),
            json!({"$ref": format!("#/$defs/C{}", i + 1)}),
        );
    }
    defs.insert(format!("C{hops}"), json!({"type": "string"}));
    json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/C0"}}, "$defs": defs})
}

/// Every line of an SDK is a piece of a declaration: nothing schema
/// text put there starts a line of its own.
fn assert_lines_are_declarations(sdk: &str) {
    for line in sdk.split(['\n', '\r']) {
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
        assert!(ok, "line `{line}` is not part of a declaration:\n{sdk}");
        assert!(!t.starts_with("INJECTED"), "injected line in:\n{sdk}");
        assert!(!t.starts_with("```"), "fence line in:\n{sdk}");
    }
    assert!(!sdk.contains('\u{2028}') && !sdk.contains('\u{2029}'));
}

#[test]
fn a_ref_chain_of_thousands_renders_on_a_small_stack() {
    let schema = ref_chain(8_000);
    let sdk = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || render_declarations(&[tool("chain", "", schema)]))
        .unwrap()
        .join()
        .expect("rendering fits a 256 KiB stack");
    assert!(sdk.contains("x?: unknown /* C"), "{sdk}");
    assert!(sdk.contains(CUT_NOTE), "{sdk}");
    assert!(sdk.len() < 4_000, "{}", sdk.len());
}

#[test]
fn deep_nesting_of_every_kind_renders_on_a_small_stack() {
    let mut schema = json!({"type": "string"});
    for i in 0..120 {
        schema = match i % 4 {
            0 => json!({"anyOf": [schema, {"type": "null"}]}),
            1 => json!({"type": "array", "items": schema}),
            2 => json!({"allOf": [schema]}),
            _ => json!({"type": "object", "properties": {"p": schema}}),
        };
    }
    let sdk = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || render_declarations(&[tool("deep", "", schema)]))
        .unwrap()
        .join()
        .expect("rendering fits a 256 KiB stack");
    assert!(sdk.contains(CUT_NOTE), "{sdk}");
}

#[test]
fn a_diamond_of_refs_stays_within_the_tool_budget() {
    for levels in [17, 40] {
        let sdk = render_declarations(&[tool("diamond", "", diamond(levels))]);
        assert!(sdk.len() <= TOOL_MAX_BYTES + 64, "{levels}: {}", sdk.len());
        assert!(sdk.contains(CUT_NOTE));
        assert_lines_are_declarations(&sdk);
    }
}

#[test]
fn many_hostile_tools_stay_within_the_sdk_budget() {
    let tools: Vec<ToolSchema> = (0..200)
        .map(|i| tool(&format!("t{i}"), "A diamond.", diamond(30)))
        .collect();
    let sdk = render_declarations(&tools);
    assert!(sdk.len() <= SDK_MAX_BYTES, "{}", sdk.len());
    // Once the SDK's work is spent, the rest render bare but still listed.
    assert_eq!(sdk.matches(CUT_NOTE).count(), 200);
    assert!(sdk.ends_with("  t199(args?: Record<string, unknown>): Promise<string>;\n};\n"));
}

#[test]
fn huge_names_and_descriptions_are_bounded() {
    let name = "n".repeat(2 * SDK_MAX_BYTES);
    let desc = "d".repeat(2 * SDK_MAX_BYTES);
    let sdk = render_declarations(&[
        tool("small", &desc, json!({})),
        tool(&name, "", json!({})),
        tool("after", "", json!({})),
    ]);
    assert!(sdk.len() <= SDK_MAX_BYTES, "{}", sdk.len());
    assert!(sdk.contains("(description cut: too long)"));
    assert!(
        sdk.contains("2 more tools not shown"),
        "{}",
        &sdk[sdk.len() - 200..]
    );
}

#[test]
fn schema_text_cannot_leave_its_comment_or_literal() {
    let evil = "x\n```\nINJECTED */ \r```\rINJECTED\u{2028}INJECTED";
    let mut defs = Map::new();
    defs.insert(
        evil.to_owned(),
        json!({"type": "object", "properties": {
            "again": {"$ref": format!("#/$defs/{}", evil.replace('~', "~0").replace('/', "~1"))}
        }}),
    );
    let self_ref = format!("#/$defs/{}", evil.replace('~', "~0").replace('/', "~1"));
    let schema = json!({"type": "object", "$defs": defs, "properties": {
        "p": {"type": "string", "pattern": evil, "format": evil, "default": evil,
              "description": evil},
        "e": {"enum": [evil, 1]},
        "c": {"const": evil},
        "r": {"$ref": self_ref},
        evil: {"type": "string"},
        "t": {"type": [evil, "string"]},
    }});
    let sdk = render_declarations(&[
        tool(evil, evil, schema),
        ToolSchema {
            name: "ok".into(),
            description: None,
            parameters: json!({"properties": {"q": {"maxLength": evil}}}),
            freeform: false,
        },
    ]);
    assert_lines_are_declarations(&sdk);
    assert!(
        sdk.contains(r#"@pattern "x\n```\nINJECTED */ \r```\rINJECTED\u2028INJECTED""#)
            || sdk.contains(r#"@pattern "x\n```\nINJECTED *\/ \r```\rINJECTED\u2028INJECTED""#),
        "{sdk}"
    );
    assert!(sdk.contains("recursive \"x\\n```"), "{sdk}");
    for line in sdk.lines().map(str::trim_start) {
        if line.starts_with('*') || line.starts_with("/**") {
            let body = line.strip_suffix("*/").unwrap_or(line);
            assert!(!body.contains("*/"), "comment closed early: `{line}`");
        }
    }
}

#[test]
fn a_real_agent_sized_tool_set_renders_uncut() {
    // About Claude Code's size: two dozen tools, ~60 KB of schema,
    // long descriptions, nested objects and unions.
    let tools: Vec<ToolSchema> = (0..24)
        .map(|i| {
            let desc = format!("Tool {i}. ") + &"Use it carefully; it does things.\n".repeat(60);
            let item = json!({"type": "object", "properties": {
                "content": {"type": "string", "description": "The text."},
                "status": {"enum": ["pending", "in_progress", "completed"]},
                "nested": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}}]}
            }, "required": ["content", "status"]});
            tool(
                &format!("tool_{i}"),
                &desc,
                json!({"type": "object", "properties": {
                    "items": {"type": "array", "items": item, "description": "Items."},
                    "path": {"type": "string", "pattern": "^[a-z/]+$", "minLength": 1},
                    "timeout": {"type": "number", "maximum": 600000, "default": 120000}
                }, "required": ["items"]}),
            )
        })
        .collect();
    let schema_bytes: usize = tools
        .iter()
        .map(|t| t.parameters.to_string().len() + t.description.as_ref().map_or(0, String::len))
        .sum();
    assert!(schema_bytes > 55_000, "{schema_bytes}");
    let sdk = render_declarations(&tools);
    assert!(
        !sdk.contains(CUT_NOTE) && !sdk.contains("not shown"),
        "{sdk}"
    );
    assert!(sdk.contains("tool_23(args: {"));
}

#[test]
fn repeated_types_and_long_required_lists_render_once() {
    let names: Vec<String> = (0..20_000).map(|i| format!("r{i}")).collect();
    let schema = json!({
        "type": vec!["object"; 20_000],
        "properties": {"a": {"type": "string"}, "r19999": {"type": "number"}},
        "required": names,
    });
    let sdk = render_declarations(&[tool("t", "", schema)]);
    assert!(
        sdk.contains("    a?: string;\n    r19999: number;\n"),
        "{sdk}"
    );
    assert!(!sdk.contains(CUT_NOTE));
}

#[test]
fn compact_keeps_the_signature_and_the_first_sentence() {
    let t = tool(
        "read",
        "Reads a file, e.g. a log. Lines are numbered.\nUse offset for long files.",
        json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "Absolute path."},
            "offset": {"type": "integer", "default": 0, "minimum": 0},
            "mode": {"enum": ["text", "bytes"], "description": "How to read."},
            "range": {"type": "object", "description": "Lines.", "properties": {
                "start": {"type": "integer", "description": "First line."}
            }, "required": ["start"]}
        }, "required": ["path"]}),
    );
    let compact = render_compact(std::slice::from_ref(&t), false);
    let want = "declare const tools: {\n  /** Reads a file, e.g. a log. */\n  read(args: {\n    \
                path: string;\n    offset?: number;\n    mode?: \"text\" | \"bytes\";\n    \
                range?: {\n      start: number;\n    };\n  }): Promise<string>;\n};\n";
    assert_eq!(compact, want);
    let full = render_declarations(std::slice::from_ref(&t));
    assert!(full.contains("Lines are numbered.") && full.contains("Absolute path."));
    assert!(compact.len() < full.len(), "{compact}");
}

#[test]
fn compact_without_a_description_or_with_odd_names_still_says_how_to_call() {
    let tools = vec![
        ToolSchema {
            name: "github.create_issue".into(),
            description: None,
            parameters: json!({"type": "object", "properties": {"title": {"type": "string"}}}),
            freeform: false,
        },
        ToolSchema {
            name: "apply_patch".into(),
            description: Some("Applies a patch.\n\nThe format is ...".into()),
            parameters: json!({}),
            freeform: true,
        },
        tool("blank", "   ", json!({})),
    ];
    let compact = render_compact(&tools, true);
    assert!(
        compact.contains("call it as `tools[\"github.create_issue\"](args)`"),
        "{compact}"
    );
    assert!(compact.contains("\"github.create_issue\"(args?: {\n    title?: string;\n  })"));
    assert!(compact.contains("Applies a patch.") && !compact.contains("The format"));
    assert!(compact.contains("apply_patch(input: string): Promise<string>;"));
    assert!(compact.contains("  blank(args?: Record<string, unknown>): Promise<string>;\n"));
    assert!(
        compact.ends_with("  describe(name: string): string;\n};\n"),
        "{compact}"
    );
    assert!(!render_compact(&tools, false).contains("describe("));
}

#[test]
fn docs_hold_each_tools_full_declaration_and_the_whole_block() {
    let tools = vec![
        tool(
            "read",
            "Read a file.\nWhole lines.",
            json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "The path."}
            }, "required": ["path"]}),
        ),
        tool("bash", "Run a command.", json!({})),
    ];
    let docs = render_docs(&tools);
    assert_eq!(docs.block(), render_declarations(&tools));
    assert_eq!(
        docs.get("read").unwrap(),
        "/**\n * Read a file.\n * Whole lines.\n */\nread(args: {\n  /** The path. */\n  \
         path: string;\n}): Promise<string>;\n"
    );
    assert_eq!(
        docs.get("bash").unwrap(),
        "/** Run a command. */\nbash(args?: Record<string, unknown>): Promise<string>;\n"
    );
    assert_eq!(docs.get("write"), None);
    assert!(docs.bytes() >= docs.block().len());
}

#[test]
fn sdk_rendering_names_parse_and_refuse_the_rest() {
    assert_eq!("full".parse::<SdkStyle>(), Ok(SdkStyle::Full));
    assert_eq!(" compact ".parse::<SdkStyle>(), Ok(SdkStyle::Compact));
    assert_eq!("auto".parse::<SdkStyle>(), Ok(SdkStyle::Auto));
    assert_eq!(
        "short".parse::<SdkStyle>(),
        Err("`short` is not an SDK rendering; use auto, full or compact".to_owned())
    );
    assert_eq!(SdkStyle::default(), SdkStyle::Auto);
    assert_eq!(SdkStyle::Compact.as_str(), "compact");
    assert_eq!(SdkStyle::Auto.as_str(), "auto");
}

#[test]
fn auto_renders_compact_only_past_its_size_and_where_describe_gives_the_rest() {
    let big = AUTO_COMPACT_ABOVE + 1;
    assert_eq!(SdkStyle::Auto.rendering(big, true), Rendering::Compact);
    assert_eq!(
        SdkStyle::Auto.rendering(AUTO_COMPACT_ABOVE, true),
        Rendering::Full
    );
    // Without tools.describe, compact would lose the docs for good.
    assert_eq!(SdkStyle::Auto.rendering(big, false), Rendering::Full);
    // An explicit choice is kept whatever the size.
    assert_eq!(SdkStyle::Full.rendering(big, true), Rendering::Full);
    assert_eq!(SdkStyle::Compact.rendering(1, false), Rendering::Compact);
}
