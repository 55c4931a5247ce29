//! Output items of a Responses turn: which are calls, how each is judged,
//! and the items the proxy writes (denials, nested calls).
//!
//! A call item is judged by the name a client executor would act on:
//! `function_call` and `custom_tool_call` by `name` (a tool of a namespace
//! as `<namespace>.<name>`), the client-executed built-ins by their tool's
//! type (`local_shell_call` is the `local_shell` tool, `shell_call` the
//! `shell` tool, `apply_patch_call` the `apply_patch` tool, `computer_call`
//! the `computer` tool).
//!
//! The judge fails closed: only the item types in [`SAFE_ITEMS`] pass
//! unjudged (text, reasoning, the provider's own tool items). Any other
//! type, one this proxy has never heard of included, is judged as a call
//! a client would execute (docs/security.md, "What passes").

use serde_json::{json, Map, Value};

use crate::classify::Verdict;
use crate::plan::ToolPlan;
use crate::turn::shape;
use crate::turn::{fate, judge_names, JudgedCall, Shape, Step, Unreadable};

/// An item's type when the item opens with it (`{"type":"...",`, as
/// Codex and the OpenAI SDKs write items), read without reading the rest
/// of the item; `None` for any other opening (the item is read then). In
/// a request with no key repeated (docs/security.md, "One reading of a
/// request": a request that repeats one is refused wherever calls can be
/// denied) the first `type` is the only one.
pub(crate) fn peeked_type(text: &str) -> Option<&str> {
    let rest = text.strip_prefix(r#"{"type":""#)?;
    let end = rest.find(['"', '\\'])?;
    (rest.as_bytes()[end] == b'"').then(|| &rest[..end])
}

/// The item types that are calls a client executes, with the tool each
/// names when the item carries no `name`, and the type of its answer.
const CALL_ITEMS: [(&str, Option<&str>, &str); 7] = [
    ("function_call", None, "function_call_output"),
    ("custom_tool_call", None, "custom_tool_call_output"),
    (
        "local_shell_call",
        Some("local_shell"),
        "local_shell_call_output",
    ),
    ("shell_call", Some("shell"), "shell_call_output"),
    (
        "apply_patch_call",
        Some("apply_patch"),
        "apply_patch_call_output",
    ),
    (
        "computer_call",
        Some(crate::responses::tools::COMPUTER),
        "computer_call_output",
    ),
    // Only with `"execution": "client"`: the provider's own search is safe.
    (
        "tool_search_call",
        Some("tool_search"),
        "tool_search_output",
    ),
];

/// The output item types that are no call a client executes: the model's
/// words and reasoning, and the tools the provider runs itself (their
/// calls and results). Everything else is judged as a call.
pub const SAFE_ITEMS: &[&str] = &[
    "message",
    "reasoning",
    "compaction",
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "tool_search_call",
    "tool_search_output",
];

/// Whether an output item of this type passes unjudged (see [`SAFE_ITEMS`]).
pub fn is_safe_type(kind: &str) -> bool {
    SAFE_ITEMS.contains(&kind)
}

/// Whether an output item is judged as a call: any type not known to be
/// safe, and a search the client runs (`"execution": "client"`).
pub fn is_judged_item(item: &Value) -> bool {
    !is_safe_type(item_type(item)) || runs_on_client(item)
}

/// Whether a provider tool's item asks the client to run it.
fn runs_on_client(item: &Value) -> bool {
    item.get("execution").and_then(Value::as_str) == Some("client")
}

/// Whether an item of this type is a call a client executes.
pub fn is_call_type(kind: &str) -> bool {
    CALL_ITEMS.iter().any(|(t, _, _)| *t == kind)
}

/// The answer type of a call item's type (`function_call_output`, ...);
/// for a type this proxy does not know, `<type>_output`, the API's rule
/// for every call type so far (a provider that reads it otherwise refuses
/// the repair, and the client gets that error: nothing passes unjudged).
pub fn output_type(kind: &str) -> std::borrow::Cow<'static, str> {
    match CALL_ITEMS.iter().find(|(t, _, _)| *t == kind) {
        Some((_, _, o)) => (*o).into(),
        None if kind.is_empty() => "function_call_output".into(),
        None => format!("{kind}_output").into(),
    }
}

/// The type of an item, `""` when it has none.
pub fn item_type(item: &Value) -> &str {
    item.get("type").and_then(Value::as_str).unwrap_or("")
}

/// The tool an item calls, as the plan knows it: `<namespace>.<name>` for
/// a tool of a namespace.
pub fn tool_name(item: &Map<String, Value>) -> String {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
    if let Some((_, Some(tool), _)) = CALL_ITEMS.iter().find(|(t, _, _)| *t == kind) {
        return (*tool).to_owned();
    }
    let name = item.get("name").and_then(Value::as_str).unwrap_or("");
    match item.get("namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() && ns != crate::responses::tools::DEFAULT_NAMESPACE => {
            format!("{ns}.{name}")
        }
        // An item of a type the proxy does not know, without a name: judged
        // by its type, so its denial says what it was.
        _ if name.is_empty() && !is_call_type(kind) => kind.to_owned(),
        _ => name.to_owned(),
    }
}

/// What the call passes to its tool, as text: a function's `arguments`, a
/// custom tool's raw `input`, a built-in's `action` (or `operation`) as JSON.
pub fn call_input(item: &Map<String, Value>) -> String {
    match item.get("type").and_then(Value::as_str).unwrap_or("") {
        "function_call" => str_field(item, "arguments"),
        "custom_tool_call" => str_field(item, "input"),
        _ => ["action", "operation", "arguments", "input"]
            .iter()
            .find_map(|k| item.get(*k))
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_default(),
    }
}

fn str_field(item: &Map<String, Value>, key: &str) -> String {
    item.get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// The call's id as its answer names it (`call_id`; `id` for items that
/// carry no `call_id`).
pub fn call_id(item: &Map<String, Value>) -> String {
    item.get("call_id")
        .or_else(|| item.get("id"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// An output item as a judge may read it (`crate::turn::shape`): an
/// object, whose `name` and `namespace`, when it is judged as a call, are
/// strings (a JavaScript client looks a tool up by a list as by the
/// string it joins to). The path is from the item down.
pub fn check_item(item: &Value) -> Result<(), Unreadable> {
    let fields = shape::entry(item, &[])?;
    if is_judged_item(item) {
        for key in ["name", "namespace"] {
            shape::name(fields.get(key), &[Step::Key(key)])?;
        }
    }
    Ok(())
}

/// Whether an event other than an item's announcement carries an `item`
/// a client could run: a stream withholds it (its fast path never takes
/// an event with an `item`).
pub fn rides_a_call(event: &Map<String, Value>, plan: &ToolPlan) -> bool {
    event
        .get("item")
        .is_some_and(|item| judge_item(item, plan).is_some())
}

/// Judges one output item; `None` for an item known to be no call a
/// client executes ([`SAFE_ITEMS`]).
pub fn judge_item(item: &Value, plan: &ToolPlan) -> Option<JudgedCall> {
    let obj = item.as_object()?;
    let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
    if !is_judged_item(item) {
        return None;
    }
    let name = tool_name(obj);
    let arguments = call_input(obj);
    let (name, verdict) = judge_names(&[name.as_str()], plan)
        .map(|(n, v)| (n.to_owned(), v))
        .unwrap_or_else(|| (String::new(), nameless(plan)));
    let shape = if kind == "function_call" {
        Shape::Function
    } else {
        Shape::Custom
    };
    Some(JudgedCall {
        id: call_id(obj),
        fate: fate(verdict, &name, &arguments, plan),
        name,
        arguments,
        shape,
        raw: Some(obj.clone()),
    })
}

/// The verdict for a call whose name is empty.
fn nameless(plan: &ToolPlan) -> Verdict {
    crate::classify::classify("", plan.visibility(""), plan.mode)
}

/// The item answering a withheld call: the output type of its call item,
/// naming its `call_id`, with `content` (a denial, or a program refused).
pub fn answer_item(call: &JudgedCall, content: &str) -> Value {
    let kind = call
        .raw
        .as_ref()
        .and_then(|r| r.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("function_call");
    json!({"type": output_type(kind), "call_id": call.id, "output": content})
}

/// The call's item as the model sent it.
pub fn raw_item(call: &JudgedCall) -> Value {
    call.raw.clone().map_or(Value::Null, Value::Object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_type_is_peeked_only_where_the_item_opens_with_it_unescaped() {
        let item = r#"{"type":"function_call_output","call_id":"c","output":"x"}"#;
        assert_eq!(peeked_type(item), Some("function_call_output"));
        assert_eq!(peeked_type(r#"{ "type": "message"}"#), None);
        assert_eq!(
            peeked_type(r#"{"call_id":"c","type":"function_call"}"#),
            None
        );
        assert_eq!(peeked_type(r#"{"type":"a\u005foutput"}"#), None);
        assert_eq!(peeked_type(r#"{"type":"unclosed"#), None);
    }

    #[test]
    fn built_in_calls_name_their_tool_and_namespaced_calls_their_namespace() {
        let item = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(
            tool_name(&item(json!({"type": "local_shell_call", "action": {}}))),
            "local_shell"
        );
        assert_eq!(
            tool_name(&item(
                json!({"type": "function_call", "name": "spawn", "namespace": "agents"})
            )),
            "agents.spawn"
        );
        assert_eq!(
            call_input(&item(
                json!({"type": "custom_tool_call", "input": "*** Begin Patch"})
            )),
            "*** Begin Patch"
        );
        assert_eq!(output_type("apply_patch_call"), "apply_patch_call_output");
        assert_eq!(output_type("hologram_call"), "hologram_call_output");
        assert_eq!(
            tool_name(&item(json!({"type": "hologram_call", "call_id": "c"}))),
            "hologram_call"
        );
        assert_eq!(
            tool_name(&item(json!({"type": "computer_call", "action": {}}))),
            "computer"
        );
        assert_eq!(
            tool_name(&item(
                json!({"type": "custom_tool_call", "name": "exec", "namespace": "functions"})
            )),
            "exec"
        );
        assert!(!is_judged_item(&json!({"type": "tool_search_call"})));
        assert!(is_judged_item(
            &json!({"type": "tool_search_call", "execution": "client"})
        ));
    }
}
