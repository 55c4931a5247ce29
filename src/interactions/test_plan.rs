//! The plan the folder's unit tests judge under: an agent on the
//! Interactions API with `read`, `bash`, its own `run_code`, and Google
//! Search.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::mode::{Mode, Runtime};
use crate::plan::ToolPlan;
use crate::preset::Catalog;

fn object(prop: &str) -> Value {
    json!({"type": "object", "properties": {prop: {"type": "string"}}, "required": [prop]})
}

/// The agent's plan in `mode` on `runtime`.
pub(crate) fn plan(mode: Mode, runtime: Runtime) -> Arc<ToolPlan> {
    let tools = json!([
        {"type": "function", "name": "read", "description": "Reads a file.",
         "parameters": object("path")},
        {"type": "function", "name": "bash", "description": "Runs a command.",
         "parameters": object("command")},
        {"type": "function", "name": "run_code", "description": "Run a JavaScript program.",
         "parameters": object("code")},
        {"type": "google_search"}
    ]);
    plan_with(tools, mode, runtime)
}

/// A plan of `tools` (the API's tool objects) in `mode` on `runtime`.
pub(crate) fn plan_with(tools: Value, mode: Mode, runtime: Runtime) -> Arc<ToolPlan> {
    let raw = serde_json::value::to_raw_value(&tools).expect("tools serialise");
    let catalog = Catalog::builtin(mode);
    let preset = catalog.get("standard").expect("the built-in preset");
    Arc::new(
        ToolPlan::build_for(&super::tools::TOOLS, Some(&raw), preset, mode, runtime)
            .expect("a valid plan"),
    )
}
