//! Programs in a Responses input: what differs from other dialects in
//! reading a history ([`crate::runtime::history`] walks it): each call
//! item and each output is an item of its own, an input that continues a
//! response sends only the outputs, and the model's turn holds items
//! (reasoning, text) the client sends back before the calls.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::mode::RUN_CODE;
use crate::runtime::history::{
    continue_entries, trailing_entries, CallIds, Kind, Refused, Trailing, Transcript,
};
use crate::runtime::output::Field;
use crate::runtime::{Execution, ExecutionLookup, Limits, MINTED_PREFIX};
use crate::tenant::Tenant;

mod echoes;

#[derive(Deserialize)]
struct ItemView {
    #[serde(rename = "type")]
    kind: Option<String>,
    call_id: Option<String>,
    output: Option<Value>,
    /// A `tool_search_output`'s loaded tools, its answer.
    tools: Option<Value>,
    name: Option<String>,
    namespace: Option<String>,
}

/// Finds executions' calls in one tenant's Responses input.
pub struct ItemReader<'a> {
    ids: CallIds<'a>,
}

impl<'a> ItemReader<'a> {
    /// A reader of `tenant`'s inputs, finding executions in `store`.
    pub fn new(store: &'a dyn ExecutionLookup, tenant: &'a Tenant) -> ItemReader<'a> {
        ItemReader {
            ids: CallIds { store, tenant },
        }
    }

    fn kind(&self, raw: &RawValue) -> Kind {
        let text = raw.get();
        if !crate::runtime::may_name_minted(text) {
            return Kind::Other;
        }
        let Ok(item) = serde_json::from_str::<ItemView>(text) else {
            return Kind::Other;
        };
        let (Some(kind), Some(id)) = (item.kind.as_deref(), item.call_id.as_deref()) else {
            return Kind::Other;
        };
        let found = self.ids.resolve(id);
        if kind.ends_with("_output") {
            return match found {
                Some((e, n)) => {
                    let text = output_text(item.output.or(item.tools));
                    Kind::Results(e, vec![(n, text)], Vec::new())
                }
                None if id.starts_with(MINTED_PREFIX) => Kind::Unplaced(vec![id.to_owned()]),
                None => Kind::Other,
            };
        }
        match found {
            Some((e, n)) if super::items::is_call_type(kind) => {
                let mut fields = serde_json::Map::new();
                fields.insert("type".into(), json!(kind));
                if let Some(name) = item.name {
                    fields.insert("name".into(), json!(name));
                }
                if let Some(ns) = item.namespace {
                    fields.insert("namespace".into(), json!(ns));
                }
                Kind::Calls(e, vec![(n, super::items::tool_name(&fields))])
            }
            _ => Kind::Other,
        }
    }

    /// The outputs at the end of the input for a program's calls, and the
    /// call items before them (a stateless client sends both; one that
    /// continues with `previous_response_id` sends only the outputs).
    /// `Err` names outputs the proxy cannot place (refused, never guessed).
    /// Call items sent back with ids the proxy never gave were given their
    /// ids before ([`ItemReader::echoes`], `Dialect::rename_echoes`).
    pub fn trailing_results(&self, items: &[Box<RawValue>]) -> Result<Option<Trailing>, Refused> {
        trailing_entries(items, |raw| self.kind(raw))
    }
}

impl Transcript for ItemReader<'_> {
    fn ids(&self) -> &CallIds<'_> {
        &self.ids
    }

    fn kinds(&self, items: &[Box<RawValue>]) -> Vec<Kind> {
        items.iter().map(|m| self.kind(m)).collect()
    }

    fn echoes(&self, items: &[Box<RawValue>]) -> Result<Option<Vec<Box<RawValue>>>, String> {
        self.read_echoes(items)
    }

    const RESULTS_BEGIN_A_RUN: bool = true;

    /// The model's own items (reasoning, text) reached the client with the
    /// program's first calls, and the client sent them back before those
    /// calls: the model's turn holds them.
    fn before_run(out: &mut Vec<Box<RawValue>>, e: &Execution) {
        let ids = model_item_ids(e);
        while out
            .last()
            .is_some_and(|raw| item_id(raw).is_some_and(|id| ids.contains(&id)))
        {
            out.pop();
        }
    }

    fn pair(e: &Execution, _beside: &[Value]) -> Vec<Value> {
        pair(e)
    }

    fn missing_pair(exec_id: &str, content: &str, _beside: Vec<Value>) -> Vec<Value> {
        missing_pair(exec_id, content)
    }
}

/// The ids of the model's items other than calls in a program's turn.
fn model_item_ids(e: &Execution) -> Vec<String> {
    let Some(Value::Array(items)) = e.kept_turn() else {
        return Vec::new();
    };
    items
        .iter()
        .filter(|i| !super::items::is_judged_item(i))
        .filter_map(|i| i.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// An item's `id`, when it has one.
fn item_id(raw: &RawValue) -> Option<String> {
    #[derive(Deserialize)]
    struct Id {
        id: Option<String>,
    }
    serde_json::from_str::<Id>(raw.get()).ok()?.id
}

impl ItemReader<'_> {
    /// The input of a request that continues a response the proxy minted
    /// (`previous_response_id`): the provider holds the model's turn, so
    /// the outputs of the program's calls become the program's own output
    /// (and the answers of calls denied beside it); other items stay.
    pub fn rewrite_continued(
        &self,
        items: &mut Vec<Box<RawValue>>,
        exec: &Execution,
        limits: &Limits,
    ) {
        let kinds = self.kinds(items);
        continue_entries(items, &kinds, exec, self.ids.store, limits, |e| {
            let mut answer = vec![
                json!({"type": "function_call_output", "call_id": e.run_call_id,
                                         "output": e.outcome}),
            ];
            answer.extend(e.denials.iter().cloned());
            answer
        });
    }
}

/// An output as a program reads it ([`crate::runtime::output`]).
fn output_text(output: Option<Value>) -> String {
    crate::runtime::output::output_text(Field::ResponsesOutput, output.as_ref())
}

/// The model's view of one execution: its turn, and the program's output
/// once it ended, with the answers of calls denied beside it.
pub fn pair(e: &Execution) -> Vec<Value> {
    let mut v = run_code_turn(e);
    if let Some(outcome) = &e.outcome {
        v.push(
            json!({"type": "function_call_output", "call_id": e.run_call_id, "output": outcome}),
        );
        v.extend(e.denials.iter().cloned());
    }
    v
}

/// The model's `run_code` turn: its output items as they arrived (reasoning
/// items included), or rebuilt when the proxy kept none.
fn run_code_turn(e: &Execution) -> Vec<Value> {
    if let Some(Value::Array(items)) = e.kept_turn() {
        return items;
    }
    let mut v = vec![
        json!({"type": "function_call", "call_id": e.run_call_id, "name": RUN_CODE,
                            "arguments": json!({"code": e.code}).to_string()}),
    ];
    v.extend(e.denied_calls.iter().cloned());
    v
}

/// What the model is told of a program whose record is gone: a `run_code`
/// call and `content`.
fn missing_pair(exec_id: &str, content: &str) -> Vec<Value> {
    let id = crate::runtime::lost_program_call_id(crate::runtime::CALL_PREFIX, exec_id);
    vec![
        json!({"type": "function_call", "call_id": id, "name": RUN_CODE,
               "arguments": "{\"code\":\"/* no longer available */\"}"}),
        json!({"type": "function_call_output", "call_id": id, "output": content}),
    ]
}
