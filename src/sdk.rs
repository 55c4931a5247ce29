//! The SDK: TypeScript declarations of the visible native tools.
//!
//! Generated from each tool's JSON Schema; the tool's description and each
//! property's description become doc comments, so nothing the client wrote
//! is lost when the schemas leave the wire. Output is a pure function of the
//! tools, so the same tools render the same bytes (provider caches hit).
//!
//! Schemas come from the client, so rendering is bounded whatever they hold
//! (design.md section 9): nesting past [`MAX_NESTING`] renders `unknown`
//! (the recursion never goes deeper, so the stack is bounded too); each tool
//! and the whole SDK have a byte budget ([`TOOL_MAX_BYTES`],
//! [`SDK_MAX_BYTES`]) and a work budget, past which types render `unknown`
//! and the tool's doc says its schema was cut. Every piece of schema text is
//! quoted or escaped so it stays inside its literal or comment line: no raw
//! line break, no `*/`. The limits sit far above real agents' tools, which
//! render exactly as they would unbounded.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashSet;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::classify::{is_js_identifier, tool_access};

/// Most bytes the whole `declare const tools` block renders to (about a
/// quarter of a million tokens: more than any prompt a model accepts).
pub const SDK_MAX_BYTES: usize = 1 << 20;
/// Most bytes one tool's declaration renders to, doc comments included.
pub const TOOL_MAX_BYTES: usize = 128 << 10;
/// Most bytes of a tool's own description; the rest is cut with a note.
const DESCRIPTION_MAX_BYTES: usize = TOOL_MAX_BYTES / 2;
/// Deepest chain of nested schemas (`$ref` hops, union members, items,
/// properties) rendered; deeper parts render `unknown`.
pub const MAX_NESTING: usize = 100;
/// Deepest object nesting rendered (each level indents the output).
const MAX_DEPTH: usize = 24;
/// Work (schema nodes visited, pointer bytes resolved) one tool may take:
/// real tools take about one unit per 30 bytes of schema.
const TOOL_MAX_WORK: usize = 50_000;
/// Work the whole SDK may take.
const SDK_MAX_WORK: usize = 500_000;
/// Room kept for the closing lines of the SDK.
const CLOSING_RESERVE: usize = 128;
/// Bytes of a tool's budget kept back from its type's rendering (see `render_tool`).
const RENDER_SLACK: usize = 8 << 10;
/// Longest `$defs` name shown in a `/* recursive Name */` marker.
const MAX_MARKER_NAME: usize = 64;
/// The doc line of a tool whose schema did not render in full.
const CUT_NOTE: &str =
    "Parts of this schema were too deep or too large to show; they read `unknown`.";

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
///
/// The result is at most [`SDK_MAX_BYTES`] long whatever the schemas hold;
/// tools that no longer fit are counted in a closing comment.
pub fn render_declarations(tools: &[ToolSchema]) -> String {
    let mut out = String::from("declare const tools: {\n");
    let mut work = SDK_MAX_WORK;
    for (i, tool) in tools.iter().enumerate() {
        let room = SDK_MAX_BYTES.saturating_sub(out.len() + CLOSING_RESERVE);
        let budget = Budget {
            bytes: room.min(TOOL_MAX_BYTES),
            work: work.min(TOOL_MAX_WORK),
        };
        match render_tool(tool, budget) {
            Some((text, used)) => {
                out.push_str(&text);
                work = work.saturating_sub(used);
            }
            None => {
                let _ = writeln!(
                    out,
                    "  // {} more tools not shown: the SDK's size budget is spent.",
                    tools.len() - i
                );
                break;
            }
        }
    }
    out.push_str("};\n");
    out
}

/// What one tool's rendering may spend.
#[derive(Clone, Copy, Debug)]
struct Budget {
    bytes: usize,
    work: usize,
}

/// Renders one tool within `budget`: its text and the work it took, or
/// `None` when not even its bare declaration fits.
fn render_tool(tool: &ToolSchema, budget: Budget) -> Option<(String, usize)> {
    let mut doc: Vec<String> = Vec::new();
    if let Some(d) = tool.description.as_deref().filter(|d| !d.trim().is_empty()) {
        let (d, clipped) = clip(d.trim(), DESCRIPTION_MAX_BYTES);
        doc.extend(split_lines(d).map(str::to_owned));
        if clipped {
            doc.push("(description cut: too long)".to_owned());
        }
    }
    if !is_js_identifier(&tool.name) {
        doc.push(format!(
            "Not a JavaScript identifier: call it as `{}(args)`.",
            tool_access(&tool.name)
        ));
    }
    let key = property_key(&tool.name);
    // The writer stops once its budget is spent, but the levels still open
    // close their braces and a property's doc lines come whole: the slack
    // keeps that overshoot inside the tool's budget.
    let fixed = doc.iter().map(|l| l.len() + 8).sum::<usize>()
        + key.len()
        + RENDER_SLACK.min(budget.bytes / 4);
    let params = &tool.parameters;
    let writer = TypeWriter::new(params, budget.bytes.saturating_sub(fixed), budget.work);
    let mut ty = writer.render(params, 1, 0, &mut Vec::new());
    if ty == "unknown" {
        // Tool arguments are always a JSON object, whatever the schema omits.
        ty = "Record<string, unknown>".to_owned();
    }
    if writer.cut.get() {
        doc.push(CUT_NOTE.to_owned());
    }
    let work = budget.work - writer.work_left.get();
    let optional = if has_required(params) { "" } else { "?" };
    let mut out = String::new();
    write_doc(&mut out, 1, &doc);
    let _ = writeln!(out, "  {key}(args{optional}: {ty}): Promise<string>;");
    if out.len() <= budget.bytes {
        return Some((out, work));
    }
    // Only a description or name of extreme size gets here: the bare
    // declaration still tells the model the tool exists.
    let mut bare = String::new();
    write_doc(&mut bare, 1, &[CUT_NOTE.to_owned()]);
    let _ = writeln!(
        bare,
        "  {key}(args?: Record<string, unknown>): Promise<string>;"
    );
    (bare.len() <= budget.bytes).then_some((bare, work))
}

fn has_required(schema: &Value) -> bool {
    schema
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty())
}

/// A name as a TypeScript property key, or as a list entry in the prompt:
/// an identifier as it is, anything else as a JSON string (which cannot
/// hold a raw line break).
pub fn property_key(name: &str) -> String {
    if is_js_identifier(name) {
        name.to_owned()
    } else {
        json_quote(name)
    }
}

/// `s` as a JSON string literal, with the line separators JavaScript
/// reads as line breaks escaped too.
fn json_quote(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"));
    if quoted.contains(['\u{2028}', '\u{2029}']) {
        quoted
            .replace('\u{2028}', "\\u2028")
            .replace('\u{2029}', "\\u2029")
    } else {
        quoted
    }
}

/// Characters that must not appear raw on a comment line: each could end
/// the line for Markdown or JavaScript (tabs are harmless and kept).
fn is_unsafe_char(c: char) -> bool {
    (c.is_control() && c != '\t') || c == '\u{2028}' || c == '\u{2029}'
}

/// `line` made safe for one comment line: unsafe characters become `\uXXXX`
/// text and `*/` cannot close the comment.
fn comment_line(line: &str) -> Cow<'_, str> {
    if !line.contains(is_unsafe_char) && !line.contains("*/") {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len() + 8);
    for c in line.chars() {
        if is_unsafe_char(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out.replace("*/", "*\\/"))
}

/// Splits text into lines at every line ending CommonMark knows
/// (`\n`, `\r\n` and a lone `\r`).
fn split_lines(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n')
        .flat_map(|l| l.strip_suffix('\r').unwrap_or(l).split('\r'))
}

/// `text` cut to at most `max` bytes at a character boundary, and whether it was cut.
fn clip(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

fn write_doc(out: &mut String, indent: usize, lines: &[String]) {
    let pad = "  ".repeat(indent);
    match lines {
        [] => {}
        [one] => {
            let _ = writeln!(out, "{pad}/** {} */", comment_line(one.trim_end()));
        }
        many => {
            let _ = writeln!(out, "{pad}/**");
            for l in many {
                let l = l.trim_end();
                if l.is_empty() {
                    let _ = writeln!(out, "{pad} *");
                } else {
                    let _ = writeln!(out, "{pad} * {}", comment_line(l));
                }
            }
            let _ = writeln!(out, "{pad} */");
        }
    }
}

/// Renders schemas to TypeScript types within a byte and a work budget.
///
/// Bytes are charged where text is produced, so the sum is close to the
/// output's length; work is charged per schema node visited. Once either
/// is spent every further type renders `unknown` and `cut` is set.
struct TypeWriter<'a> {
    root: &'a Value,
    bytes_left: Cell<usize>,
    work_left: Cell<usize>,
    cut: Cell<bool>,
}

impl<'a> TypeWriter<'a> {
    fn new(root: &'a Value, bytes: usize, work: usize) -> TypeWriter<'a> {
        TypeWriter {
            root,
            bytes_left: Cell::new(bytes),
            work_left: Cell::new(work),
            cut: Cell::new(false),
        }
    }

    /// Whether a budget is spent; marks the output as cut when it is.
    fn spent(&self) -> bool {
        let spent = self.bytes_left.get() == 0 || self.work_left.get() == 0;
        if spent {
            self.cut.set(true);
        }
        spent
    }

    fn spend_bytes(&self, n: usize) {
        self.bytes_left.set(self.bytes_left.get().saturating_sub(n));
    }

    fn spend_work(&self, n: usize) {
        self.work_left.set(self.work_left.get().saturating_sub(n));
    }

    /// A piece of fixed text, charged.
    fn text(&self, s: &str) -> String {
        self.spend_bytes(s.len());
        s.to_owned()
    }

    fn render(
        &self,
        schema: &'a Value,
        indent: usize,
        nesting: usize,
        refs: &mut Vec<&'a str>,
    ) -> String {
        if indent > MAX_DEPTH || nesting > MAX_NESTING || self.spent() {
            self.cut.set(true);
            // Past a limit a reference still says what it pointed to.
            return match schema.get("$ref").and_then(Value::as_str) {
                Some(r) => format!("unknown /* {} */", marker_name(r)),
                None => "unknown".to_owned(),
            };
        }
        self.spend_work(1);
        let obj = match schema {
            Value::Bool(true) => return self.text("unknown"),
            Value::Bool(false) => return self.text("never"),
            Value::Object(o) => o,
            _ => return self.text("unknown"),
        };
        let ty = self.render_object_schema(obj, indent, nesting + 1, refs);
        if obj.get("nullable") == Some(&Value::Bool(true)) && ty != "null" {
            self.spend_bytes(7);
            format!("{} | null", ty)
        } else {
            ty
        }
    }

    fn render_object_schema(
        &self,
        obj: &'a Map<String, Value>,
        indent: usize,
        nesting: usize,
        refs: &mut Vec<&'a str>,
    ) -> String {
        if let Some(Value::String(r)) = obj.get("$ref") {
            return self.render_ref(r, indent, nesting, refs);
        }
        if let Some(c) = obj.get("const") {
            let lit = literal(c);
            self.spend_bytes(lit.len());
            return lit;
        }
        if let Some(Value::Array(values)) = obj.get("enum") {
            if !values.is_empty() {
                return self.render_enum(values);
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = obj.get(key) {
                return self.join(options, " | ", indent, nesting, refs);
            }
        }
        if let Some(Value::Array(parts)) = obj.get("allOf") {
            return self.join(parts, " & ", indent, nesting, refs);
        }
        match obj.get("type") {
            Some(Value::String(t)) => self.render_typed(t, obj, indent, nesting, refs),
            Some(Value::Array(types)) => self.render_type_list(types, obj, indent, nesting, refs),
            _ if obj.contains_key("properties") => {
                self.render_typed("object", obj, indent, nesting, refs)
            }
            _ if obj.contains_key("items") => {
                self.render_typed("array", obj, indent, nesting, refs)
            }
            _ => self.text("unknown"),
        }
    }

    fn render_enum(&self, values: &[Value]) -> String {
        let mut out = String::new();
        for (i, v) in values.iter().enumerate() {
            if self.spent() {
                break;
            }
            self.spend_work(1);
            let lit = literal(v);
            self.spend_bytes(lit.len() + 3);
            if i > 0 {
                out.push_str(" | ");
            }
            out.push_str(&lit);
        }
        if out.is_empty() {
            return self.text("unknown");
        }
        out
    }

    /// `"type": [..]`: each distinct type once, in order.
    fn render_type_list(
        &self,
        types: &'a [Value],
        obj: &'a Map<String, Value>,
        indent: usize,
        nesting: usize,
        refs: &mut Vec<&'a str>,
    ) -> String {
        const KNOWN: [&str; 7] = [
            "string", "number", "integer", "boolean", "null", "array", "object",
        ];
        let mut tried: Vec<&str> = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        for t in types.iter().filter_map(Value::as_str) {
            if self.spent() {
                break;
            }
            self.spend_work(1);
            // Every other name renders `unknown`: one key for them all keeps
            // `tried` short whatever the list holds.
            let t = if KNOWN.contains(&t) { t } else { "" };
            if tried.contains(&t) {
                continue;
            }
            tried.push(t);
            let rendered = self.render_typed(t, obj, indent, nesting, refs);
            if !seen.contains(&rendered) {
                self.spend_bytes(3);
                seen.push(rendered);
            }
        }
        if seen.is_empty() {
            self.text("unknown")
        } else {
            seen.join(" | ")
        }
    }

    fn join(
        &self,
        options: &'a [Value],
        sep: &str,
        indent: usize,
        nesting: usize,
        refs: &mut Vec<&'a str>,
    ) -> String {
        let mut parts: Vec<String> = Vec::new();
        for o in options {
            if self.spent() {
                break;
            }
            let ty = self.render(o, indent, nesting, refs);
            parts.push(self.parenthesize(ty));
            self.spend_bytes(sep.len());
        }
        if parts.is_empty() {
            return self.text("unknown");
        }
        parts.join(sep)
    }

    fn parenthesize(&self, ty: String) -> String {
        let out = parenthesize(ty);
        if out.starts_with('(') {
            self.spend_bytes(2);
        }
        out
    }

    /// A property's doc lines: its description (or, when it has none, the
    /// one its `$ref` target or union members carry), default and constraints.
    fn property_doc(&self, schema: &'a Value) -> Vec<String> {
        let mut lines: Vec<String> = Vec::new();
        if let Some(d) = self.description(schema, 0) {
            let (d, clipped) = clip(d.trim(), self.bytes_left.get());
            lines.extend(split_lines(d).map(str::to_owned));
            if clipped {
                self.cut.set(true);
            }
        }
        if let Some(default) = schema.get("default") {
            lines.push(format!("@default {}", literal(default)));
        }
        for key in CONSTRAINTS {
            if let Some(v) = schema.get(key).filter(|v| !v.is_object() && !v.is_array()) {
                let text = match v.as_str() {
                    // A pattern or format holding a line break is shown as
                    // a JSON string: on one line, and exact.
                    Some(s) if s.contains(is_unsafe_char) => json_quote(s),
                    Some(s) => s.to_owned(),
                    None => v.to_string(),
                };
                lines.push(format!("@{key} {text}"));
            }
        }
        self.spend_bytes(lines.iter().map(|l| l.len() + 8).sum());
        lines
    }

    fn description(&self, schema: &'a Value, depth: usize) -> Option<&'a str> {
        if depth > 4 || self.work_left.get() == 0 {
            return None;
        }
        self.spend_work(1);
        if let Some(d) = schema.get("description").and_then(Value::as_str) {
            return Some(d);
        }
        if let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| self.resolve(r))
        {
            return self.description(target, depth + 1);
        }
        ["anyOf", "oneOf", "allOf"]
            .iter()
            .filter_map(|k| schema.get(*k).and_then(Value::as_array))
            .flatten()
            .find_map(|member| self.description(member, depth + 1))
    }

    /// Resolves a local pointer, charging the work of reading it.
    fn resolve(&self, r: &str) -> Option<&'a Value> {
        self.spend_work(1 + r.len() / 32);
        resolve_pointer(self.root, r)
    }

    fn render_ref(
        &self,
        r: &'a str,
        indent: usize,
        nesting: usize,
        refs: &mut Vec<&'a str>,
    ) -> String {
        if refs.contains(&r) {
            // A recursive type: name it instead of unrolling it forever.
            let marker = format!("unknown /* recursive {} */", marker_name(r));
            self.spend_bytes(marker.len());
            return marker;
        }
        match self.resolve(r) {
            Some(target) => {
                refs.push(r);
                let ty = self.render(target, indent, nesting, refs);
                refs.pop();
                ty
            }
            None => self.text("unknown"),
        }
    }

    fn render_typed(
        &self,
        t: &str,
        obj: &'a Map<String, Value>,
        indent: usize,
        nesting: usize,
        refs: &mut Vec<&'a str>,
    ) -> String {
        match t {
            "string" => self.text("string"),
            "number" | "integer" => self.text("number"),
            "boolean" => self.text("boolean"),
            "null" => self.text("null"),
            "array" => self.render_array(obj, indent, nesting, refs),
            "object" => self.render_object(obj, indent, nesting, refs),
            _ => self.text("unknown"),
        }
    }

    fn render_array(
        &self,
        obj: &'a Map<String, Value>,
        indent: usize,
        nesting: usize,
        refs: &mut Vec<&'a str>,
    ) -> String {
        let tuple = obj
            .get("prefixItems")
            .or_else(|| obj.get("items").filter(|i| i.is_array()));
        if let Some(Value::Array(items)) = tuple {
            let mut parts: Vec<String> = Vec::new();
            for i in items {
                if self.spent() {
                    break;
                }
                parts.push(self.render(i, indent, nesting, refs));
                self.spend_bytes(2);
            }
            return format!("[{}]", parts.join(", "));
        }
        match obj.get("items") {
            Some(items) => {
                let ty = self.render(items, indent, nesting, refs);
                self.spend_bytes(2);
                format!("{}[]", self.parenthesize(ty))
            }
            None => self.text("unknown[]"),
        }
    }

    fn render_object(
        &self,
        obj: &'a Map<String, Value>,
        indent: usize,
        nesting: usize,
        refs: &mut Vec<&'a str>,
    ) -> String {
        let additional = obj.get("additionalProperties");
        let props = match obj.get("properties") {
            Some(Value::Object(p)) if !p.is_empty() => p,
            _ => {
                return match additional {
                    Some(Value::Bool(false)) => self.text("Record<string, never>"),
                    Some(s @ Value::Object(_)) => {
                        let ty = self.render(s, indent, nesting, refs);
                        self.spend_bytes(17);
                        format!("Record<string, {ty}>")
                    }
                    _ => self.text("Record<string, unknown>"),
                };
            }
        };
        // A set: a hostile list of thousands of names must not make each
        // property's lookup linear.
        let required: HashSet<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let pad = "  ".repeat(indent + 1);
        let mut out = String::from("{\n");
        for (name, schema) in props {
            if self.spent() {
                break;
            }
            write_doc(&mut out, indent + 1, &self.property_doc(schema));
            let opt = if required.contains(name.as_str()) {
                ""
            } else {
                "?"
            };
            let ty = self.render(schema, indent + 1, nesting, refs);
            let key = property_key(name);
            self.spend_bytes(pad.len() + key.len() + 4);
            let _ = writeln!(out, "{pad}{key}{opt}: {ty};");
        }
        match additional {
            Some(Value::Object(_)) | Some(Value::Bool(true)) => {
                self.spend_bytes(pad.len() + 24);
                let _ = writeln!(out, "{pad}[key: string]: unknown;");
            }
            _ => {}
        }
        self.spend_bytes(indent * 2 + 3);
        let _ = write!(out, "{}}}", "  ".repeat(indent));
        out
    }
}

/// The name a `/* recursive Name */` marker shows for `$ref` `r`: its last
/// segment (which holds no `/`, so no `*/`), JSON-quoted when it holds a
/// character that could end the comment line, and short.
fn marker_name(r: &str) -> Cow<'_, str> {
    let name = r.rsplit('/').next().unwrap_or(r);
    let (short, clipped) = clip(name, MAX_MARKER_NAME);
    match (short.contains(is_unsafe_char), clipped) {
        (false, false) => Cow::Borrowed(short),
        (false, true) => Cow::Owned(format!("{short}…")),
        (true, _) => Cow::Owned(json_quote(short)),
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
    let lit = serde_json::to_string(v).unwrap_or_else(|_| "unknown".to_owned());
    if lit.contains(['\u{2028}', '\u{2029}']) {
        lit.replace('\u{2028}', "\\u2028")
            .replace('\u{2029}', "\\u2029")
    } else {
        lit
    }
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
}
