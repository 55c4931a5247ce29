//! TypeScript types from JSON Schema, within the budgets of [`super`].

use super::*;

/// Renders schemas to TypeScript types within a byte and a work budget.
///
/// Bytes are charged where text is produced, so the sum is close to the
/// output's length; work is charged per schema node visited. Once either
/// is spent every further type renders `unknown` and `cut` is set.
pub(super) struct TypeWriter<'a> {
    root: &'a Value,
    bytes_left: Cell<usize>,
    pub(super) work_left: Cell<usize>,
    pub(super) cut: Cell<bool>,
    /// Whether properties carry their doc comments (the compact SDK drops them).
    docs: bool,
}

impl<'a> TypeWriter<'a> {
    pub(super) fn new(root: &'a Value, bytes: usize, work: usize) -> TypeWriter<'a> {
        TypeWriter {
            root,
            bytes_left: Cell::new(bytes),
            work_left: Cell::new(work),
            cut: Cell::new(false),
            docs: true,
        }
    }

    /// The same writer without property doc comments: types only.
    pub(super) fn without_docs(mut self) -> TypeWriter<'a> {
        self.docs = false;
        self
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

    pub(super) fn render(
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
        if !self.docs {
            return lines;
        }
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
pub(super) fn parenthesize(ty: String) -> String {
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
