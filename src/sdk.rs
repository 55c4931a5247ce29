//! The SDK: TypeScript declarations of the visible native tools.
//!
//! Generated from each tool's JSON Schema; the tool's description and each
//! property's description become doc comments, so nothing the client wrote
//! is lost when the schemas leave the wire. Output is a pure function of the
//! tools, so the same tools render the same bytes (provider caches hit).

use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::classify::{is_js_identifier, tool_access};

/// One tool as the SDK sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSchema {
    /// The tool's name, exactly as the client declared it.
    pub name: String,
    /// The tool's description, if any.
    pub description: Option<String>,
    /// The JSON Schema of its arguments (`{}` when absent).
    pub parameters: Value,
}

/// Renders the `declare const tools: {...}` block for `tools`.
pub fn render_declarations(tools: &[ToolSchema]) -> String {
    let mut out = String::from("declare const tools: {\n");
    for tool in tools {
        render_tool(&mut out, tool);
    }
    out.push_str("};\n");
    out
}

fn render_tool(out: &mut String, tool: &ToolSchema) {
    let mut doc: Vec<String> = Vec::new();
    if let Some(d) = tool.description.as_deref().filter(|d| !d.trim().is_empty()) {
        doc.extend(d.trim().lines().map(str::to_owned));
    }
    if !is_js_identifier(&tool.name) {
        doc.push(format!(
            "Not a JavaScript identifier: call it as `{}(args)`.",
            tool_access(&tool.name)
        ));
    }
    write_doc(out, 1, &doc);
    let key = property_key(&tool.name);
    let params = &tool.parameters;
    let mut ty = TypeWriter { root: params }.render(params, 1, &mut Vec::new());
    if ty == "unknown" {
        // Tool arguments are always a JSON object, whatever the schema omits.
        ty = "Record<string, unknown>".to_owned();
    }
    let optional = if has_required(params) { "" } else { "?" };
    let _ = writeln!(out, "  {key}(args{optional}: {ty}): Promise<string>;");
}

fn has_required(schema: &Value) -> bool {
    schema
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty())
}

fn property_key(name: &str) -> String {
    if is_js_identifier(name) {
        name.to_owned()
    } else {
        serde_json::to_string(name).unwrap_or_else(|_| format!("{name:?}"))
    }
}

fn write_doc(out: &mut String, indent: usize, lines: &[String]) {
    let pad = "  ".repeat(indent);
    let lines: Vec<String> = lines.iter().map(|l| l.replace("*/", "*\\/")).collect();
    match lines.as_slice() {
        [] => {}
        [one] => {
            let _ = writeln!(out, "{pad}/** {} */", one.trim_end());
        }
        many => {
            let _ = writeln!(out, "{pad}/**");
            for l in many {
                let l = l.trim_end();
                if l.is_empty() {
                    let _ = writeln!(out, "{pad} *");
                } else {
                    let _ = writeln!(out, "{pad} * {l}");
                }
            }
            let _ = writeln!(out, "{pad} */");
        }
    }
}

/// Deepest nesting rendered; deeper schemas become `unknown` rather than
/// letting a hostile schema blow the prompt up.
const MAX_DEPTH: usize = 24;

struct TypeWriter<'a> {
    root: &'a Value,
}

impl<'a> TypeWriter<'a> {
    fn render(&self, schema: &'a Value, indent: usize, refs: &mut Vec<&'a str>) -> String {
        if indent > MAX_DEPTH {
            return "unknown".to_owned();
        }
        let obj = match schema {
            Value::Bool(true) => return "unknown".to_owned(),
            Value::Bool(false) => return "never".to_owned(),
            Value::Object(o) => o,
            _ => return "unknown".to_owned(),
        };
        let ty = self.render_object_schema(obj, indent, refs);
        if obj.get("nullable") == Some(&Value::Bool(true)) && ty != "null" {
            format!("{} | null", ty)
        } else {
            ty
        }
    }

    fn render_object_schema(
        &self,
        obj: &'a Map<String, Value>,
        indent: usize,
        refs: &mut Vec<&'a str>,
    ) -> String {
        if let Some(Value::String(r)) = obj.get("$ref") {
            return self.render_ref(r, indent, refs);
        }
        if let Some(c) = obj.get("const") {
            return literal(c);
        }
        if let Some(Value::Array(values)) = obj.get("enum") {
            if !values.is_empty() {
                return values.iter().map(literal).collect::<Vec<_>>().join(" | ");
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = obj.get(key) {
                return self.join(options, " | ", indent, refs);
            }
        }
        if let Some(Value::Array(parts)) = obj.get("allOf") {
            return self.join(parts, " & ", indent, refs);
        }
        match obj.get("type") {
            Some(Value::String(t)) => self.render_typed(t, obj, indent, refs),
            Some(Value::Array(types)) => {
                let mut seen = Vec::new();
                for t in types.iter().filter_map(Value::as_str) {
                    let rendered = self.render_typed(t, obj, indent, refs);
                    if !seen.contains(&rendered) {
                        seen.push(rendered);
                    }
                }
                if seen.is_empty() {
                    "unknown".to_owned()
                } else {
                    seen.join(" | ")
                }
            }
            _ if obj.contains_key("properties") => self.render_typed("object", obj, indent, refs),
            _ if obj.contains_key("items") => self.render_typed("array", obj, indent, refs),
            _ => "unknown".to_owned(),
        }
    }

    fn join(
        &self,
        options: &'a [Value],
        sep: &str,
        indent: usize,
        refs: &mut Vec<&'a str>,
    ) -> String {
        if options.is_empty() {
            return "unknown".to_owned();
        }
        let parts: Vec<String> = options
            .iter()
            .map(|o| parenthesize(self.render(o, indent, refs)))
            .collect();
        parts.join(sep)
    }

    /// A property's doc lines: its description (or, when it has none, the
    /// one its `$ref` target or union members carry), default and constraints.
    fn property_doc(&self, schema: &'a Value) -> Vec<String> {
        let mut lines: Vec<String> = self
            .description(schema, 0)
            .map(|d| d.trim().lines().map(str::to_owned).collect())
            .unwrap_or_default();
        if let Some(default) = schema.get("default") {
            lines.push(format!("@default {}", literal(default)));
        }
        for key in CONSTRAINTS {
            if let Some(v) = schema.get(key).filter(|v| !v.is_object() && !v.is_array()) {
                let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                lines.push(format!("@{key} {text}"));
            }
        }
        lines
    }

    fn description(&self, schema: &'a Value, depth: usize) -> Option<&'a str> {
        if depth > 4 {
            return None;
        }
        if let Some(d) = schema.get("description").and_then(Value::as_str) {
            return Some(d);
        }
        if let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| resolve_pointer(self.root, r))
        {
            return self.description(target, depth + 1);
        }
        ["anyOf", "oneOf", "allOf"]
            .iter()
            .filter_map(|k| schema.get(*k).and_then(Value::as_array))
            .flatten()
            .find_map(|member| self.description(member, depth + 1))
    }

    fn render_ref(&self, r: &'a str, indent: usize, refs: &mut Vec<&'a str>) -> String {
        if refs.contains(&r) {
            // A recursive type: name it instead of unrolling it forever.
            return format!(
                "unknown /* recursive {} */",
                r.rsplit('/').next().unwrap_or(r)
            );
        }
        match resolve_pointer(self.root, r) {
            Some(target) => {
                refs.push(r);
                let ty = self.render(target, indent, refs);
                refs.pop();
                ty
            }
            None => "unknown".to_owned(),
        }
    }

    fn render_typed(
        &self,
        t: &str,
        obj: &'a Map<String, Value>,
        indent: usize,
        refs: &mut Vec<&'a str>,
    ) -> String {
        match t {
            "string" => "string".to_owned(),
            "number" | "integer" => "number".to_owned(),
            "boolean" => "boolean".to_owned(),
            "null" => "null".to_owned(),
            "array" => self.render_array(obj, indent, refs),
            "object" => self.render_object(obj, indent, refs),
            _ => "unknown".to_owned(),
        }
    }

    fn render_array(
        &self,
        obj: &'a Map<String, Value>,
        indent: usize,
        refs: &mut Vec<&'a str>,
    ) -> String {
        let tuple = obj
            .get("prefixItems")
            .or_else(|| obj.get("items").filter(|i| i.is_array()));
        if let Some(Value::Array(items)) = tuple {
            let parts: Vec<String> = items.iter().map(|i| self.render(i, indent, refs)).collect();
            return format!("[{}]", parts.join(", "));
        }
        match obj.get("items") {
            Some(items) => format!("{}[]", parenthesize(self.render(items, indent, refs))),
            None => "unknown[]".to_owned(),
        }
    }

    fn render_object(
        &self,
        obj: &'a Map<String, Value>,
        indent: usize,
        refs: &mut Vec<&'a str>,
    ) -> String {
        let additional = obj.get("additionalProperties");
        let props = match obj.get("properties") {
            Some(Value::Object(p)) if !p.is_empty() => p,
            _ => {
                return match additional {
                    Some(Value::Bool(false)) => "Record<string, never>".to_owned(),
                    Some(s @ Value::Object(_)) => {
                        format!("Record<string, {}>", self.render(s, indent, refs))
                    }
                    _ => "Record<string, unknown>".to_owned(),
                };
            }
        };
        let required: Vec<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let pad = "  ".repeat(indent + 1);
        let mut out = String::from("{\n");
        for (name, schema) in props {
            write_doc(&mut out, indent + 1, &self.property_doc(schema));
            let opt = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            let ty = self.render(schema, indent + 1, refs);
            let _ = writeln!(out, "{pad}{}{opt}: {ty};", property_key(name));
        }
        match additional {
            Some(Value::Object(_)) | Some(Value::Bool(true)) => {
                let _ = writeln!(out, "{pad}[key: string]: unknown;");
            }
            _ => {}
        }
        let _ = write!(out, "{}}}", "  ".repeat(indent));
        out
    }
}

/// Validation keywords worth telling the model, as `@keyword value` lines.
const CONSTRAINTS: [&str; 10] = [
    "format",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
];

fn literal(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "unknown".to_owned())
}

/// Wraps a type in parentheses when it is a union or intersection at its
/// top level, so `[]` or another operator binds to the whole of it.
fn parenthesize(ty: String) -> String {
    if has_top_level_operator(&ty) {
        format!("({ty})")
    } else {
        ty
    }
}

fn has_top_level_operator(ty: &str) -> bool {
    let mut depth = 0i32;
    let mut in_string = false;
    let mut escaped = false;
    let bytes = ty.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' | b'(' | b'<' => depth += 1,
            b'}' | b']' | b')' | b'>' => depth -= 1,
            b'|' | b'&' if depth == 0 && i > 0 && bytes[i - 1] == b' ' => return true,
            _ => {}
        }
    }
    false
}

/// Resolves a local JSON pointer (`#`, `#/$defs/X`, `#/definitions/X`).
fn resolve_pointer<'a>(root: &'a Value, r: &str) -> Option<&'a Value> {
    let pointer = r.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, description: &str, parameters: Value) -> ToolSchema {
        ToolSchema {
            name: name.into(),
            description: Some(description.into()),
            parameters,
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
}
