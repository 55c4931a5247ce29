//! Tools of a Messages request: client tools (collapsed into the SDK in
//! code mode) and the provider's server tools (kept on the wire).
//!
//! A client tool declared with `defer_loading: true` (Claude Code's tools
//! its `ToolSearch` loaded, with tool search on) is a client tool like any
//! other: collapsed with the rest, so its flag leaves the wire with it.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::api::Api;
use crate::error::ProxyError;
use crate::sdk::ToolSchema;
use crate::tools::{declared_items, Deferral, ToolEntry, ToolReader, RUN_CODE_TOOL};
use crate::wire::{to_raw, RawObject};

/// How a Messages request's tools are read.
pub const TOOLS: ToolReader = ToolReader {
    api: Api::Messages,
    parse,
    run_code_tool,
    keys: crate::wire::Keys::Exact,
    finish_wire: with_client_breakpoint,
};

/// The wire's tools with the client's cache breakpoint: a `cache_control`
/// on the client's last tool caches all its tools, so it moves to the last
/// tool of the wire, unless that one has its own. Once per tool set: the
/// client's whole `tools` array is read for its last entry.
fn with_client_breakpoint(
    declared: Option<&RawValue>,
    wire: Box<RawValue>,
) -> Result<Box<RawValue>, ProxyError> {
    #[derive(Deserialize)]
    struct Breakpoint<'a> {
        #[serde(borrow)]
        cache_control: Option<&'a RawValue>,
    }
    fn breakpoint(tool: &RawValue) -> Option<&RawValue> {
        serde_json::from_str::<Breakpoint<'_>>(tool.get())
            .ok()?
            .cache_control
    }
    let declared = declared.and_then(|t| serde_json::from_str::<Vec<&RawValue>>(t.get()).ok());
    let Some(cc) = declared.as_ref().and_then(|t| breakpoint(t.last()?)) else {
        return Ok(wire);
    };
    let mut tools: Vec<&RawValue> = serde_json::from_str(wire.get()).unwrap_or_default();
    let Some(last) = tools.pop().filter(|last| breakpoint(last).is_none()) else {
        return Ok(wire);
    };
    let mut object = RawObject::parse(last.get().as_bytes())
        .map_err(|e| ProxyError::InvalidRequest(format!("`tools`: {e}")))?;
    object.set("cache_control", cc.to_owned());
    let last = to_raw(&object);
    tools.push(&last);
    Ok(to_raw(&tools))
}

/// The proxy's `run_code` tool in the Messages shape (`input_schema`).
fn run_code_tool() -> String {
    let chat: Value = serde_json::from_str(RUN_CODE_TOOL).unwrap_or(Value::Null);
    let f = &chat["function"];
    json!({"name": f["name"], "description": f["description"], "input_schema": f["parameters"]})
        .to_string()
}

/// Whether a tool of this `type` is executed by the client: untyped
/// (`custom`) tools and the fixed-schema `bash_*`, `text_editor_*`,
/// `computer_*` and `memory_*`.
fn is_client_kind(kind: &str) -> bool {
    kind == "custom"
        || ["bash_", "text_editor_", "computer_", "memory_"]
            .iter()
            .any(|p| kind.starts_with(p))
}

/// Whether a typed tool is one of the provider's server tools; a type
/// neither this nor [`is_client_kind`] knows is unknown.
fn is_server_kind(kind: &str) -> bool {
    [
        "web_search_",
        "web_fetch_",
        "code_execution_",
        "tool_search_tool_",
    ]
    .iter()
    .any(|p| kind.starts_with(p))
        || kind == "mcp_toolset"
}

/// A tool's part in the provider's deferred loading: `defer_loading: true`
/// defers any tool (the tool search tool excepted, which the API refuses
/// to defer); an `mcp_toolset` defers its tools in `default_config` or
/// `configs`, and counts as deferred whatever it says (a tool search kept
/// for nothing costs less than one dropped that the toolset needed).
fn deferral(kind: &str, tool: &Value) -> Deferral {
    if kind.starts_with("tool_search_tool_") {
        Deferral::Search
    } else if kind == "mcp_toolset" || tool.get("defer_loading") == Some(&Value::Bool(true)) {
        Deferral::Deferred
    } else {
        Deferral::Loaded
    }
}

/// The fields of a tool the request side looks at.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<std::borrow::Cow<'a, str>>,
}

/// The names of the provider's server tools a `tools` value declares (a
/// `tool_choice` may name them; they stay on the wire).
pub(crate) fn server_tool_names(tools: Option<&RawValue>) -> Vec<String> {
    let Some(items) = tools.and_then(|t| serde_json::from_str::<Vec<&RawValue>>(t.get()).ok())
    else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|raw| serde_json::from_str::<Head<'_>>(raw.get()).ok())
        .filter(|h| !is_client_kind(h.kind.as_deref().unwrap_or("custom")))
        .filter_map(|h| h.name.map(std::borrow::Cow::into_owned))
        .collect()
}

/// Reads the `tools` of a Messages request: a tool without a `type` (or
/// `custom`) is a client tool; a typed one is the provider's, except the
/// client-executed `bash_*` and `text_editor_*` tools.
pub(crate) fn parse(tools: Option<&RawValue>) -> Result<Vec<ToolEntry>, ProxyError> {
    let items = declared_items(tools, "`tools` must be an array of tool objects")?;
    let mut out = Vec::with_capacity(items.len());
    for (i, raw) in items.into_iter().enumerate() {
        let t: Value = serde_json::from_str(raw.get()).map_err(|e| {
            ProxyError::InvalidRequest(format!("`tools[{i}]` is not a tool object: {e}"))
        })?;
        let kind = t.get("type").and_then(Value::as_str).unwrap_or("custom");
        let name = t
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let client = is_client_kind(kind);
        if client && name.is_empty() {
            return Err(ProxyError::InvalidRequest(format!(
                "`tools[{i}]` has no name; give it `name`"
            )));
        }
        let parameters = match (kind, t.get("input_schema")) {
            (_, Some(schema)) if schema.is_object() => schema.clone(),
            (k, _) if k.starts_with("bash_") => json!({"type": "object",
                "properties": {"command": {"type": "string"}, "restart": {"type": "boolean"}}}),
            (k, _) if k.starts_with("computer_") => json!({"type": "object",
                "properties": {"action": {"type": "string", "enum": ["screenshot", "left_click", "right_click",
                    "middle_click", "double_click", "triple_click", "mouse_move", "left_click_drag", "type", "key",
                    "scroll", "wait", "hold_key", "left_mouse_down", "left_mouse_up", "cursor_position", "zoom"]},
                               "coordinate": {"type": "array", "items": {"type": "integer"}},
                               "text": {"type": "string"}, "scroll_direction": {"type": "string"},
                               "scroll_amount": {"type": "integer"}, "duration": {"type": "number"}},
                "required": ["action"]}),
            (k, _) if k.starts_with("memory_") => json!({"type": "object",
                "properties": {"command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "delete", "rename"]},
                               "path": {"type": "string"}, "file_text": {"type": "string"},
                               "old_str": {"type": "string"}, "new_str": {"type": "string"},
                               "insert_line": {"type": "integer"}, "insert_text": {"type": "string"},
                               "old_path": {"type": "string"}, "new_path": {"type": "string"}},
                "required": ["command"]}),
            (k, _) if k.starts_with("text_editor_") => json!({"type": "object",
                "properties": {"command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "undo_edit"]},
                               "path": {"type": "string"}, "file_text": {"type": "string"},
                               "old_str": {"type": "string"}, "new_str": {"type": "string"},
                               "insert_line": {"type": "integer"}, "view_range": {"type": "array", "items": {"type": "integer"}}},
                "required": ["command", "path"]}),
            _ => json!({}),
        };
        out.push(ToolEntry {
            raw,
            schema: ToolSchema {
                name: if client { name } else { kind.to_owned() },
                description: t
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                parameters,
                freeform: false,
            },
            provider: !client,
            unknown: !client && !is_server_kind(kind),
            call_item: None,
            group: None,
            deferral: deferral(kind, &t),
        });
    }
    Ok(out)
}
