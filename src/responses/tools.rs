//! Tools of a Responses request: what is a client tool (collapsed into the
//! SDK in code mode) and what the provider runs itself (kept on the wire).
//!
//! Client tools: `function` (flat), `custom` (freeform: one string input),
//! the tools of a `namespace` group (each named `<namespace>.<name>`), and
//! the built-ins a client executes (`local_shell`, `shell` in a local
//! environment, `apply_patch`), each named by its type and described by
//! the object its call item carries, and computer use (`computer_use_preview`,
//! `computer`: one tool named `computer`, its calls `computer_call` items).
//! The provider's own tools (`web_search*`, `file_search`,
//! `code_interpreter`, `image_generation`, `mcp`, `tool_search`, a `shell`
//! in a hosted container) are kept on the wire as declared, never judged.
//! A type this proxy does not know is kept on the wire too, marked unknown:
//! in a mode that can deny, the plan refuses it (it may be one the client
//! executes).

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use crate::api::Api;
use crate::error::ProxyError;
use crate::mode::RUN_CODE;
use crate::sdk::{clip, ToolSchema};
use crate::tools::{declared_items, ToolEntry, ToolGroup, ToolReader, RUN_CODE_TOOL};
use crate::wire::RawObject;

/// The namespace whose tools are the top-level ones (the API's default).
pub(crate) const DEFAULT_NAMESPACE: &str = "functions";

/// Whether a tool the provider could run is declared to run on the client
/// (`"execution": "client"`, as Codex declares `tool_search`).
fn client_executed(tool: &Map<String, Value>) -> bool {
    tool.get("execution").and_then(Value::as_str) == Some("client")
}

/// The name computer use goes by, whichever type declared it.
pub(crate) const COMPUTER: &str = "computer";

/// Whether a tool of this type is one the provider runs itself.
fn is_provider_kind(kind: &str) -> bool {
    kind.starts_with("web_search")
        || matches!(
            kind,
            "file_search"
                | "code_interpreter"
                | "image_generation"
                | "mcp"
                | "tool_search"
                | "shell"
        )
}

/// Most bytes of a custom tool's grammar shown in its SDK description;
/// real grammars (Codex's `apply_patch`) are a fraction of this.
const GRAMMAR_MAX_BYTES: usize = 4 << 10;

/// How a Responses request's tools are read.
pub const TOOLS: ToolReader = ToolReader {
    api: Api::Responses,
    parse,
    run_code_tool,
    keys: crate::wire::Keys::Exact,
    finish_wire: crate::tools::wire_as_built,
};

/// The proxy's `run_code` tool in the Responses shape (flat `function`).
fn run_code_tool() -> String {
    let chat: serde_json::Value =
        serde_json::from_str(RUN_CODE_TOOL).unwrap_or(serde_json::Value::Null);
    let f = &chat["function"];
    serde_json::json!({"type": "function", "name": f["name"], "description": f["description"],
                       "parameters": f["parameters"]})
    .to_string()
}

/// Reads the `tools` of a Responses request, in declaration order (the
/// tools of a namespace where the namespace stands).
pub(crate) fn parse(tools: Option<&RawValue>) -> Result<Vec<ToolEntry>, ProxyError> {
    let items = declared_items(
        tools,
        "`tools` must be an array of tool objects (each with a `type`)",
    )?;
    let mut out = Vec::with_capacity(items.len());
    for (i, raw) in items.into_iter().enumerate() {
        let at = format!("tools[{i}]");
        let tool = object(&raw, &at)?;
        match kind(&tool, &at)? {
            "namespace" => namespace(&raw, &tool, &at, &mut out)?,
            _ => out.push(entry(raw, &tool, &at, None)?),
        }
    }
    Ok(out)
}

fn invalid(message: String) -> ProxyError {
    ProxyError::InvalidRequest(message)
}

/// The tool at `at` as an object.
fn object(raw: &RawValue, at: &str) -> Result<Map<String, Value>, ProxyError> {
    serde_json::from_str(raw.get()).map_err(|e| {
        invalid(format!(
            "`{at}` is not a tool object ({e}); send an object with a `type`"
        ))
    })
}

fn kind<'a>(tool: &'a Map<String, Value>, at: &str) -> Result<&'a str, ProxyError> {
    match tool.get("type") {
        Some(Value::String(t)) => Ok(t),
        None => Err(invalid(format!(
            "`{at}` has no `type`; give it one (\"function\", \"custom\", \"namespace\", ...)"
        ))),
        Some(_) => Err(invalid(format!("`{at}.type` must be a string"))),
    }
}

/// A string field that must be there.
fn name_of<'a>(tool: &'a Map<String, Value>, at: &str, what: &str) -> Result<&'a str, ProxyError> {
    match tool.get("name") {
        Some(Value::String(n)) if !n.is_empty() => Ok(n),
        None | Some(Value::Null) => Err(invalid(format!(
            "`{at}` ({what}) has no name; give it `name`"
        ))),
        Some(_) => Err(invalid(format!("`{at}.name` must be a non-empty string"))),
    }
}

/// A string field that may be absent.
fn text_of(tool: &Map<String, Value>, key: &str, at: &str) -> Result<Option<String>, ProxyError> {
    match tool.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(format!("`{at}.{key}` must be a string"))),
    }
}

/// One tool that is not a namespace. `group` is the namespace it belongs
/// to (its name prefixes the tool's, its description is named).
fn entry(
    raw: Box<RawValue>,
    tool: &Map<String, Value>,
    at: &str,
    group: Option<(&str, Option<&str>, &Arc<ToolGroup>)>,
) -> Result<ToolEntry, ProxyError> {
    let t = kind(tool, at)?;
    let (name, mut description, parameters, freeform) = match t {
        "function" => {
            let name = name_of(tool, at, "a function tool")?.to_owned();
            let parameters = match tool.get("parameters") {
                None | Some(Value::Null) => json!({}),
                Some(p @ Value::Object(_)) => p.clone(),
                Some(_) => {
                    return Err(invalid(format!(
                        "`{at}.parameters` must be a JSON Schema object"
                    )))
                }
            };
            (name, text_of(tool, "description", at)?, parameters, false)
        }
        "custom" => {
            let name = name_of(tool, at, "a custom tool")?.to_owned();
            let description = custom_description(tool, at)?;
            (name, description, json!({}), true)
        }
        "local_shell" | "apply_patch" => {
            let (description, parameters) = built_in(t);
            (
                t.to_owned(),
                Some(description.to_owned()),
                parameters,
                false,
            )
        }
        "shell" if local_shell_environment(tool) => {
            let (description, parameters) = built_in(t);
            (
                t.to_owned(),
                Some(description.to_owned()),
                parameters,
                false,
            )
        }
        "tool_search" if client_executed(tool) => {
            let (description, parameters) = built_in(t);
            (
                t.to_owned(),
                text_of(tool, "description", at)?.or(Some(description.to_owned())),
                match tool.get("parameters") {
                    Some(p @ Value::Object(_)) => p.clone(),
                    _ => parameters,
                },
                false,
            )
        }
        "computer_use_preview" | "computer" => {
            let (description, parameters) = built_in("computer");
            (
                COMPUTER.to_owned(),
                Some(description.to_owned()),
                parameters,
                false,
            )
        }
        _ if group.is_some() => {
            return Err(invalid(format!(
                "`{at}` has type `{t}`; a namespace holds function and custom tools only"
            )))
        }
        // The provider's own tool, or one this proxy does not know: the
        // provider reads it, so it stays on the wire as declared.
        _ => return Ok(ToolEntry::provider(raw, t, is_provider_kind(t))),
    };
    // Tools of the `functions` namespace are the top-level function
    // tools by another spelling (the API's default namespace).
    let named_in = group
        .map(|(ns, _, _)| ns)
        .filter(|ns| *ns != DEFAULT_NAMESPACE);
    let name = match named_in {
        Some(ns) => format!("{ns}.{name}"),
        None if name == RUN_CODE && t != "function" => {
            return Err(invalid(format!(
                "`{at}` is a `{t}` tool named `run_code`, a name reserved for the function tool \
                 that runs programs; declare run_code as a function tool, or rename this one"
            )))
        }
        None => name,
    };
    if let Some((ns, ns_description, _)) = group.filter(|(ns, _, _)| *ns != DEFAULT_NAMESPACE) {
        let note = match ns_description.map(str::trim).filter(|d| !d.is_empty()) {
            Some(d) => format!("Part of the `{ns}` tool group: {d}"),
            None => format!("Part of the `{ns}` tool group."),
        };
        description = Some(match description.filter(|d| !d.trim().is_empty()) {
            Some(d) => format!("{d}\n\n{note}"),
            None => note,
        });
    }
    let schema = ToolSchema {
        name,
        description,
        parameters,
        freeform,
    };
    Ok(ToolEntry {
        call_item: match t {
            "custom" => Some("custom_tool_call"),
            "local_shell" => Some("local_shell_call"),
            "shell" => Some("shell_call"),
            "apply_patch" => Some("apply_patch_call"),
            "computer_use_preview" | "computer" => Some("computer_call"),
            "tool_search" => Some("tool_search_call"),
            _ => None,
        },
        group: group.map(|(_, _, g)| g.clone()),
        ..ToolEntry::client(raw, schema)
    })
}

/// A `namespace` group: each of its tools becomes a client tool named
/// `<namespace>.<name>`, sharing the group so the wire can rebuild it from
/// the tools it keeps.
fn namespace(
    raw: &RawValue,
    tool: &Map<String, Value>,
    at: &str,
    out: &mut Vec<ToolEntry>,
) -> Result<(), ProxyError> {
    let ns = name_of(tool, at, "a namespace")?;
    let description = text_of(tool, "description", at)?;
    let head = RawObject::parse(raw.get().as_bytes())
        .map_err(|e| invalid(format!("`{at}` is not a tool object ({e})")))?;
    let children: Vec<Box<RawValue>> = match head.get("tools") {
        Some(t) => serde_json::from_str(t.get())
            .map_err(|_| invalid(format!("`{at}.tools` must be an array of tool objects")))?,
        None => {
            return Err(invalid(format!(
                "`{at}` is a namespace without `tools`; list its tools in `tools`"
            )))
        }
    };
    let group = Arc::new(ToolGroup {
        object: head,
        key: "tools",
    });
    for (j, child) in children.into_iter().enumerate() {
        let at = format!("{at}.tools[{j}]");
        let obj = object(&child, &at)?;
        out.push(entry(
            child,
            &obj,
            &at,
            Some((ns, description.as_deref(), &group)),
        )?);
    }
    Ok(())
}

/// Whether a `shell` tool runs where the client is (no `environment`, or
/// a `local` one); a hosted container is the provider's.
fn local_shell_environment(tool: &Map<String, Value>) -> bool {
    match tool.get("environment") {
        None | Some(Value::Null) => true,
        Some(env) => env.get("type").and_then(Value::as_str) == Some("local"),
    }
}

/// A custom tool's description, with the input format it was given so the
/// model writes inputs that parse.
fn custom_description(tool: &Map<String, Value>, at: &str) -> Result<Option<String>, ProxyError> {
    let description = text_of(tool, "description", at)?;
    let format = match tool.get("format") {
        None | Some(Value::Null) => return Ok(description),
        Some(Value::Object(f)) => f,
        Some(_) => {
            return Err(invalid(format!(
                "`{at}.format` must be an object: {{\"type\":\"text\"}} or \
                 {{\"type\":\"grammar\",\"syntax\":\"lark\"|\"regex\",\"definition\":...}}"
            )))
        }
    };
    let note = match format.get("type").and_then(Value::as_str) {
        Some("grammar") => {
            let syntax = text_of(format, "syntax", &format!("{at}.format"))?;
            let definition = text_of(format, "definition", &format!("{at}.format"))?;
            let Some(definition) = definition else {
                return Err(invalid(format!(
                    "`{at}.format` is a grammar without `definition`; give the grammar's text"
                )));
            };
            let (shown, cut) = clip(&definition, GRAMMAR_MAX_BYTES);
            let what = match syntax.as_deref() {
                Some("regex") => "matching this regular expression".to_owned(),
                Some(s) => format!("in this {s} grammar"),
                None => "in this grammar".to_owned(),
            };
            let mut note = format!("The input must be written {what}:\n{shown}");
            if cut {
                note.push_str("\n(grammar cut: too long)");
            }
            Some(note)
        }
        // Free text, or a format this proxy does not know: no constraint to show.
        _ => None,
    };
    Ok(match (description.filter(|d| !d.trim().is_empty()), note) {
        (Some(d), Some(n)) => Some(format!("{d}\n\n{n}")),
        (d, n) => d.or(n),
    })
}

/// The description and argument schema of a client-executed built-in: the
/// object its call item carries (`action` of a `local_shell_call`,
/// `shell_call` or `computer_call`, `operation` of an `apply_patch_call`).
fn built_in(kind: &str) -> (&'static str, Value) {
    match kind {
        "tool_search" => (
            "Searches the client's deferred tools; the tools it finds are callable from the next program.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to search for."},
                    "limit": {"type": "number", "description": "Most tools to return."}
                },
                "required": ["query"]
            }),
        ),
        "computer" => (
            "Acts on the user's screen (the client's computer): one action, answered by a screenshot.",
            json!({
                "type": "object",
                "properties": {
                    "type": {"enum": ["click", "double_click", "drag", "keypress", "move",
                                      "screenshot", "scroll", "type", "wait"]},
                    "x": {"type": "integer"}, "y": {"type": "integer"},
                    "button": {"type": "string"},
                    "keys": {"type": "array", "items": {"type": "string"}},
                    "text": {"type": "string"},
                    "scroll_x": {"type": "integer"}, "scroll_y": {"type": "integer"},
                    "path": {"type": "array", "items": {"type": "object"}}
                },
                "required": ["type"]
            }),
        ),
        "local_shell" => (
            "Runs a command on the user's machine (the client's local shell).",
            json!({
                "type": "object",
                "properties": {
                    "type": {"const": "exec"},
                    "command": {"type": "array", "items": {"type": "string"},
                                "description": "The program and its arguments (argv)."},
                    "timeout_ms": {"type": "integer", "description": "Time limit in milliseconds."},
                    "working_directory": {"type": "string", "description": "Directory to run in."},
                    "env": {"type": "object", "additionalProperties": {"type": "string"},
                            "description": "Environment variables to set."},
                    "user": {"type": "string", "description": "The user to run as."}
                },
                "required": ["type", "command"]
            }),
        ),
        "shell" => (
            "Runs shell commands in the client's environment, in order.",
            json!({
                "type": "object",
                "properties": {
                    "commands": {"type": "array", "items": {"type": "string"},
                                 "description": "Shell commands to run, in order."},
                    "timeout_ms": {"type": "integer", "description": "Time limit in milliseconds."},
                    "max_output_length": {"type": "integer",
                                          "description": "Most characters of output to keep."}
                },
                "required": ["commands"]
            }),
        ),
        _ => (
            "Creates, updates or deletes one file (a V4A diff for create and update).",
            json!({
                "anyOf": [
                    {"type": "object", "properties": {
                        "type": {"const": "create_file"},
                        "path": {"type": "string", "description": "The file to create."},
                        "diff": {"type": "string", "description": "The new file's content as a V4A diff."}
                    }, "required": ["type", "path", "diff"]},
                    {"type": "object", "properties": {
                        "type": {"const": "update_file"},
                        "path": {"type": "string", "description": "The file to change."},
                        "diff": {"type": "string", "description": "The change as a V4A diff."}
                    }, "required": ["type", "path", "diff"]},
                    {"type": "object", "properties": {
                        "type": {"const": "delete_file"},
                        "path": {"type": "string", "description": "The file to delete."}
                    }, "required": ["type", "path"]}
                ]
            }),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(tools: Value) -> Result<Vec<ToolEntry>, ProxyError> {
        let raw = RawValue::from_string(tools.to_string()).unwrap();
        parse(Some(&raw))
    }

    fn names(entries: &[ToolEntry]) -> Vec<(&str, bool, bool)> {
        entries
            .iter()
            .map(|e| (e.schema.name.as_str(), e.schema.freeform, e.provider))
            .collect()
    }

    #[test]
    fn every_kind_of_tool_is_read_with_its_name_and_owner() {
        let entries = parsed(json!([
            {"type": "function", "name": "exec_command", "description": "Run.",
             "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}, "strict": false},
            {"type": "custom", "name": "apply_patch", "description": "Patch files.",
             "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}},
            {"type": "namespace", "name": "agents", "description": "Sub-agents.", "tools": [
                {"type": "function", "name": "spawn", "parameters": {"type": "object"}},
                {"type": "custom", "name": "note"}
            ]},
            {"type": "local_shell"},
            {"type": "shell"},
            {"type": "shell", "environment": {"type": "container_auto"}},
            {"type": "apply_patch"},
            {"type": "web_search"},
            {"type": "mcp", "server_label": "x", "server_url": "https://x"},
            {"type": "some_future_tool"},
            {"type": "function", "name": "run_code", "parameters": {"type": "object"}},
            {"type": "computer_use_preview", "display_width": 1024, "display_height": 768}
        ]))
        .unwrap();
        assert_eq!(
            names(&entries),
            vec![
                ("exec_command", false, false),
                ("apply_patch", true, false),
                ("agents.spawn", false, false),
                ("agents.note", true, false),
                ("local_shell", false, false),
                ("shell", false, false),
                ("shell", false, true),
                ("apply_patch", false, false),
                ("web_search", false, true),
                ("mcp", false, true),
                ("some_future_tool", false, true),
                ("run_code", false, false),
                ("computer", false, false),
            ]
        );
        let unknown: Vec<&str> = entries
            .iter()
            .filter(|e| e.unknown)
            .map(|e| e.schema.name.as_str())
            .collect();
        assert_eq!(unknown, ["some_future_tool"]);
        assert_eq!(entries[12].call_item, Some("computer_call"));
        let patch = entries[1].schema.description.as_deref().unwrap();
        assert!(
            patch.starts_with("Patch files.\n\nThe input must be written in this lark grammar:\nstart: begin_patch"),
            "{patch}"
        );
        let spawn = entries[2].schema.description.as_deref().unwrap();
        assert_eq!(spawn, "Part of the `agents` tool group: Sub-agents.");
        assert!(entries[2].group.is_some());
        assert!(Arc::ptr_eq(
            entries[2].group.as_ref().unwrap(),
            entries[3].group.as_ref().unwrap()
        ));
        assert_eq!(
            entries[4].schema.parameters["required"],
            json!(["type", "command"])
        );
        assert_eq!(
            entries[0].schema.parameters["properties"]["cmd"]["type"],
            "string"
        );
    }

    #[test]
    fn long_grammars_are_clipped_in_the_description() {
        let definition = "x".repeat(GRAMMAR_MAX_BYTES * 2);
        let entries = parsed(json!([{"type": "custom", "name": "t",
            "format": {"type": "grammar", "syntax": "regex", "definition": definition}}]))
        .unwrap();
        let d = entries[0].schema.description.as_deref().unwrap();
        assert!(d.starts_with("The input must be written matching this regular expression:\n"));
        assert!(d.ends_with("(grammar cut: too long)"), "{d}");
        assert!(d.len() < GRAMMAR_MAX_BYTES + 200);
    }

    #[test]
    fn malformed_tools_are_refused_with_where_and_what() {
        let cases = [
            (
                json!({"type": "function"}),
                "`tools[0]` (a function tool) has no name",
            ),
            (json!([{"name": "x"}]), "`tools[0]` has no `type`"),
            (
                json!([{"type": "function"}]),
                "`tools[0]` (a function tool) has no name",
            ),
            (
                json!([{"type": "function", "name": 3}]),
                "`tools[0].name` must be",
            ),
            (
                json!([{"type": "function", "name": "a", "parameters": "x"}]),
                "`tools[0].parameters`",
            ),
            (
                json!([{"type": "custom", "name": "a", "format": "lark"}]),
                "`tools[0].format` must be an object",
            ),
            (
                json!([{"type": "custom", "name": "a", "format": {"type": "grammar"}}]),
                "without `definition`",
            ),
            (
                json!([{"type": "namespace", "name": "n"}]),
                "namespace without `tools`",
            ),
            (
                json!([{"type": "namespace", "name": "n", "tools": [{"type": "web_search"}]}]),
                "`tools[0].tools[0]` has type `web_search`",
            ),
            (json!([{"type": "custom", "name": "run_code"}]), "reserved"),
            (json!([7]), "`tools[0]` is not a tool object"),
        ];
        for (tools, expected) in cases {
            let err = parsed(tools.clone())
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            let expected = if tools.is_object() {
                "`tools` must be an array"
            } else {
                expected
            };
            assert!(err.contains(expected), "{tools}: {err}");
        }
    }

    #[test]
    fn no_tools_is_an_empty_list() {
        assert!(parse(None).unwrap().is_empty());
        let null = RawValue::from_string("null".into()).unwrap();
        assert!(parse(Some(&null)).unwrap().is_empty());
    }
}
