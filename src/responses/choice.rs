//! `tool_choice` of a Responses request, judged against the plan the same
//! way as on chat completions (`crate::chat::request::choice`): read into what it
//! means, each named tool judged, written back from that reading, so the
//! provider is never pointed at a tool the wire lacks.
//!
//! Shapes: `"none" | "auto" | "required"`, `{type: "function", name}`,
//! `{type: "custom", name}`, a client built-in `{type: "local_shell" |
//! "shell" | "apply_patch"}`, `{type: "allowed_tools", mode, tools: [...]}`,
//! and the provider's own (`{type: "web_search"}`, `{type: "mcp", ...}`,
//! ...), which name tools the wire keeps as declared and pass as they are.

use serde_json::{json, Map, Value};

use crate::classify::Visibility;
use crate::error::ProxyError;
use crate::mode::{Mode, RUN_CODE};
use crate::plan::ToolPlan;
use crate::turn::callable;

/// The built-ins a client executes; a choice of one names the tool of that type.
const CLIENT_BUILT_INS: [&str; 3] = ["local_shell", "shell", "apply_patch"];

/// A tool a choice points at.
#[derive(Debug, PartialEq)]
enum Ref {
    /// A `function` or `custom` tool (of a namespace, when given).
    Named {
        kind: &'static str,
        name: String,
        namespace: Option<String>,
    },
    /// A client-executed built-in, by its type.
    BuiltIn(String),
    /// A tool the provider runs (or one this proxy does not know): as sent.
    Provider(Value),
}

impl Ref {
    /// The tool as the plan names it; `None` for the provider's.
    fn tool(&self) -> Option<String> {
        match self {
            Ref::Named {
                name,
                namespace: Some(ns),
                ..
            } => Some(format!("{ns}.{name}")),
            Ref::Named { name, .. } => Some(name.clone()),
            Ref::BuiltIn(t) => Some(t.clone()),
            Ref::Provider(_) => None,
        }
    }

    fn render(&self) -> Value {
        match self {
            Ref::Named {
                kind,
                name,
                namespace,
            } => {
                let mut m = Map::new();
                m.insert("type".into(), json!(kind));
                if let Some(ns) = namespace {
                    m.insert("namespace".into(), json!(ns));
                }
                m.insert("name".into(), json!(name));
                Value::Object(m)
            }
            Ref::BuiltIn(t) => json!({"type": t}),
            Ref::Provider(v) => v.clone(),
        }
    }
}

/// A `tool_choice` as the proxy reads it.
#[derive(Debug, PartialEq)]
enum Choice {
    Keyword(&'static str),
    Forced(Ref),
    Allowed(&'static str, Vec<Ref>),
}

fn invalid(what: &str) -> ProxyError {
    ProxyError::InvalidRequest(format!(
        "{what}; use \"none\", \"auto\", \"required\", {{\"type\":\"function\",\"name\":...}}, \
         {{\"type\":\"custom\",\"name\":...}} or \
         {{\"type\":\"allowed_tools\",\"mode\":\"auto\",\"tools\":[...]}}"
    ))
}

fn keyword(s: &str, allowed: &[&'static str]) -> Option<&'static str> {
    allowed.iter().copied().find(|k| *k == s)
}

fn read_ref(v: &Value, field: &str, plan: &ToolPlan) -> Result<Ref, ProxyError> {
    let Some(o) = v.as_object() else {
        return Err(invalid(&format!("`{field}` is not an object")));
    };
    let kind = match o.get("type") {
        Some(Value::String(t)) => t.as_str(),
        _ => return Err(invalid(&format!("`{field}` has no `type`"))),
    };
    let text = |key: &str| match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(&format!("`{field}.{key}` is not a string"))),
    };
    match kind {
        "function" | "custom" => {
            let name = text("name")?.ok_or_else(|| invalid(&format!("`{field}` names no tool")))?;
            Ok(Ref::Named {
                kind: if kind == "function" {
                    "function"
                } else {
                    "custom"
                },
                name,
                namespace: text("namespace")?,
            })
        }
        // A built-in the client declared is a client tool; otherwise the
        // type names the provider's tool of that type.
        t if CLIENT_BUILT_INS.contains(&t) && plan.visibility(t) != Visibility::Undeclared => {
            Ok(Ref::BuiltIn(t.to_owned()))
        }
        _ => Ok(Ref::Provider(v.clone())),
    }
}

fn read_choice(v: &Value, plan: &ToolPlan) -> Result<Choice, ProxyError> {
    match v {
        Value::String(s) => keyword(s, &["none", "auto", "required"])
            .map(Choice::Keyword)
            .ok_or_else(|| invalid(&format!("`tool_choice` is {s:?}"))),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("allowed_tools") => {
            let mode = o
                .get("mode")
                .and_then(Value::as_str)
                .and_then(|m| keyword(m, &["auto", "required"]))
                .ok_or_else(|| invalid("`tool_choice.mode` is not auto or required"))?;
            let tools = o
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| invalid("`tool_choice.tools` is not an array"))?;
            let tools = tools
                .iter()
                .enumerate()
                .map(|(i, t)| read_ref(t, &format!("tool_choice.tools[{i}]"), plan))
                .collect::<Result<_, _>>()?;
            Ok(Choice::Allowed(mode, tools))
        }
        Value::Object(_) => Ok(Choice::Forced(read_ref(v, "tool_choice", plan)?)),
        _ => Err(invalid("`tool_choice` is neither a string nor an object")),
    }
}

/// What a reference becomes: itself when the wire can satisfy it,
/// `run_code` in code mode, nothing otherwise.
fn judge_ref(r: Ref, plan: &ToolPlan) -> Option<Ref> {
    match r.tool() {
        None => Some(r),
        Some(tool) if callable(plan, &tool) => Some(r),
        Some(_) if plan.mode == Mode::Code => Some(Ref::Named {
            kind: "function",
            name: RUN_CODE.to_owned(),
            namespace: None,
        }),
        Some(_) => None,
    }
}

fn judge_choice(choice: Choice, plan: &ToolPlan) -> Choice {
    match choice {
        Choice::Keyword(k) => Choice::Keyword(k),
        Choice::Forced(r) => judge_ref(r, plan).map_or(Choice::Keyword("auto"), Choice::Forced),
        Choice::Allowed(mode, tools) => {
            let mut kept: Vec<Ref> = Vec::with_capacity(tools.len());
            for r in tools.into_iter().filter_map(|r| judge_ref(r, plan)) {
                if !kept.contains(&r) {
                    kept.push(r);
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

fn render_choice(choice: &Choice) -> Value {
    match choice {
        Choice::Keyword(k) => json!(k),
        Choice::Forced(r) => r.render(),
        Choice::Allowed(mode, tools) => json!({
            "type": "allowed_tools",
            "mode": mode,
            "tools": tools.iter().map(Ref::render).collect::<Vec<_>>(),
        }),
    }
}

/// The `tool_choice` to send for the client's `value`: one the wire can
/// satisfy, written from the proxy's reading.
pub(super) fn tool_choice(value: &Value, plan: &ToolPlan) -> Result<Value, ProxyError> {
    Ok(render_choice(&judge_choice(
        read_choice(value, plan)?,
        plan,
    )))
}
