//! Property: whatever the text, the calls, their fragmentation and the chunk
//! boundaries, no denied name reaches the client and allowed calls arrive
//! exactly as the model wrote them.

mod common;

use codemode_proxy::stream::RoundEnd;
use codemode_proxy::Mode;
use common::sse_client::reassemble;
use common::{agent_plan, judge_pieces};
use proptest::prelude::*;
use serde_json::{json, Value};

#[derive(Clone, Debug)]
enum Item {
    Text(String),
    Call {
        name: &'static str,
        args: String,
        cuts: Vec<usize>,
    },
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        "[a-zA-Z .,]{1,12}".prop_map(Item::Text),
        (
            prop_oneof![
                Just("run_code"),
                Just("read"),
                Just("bash"),
                Just("nope"),
                Just("github.x")
            ],
            proptest::collection::btree_map("[a-z]{1,6}", "[a-zA-Z0-9 \"\\\\{}]{0,12}", 0..4),
            proptest::collection::vec(0usize..64, 0..5),
        )
            .prop_map(|(name, map, cuts)| Item::Call {
                name,
                args: serde_json::to_string(&map).unwrap(),
                cuts,
            }),
    ]
}

/// Delta styles seen in the wild: OpenAI (index, id first), Gemini-like
/// (no index, id on every delta), and index with the id repeated.
fn stream(items: &[Item], style: u8) -> Vec<u8> {
    let mut out = String::new();
    let mut push = |delta: Value, finish: Option<&str>| {
        let c = json!({"id": "p", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        out.push_str(&format!("data: {c}\n\n"));
    };
    let mut n = 0;
    for it in items {
        match it {
            Item::Text(t) => push(json!({"content": t}), None),
            Item::Call { name, args, cuts } => {
                let id = format!("call_{n}");
                let mut points: Vec<usize> = cuts.iter().map(|c| c % (args.len() + 1)).collect();
                points.sort();
                points.dedup();
                let mut pieces = Vec::new();
                let mut last = 0;
                for p in points.into_iter().chain([args.len()]) {
                    if p >= last && args.is_char_boundary(p) && args.is_char_boundary(last) {
                        pieces.push(&args[last..p]);
                        last = p;
                    }
                }
                let mut first = json!({"id": id, "type": "function", "function": {"name": name, "arguments": ""}});
                if style != 1 {
                    first["index"] = json!(n);
                }
                push(json!({"tool_calls": [first]}), None);
                for piece in pieces {
                    let mut d = json!({"function": {"arguments": piece}});
                    match style {
                        0 => d["index"] = json!(n),
                        1 => d["id"] = json!(id),
                        _ => {
                            d["index"] = json!(n);
                            d["id"] = json!(id);
                        }
                    }
                    push(json!({"tool_calls": [d]}), None);
                }
                n += 1;
            }
        }
    }
    push(json!({}), Some("tool_calls"));
    out.push_str("data: [DONE]\n\n");
    out.into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn no_denied_name_reaches_the_client_and_allowed_calls_are_exact(
        items in proptest::collection::vec(item(), 0..8),
        style in 0u8..3,
        cuts in proptest::collection::vec(0usize..4096, 0..12),
    ) {
        let bytes = stream(&items, style);
        let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
        points.sort();
        let mut pieces: Vec<&[u8]> = Vec::new();
        let mut last = 0;
        for p in points.into_iter().chain([bytes.len()]) {
            pieces.push(&bytes[last..p]);
            last = p;
        }
        let (client, end, _) = judge_pieces(&pieces, &agent_plan(Mode::Code), 2);
        let view = reassemble(&client);

        let allowed: Vec<(String, String)> = items.iter().filter_map(|i| match i {
            Item::Call { name: "run_code", args, .. } => Some(("run_code".to_owned(), args.clone())),
            _ => None,
        }).collect();
        let calls = items.iter().filter(|i| matches!(i, Item::Call { .. })).count();
        let got: Vec<(String, String)> = view.calls.iter().map(|c| (c.name.clone(), c.arguments.clone())).collect();
        prop_assert_eq!(&got, &allowed);
        for (i, c) in view.calls.iter().enumerate() {
            prop_assert_eq!(c.index, i as i64);
        }
        let text: String = items.iter().filter_map(|i| match i { Item::Text(t) => Some(t.as_str()), _ => None }).collect();
        prop_assert_eq!(view.text, text);
        let repaired = matches!(end, RoundEnd::Repair { .. });
        prop_assert_eq!(repaired, calls > 0 && allowed.is_empty());
    }
}
