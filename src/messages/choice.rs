//! `tool_choice` of a Messages request, judged against the plan the same
//! way as on the other dialects (`crate::chat::request::choice`): read into what
//! it means, the named tool judged, written back from that reading, so the
//! provider is never pointed at a tool the wire lacks.
//!
//! Shapes: `{type: "auto" | "any" | "none"}` and `{type: "tool", name}`,
//! each with an optional `disable_parallel_tool_use` (kept as sent).

use serde_json::{Map, Value};

use crate::error::ProxyError;
use crate::mode::{Mode, RUN_CODE};
use crate::plan::ToolPlan;
use crate::turn::callable;

/// A `tool_choice` as the proxy reads it.
#[derive(Debug, PartialEq)]
struct Choice {
    /// `auto`, `any`, `none`, or `tool` with its name.
    kind: Kind,
    /// `disable_parallel_tool_use`, when given.
    disable_parallel: Option<bool>,
}

#[derive(Debug, PartialEq)]
enum Kind {
    Keyword(&'static str),
    Tool(String),
}

fn invalid(what: &str) -> ProxyError {
    ProxyError::InvalidRequest(format!(
        "{what}; use {{\"type\":\"auto\"}}, {{\"type\":\"any\"}}, {{\"type\":\"none\"}} or \
         {{\"type\":\"tool\",\"name\":...}}"
    ))
}

fn read_choice(v: &Value) -> Result<Choice, ProxyError> {
    let Some(o) = v.as_object() else {
        return Err(invalid("`tool_choice` is not an object"));
    };
    let kind = match o.get("type").and_then(Value::as_str) {
        Some("auto") => Kind::Keyword("auto"),
        Some("any") => Kind::Keyword("any"),
        Some("none") => Kind::Keyword("none"),
        Some("tool") => match o.get("name") {
            Some(Value::String(n)) => Kind::Tool(n.clone()),
            _ => return Err(invalid("`tool_choice` of type `tool` names no tool")),
        },
        Some(other) => return Err(invalid(&format!("`tool_choice.type` is {other:?}"))),
        None => return Err(invalid("`tool_choice` has no `type`")),
    };
    let disable_parallel = match o.get("disable_parallel_tool_use") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => {
            return Err(invalid(
                "`tool_choice.disable_parallel_tool_use` is not a boolean",
            ))
        }
    };
    Ok(Choice {
        kind,
        disable_parallel,
    })
}

/// The choice the wire can satisfy: a forced tool the wire lacks becomes
/// `run_code` in code mode (the tool is reached through it), `auto`
/// otherwise. A server tool (`server_tools`) stays on the wire as declared.
fn judge_choice(choice: Choice, plan: &ToolPlan, server_tools: &[String]) -> Choice {
    let kind = match choice.kind {
        Kind::Tool(name) if callable(plan, &name) || server_tools.contains(&name) => {
            Kind::Tool(name)
        }
        Kind::Tool(_) if plan.mode == Mode::Code => Kind::Tool(RUN_CODE.to_owned()),
        Kind::Tool(_) => Kind::Keyword("auto"),
        k => k,
    };
    Choice { kind, ..choice }
}

fn render_choice(choice: &Choice) -> Value {
    let mut m = Map::new();
    match &choice.kind {
        Kind::Keyword(k) => {
            m.insert("type".into(), Value::from(*k));
        }
        Kind::Tool(name) => {
            m.insert("type".into(), Value::from("tool"));
            m.insert("name".into(), Value::from(name.as_str()));
        }
    }
    if let Some(b) = choice.disable_parallel {
        m.insert("disable_parallel_tool_use".into(), Value::Bool(b));
    }
    Value::Object(m)
}

/// The `tool_choice` to send for the client's `value`: one the wire can
/// satisfy, written from the proxy's reading. `server_tools` are the names
/// of the provider's tools the request declares (they stay on the wire).
pub(super) fn tool_choice(
    value: &Value,
    plan: &ToolPlan,
    server_tools: &[String],
) -> Result<Value, ProxyError> {
    Ok(render_choice(&judge_choice(
        read_choice(value)?,
        plan,
        server_tools,
    )))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use serde_json::value::RawValue;

    use super::*;
    use crate::mode::Runtime;
    use crate::preset::{Catalog, ConfigFile};

    fn plan_in(mode: Mode, preset: &str) -> ToolPlan {
        let tools = json!([
            {"name": "Read", "input_schema": {"type": "object"}},
            {"name": "Bash", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
        ]);
        let raw = RawValue::from_string(tools.to_string()).unwrap();
        let file: ConfigFile = toml::from_str(
            "[[preset]]\nname = \"no-bash\"\nextends = \"standard\"\ndeny = [\"Bash\"]\n",
        )
        .unwrap();
        let catalog = Catalog::build(Mode::Code, file).unwrap();
        ToolPlan::build_for(
            &crate::messages::tools::TOOLS,
            Some(&raw),
            catalog.get(preset).unwrap(),
            mode,
            Runtime::Embedded,
        )
        .unwrap()
    }

    fn plan(mode: Mode) -> ToolPlan {
        plan_in(mode, "standard")
    }

    fn judged(v: Value, mode: Mode) -> Value {
        tool_choice(&v, &plan(mode), &["web_search".to_owned()]).unwrap()
    }

    #[test]
    fn a_forced_native_tool_becomes_run_code_in_code_mode() {
        assert_eq!(
            judged(
                json!({"type": "tool", "name": "Read", "disable_parallel_tool_use": true}),
                Mode::Code
            ),
            json!({"type": "tool", "name": "run_code", "disable_parallel_tool_use": true})
        );
        assert_eq!(
            judged(json!({"type": "tool", "name": "Nope"}), Mode::Code),
            json!({"type": "tool", "name": "run_code"})
        );
        assert_eq!(
            judged(json!({"type": "tool", "name": "run_code"}), Mode::Code),
            json!({"type": "tool", "name": "run_code"})
        );
    }

    #[test]
    fn a_server_tool_and_the_keywords_stay() {
        for mode in [Mode::Code, Mode::Native] {
            assert_eq!(
                judged(json!({"type": "tool", "name": "web_search"}), mode),
                json!({"type": "tool", "name": "web_search"})
            );
            for k in ["auto", "any", "none"] {
                assert_eq!(
                    judged(json!({"type": k, "disable_parallel_tool_use": false}), mode),
                    json!({"type": k, "disable_parallel_tool_use": false})
                );
            }
        }
    }

    #[test]
    fn native_mode_keeps_a_declared_tool_and_drops_one_the_preset_hides() {
        assert_eq!(
            judged(json!({"type": "tool", "name": "Bash"}), Mode::Native),
            json!({"type": "tool", "name": "Bash"})
        );
        let hidden = plan_in(Mode::Native, "no-bash");
        assert_eq!(
            tool_choice(
                &json!({"type": "tool", "name": "Bash", "disable_parallel_tool_use": true}),
                &hidden,
                &[]
            )
            .unwrap(),
            json!({"type": "auto", "disable_parallel_tool_use": true})
        );
        assert_eq!(
            tool_choice(&json!({"type": "tool", "name": "Read"}), &hidden, &[]).unwrap(),
            json!({"type": "tool", "name": "Read"})
        );
    }

    #[test]
    fn malformed_choices_are_refused_with_the_shapes_to_use() {
        for bad in [
            json!("auto"),
            json!({"type": "required"}),
            json!({"type": "tool"}),
            json!({"name": "Read"}),
            json!({"type": "auto", "disable_parallel_tool_use": "yes"}),
        ] {
            let err = tool_choice(&bad, &plan(Mode::Code), &[]).unwrap_err();
            assert!(err.to_string().contains("{\"type\":\"tool\""), "{err}");
        }
    }
}
