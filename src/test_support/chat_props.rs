//! Property: whatever the text, the calls, their fragmentation and the chunk
//! boundaries, no denied name reaches the client and allowed calls arrive
//! exactly as the model wrote them.

use proptest::prelude::*;
use serde_json::{json, Value};

use crate::mode::Mode;
use crate::test_support::chat_client::reassemble;
use crate::test_support::{agent_plan, judge_at_cuts, RoundEnd, StreamJudge};

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
        let judged = judge_at_cuts(StreamJudge::new(agent_plan(Mode::Code), 2), &bytes, &cuts);
        let (client, end) = (judged.client, judged.end);
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

/// How a generated call is written on the wire.
#[derive(Clone, Copy, Debug)]
enum Spelling {
    /// `tool_calls` with `function`.
    Plain,
    /// The `tool_calls` key spelled with a JSON escape.
    EscapedKey,
    /// A `type: "custom"` call (`custom.name`, `custom.input`).
    Custom,
    /// A legacy `function_call` delta.
    Legacy,
    /// A second choice (index 1) of the chunk carries the call.
    SecondChoice,
}

fn spelling() -> impl Strategy<Value = Spelling> {
    prop_oneof![
        Just(Spelling::Plain),
        Just(Spelling::EscapedKey),
        Just(Spelling::Custom),
        Just(Spelling::Legacy),
        Just(Spelling::SecondChoice),
    ]
}

/// A stream whose calls come in every spelling a client might read.
fn shaped_stream(items: &[(Item, Spelling)]) -> Vec<u8> {
    let mut out = String::new();
    let mut n = 0;
    for (it, spelling) in items {
        let chunk = |delta: Value| json!({"id": "p", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
        match it {
            Item::Text(t) => out += &format!("data: {}\n\n", chunk(json!({"content": t}))),
            Item::Call { name, args, .. } => {
                let id = format!("call_{n}");
                let text = match spelling {
                    Spelling::Plain | Spelling::EscapedKey => {
                        let c = chunk(json!({"tool_calls": [{"index": n, "id": id, "type": "function",
                            "function": {"name": name, "arguments": args}}]}));
                        let s = c.to_string();
                        if matches!(spelling, Spelling::EscapedKey) {
                            s.replace("\"tool_calls\"", "\"tool\\u005fcalls\"")
                        } else {
                            s
                        }
                    }
                    Spelling::Custom => chunk(json!({"tool_calls": [{"index": n, "id": id, "type": "custom",
                            "custom": {"name": name, "input": args}}]}))
                    .to_string(),
                    Spelling::Legacy => {
                        chunk(json!({"function_call": {"name": name, "arguments": args}})).to_string()
                    }
                    Spelling::SecondChoice => json!({"id": "p", "choices": [
                        {"index": 0, "delta": {}, "finish_reason": null},
                        {"index": 1, "delta": {"tool_calls": [{"index": 0, "id": id, "type": "function",
                            "function": {"name": name, "arguments": args}}]}, "finish_reason": null}]})
                    .to_string(),
                };
                out += &format!("data: {text}\n\n");
                n += 1;
            }
        }
    }
    out += &format!(
        "data: {}\n\n",
        json!({"id": "p", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    );
    out.push_str("data: [DONE]\n\n");
    out.into_bytes()
}

/// Every call name a lenient client reads: escapes decoded, every choice,
/// `function` and `custom` names, legacy `function_call`.
fn lenient_names(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes).replace("\r\n", "\n");
    let mut names = Vec::new();
    for block in text.split("\n\n") {
        let data: Vec<&str> = block
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim_start)
            .collect();
        let Ok(chunk) = serde_json::from_str::<Value>(&data.join("\n")) else {
            continue;
        };
        for choice in chunk["choices"].as_array().into_iter().flatten() {
            let d = &choice["delta"];
            for call in d["tool_calls"].as_array().into_iter().flatten() {
                for body in ["function", "custom"] {
                    if let Some(n) = call[body]["name"].as_str() {
                        names.push(n.to_owned());
                    }
                }
            }
            if let Some(n) = d["function_call"]["name"].as_str() {
                names.push(n.to_owned());
            }
        }
    }
    names
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn no_spelling_of_a_call_carries_a_denied_name_to_the_client(
        items in proptest::collection::vec((item(), spelling()), 0..6),
        cuts in proptest::collection::vec(0usize..4096, 0..12),
    ) {
        let bytes = shaped_stream(&items);
        let judged = judge_at_cuts(StreamJudge::new(agent_plan(Mode::Code), 2), &bytes, &cuts);
        let (client, end) = (judged.client, judged.end);
        for name in lenient_names(&client) {
            prop_assert!(name == "run_code", "the client could read a call to {}", name);
        }
        // A turn whose every judged call was denied is repaired; calls in a
        // second choice are dropped, not judged.
        let judged: Vec<&str> = items.iter().filter_map(|(i, s)| match (i, s) {
            (Item::Call { name, .. }, Spelling::Plain | Spelling::EscapedKey | Spelling::Custom | Spelling::Legacy) => Some(*name),
            _ => None,
        }).collect();
        let legacy_calls = items.iter().filter(|(i, s)| matches!((i, s), (Item::Call { .. }, Spelling::Legacy))).count();
        if legacy_calls <= 1 {
            let repaired = matches!(end, RoundEnd::Repair { .. });
            let any_pass = judged.contains(&"run_code");
            prop_assert_eq!(repaired, !judged.is_empty() && !any_pass);
        }
    }
}
