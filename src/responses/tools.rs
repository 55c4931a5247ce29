//! Tools of a Responses request: what is a client tool (collapsed into the
//! SDK in code mode) and what the provider runs itself (kept on the wire).

use serde_json::value::RawValue;

use crate::error::ProxyError;
use crate::plan::ToolEntry;

/// The proxy's `run_code` tool in the Responses shape (flat `function`).
pub fn run_code_tool() -> String {
    let chat: serde_json::Value =
        serde_json::from_str(crate::runtime::RUN_CODE_TOOL).unwrap_or(serde_json::Value::Null);
    let f = &chat["function"];
    serde_json::json!({"type": "function", "name": f["name"], "description": f["description"],
                       "parameters": f["parameters"]})
    .to_string()
}

/// Reads the `tools` of a Responses request.
pub(crate) fn parse(tools: Option<&RawValue>) -> Result<Vec<ToolEntry>, ProxyError> {
    let Some(tools) = tools.filter(|t| t.get() != "null") else {
        return Ok(Vec::new());
    };
    let items: Vec<Box<RawValue>> = serde_json::from_str(tools.get()).map_err(|_| {
        ProxyError::InvalidRequest("`tools` must be an array of tool objects".to_owned())
    })?;
    let mut out = Vec::new();
    for raw in items {
        let t: serde_json::Value = serde_json::from_str(raw.get()).unwrap_or_default();
        let kind = t
            .get("type")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        let name = t
            .get("name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        let (provider, freeform) = match kind {
            "function" => (false, false),
            "custom" => (false, true),
            _ => (true, false),
        };
        out.push(ToolEntry {
            raw,
            provider,
            call_item: freeform.then_some("custom_tool_call"),
            schema: crate::sdk::ToolSchema {
                name: name.to_owned(),
                description: t
                    .get("description")
                    .and_then(|d| d.as_str())
                    .map(str::to_owned),
                parameters: t
                    .get("parameters")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({})),
                freeform,
            },
        });
    }
    Ok(out)
}
