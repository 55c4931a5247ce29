//! The SDK: TypeScript declarations of the visible native tools.
//!
//! Generated from each tool's JSON Schema; the tool's description and each
//! property's description become doc comments, so nothing the client wrote
//! is lost when the schemas leave the wire. Output is a pure function of the
//! tools, so the same tools render the same bytes (provider caches hit).
//!
//! The compact rendering ([`Rendering::Compact`]; a preset's `sdk` row
//! asks for it, or `auto` picks it for a large tool set)
//! keeps each tool's signature (every parameter's type) and only the first
//! sentence of its description ([`first_sentence`]); the full declarations
//! stay with the plan ([`render_docs`]) and a program reads them with
//! `tools.describe(name)`, answered by the embedded runtime.
//!
//! Schemas come from the client, so rendering is bounded whatever they hold
//! (docs/security.md): nesting past [`MAX_NESTING`] renders `unknown`
//! (the recursion never goes deeper, so the stack is bounded too); each tool
//! and the whole SDK have a byte budget ([`TOOL_MAX_BYTES`],
//! [`SDK_MAX_BYTES`]) and a work budget, past which types render `unknown`
//! and the tool's doc says its schema was cut. Every piece of schema text is
//! quoted or escaped so it stays inside its literal or comment line: no raw
//! line break, no `*/`. The limits sit far above real agents' tools, which
//! render exactly as they would unbounded.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use serde_json::{Map, Value};

mod naming;
mod params;
pub use params::Params;

pub use naming::{is_js_identifier, program_call, tool_access};

mod compact;
mod types;

pub use compact::first_sentence;
use types::TypeWriter;

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
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolSchema {
    /// The tool's name, exactly as the client declared it (a tool of a
    /// namespace: `<namespace>.<name>`).
    pub name: String,
    /// The tool's description, if any.
    pub description: Option<String>,
    /// The JSON Schema of its arguments (`{}` when absent).
    pub parameters: Value,
    /// A freeform tool: it takes one string, not a JSON object (the
    /// Responses API's `custom` tools); `parameters` is then unused.
    pub freeform: bool,
}

/// Renders the `declare const tools: {...}` block for `tools`.
///
/// The result is at most [`SDK_MAX_BYTES`] long whatever the schemas hold;
/// tools that no longer fit are counted in a closing comment. (The proxy
/// renders it through [`render_docs`], which also indexes each tool.)
#[cfg(any(test, feature = "bench-internals"))]
pub fn render_declarations(tools: &[ToolSchema]) -> String {
    render_block(tools, Rendering::Full, "", None)
}

/// Renders the compact block for `tools`: each tool's signature (its
/// parameters' types, no doc comments) under the first sentence of its
/// description. With `describe`, the block ends with the declaration of
/// `tools.describe(name)`, which returns a tool's full declaration.
pub fn render_compact(tools: &[ToolSchema], describe: bool) -> String {
    render_block(
        tools,
        Rendering::Compact,
        if describe { DESCRIBE_DECLARATION } else { "" },
        None,
    )
}

/// Each tool's full declaration (what [`render_declarations`] writes for
/// it), by name: what `tools.describe(name)` returns.
pub fn render_docs(tools: &[ToolSchema]) -> ToolDocs {
    let mut index = Vec::with_capacity(tools.len());
    let text = render_block(tools, Rendering::Full, "", Some(&mut index));
    let mut by_name = HashMap::with_capacity(index.len());
    for (name, range) in index {
        by_name.entry(name).or_insert(range);
    }
    let params = tools
        .iter()
        .filter(|t| !t.freeform)
        .map(|t| (t.name.clone(), Params::of(t)))
        .collect();
    ToolDocs {
        text: text.into_boxed_str(),
        index: by_name,
        params,
    }
}

/// The declaration of `tools.describe` the compact SDK ends with.
const DESCRIBE_DECLARATION: &str =
    "  /** Returns tool `name`'s full documentation (its whole description and \
     parameter docs) as text; not a tool call. */\n  describe(name: string): string;\n";

/// The name `tools.describe` takes in programs; a client tool of that name
/// takes precedence, and then the SDK does not offer describe.
pub const DESCRIBE: &str = "describe";

/// How a preset asks the SDK to render (its `sdk` row, `CODEMODE_SDK`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SdkStyle {
    /// Compact where it pays: when the full SDK would pass
    /// [`AUTO_COMPACT_ABOVE`] bytes and `tools.describe` can give back
    /// what compact leaves out; full otherwise (the default).
    #[default]
    Auto,
    /// The whole description and every parameter's docs.
    Full,
    /// The signature and the first sentence of the description.
    Compact,
}

/// Above this many bytes of full SDK, `auto` renders compact. The value
/// runs (BENCHMARKS.md, "Value on real agents") put every agent measured
/// above it (Codex's full SDK is 7.3 KB, opencode's 18.9 KB, Claude
/// Code's 46.7 KB) and show compact paying on all of them; a tool set
/// under it (a handful of tools) costs less in full than one
/// `tools.describe` round trip, which re-sends the whole prompt.
pub const AUTO_COMPACT_ABOVE: usize = 4 << 10;

impl SdkStyle {
    /// The name as configured.
    pub fn as_str(self) -> &'static str {
        match self {
            SdkStyle::Auto => "auto",
            SdkStyle::Full => "full",
            SdkStyle::Compact => "compact",
        }
    }

    /// The rendering this style gives a tool set whose full SDK is
    /// `full_bytes` long, where `describe` says whether programs can call
    /// `tools.describe` (without it, compact loses the docs for good).
    pub fn rendering(self, full_bytes: usize, describe: bool) -> Rendering {
        match self {
            SdkStyle::Full => Rendering::Full,
            SdkStyle::Compact => Rendering::Compact,
            SdkStyle::Auto if describe && full_bytes > AUTO_COMPACT_ABOVE => Rendering::Compact,
            SdkStyle::Auto => Rendering::Full,
        }
    }
}

impl std::str::FromStr for SdkStyle {
    type Err = String;

    fn from_str(s: &str) -> Result<SdkStyle, String> {
        match s.trim() {
            "auto" => Ok(SdkStyle::Auto),
            "full" => Ok(SdkStyle::Full),
            "compact" => Ok(SdkStyle::Compact),
            other => Err(format!(
                "`{other}` is not an SDK rendering; use auto, full or compact"
            )),
        }
    }
}

/// How the SDK of one tool set is rendered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rendering {
    /// Each tool's whole declaration.
    Full,
    /// Each tool's signature and first sentence.
    Compact,
}

impl Rendering {
    /// The name dry-run, the inspector and the access log use.
    pub fn as_str(self) -> &'static str {
        match self {
            Rendering::Full => "full",
            Rendering::Compact => "compact",
        }
    }
}

/// Whether programs of a tool set can call `tools.describe`: only where the
/// proxy runs them, and only when no client tool is called `describe`
/// itself (the program calls the client's tool then).
pub fn describe_offered(visible: &[ToolSchema], runs_code: bool) -> bool {
    runs_code && !visible.iter().any(|t| t.name == DESCRIBE)
}

/// Every visible tool's full declaration, by name, kept beside the plan so
/// a program's `tools.describe(name)` is answered without a round trip.
#[derive(Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolDocs {
    text: Box<str>,
    index: HashMap<String, std::ops::Range<usize>>,
    params: HashMap<String, Params>,
}

impl ToolDocs {
    /// Tool `name`'s full declaration, its first indent removed.
    pub fn get(&self, name: &str) -> Option<String> {
        let range = self.index.get(name)?;
        let text = self.text.get(range.clone())?;
        let mut out = String::with_capacity(text.len());
        for line in text.lines() {
            out.push_str(line.strip_prefix("  ").unwrap_or(line));
            out.push('\n');
        }
        Some(out)
    }

    /// How a program passes tool `name`'s arguments.
    pub fn params(&self, name: &str) -> Option<&Params> {
        self.params.get(name)
    }

    /// The whole `declare const tools` block: the full SDK.
    pub fn block(&self) -> &str {
        &self.text
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.text.len() + self.index.keys().map(|k| k.len() + 48).sum::<usize>()
    }
}

/// The block for `tools` in `style`, `extra` before its closing brace;
/// `index` gets each rendered tool's name and byte range.
fn render_block(
    tools: &[ToolSchema],
    style: Rendering,
    extra: &str,
    mut index: Option<&mut Vec<(String, std::ops::Range<usize>)>>,
) -> String {
    let mut out = String::from("declare const tools: {\n");
    let mut work = SDK_MAX_WORK;
    for (i, tool) in tools.iter().enumerate() {
        let room = SDK_MAX_BYTES.saturating_sub(out.len() + CLOSING_RESERVE + extra.len());
        let budget = Budget {
            bytes: room.min(TOOL_MAX_BYTES),
            work: work.min(TOOL_MAX_WORK),
        };
        match render_tool(tool, budget, style) {
            Some((text, used)) => {
                let start = out.len();
                out.push_str(&text);
                if let Some(index) = index.as_deref_mut() {
                    index.push((tool.name.clone(), start..out.len()));
                }
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
    out.push_str(extra);
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
fn render_tool(tool: &ToolSchema, budget: Budget, style: Rendering) -> Option<(String, usize)> {
    let mut doc: Vec<String> = Vec::new();
    match tool.description.as_deref().filter(|d| !d.trim().is_empty()) {
        Some(d) if style == Rendering::Compact => {
            let first = first_sentence(d);
            if !first.is_empty() {
                doc.push(first);
            }
        }
        Some(d) => {
            let (d, clipped) = clip(d.trim(), DESCRIPTION_MAX_BYTES);
            doc.extend(split_lines(d).map(str::to_owned));
            if clipped {
                doc.push("(description cut: too long)".to_owned());
            }
        }
        None => {}
    }
    if !is_js_identifier(&tool.name) {
        doc.push(format!(
            "Not a JavaScript identifier: call it as `{}(args)`.",
            tool_access(&tool.name)
        ));
    }
    let key = property_key(&tool.name);
    if tool.freeform {
        doc.push("Takes one string (the whole input), not an object.".to_owned());
        let mut out = String::new();
        write_doc(&mut out, 1, &doc);
        let _ = writeln!(out, "  {key}(input: string): Promise<string>;");
        return (out.len() <= budget.bytes).then_some((out, 0));
    }
    // The writer stops once its budget is spent, but the levels still open
    // close their braces and a property's doc lines come whole: the slack
    // keeps that overshoot inside the tool's budget.
    let fixed = doc.iter().map(|l| l.len() + 8).sum::<usize>()
        + key.len()
        + RENDER_SLACK.min(budget.bytes / 4);
    let params = &tool.parameters;
    let mut writer = TypeWriter::new(params, budget.bytes.saturating_sub(fixed), budget.work);
    if style == Rendering::Compact {
        writer = writer.without_docs();
    }
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
pub(crate) fn clip(text: &str, max: usize) -> (&str, bool) {
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

#[cfg(test)]
mod fixtures_tests;
#[cfg(test)]
mod tests;
