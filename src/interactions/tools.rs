//! Tools of an Interactions request: `tools` is a flat list, each entry
//! typed. A `function` is a client tool (collapsed into the SDK in code
//! mode); Google's own (`google_search`, `code_execution`, `url_context`,
//! `mcp_server`, `file_search`, `google_maps`, `retrieval`) stay on the
//! wire as declared, never judged. A type no one here knows may be a tool
//! the client executes (`computer_use` is: its actions are calls the
//! client runs), so it is unknown, and refused in a mode that can deny.

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use crate::api::Api;
use crate::error::ProxyError;
use crate::sdk::ToolSchema;
use crate::tools::{declared_items, ToolEntry, ToolReader, RUN_CODE_TOOL};

/// How an Interactions request's tools are read.
pub const TOOLS: ToolReader = ToolReader {
    api: Api::Interactions,
    parse,
    run_code_tool,
    keys: crate::wire::Keys::Exact,
    finish_wire: crate::tools::wire_as_built,
};

/// The tool types the provider runs itself.
const PROVIDER_TOOLS: &[&str] = &[
    "google_search",
    "code_execution",
    "url_context",
    "mcp_server",
    "file_search",
    "google_maps",
    "retrieval",
];

/// The proxy's `run_code` tool in the Interactions shape (flat `function`).
fn run_code_tool() -> String {
    let chat: Value = serde_json::from_str(RUN_CODE_TOOL).unwrap_or(Value::Null);
    let f = &chat["function"];
    json!({"type": "function", "name": f["name"], "description": f["description"],
           "parameters": f["parameters"]})
    .to_string()
}

/// Reads the `tools` of an Interactions request, in declaration order.
pub(crate) fn parse(tools: Option<&RawValue>) -> Result<Vec<ToolEntry>, ProxyError> {
    let items = declared_items(tools, "`tools` must be an array of tool objects")?;
    let mut out = Vec::with_capacity(items.len());
    for (i, raw) in items.into_iter().enumerate() {
        let tool: Map<String, Value> = serde_json::from_str(raw.get()).map_err(|e| {
            ProxyError::InvalidRequest(format!("`tools[{i}]` is not a tool object: {e}"))
        })?;
        let kind = tool.get("type").and_then(Value::as_str).ok_or_else(|| {
            ProxyError::InvalidRequest(format!(
                "`tools[{i}]` has no `type`; give it one (\"function\", \"google_search\", ...)"
            ))
        })?;
        if kind != "function" {
            out.push(ToolEntry::provider(
                raw,
                kind,
                PROVIDER_TOOLS.contains(&kind),
            ));
            continue;
        }
        let name = tool
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                ProxyError::InvalidRequest(format!("`tools[{i}]` has no name; give it `name`"))
            })?;
        let parameters = tool
            .get("parameters")
            .filter(|p| p.is_object())
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        out.push(ToolEntry::client(
            raw,
            ToolSchema {
                name: name.to_owned(),
                description: tool
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                parameters,
                freeform: false,
            },
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::to_raw;

    fn read(tools: Value) -> Vec<ToolEntry> {
        parse(Some(&to_raw(&tools))).unwrap()
    }

    #[test]
    fn functions_are_client_tools_googles_stay_and_others_are_unknown() {
        let tools = read(json!([
            {"type": "function", "name": "get_weather", "description": "Weather.",
             "parameters": {"type": "object", "properties": {"location": {"type": "string"}}}},
            {"type": "google_search"},
            {"type": "computer_use", "environment": "browser"},
        ]));
        let seen: Vec<(&str, bool, bool)> = tools
            .iter()
            .map(|t| (t.schema.name.as_str(), t.provider, t.unknown))
            .collect();
        assert_eq!(
            seen,
            [
                ("get_weather", false, false),
                ("google_search", true, false),
                ("computer_use", true, true),
            ]
        );
        assert_eq!(tools[1].raw.get(), r#"{"type":"google_search"}"#);
        let err = parse(Some(&to_raw(&json!([{"type": "function"}]))))
            .err()
            .unwrap();
        assert!(err.to_string().contains("has no name"), "{err}");
    }
}
