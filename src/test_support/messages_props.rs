//! Properties of the Messages stream judge: whatever the blocks, their
//! fragmentation, the pings and the chunk boundaries, the client gets the
//! bytes it gets from the stream fed whole and the round ends the same
//! way; no `tool_use` but `run_code` reaches it, and `run_code` arrives
//! exactly as the model wrote it, nor a `tool_reference` to another tool;
//! and the same turn as one JSON message is judged as its stream is.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::stream_props::{
    a_fixture_cut_gives_what_it_gives_whole, call_cuts, call_input, only_run_code_got_through,
    same, split, summary, text_deltas,
};
use crate::messages::Messages;
use crate::mode::{Mode, Runtime};
use crate::test_support::messages_client::reassemble;
use crate::test_support::{
    judge_at_cuts, messages_plan, same_at_every_cut, Judged, MessagesJudge, RoundEnd,
};
use crate::turn::repair_history;

/// One content block of a generated turn.
#[derive(Clone, Debug)]
enum Block {
    /// Text in these deltas.
    Text(Vec<String>),
    /// Thinking with a signature.
    Thinking(String),
    /// A `tool_use`, its input's JSON text cut at these offsets.
    ToolUse {
        name: &'static str,
        input: String,
        cuts: Vec<usize>,
    },
    /// A `tool_reference` to this tool.
    Reference(&'static str),
}

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        text_deltas().prop_map(Block::Text),
        summary().prop_map(Block::Thinking),
        (
            prop_oneof![
                Just("run_code"),
                Just("Read"),
                Just("Bash"),
                Just("nope"),
                Just("web_search"),
            ],
            call_input(),
            call_cuts(),
        )
            .prop_map(|(name, map, cuts)| Block::ToolUse {
                name,
                // Anthropic writes input as spaced JSON text.
                input: serde_json::to_string(&map)
                    .unwrap()
                    .replace("\":", "\": ")
                    .replace(",\"", ", \""),
                cuts,
            }),
        prop_oneof![Just("run_code"), Just("Read"), Just("nope"), Just("")]
            .prop_map(Block::Reference),
    ]
}

/// How the provider writes the stream.
#[derive(Clone, Copy, Debug)]
struct Quirks {
    /// A `ping` after every `n`th event (0: none).
    ping_every: usize,
    /// The body ends without `message_delta` and `message_stop`.
    no_end: bool,
}

fn quirks() -> impl Strategy<Value = Quirks> {
    (0usize..4, prop::bool::weighted(0.2))
        .prop_map(|(ping_every, no_end)| Quirks { ping_every, no_end })
}

/// The turn's stream and the same turn as one JSON message.
fn turn(blocks: &[Block], q: Quirks) -> (Vec<u8>, Value) {
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": "msg_p", "type": "message",
        "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
        "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    ];
    let mut content = Vec::new();
    for (index, b) in blocks.iter().enumerate() {
        let delta = |d: Value| json!({"type": "content_block_delta", "index": index, "delta": d});
        let whole = match b {
            Block::Text(pieces) => {
                events.push(json!({"type": "content_block_start", "index": index,
                                   "content_block": {"type": "text", "text": ""}}));
                for p in pieces {
                    events.push(delta(json!({"type": "text_delta", "text": p})));
                }
                json!({"type": "text", "text": pieces.concat()})
            }
            Block::Thinking(thinking) => {
                events.push(json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""}}));
                events.push(delta(
                    json!({"type": "thinking_delta", "thinking": thinking}),
                ));
                let signature = format!("EqQBCgIYAh{index}==");
                events.push(delta(
                    json!({"type": "signature_delta", "signature": signature}),
                ));
                json!({"type": "thinking", "thinking": thinking, "signature": signature})
            }
            Block::ToolUse { name, input, cuts } => {
                let id = format!("toolu_{index}");
                events.push(json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
                events.push(delta(
                    json!({"type": "input_json_delta", "partial_json": ""}),
                ));
                for p in split(input, cuts) {
                    events.push(delta(
                        json!({"type": "input_json_delta", "partial_json": p}),
                    ));
                }
                let parsed: Value = serde_json::from_str(input).unwrap();
                json!({"type": "tool_use", "id": id, "name": name, "input": parsed})
            }
            Block::Reference(name) => {
                let block = json!({"type": "tool_reference", "tool_name": name});
                events.push(
                    json!({"type": "content_block_start", "index": index, "content_block": block}),
                );
                block
            }
        };
        events.push(json!({"type": "content_block_stop", "index": index}));
        content.push(whole);
    }
    let calls = blocks.iter().any(|b| matches!(b, Block::ToolUse { .. }));
    let stop = if calls { "tool_use" } else { "end_turn" };
    if !q.no_end {
        events.push(
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                           "usage": {"output_tokens": 5}}),
        );
        events.push(json!({"type": "message_stop"}));
    }
    let mut out = String::new();
    for (n, e) in events.iter().enumerate() {
        let kind = e["type"].as_str().unwrap();
        out.push_str(&format!("event: {kind}\ndata: {e}\n\n"));
        if q.ping_every > 0 && n % q.ping_every == 0 {
            out.push_str("event: ping\ndata: {\"type\": \"ping\"}\n\n");
        }
    }
    let message = json!({"id": "msg_p", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 5}});
    (out.into_bytes(), message)
}

fn judge(bytes: &[u8], cuts: &[usize]) -> Judged {
    let plan = messages_plan(Mode::Code, Runtime::Client);
    judge_at_cuts(MessagesJudge::new(plan, 2), bytes, cuts)
}

/// A call as the client (or the JSON path) holds it: name and input.
fn call(name: &str, input: &str) -> (String, Value) {
    let input = serde_json::from_str(input).unwrap_or(Value::Null);
    (name.to_owned(), input)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_fixture_cut_anywhere_gives_the_client_what_it_gives_whole(
        pick in any::<prop::sample::Index>(),
        cuts in proptest::collection::vec(any::<usize>(), 1..24),
    ) {
        a_fixture_cut_gives_what_it_gives_whole("messages", pick, &cuts, judge)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn only_run_code_reaches_the_client_exactly_and_cuts_change_nothing(
        blocks in proptest::collection::vec(block(), 0..6),
        q in quirks(),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        let (bytes, _) = turn(&blocks, q);
        let whole = judge(&bytes, &[]);
        same(&judge(&bytes, &cuts), &whole)?;
        let view = reassemble(&whole.client);

        let calls: Vec<(&str, &str)> = blocks.iter().filter_map(|b| match b {
            Block::ToolUse { name, input, .. } => Some((*name, input.as_str())),
            _ => None,
        }).collect();
        let got: Vec<(String, String)> = view.calls.iter().map(|c| (c.name.clone(), c.input.clone())).collect();
        only_run_code_got_through(&calls, &got, &whole.end)?;
        let text: String = blocks.iter().filter_map(|b| match b {
            Block::Text(p) => Some(p.concat()),
            _ => None,
        }).collect();
        prop_assert_eq!(&view.text, &text);
        // A reference reaches the client only where a direct call of its
        // tool would: in code mode, `run_code`'s alone.
        let references = blocks.iter().filter(|b| matches!(b, Block::Reference("run_code"))).count();
        prop_assert_eq!(view.blocks.iter().filter(|b| *b == "tool_reference").count(), references);
    }

    #[test]
    fn a_whole_message_is_judged_as_its_stream(
        blocks in proptest::collection::vec(block(), 0..6),
        q in quirks(),
    ) {
        let (bytes, mut message) = turn(&blocks, Quirks { no_end: false, ..q });
        let plan = messages_plan(Mode::Code, Runtime::Client);
        let streamed = judge(&bytes, &[]);
        let judged = crate::test_support::judged::<Messages>(&mut message, &plan);
        let passed: Vec<(String, Value)> = judged.calls.iter()
            .filter(|c| c.passed())
            .map(|c| call(&c.name, &c.arguments))
            .collect();
        let view = reassemble(&streamed.client);
        let got: Vec<(String, Value)> = view.calls.iter().map(|c| call(&c.name, &c.input)).collect();
        prop_assert_eq!(&got, &passed);
        match &streamed.end {
            RoundEnd::Repair { messages } => {
                prop_assert!(passed.is_empty() && !judged.calls.is_empty());
                prop_assert_eq!(messages, &repair_history::<Messages>(&judged));
            }
            RoundEnd::Done { .. } => {
                let blocks: Vec<&str> = message["content"].as_array().unwrap().iter()
                    .map(|b| b["type"].as_str().unwrap())
                    .collect();
                prop_assert_eq!(view.blocks.iter().map(String::as_str).collect::<Vec<_>>(), blocks);
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
        blocks in proptest::collection::vec(block(), 1..4),
        q in quirks(),
    ) {
        let (bytes, _) = turn(&blocks, q);
        let plan = messages_plan(Mode::Code, Runtime::Client);
        same_at_every_cut("generated", &bytes, || MessagesJudge::new(plan.clone(), 2));
    }
}
