//! Properties of the Responses stream judge: whatever the items, their
//! fragmentation, the provider's quirks and the chunk boundaries, the
//! client gets the bytes it gets from the stream fed whole and the round
//! ends the same way; no call but `run_code` reaches it, and `run_code`
//! arrives exactly as the model wrote it; and the same turn as one JSON
//! response is judged as its stream is.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::stream_props::{
    a_fixture_cut_gives_what_it_gives_whole, call_cuts, call_input, only_run_code_got_through,
    same, split, summary, text_deltas,
};
use crate::mode::{Mode, Runtime};
use crate::responses::Responses;
use crate::test_support::responses_client::reassemble;
use crate::test_support::{
    judge_at_cuts, responses_plan, same_at_every_cut, Judged, ResponsesJudge, RoundEnd,
};
use crate::turn::repair_history;

/// One output item of a generated turn.
#[derive(Clone, Debug)]
enum Item {
    /// A message, its text in these deltas.
    Text(Vec<String>),
    /// A reasoning item with a summary.
    Reasoning(String),
    /// A function call (or, for `apply_patch`, a custom tool call), its
    /// arguments cut at these offsets into deltas.
    Call {
        name: &'static str,
        args: String,
        cuts: Vec<usize>,
    },
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        text_deltas().prop_map(Item::Text),
        summary().prop_map(Item::Reasoning),
        (
            prop_oneof![
                Just("run_code"),
                Just("exec_command"),
                Just("read"),
                Just("apply_patch"),
                Just("nope"),
                Just("agents.spawn"),
            ],
            call_input(),
            call_cuts(),
        )
            .prop_map(|(name, map, cuts)| Item::Call {
                name,
                args: serde_json::to_string(&map).unwrap(),
                cuts,
            }),
    ]
}

/// How the provider writes the stream.
#[derive(Clone, Copy, Debug)]
struct Quirks {
    /// `sequence_number` as the last key (gpt-5.1) rather than the second.
    seq_last: bool,
    /// A `data: [DONE]` after the terminal.
    done: bool,
    /// The body ends without `response.completed`.
    no_terminal: bool,
    /// A keep-alive comment before every event.
    comments: bool,
}

fn quirks() -> impl Strategy<Value = Quirks> {
    (
        any::<bool>(),
        any::<bool>(),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(seq_last, done, no_terminal, comments)| Quirks {
            seq_last,
            done,
            no_terminal,
            comments,
        })
}

/// The turn's stream and the same turn as one JSON response.
fn turn(items: &[Item], q: Quirks) -> (Vec<u8>, Value) {
    let mut events: Vec<Value> = Vec::new();
    let response = |status: &str, output: Vec<Value>| {
        json!({"id": "resp_p", "object": "response", "created_at": 1, "status": status,
               "model": "gpt-5", "output": output, "usage": null})
    };
    events.push(json!({"type": "response.created", "response": response("in_progress", vec![])}));
    events
        .push(json!({"type": "response.in_progress", "response": response("in_progress", vec![])}));
    let mut output = Vec::new();
    for (index, it) in items.iter().enumerate() {
        let id = format!("it_{index}");
        let whole = match it {
            Item::Text(pieces) => {
                let text: String = pieces.concat();
                events.push(json!({"type": "response.output_item.added", "output_index": index,
                    "item": {"id": id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}}));
                events.push(json!({"type": "response.content_part.added", "item_id": id, "output_index": index,
                    "content_index": 0, "part": {"type": "output_text", "annotations": [], "text": ""}}));
                for p in pieces {
                    events.push(json!({"type": "response.output_text.delta", "item_id": id, "output_index": index,
                        "content_index": 0, "delta": p, "logprobs": []}));
                }
                let part = json!({"type": "output_text", "annotations": [], "text": text});
                events.push(json!({"type": "response.output_text.done", "item_id": id, "output_index": index,
                    "content_index": 0, "text": text}));
                events.push(json!({"type": "response.content_part.done", "item_id": id, "output_index": index,
                    "content_index": 0, "part": part}));
                json!({"id": id, "type": "message", "status": "completed", "content": [part], "role": "assistant"})
            }
            Item::Reasoning(summary) => {
                events.push(
                    json!({"type": "response.output_item.added", "output_index": index,
                    "item": {"id": id, "type": "reasoning", "summary": []}}),
                );
                events.push(
                    json!({"type": "response.reasoning_summary_text.delta", "item_id": id,
                    "output_index": index, "summary_index": 0, "delta": summary}),
                );
                json!({"id": id, "type": "reasoning", "encrypted_content": format!("gAAA{index}=="),
                       "summary": [{"type": "summary_text", "text": summary}]})
            }
            Item::Call { name, args, cuts } => {
                let call_id = format!("call_{index}");
                let (kind, field, delta_kind) = if *name == "apply_patch" {
                    (
                        "custom_tool_call",
                        "input",
                        "response.custom_tool_call_input",
                    )
                } else {
                    (
                        "function_call",
                        "arguments",
                        "response.function_call_arguments",
                    )
                };
                let (namespace, short) = match name.split_once('.') {
                    Some((ns, n)) => (Some(ns), n),
                    None => (None, *name),
                };
                let mut opened = json!({"id": id, "type": kind, "status": "in_progress", "call_id": call_id,
                                        "name": short, field: ""});
                if let Some(ns) = namespace {
                    opened["namespace"] = json!(ns);
                }
                events.push(json!({"type": "response.output_item.added", "output_index": index, "item": opened.clone()}));
                for p in split(args, cuts) {
                    events.push(json!({"type": format!("{delta_kind}.delta"), "item_id": id,
                        "output_index": index, "delta": p}));
                }
                events.push(json!({"type": format!("{delta_kind}.done"), "item_id": id,
                    "output_index": index, field: args}));
                let mut whole = opened;
                whole["status"] = json!("completed");
                whole[field] = json!(args);
                whole
            }
        };
        events.push(json!({"type": "response.output_item.done", "output_index": index, "item": whole.clone()}));
        output.push(whole);
    }
    let mut whole = response("completed", output);
    whole["usage"] = json!({"input_tokens": 10, "output_tokens": 5, "total_tokens": 15});
    if !q.no_terminal {
        events.push(json!({"type": "response.completed", "response": whole.clone()}));
    }
    let mut out = String::new();
    for (n, mut e) in events.into_iter().enumerate() {
        let kind = e["type"].as_str().unwrap().to_owned();
        let data = if q.seq_last {
            e["sequence_number"] = json!(n);
            e.to_string()
        } else {
            // `sequence_number` second, as most recordings have it.
            let mut o = serde_json::Map::new();
            let obj = e.as_object_mut().unwrap();
            o.insert("type".into(), obj.remove("type").unwrap());
            o.insert("sequence_number".into(), json!(n));
            o.extend(std::mem::take(obj));
            Value::Object(o).to_string()
        };
        if q.comments {
            out.push_str(": keep-alive\n\n");
        }
        out.push_str(&format!("event: {kind}\ndata: {data}\n\n"));
    }
    if q.done {
        out.push_str("data: [DONE]\n\n");
    }
    (out.into_bytes(), whole)
}

fn judge(bytes: &[u8], cuts: &[usize]) -> Judged {
    let plan = responses_plan(Mode::Code, Runtime::Client);
    judge_at_cuts(ResponsesJudge::new(plan, 2), bytes, cuts)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_fixture_cut_anywhere_gives_the_client_what_it_gives_whole(
        pick in any::<prop::sample::Index>(),
        cuts in proptest::collection::vec(any::<usize>(), 1..24),
    ) {
        a_fixture_cut_gives_what_it_gives_whole("responses", pick, &cuts, judge)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn only_run_code_reaches_the_client_exactly_and_cuts_change_nothing(
        items in proptest::collection::vec(item(), 0..6),
        q in quirks(),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        let (bytes, _) = turn(&items, q);
        let whole = judge(&bytes, &[]);
        same(&judge(&bytes, &cuts), &whole)?;
        let view = reassemble(&whole.client);

        let calls: Vec<(&str, &str)> = items.iter().filter_map(|i| match i {
            Item::Call { name, args, .. } => Some((*name, args.as_str())),
            _ => None,
        }).collect();
        let got: Vec<(String, String)> = view.calls.iter().map(|c| (c.name.clone(), c.arguments.clone())).collect();
        let repaired = only_run_code_got_through(&calls, &got, &whole.end)?;
        let text: String = items.iter().filter_map(|i| match i {
            Item::Text(p) => Some(p.concat()),
            _ => None,
        }).collect();
        prop_assert_eq!(&view.text, &text);
        // A repaired round's [DONE] waits for the stream's end.
        prop_assert_eq!(view.done, usize::from(q.done && !repaired));
    }

    #[test]
    fn a_whole_response_is_judged_as_its_stream(
        items in proptest::collection::vec(item(), 0..6),
        q in quirks(),
    ) {
        let (bytes, mut response) = turn(&items, Quirks { no_terminal: false, ..q });
        let plan = responses_plan(Mode::Code, Runtime::Client);
        let streamed = judge(&bytes, &[]);
        let judged = crate::test_support::judged::<Responses>(&mut response, &plan);
        let passed: Vec<(String, String)> = judged.calls.iter()
            .filter(|c| c.passed())
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect();
        let view = reassemble(&streamed.client);
        let got: Vec<(String, String)> = view.calls.iter().map(|c| (c.name.clone(), c.arguments.clone())).collect();
        prop_assert_eq!(&got, &passed);
        match &streamed.end {
            RoundEnd::Repair { messages } => {
                prop_assert!(passed.is_empty() && !judged.calls.is_empty());
                prop_assert_eq!(messages, &repair_history::<Responses>(&judged));
            }
            RoundEnd::Done { .. } => {
                let terminal = view.terminal.expect("a terminal event");
                prop_assert_eq!(&terminal["response"]["output"], &response["output"]);
            }
            RoundEnd::Program(_) => prop_assert!(false, "no program on the client runtime"),
        }
    }
}

proptest! {
    // Every cut of a whole stream is a few thousand judge runs: few cases.
    #![proptest_config(ProptestConfig::with_cases(8))]

    #[test]
    fn a_generated_stream_cut_at_every_offset_gives_what_it_gives_whole(
        items in proptest::collection::vec(item(), 1..4),
        q in quirks(),
    ) {
        let (bytes, _) = turn(&items, q);
        let plan = responses_plan(Mode::Code, Runtime::Client);
        same_at_every_cut("generated", &bytes, || ResponsesJudge::new(plan.clone(), 2));
    }
}
