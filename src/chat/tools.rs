//! Tools of a chat-completions request: `function` and `custom` entries,
//! each a client tool.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::api::Api;
use crate::error::ProxyError;
use crate::sdk::ToolSchema;
use crate::tools::{declared_items, ToolEntry, ToolReader, RUN_CODE_TOOL};

/// How a chat request's tools are read.
pub const TOOLS: ToolReader = ToolReader {
    api: Api::Chat,
    parse,
    run_code_tool: || RUN_CODE_TOOL.to_owned(),
    keys: crate::wire::Keys::Exact,
    finish_wire: crate::tools::wire_as_built,
};

#[derive(Deserialize)]
struct ToolIn {
    function: Option<FunctionIn>,
    custom: Option<FunctionIn>,
    name: Option<String>,
    description: Option<String>,
    parameters: Option<Value>,
}

#[derive(Deserialize)]
struct FunctionIn {
    name: String,
    description: Option<String>,
    parameters: Option<Value>,
}

/// Two different names a tool entry gives itself, if it does.
fn conflicting_names(t: &ToolIn) -> Option<(&str, &str)> {
    let mut names = [&t.function, &t.custom]
        .into_iter()
        .flatten()
        .map(|f| f.name.as_str())
        .chain(t.name.as_deref());
    let first = names.next()?;
    names.find(|n| *n != first).map(|other| (first, other))
}

pub(crate) fn parse(tools: Option<&RawValue>) -> Result<Vec<ToolEntry>, ProxyError> {
    let items = declared_items(tools, "`tools` must be an array of tool objects")?;
    let mut out = Vec::with_capacity(items.len());
    for (i, raw) in items.into_iter().enumerate() {
        let t: ToolIn = serde_json::from_str(raw.get()).map_err(|e| {
            ProxyError::InvalidRequest(format!("`tools[{i}]` is not a tool object: {e}"))
        })?;
        // Function tools carry their fields under `function`, custom tools
        // under `custom` (or at the top). A tool that names itself twice
        // differently has no one reading: the provider could see either.
        if let Some((a, b)) = conflicting_names(&t) {
            return Err(ProxyError::InvalidRequest(format!(
                "`tools[{i}]` is named both `{a}` and `{b}`; give each tool one name"
            )));
        }
        let (name, description, parameters) = match t.function.or(t.custom) {
            Some(f) => (f.name, f.description, f.parameters),
            None => match t.name {
                Some(n) => (n, t.description, t.parameters),
                None => {
                    return Err(ProxyError::InvalidRequest(format!(
                        "`tools[{i}]` has no name; give it `function.name`"
                    )))
                }
            },
        };
        out.push(ToolEntry::client(
            raw,
            ToolSchema {
                name,
                description,
                parameters: parameters.unwrap_or_else(|| Value::Object(Default::default())),
                freeform: false,
            },
        ));
    }
    Ok(out)
}

// Chat is the dialect the tests and benchmarks plan for when they name
// none; the proxy's own paths hand the plan their dialect's reader.
#[cfg(any(test, feature = "bench-internals"))]
impl crate::plan::ToolPlan {
    /// Builds the plan for the raw `tools` value of a chat request.
    pub fn build(
        tools: Option<&RawValue>,
        preset: &crate::preset::Preset,
        mode: crate::mode::Mode,
        runtime: crate::mode::Runtime,
    ) -> Result<crate::plan::ToolPlan, ProxyError> {
        crate::plan::ToolPlan::build_for(&TOOLS, tools, preset, mode, runtime)
    }
}

#[cfg(any(test, feature = "bench-internals"))]
impl crate::plan::PlanCache {
    /// The plan for this tool set, preset and mode of a Chat Completions
    /// request, built on a miss.
    pub fn get_or_build(
        &self,
        tools: Option<&RawValue>,
        preset: &crate::preset::Preset,
        mode: crate::mode::Mode,
        runtime: crate::mode::Runtime,
    ) -> Result<std::sync::Arc<crate::plan::ToolPlan>, ProxyError> {
        self.get_or_build_for(&TOOLS, tools, preset, mode, runtime)
    }
}
