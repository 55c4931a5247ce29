//! How a program passes a tool's arguments: what a lone positional
//! argument stands for, and the object form an error shows.

use serde_json::Value;

use super::{naming, ToolSchema};

/// How a program passes a tool's arguments, read from its schema (sent to
/// a sandbox worker with the docs).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Params {
    /// The parameter a lone positional argument stands for
    /// (`tools.read("a.txt")` is `{ path: "a.txt" }`): the one required
    /// parameter, or the only one there is.
    pub sole: Option<String>,
    /// The call's object form, for errors: `tools.write({ path, content })`.
    pub form: String,
}

impl Params {
    /// The most names a form shows.
    const SHOWN: usize = 6;

    pub(super) fn of(tool: &ToolSchema) -> Params {
        let names: Vec<&str> = tool
            .parameters
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let required: Vec<&str> = tool
            .parameters
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let sole = match (required.as_slice(), names.as_slice()) {
            ([one], _) | ([], [one]) => Some((*one).to_owned()),
            _ => None,
        };
        let shown = if required.is_empty() {
            &names
        } else {
            &required
        };
        let mut fields = shown[..shown.len().min(Self::SHOWN)].join(", ");
        if shown.len() > Self::SHOWN {
            fields.push_str(", ...");
        }
        let callee = naming::tool_access(&tool.name);
        let form = if fields.is_empty() {
            format!("{callee}({{}})")
        } else {
            format!("{callee}({{ {fields} }})")
        };
        Params { sole, form }
    }
}
