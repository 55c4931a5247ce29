//! The tools a request declares, read by its dialect: which are the
//! client's (judged, shown in the SDK) and which the provider runs itself
//! (kept on the wire as declared).
//!
//! Each dialect's reader sits in its folder (`chat/tools.rs`, ...) and
//! reaches the plan as a [`ToolReader`] its dialect hands over, so the
//! plan names no dialect module.

pub mod client_code;

use std::sync::Arc;

use serde_json::value::RawValue;

use crate::api::Api;
use crate::error::ProxyError;
use crate::sdk::ToolSchema;

/// The `run_code` tool the proxy announces when it runs programs itself, in
/// chat's shape: each dialect writes its own from this one.
pub const RUN_CODE_TOOL: &str = r#"{"type":"function","function":{"name":"run_code","description":"Run a JavaScript or TypeScript program: the body of an async function that calls the tools described in the system prompt as `await tools.<name>(args)`. Run independent calls together with Promise.all. The program's console output and its return value (as JSON; without a `return`, the last expression's value) come back as the result; intermediate tool results stay inside the program.","parameters":{"type":"object","properties":{"code":{"type":"string","description":"The body of an async function."}},"required":["code"]}}}"#;

/// How a dialect reads the tools its requests declare.
pub struct ToolReader {
    /// The API whose requests it reads (the plan's cache key).
    pub(crate) api: Api,
    /// Reads a request's `tools`, in declaration order.
    pub(crate) parse: fn(Option<&RawValue>) -> Result<Vec<ToolEntry>, ProxyError>,
    /// The proxy's `run_code` tool in the dialect's shape, for the
    /// embedded runtime.
    pub(crate) run_code_tool: fn() -> String,
    /// How the provider tells the keys of a tool apart.
    pub(crate) keys: crate::wire::Keys,
    /// The tools the wire announces, finished from the client's declared
    /// ones once per tool set, with the plan (Messages moves the client's
    /// cache breakpoint onto them).
    pub(crate) finish_wire: FinishWire,
}

/// Finishes the wire's tools from the client's declared ones.
pub(crate) type FinishWire =
    fn(Option<&RawValue>, Box<RawValue>) -> Result<Box<RawValue>, ProxyError>;

/// The wire's tools as the plan built them.
pub(crate) fn wire_as_built(
    _declared: Option<&RawValue>,
    wire: Box<RawValue>,
) -> Result<Box<RawValue>, ProxyError> {
    Ok(wire)
}

/// The entries of a request's `tools` array, each raw; none for a missing
/// or null `tools`. `message` says what the array must hold when it is not
/// an array.
pub(crate) fn declared_items(
    tools: Option<&RawValue>,
    message: &str,
) -> Result<Vec<Box<RawValue>>, ProxyError> {
    let Some(tools) = tools.filter(|t| t.get() != "null") else {
        return Ok(Vec::new());
    };
    serde_json::from_str(tools.get()).map_err(|_| ProxyError::InvalidRequest(message.to_owned()))
}

/// A group of tools declared together (a Responses `namespace`, a Gemini
/// `Tool`): its declaration, whose list of tools (under `key`) the wire
/// rewrites to the ones it keeps.
#[derive(Debug)]
pub(crate) struct ToolGroup {
    /// The group's declaration, every field raw.
    pub(crate) object: crate::wire::RawObject,
    /// The field listing its tools (`tools`, `functionDeclarations`).
    pub(crate) key: &'static str,
}

/// How a tool takes part in the provider's deferred loading (a tool
/// search that loads tools declared with `defer_loading: true`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Deferral {
    /// Loaded from the start.
    #[default]
    Loaded,
    /// Loaded when the provider's tool search finds it: declared with
    /// `defer_loading: true`, or a group of the provider's whose tools may
    /// be (an MCP toolset).
    Deferred,
    /// The provider's own tool search: it finds deferred tools of the
    /// wire, so a wire with none leaves it nothing to find.
    Search,
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
    /// Its part in the provider's deferred loading.
    pub(crate) deferral: Deferral,
}

impl ToolEntry {
    /// A tool the client runs, declared as `raw`, shown as `schema`: a
    /// plain function call, of no group, loaded.
    pub(crate) fn client(raw: Box<RawValue>, schema: ToolSchema) -> ToolEntry {
        ToolEntry {
            raw,
            schema,
            provider: false,
            unknown: false,
            call_item: None,
            group: None,
            deferral: Deferral::Loaded,
        }
    }

    /// A tool the provider runs itself, of type `kind` (`known`: one this
    /// proxy knows the provider runs), declared as `raw`.
    pub(crate) fn provider(raw: Box<RawValue>, kind: &str, known: bool) -> ToolEntry {
        ToolEntry {
            provider: true,
            unknown: !known,
            ..ToolEntry::client(
                raw,
                ToolSchema {
                    name: kind.to_owned(),
                    ..ToolSchema::default()
                },
            )
        }
    }
}
