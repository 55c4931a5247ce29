//! The tools a request declares, read by its dialect: which are the
//! client's (judged, shown in the SDK) and which the provider runs itself
//! (kept on the wire as declared).
//!
//! The readers sit below the tool plan ([`crate::plan`]) that uses them
//! and the dialects that rewrite requests with it, so the plan names no
//! dialect module.

pub(crate) mod chat;
pub mod client_code;
pub(crate) mod messages;
pub(crate) mod responses;

use std::sync::Arc;

use serde_json::value::RawValue;

use crate::api::Api;
use crate::error::ProxyError;
use crate::sdk::ToolSchema;

pub use chat::RUN_CODE_TOOL;

/// Reads the `tools` of a request in `dialect`, in declaration order.
pub(crate) fn parse(dialect: Api, tools: Option<&RawValue>) -> Result<Vec<ToolEntry>, ProxyError> {
    match dialect {
        Api::Chat => chat::parse(tools),
        Api::Responses => responses::parse(tools),
        Api::Messages => messages::parse(tools),
    }
}

/// The proxy's `run_code` tool in `dialect`'s shape, for the embedded runtime.
pub(crate) fn run_code_tool(dialect: Api) -> String {
    match dialect {
        Api::Chat => RUN_CODE_TOOL.to_owned(),
        Api::Responses => responses::run_code_tool(),
        Api::Messages => messages::run_code_tool(),
    }
}

/// A group of tools declared together (a Responses `namespace`): its
/// declaration, whose `tools` the wire rewrites to the ones it keeps.
#[derive(Debug)]
pub(crate) struct ToolGroup {
    /// The group's declaration, every field raw.
    pub(crate) object: crate::wire::RawObject,
}

/// One tool of a request, read by its dialect.
pub(crate) struct ToolEntry {
    /// The tool as the client declared it (for a tool of a namespace: the
    /// whole group's declaration is written by the dialect).
    pub(crate) raw: Box<RawValue>,
    /// The tool as the SDK shows it.
    pub(crate) schema: ToolSchema,
    /// Run by the provider itself (web search, ...): stays on the wire.
    pub(crate) provider: bool,
    /// A type this proxy does not know (kept on the wire as the provider's):
    /// in a mode that can deny, the plan refuses it, since it may be a tool
    /// the client executes.
    pub(crate) unknown: bool,
    /// The item type a nested call of this tool reaches the client as, when
    /// not the dialect's plain function call (Responses: `custom_tool_call`,
    /// `local_shell_call`, `shell_call`, `apply_patch_call`).
    pub(crate) call_item: Option<&'static str>,
    /// The group declaring it, if any: `raw` is then the tool's own
    /// declaration inside the group, and the wire rebuilds the group.
    pub(crate) group: Option<Arc<ToolGroup>>,
}
