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
    let _ = tools;
    Err(ProxyError::InvalidRequest(
        "the Responses API's tools are not read yet".to_owned(),
    ))
}
