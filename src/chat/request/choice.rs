//! The request fields that name tools besides `tools`: `tool_choice`, and
//! the legacy `functions` and `function_call` (docs/modes.md, "What the model sees").
//!
//! When the wire may lack a declared tool, each field is read into what it
//! means, judged against the plan, and written back from that reading: the
//! provider gets exactly what the proxy judged, never a name the wire lacks
//! or a field the proxy did not read.

use serde_json::{json, Map, Value};

use crate::error::ProxyError;
use crate::mode::{Mode, RUN_CODE};
use crate::plan::ToolPlan;
use crate::turn::callable;

/// The two kinds of named tool a choice can force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Function,
    Custom,
}

/// A `tool_choice` as the proxy reads it.
#[derive(Debug, PartialEq)]
enum Choice {
    /// `none`, `auto` or `required`.
    Keyword(&'static str),
    /// One named tool.
    Forced(Kind, String),
    /// `allowed_tools`: a subset, with `auto` or `required`.
    Allowed(&'static str, Vec<(Kind, String)>),
}

fn invalid(what: &str) -> ProxyError {
    ProxyError::InvalidRequest(format!(
        "{what}; use \"none\", \"auto\", \"required\", {{\"type\":\"function\",\"function\":{{\"name\":...}}}} \
         or {{\"type\":\"allowed_tools\",\"allowed_tools\":{{\"mode\":\"auto\",\"tools\":[...]}}}}"
    ))
}

fn keyword(s: &str, allowed: &[&'static str]) -> Option<&'static str> {
    allowed.iter().copied().find(|k| *k == s)
}

/// The name of a tool reference: `{"type":"function","function":{"name"}}`,
/// `{"type":"custom","custom":{"name"}}`, or `name` at the top.
fn named(v: &Value, field: &str) -> Result<(Kind, String), ProxyError> {
    let kind = match v.get("type").and_then(Value::as_str) {
        None | Some("function") => Kind::Function,
        Some("custom") => Kind::Custom,
        Some(other) => {
            return Err(invalid(&format!(
                "`{field}` has type `{other}`, which this proxy does not read"
            )))
        }
    };
    let nested = match kind {
        Kind::Function => "function",
        Kind::Custom => "custom",
    };
    let inner = v.get(nested).and_then(|f| f.get("name"));
    let top = v.get("name");
    let name = match (inner, top) {
        (Some(a), Some(b)) if a != b => {
            return Err(invalid(&format!("`{field}` names two tools")));
        }
        (Some(n), _) | (None, Some(n)) => n.as_str(),
        (None, None) => None,
    };
    match name {
        Some(n) => Ok((kind, n.to_owned())),
        None => Err(invalid(&format!("`{field}` names no tool"))),
    }
}

fn read_choice(v: &Value) -> Result<Choice, ProxyError> {
    match v {
        Value::String(s) => keyword(s, &["none", "auto", "required"])
            .map(Choice::Keyword)
            .ok_or_else(|| invalid(&format!("`tool_choice` is {s:?}"))),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("allowed_tools") => {
            // The chat shape nests mode and tools; the Responses shape does not.
            let inner = o.get("allowed_tools").unwrap_or(v);
            let mode = inner
                .get("mode")
                .and_then(Value::as_str)
                .and_then(|m| keyword(m, &["auto", "required"]))
                .ok_or_else(|| {
                    invalid("`tool_choice.allowed_tools.mode` is not auto or required")
                })?;
            let tools = inner
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| invalid("`tool_choice.allowed_tools.tools` is not an array"))?;
            let tools = tools
                .iter()
                .enumerate()
                .map(|(i, t)| named(t, &format!("tool_choice.allowed_tools.tools[{i}]")))
                .collect::<Result<_, _>>()?;
            Ok(Choice::Allowed(mode, tools))
        }
        Value::Object(_) => {
            let (kind, name) = named(v, "tool_choice")?;
            Ok(Choice::Forced(kind, name))
        }
        _ => Err(invalid("`tool_choice` is neither a string nor an object")),
    }
}

fn judge_choice(choice: Choice, plan: &ToolPlan) -> Choice {
    match choice {
        Choice::Keyword(k) => Choice::Keyword(k),
        Choice::Forced(kind, name) if callable(plan, &name) => Choice::Forced(kind, name),
        Choice::Forced(..) => match plan.mode {
            // The forced tool is reached through run_code: force that.
            Mode::Code => Choice::Forced(Kind::Function, RUN_CODE.to_owned()),
            Mode::Native | Mode::Both => Choice::Keyword("auto"),
        },
        Choice::Allowed(mode, tools) => {
            let mut kept: Vec<(Kind, String)> = Vec::with_capacity(tools.len());
            for (kind, name) in tools {
                let entry = if callable(plan, &name) {
                    (kind, name)
                } else if plan.mode == Mode::Code {
                    (Kind::Function, RUN_CODE.to_owned())
                } else {
                    continue;
                };
                if !kept.contains(&entry) {
                    kept.push(entry);
                }
            }
            if kept.is_empty() {
                Choice::Keyword(mode)
            } else {
                Choice::Allowed(mode, kept)
            }
        }
    }
}

fn reference(kind: Kind, name: &str) -> Value {
    match kind {
        Kind::Function => json!({"type": "function", "function": {"name": name}}),
        Kind::Custom => json!({"type": "custom", "custom": {"name": name}}),
    }
}

fn render_choice(choice: &Choice) -> Value {
    match choice {
        Choice::Keyword(k) => json!(k),
        Choice::Forced(kind, name) => reference(*kind, name),
        Choice::Allowed(mode, tools) => json!({
            "type": "allowed_tools",
            "allowed_tools": {
                "mode": mode,
                "tools": tools.iter().map(|(k, n)| reference(*k, n)).collect::<Vec<_>>(),
            },
        }),
    }
}

/// The `tool_choice` to send for the client's `value`: one the wire can
/// satisfy, written from the proxy's reading.
pub(super) fn tool_choice(value: &Value, plan: &ToolPlan) -> Result<Value, ProxyError> {
    Ok(render_choice(&judge_choice(read_choice(value)?, plan)))
}

/// The legacy `functions` without the ones the plan hides; `None` when
/// nothing is left (the field is then dropped, with `function_call`).
pub(super) fn functions(value: &Value, plan: &ToolPlan) -> Result<Option<Value>, ProxyError> {
    let Some(items) = value.as_array() else {
        return Err(ProxyError::InvalidRequest(
            "`functions` must be an array of function objects".into(),
        ));
    };
    let mut kept = Vec::with_capacity(items.len());
    for (i, f) in items.iter().enumerate() {
        let Some(name) = f.get("name").and_then(Value::as_str) else {
            return Err(ProxyError::InvalidRequest(format!(
                "`functions[{i}]` has no name; give it `name`"
            )));
        };
        if callable(plan, name) {
            kept.push(f.clone());
        }
    }
    Ok((!kept.is_empty()).then_some(Value::Array(kept)))
}

/// The legacy `function_call` to send: `none`, `auto`, or a callable name
/// (a hidden one becomes `auto`).
pub(super) fn function_call(value: &Value, plan: &ToolPlan) -> Result<Value, ProxyError> {
    let bad = || {
        ProxyError::InvalidRequest(
            "`function_call` must be \"none\", \"auto\" or {\"name\": ...}".into(),
        )
    };
    match value {
        Value::String(s) => keyword(s, &["none", "auto"])
            .map(|k| json!(k))
            .ok_or_else(bad),
        Value::Object(o) => {
            let name = o.get("name").and_then(Value::as_str).ok_or_else(bad)?;
            Ok(if callable(plan, name) {
                let mut m = Map::new();
                m.insert("name".into(), json!(name));
                Value::Object(m)
            } else {
                json!("auto")
            })
        }
        _ => Err(bad()),
    }
}
