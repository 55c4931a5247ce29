//! Tools of a Gemini request: `tools` is a list of `Tool` objects, each
//! holding `functionDeclarations` (client tools, collapsed into the SDK in
//! code mode) and the provider's own tools (`googleSearch`,
//! `codeExecution`, `urlContext`, ...: kept on the wire).
//!
//! A `Tool` is a group: its function declarations are written back into
//! it, so the wire keeps the client's grouping; each provider tool becomes
//! a `Tool` of its own. A field no one here knows may be a tool the client
//! executes (`computerUse` is: its actions are calls the client runs), so
//! it is unknown, and refused in a mode that can deny.

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use crate::api::Api;
use crate::error::ProxyError;
use crate::sdk::ToolSchema;
use crate::tools::{declared_items, ToolEntry, ToolGroup, ToolReader, RUN_CODE_TOOL};
use crate::wire::{camel, to_raw, RawObject};

/// How a Gemini request's tools are read.
pub const TOOLS: ToolReader = ToolReader {
    api: Api::Gemini,
    parse,
    run_code_tool,
    keys: crate::wire::Keys::Proto,
    finish_wire: crate::tools::wire_as_built,
};

/// The proxy's `run_code` tool as a Gemini `Tool`.
fn run_code_tool() -> String {
    let chat: Value = serde_json::from_str(RUN_CODE_TOOL).unwrap_or(Value::Null);
    let f = &chat["function"];
    json!({"functionDeclarations": [{"name": f["name"], "description": f["description"],
                                     "parametersJsonSchema": f["parameters"]}]})
    .to_string()
}

/// The provider's own tools, by their field in a `Tool` (camelCase; a
/// snake_case spelling is read as its camelCase twin).
const PROVIDER_TOOLS: &[&str] = &[
    "googleSearch",
    "googleSearchRetrieval",
    "codeExecution",
    "urlContext",
    "fileSearch",
    "googleMaps",
    "retrieval",
    "enterpriseWebSearch",
];

/// Reads the `tools` of a Gemini request, in declaration order.
pub(crate) fn parse(tools: Option<&RawValue>) -> Result<Vec<ToolEntry>, ProxyError> {
    let items = declared_items(tools, "`tools` must be an array of Tool objects")?;
    let mut out = Vec::new();
    for (i, raw) in items.into_iter().enumerate() {
        let tool: Map<String, Value> = serde_json::from_str(raw.get()).map_err(|e| {
            ProxyError::InvalidRequest(format!("`tools[{i}]` is not a Tool object: {e}"))
        })?;
        for (key, value) in &tool {
            let name = camel(key);
            if name == "functionDeclarations" {
                declarations(i, key, value, &mut out)?;
                continue;
            }
            let known = PROVIDER_TOOLS.contains(&name.as_ref());
            out.push(ToolEntry::provider(
                to_raw(&json!({ key.as_str(): value })),
                &name,
                known,
            ));
        }
    }
    Ok(out)
}

/// The function declarations of `tools[i]`, each a client tool of the
/// group `{key: [...]}`.
fn declarations(
    i: usize,
    key: &str,
    value: &Value,
    out: &mut Vec<ToolEntry>,
) -> Result<(), ProxyError> {
    let Value::Array(decls) = value else {
        return Err(ProxyError::InvalidRequest(format!(
            "`tools[{i}].{key}` must be an array of function declarations"
        )));
    };
    let key: &'static str = if key == "functionDeclarations" {
        "functionDeclarations"
    } else {
        "function_declarations"
    };
    let object = RawObject::parse(format!("{{\"{key}\":[]}}").as_bytes())
        .map_err(|_| ProxyError::InvalidRequest("a Tool object".into()))?;
    let group = Arc::new(ToolGroup { object, key });
    for (j, decl) in decls.iter().enumerate() {
        let name = decl
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                ProxyError::InvalidRequest(format!(
                    "`tools[{i}].{key}[{j}]` has no name; give it `name`"
                ))
            })?;
        let parameters = [
            "parametersJsonSchema",
            "parameters_json_schema",
            "parameters",
        ]
        .iter()
        .find_map(|k| decl.get(*k).filter(|p| p.is_object()))
        .map(json_schema)
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        let schema = ToolSchema {
            name: name.to_owned(),
            description: decl
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
            parameters,
            freeform: false,
        };
        out.push(ToolEntry {
            group: Some(group.clone()),
            ..ToolEntry::client(to_raw(decl), schema)
        });
    }
    Ok(())
}

/// A declaration's `parameters` as JSON Schema: Gemini's OpenAPI subset
/// spells types in capitals (`OBJECT`, `STRING`), which the SDK reads in
/// lower case.
fn json_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("type", Value::String(t)) => Value::String(t.to_ascii_lowercase()),
                        _ => json_schema(v),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(json_schema).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(tools: Value) -> Vec<ToolEntry> {
        parse(Some(&to_raw(&tools))).unwrap()
    }

    #[test]
    fn declarations_are_client_tools_and_googles_own_stay_on_the_wire() {
        let tools = read(json!([
            {"functionDeclarations": [
                {"name": "read_file", "description": "Reads.", "parametersJsonSchema":
                    {"type": "object", "properties": {"path": {"type": "string"}}}},
                {"name": "run_shell_command", "parameters":
                    {"type": "OBJECT", "properties": {"command": {"type": "STRING"}}}}],
             "googleSearch": {}},
            {"code_execution": {}},
        ]));
        let names: Vec<(&str, bool, bool)> = tools
            .iter()
            .map(|t| (t.schema.name.as_str(), t.provider, t.unknown))
            .collect();
        assert_eq!(
            names,
            [
                ("read_file", false, false),
                ("run_shell_command", false, false),
                ("googleSearch", true, false),
                ("codeExecution", true, false),
            ]
        );
        assert_eq!(
            tools[1].schema.parameters["properties"]["command"]["type"],
            "string"
        );
        assert_eq!(tools[3].raw.get(), r#"{"code_execution":{}}"#);
    }

    #[test]
    fn a_tool_field_no_one_knows_is_unknown() {
        let tools = read(json!([{"computerUse": {"environment": "ENVIRONMENT_BROWSER"}}]));
        assert!(tools[0].unknown && tools[0].provider);
        let err = parse(Some(&to_raw(&json!([{"functionDeclarations": [{}]}]))))
            .err()
            .unwrap();
        assert!(err.to_string().contains("has no name"), "{err}");
    }
}
