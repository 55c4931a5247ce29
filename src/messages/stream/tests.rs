//! The Messages stream judge over recorded shapes, each fed whole, cut at
//! every byte offset and byte by byte: the client's view is the same, and
//! what holds for every client stream is checked on every output.

use super::*;
use crate::mode::{Mode, Runtime};
use crate::sse::SseParser;
use crate::test_support::messages_plan;
use crate::test_support::rounds::{self, done_splice, through_body, Run};

// ---- plans and fixtures ----

fn code() -> Arc<ToolPlan> {
    messages_plan(Mode::Code, Runtime::Client)
}

fn embedded() -> Arc<ToolPlan> {
    messages_plan(Mode::Code, Runtime::Embedded)
}

/// The events as an upstream sends them, each with its `event:` line.
fn sse(events: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in events {
        let kind = e["type"].as_str().unwrap();
        out.extend_from_slice(format!("event: {kind}\ndata: {e}\n\n").as_bytes());
    }
    out
}

fn start(id: &str, input_tokens: u64) -> Vec<Value> {
    vec![
        json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
               "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "stop_sequence": null,
               "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": 0,
                         "cache_read_input_tokens": 100, "output_tokens": 1}}}),
        json!({"type": "ping"}),
    ]
}

fn end(stop_reason: &str, output_tokens: u64) -> Vec<Value> {
    vec![
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": output_tokens}}),
        json!({"type": "message_stop"}),
    ]
}

fn text(index: u64, pieces: &[&str]) -> Vec<Value> {
    let mut ev = vec![json!({"type": "content_block_start", "index": index,
                             "content_block": {"type": "text", "text": ""}})];
    for p in pieces {
        ev.push(json!({"type": "content_block_delta", "index": index,
                       "delta": {"type": "text_delta", "text": p}}));
    }
    ev.push(json!({"type": "content_block_stop", "index": index}));
    ev
}

/// A signature as providers write them: opaque base64, kept byte for byte.
const SIGNATURE: &str = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxsZW9pc+/u1rI3Nx8iMOr1Gf/=";
const THINKING: &str = "Let me read \"a.txt\" \u{2014} then\nanswer.";

fn thinking(index: u64) -> Vec<Value> {
    vec![
        json!({"type": "content_block_start", "index": index,
               "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        json!({"type": "content_block_delta", "index": index,
               "delta": {"type": "thinking_delta", "thinking": &THINKING[..12]}}),
        json!({"type": "content_block_delta", "index": index,
               "delta": {"type": "thinking_delta", "thinking": &THINKING[12..]}}),
        json!({"type": "content_block_delta", "index": index,
               "delta": {"type": "signature_delta", "signature": SIGNATURE}}),
        json!({"type": "content_block_stop", "index": index}),
    ]
}

fn tool_use(index: u64, id: &str, name: &str, pieces: &[&str]) -> Vec<Value> {
    let mut ev = vec![
        json!({"type": "content_block_start", "index": index,
               "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        json!({"type": "content_block_delta", "index": index,
               "delta": {"type": "input_json_delta", "partial_json": ""}}),
    ];
    for p in pieces {
        ev.push(json!({"type": "content_block_delta", "index": index,
                       "delta": {"type": "input_json_delta", "partial_json": p}}));
    }
    ev.push(json!({"type": "content_block_stop", "index": index}));
    ev
}

/// One round: its start, its blocks' events, its end.
fn round(id: &str, input_tokens: u64, blocks: Vec<Vec<Value>>, stop: &str, out: u64) -> Vec<u8> {
    let mut ev = start(id, input_tokens);
    for b in blocks {
        ev.extend(b);
    }
    ev.extend(end(stop, out));
    sse(&ev)
}

// ---- driving the judge as the body does ----

/// [`rounds::every_cut`] with a fresh Messages judge, the client's view
/// checked on the whole run.
fn run_every_cut(
    plan: &Arc<ToolPlan>,
    max_repairs: u32,
    rounds: &[Vec<u8>],
    hand_off: Option<&Value>,
) -> Run {
    let run = rounds::every_cut(
        || MessagesJudge::new(plan.clone(), max_repairs),
        rounds,
        hand_off,
    );
    view(plan, &run.bytes);
    run
}

// ---- the client's view ----

struct View {
    events: Vec<Value>,
    /// The message as a client SDK accumulates it.
    message: Value,
}

/// Reads the client's bytes as an SDK does, checking what holds for every
/// stream: an `event:` line naming each event's type; one `message_start`,
/// first; content block indices contiguous, each block's events between
/// its start and its stop; no call the plan withholds; at most one
/// `message_delta`, then only `message_stop`, then nothing; nothing after
/// an `error`.
fn view(plan: &ToolPlan, bytes: &[u8]) -> View {
    let mut parser = SseParser::new(1 << 20);
    let mut raw = Vec::new();
    parser.push(bytes, &mut raw).unwrap();
    parser.finish(&mut raw);
    let mut events: Vec<Value> = Vec::new();
    let mut message = Value::Null;
    let mut open: Vec<bool> = Vec::new();
    let mut json: Vec<String> = Vec::new();
    let (mut deltas, mut stops, mut errors) = (0, 0, 0);
    for ev in raw {
        let Some(data) = ev.data.as_deref() else {
            continue;
        };
        let e: Value = serde_json::from_str(data).unwrap();
        let kind = e["type"].as_str().unwrap().to_owned();
        assert_eq!(
            ev.event.as_deref(),
            Some(kind.as_str()),
            "event line names the type"
        );
        assert_eq!(
            stops + errors,
            0,
            "nothing after message_stop or error: {e}"
        );
        if kind != "message_stop" && kind != "error" {
            assert_eq!(deltas, 0, "only message_stop after message_delta: {e}");
        }
        match kind.as_str() {
            "message_start" => {
                assert!(events.is_empty(), "message_start comes first, once");
                message = e["message"].clone();
                assert_eq!(message["content"], json!([]));
            }
            "content_block_start" => {
                assert_eq!(
                    e["index"],
                    json!(open.len()),
                    "contiguous content block indices"
                );
                // The proxy's own calls (a program's, handed off) carry
                // the fixtures' minted ids; every other call passes the rule.
                let minted = e["content_block"]["id"]
                    .as_str()
                    .is_some_and(|id| id.starts_with("toolu_cm_"));
                if let Some(call) = items::judge_block(&e["content_block"], plan) {
                    assert!(
                        call.passed() || minted,
                        "a withheld call reached the client: {e}"
                    );
                }
                open.push(true);
                json.push(String::new());
                message["content"]
                    .as_array_mut()
                    .unwrap()
                    .push(e["content_block"].clone());
            }
            "content_block_delta" | "content_block_stop" => {
                let i = e["index"].as_u64().unwrap() as usize;
                assert!(
                    open.get(i).copied().unwrap_or(false),
                    "an event of an open block: {e}"
                );
                let block = &mut message["content"][i];
                let d = &e["delta"];
                match d["type"].as_str().unwrap_or("") {
                    "text_delta" => append(block, "text", d),
                    "thinking_delta" => append(block, "thinking", d),
                    "signature_delta" => append(block, "signature", d),
                    "input_json_delta" => json[i].push_str(d["partial_json"].as_str().unwrap()),
                    _ => {}
                }
                if kind == "content_block_stop" {
                    open[i] = false;
                    if !json[i].is_empty() {
                        block["input"] = serde_json::from_str(&json[i]).unwrap();
                    }
                }
            }
            "message_delta" => {
                deltas += 1;
                message["stop_reason"] = e["delta"]["stop_reason"].clone();
                for (k, v) in e["usage"].as_object().unwrap() {
                    message["usage"][k] = v.clone();
                }
            }
            "message_stop" => stops += 1,
            "error" => errors += 1,
            _ => {}
        }
        events.push(e);
    }
    View { events, message }
}

fn append(block: &mut Value, field: &str, delta: &Value) {
    let joined = format!(
        "{}{}",
        block[field].as_str().unwrap_or(""),
        delta[field].as_str().unwrap()
    );
    block[field] = json!(joined);
}

impl View {
    fn kinds(&self) -> Vec<&str> {
        self.events
            .iter()
            .map(|e| e["type"].as_str().unwrap())
            .collect()
    }

    fn count(&self, kind: &str) -> usize {
        self.kinds().iter().filter(|k| **k == kind).count()
    }

    fn blocks(&self) -> &Vec<Value> {
        self.message["content"].as_array().unwrap()
    }

    fn text(&self) -> String {
        self.blocks()
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect()
    }
}

fn assert_no_trace(bytes: &[u8], traces: &[&str]) {
    let text = String::from_utf8_lossy(bytes);
    for trace in traces {
        assert!(
            !text.contains(trace),
            "a withheld call left a trace: {trace}"
        );
    }
}

// ---- fixtures ----

#[test]
fn a_text_only_turn_passes_byte_for_byte() {
    let rounds = [round(
        "msg_1",
        10,
        vec![text(0, &["Hel", "lo ", "world"])],
        "end_turn",
        3,
    )];
    let run = run_every_cut(&code(), 2, &rounds, None);
    assert!(done_splice(&run.ends[0]).is_none());
    assert_eq!(
        String::from_utf8_lossy(&run.bytes),
        String::from_utf8_lossy(&rounds[0]),
        "nothing was the proxy's to change"
    );
    let v = view(&code(), &run.bytes);
    assert_eq!(v.text(), "Hello world");
    assert_eq!(v.message["stop_reason"], "end_turn");
}

#[test]
fn a_passed_tool_use_streams_through_after_its_thinking() {
    let rounds = [round(
        "msg_1",
        10,
        vec![
            thinking(0),
            tool_use(1, "toolu_1", "run_code", &["{\"code\":", "\"1\"}"]),
        ],
        "tool_use",
        4,
    )];
    let run = run_every_cut(&code(), 2, &rounds, None);
    assert!(done_splice(&run.ends[0]).is_none());
    let v = view(&code(), &run.bytes);
    let blocks = v.blocks();
    assert_eq!(blocks[0]["signature"], SIGNATURE);
    assert_eq!(blocks[0]["thinking"], THINKING);
    assert_eq!(blocks[1]["name"], "run_code");
    assert_eq!(blocks[1]["input"], json!({"code": "1"}));
    assert_eq!(v.message["stop_reason"], "tool_use");
    assert_eq!(v.count("ping"), 1, "ping passes");
}

fn denied_then_text() -> [Vec<u8>; 2] {
    [
        round(
            "msg_1",
            10,
            vec![
                thinking(0),
                tool_use(1, "toolu_1", "Bash", &["{\"command\":", "\"ls\"}"]),
            ],
            "tool_use",
            5,
        ),
        round("msg_2", 20, vec![text(0, &["Done", "."])], "end_turn", 7),
    ]
}

#[test]
fn a_denied_call_is_repaired_inside_one_message() {
    let run = run_every_cut(&code(), 2, &denied_then_text(), None);
    let RoundEnd::Repair { messages } = &run.ends[0] else {
        panic!("expected a repair, got {:?}", run.ends[0])
    };
    let turn = &messages[0];
    assert_eq!(turn["role"], "assistant");
    assert_eq!(
        turn["content"][0],
        json!({"type": "thinking", "thinking": THINKING, "signature": SIGNATURE}),
        "the thinking block is replayed whole, its signature untouched"
    );
    assert_eq!(
        turn["content"][1],
        json!({"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}})
    );
    let answer = &messages[1]["content"][0];
    assert_eq!(messages[1]["role"], "user");
    assert_eq!(answer["type"], "tool_result");
    assert_eq!(answer["tool_use_id"], "toolu_1");
    assert_eq!(answer["is_error"], true);
    assert!(answer["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("UNKNOWN_TOOL:"));
    assert!(done_splice(&run.ends[1]).is_none());

    assert_no_trace(&run.bytes, &["Bash", "toolu_1", "msg_2", "tool_use"]);
    let v = view(&code(), &run.bytes);
    assert_eq!(v.count("message_start"), 1);
    assert_eq!(v.count("message_delta"), 1);
    assert_eq!(v.count("message_stop"), 1);
    assert_eq!(v.count("ping"), 2, "every round's ping passes");
    assert_eq!(v.message["id"], "msg_1");
    assert_eq!(v.message["stop_reason"], "end_turn");
    assert_eq!(
        v.message["usage"],
        json!({"input_tokens": 30, "cache_creation_input_tokens": 0,
               "cache_read_input_tokens": 200, "output_tokens": 12}),
        "usage summed over both rounds"
    );
    let blocks = v.blocks();
    assert_eq!(blocks.len(), 2, "the thinking, then the repaired answer");
    assert_eq!(blocks[0]["signature"], SIGNATURE);
    assert_eq!(v.text(), "Done.");
}

#[test]
fn repairs_past_the_bound_give_up_with_a_note_and_end_turn() {
    let denied = |id: &str| {
        round(
            id,
            5,
            vec![tool_use(0, "toolu_1", "Bash", &["{\"command\":\"ls\"}"])],
            "tool_use",
            1,
        )
    };
    let run = run_every_cut(&code(), 1, &[denied("msg_1"), denied("msg_2")], None);
    assert!(matches!(run.ends[0], RoundEnd::Repair { .. }));
    assert!(done_splice(&run.ends[1]).is_none());
    let v = view(&code(), &run.bytes);
    let blocks = v.blocks();
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0]["type"], "text");
    assert!(blocks[0]["text"].as_str().unwrap().contains("Bash"));
    assert_eq!(v.message["stop_reason"], "end_turn");
    assert_eq!(v.message["usage"]["input_tokens"], 10);
    assert_eq!(v.message["usage"]["output_tokens"], 2);
    assert_no_trace(&run.bytes, &["toolu_1", "tool_use"]);
}

#[test]
fn a_body_that_ends_without_its_message_delta_still_gives_up_and_stops() {
    let mut events = start("msg_1", 5);
    events.extend(tool_use(0, "toolu_1", "Bash", &["{\"command\":\"ls\"}"]));
    let run = run_every_cut(&code(), 0, &[sse(&events)], None);
    let v = view(&code(), &run.bytes);
    assert_eq!(
        &v.kinds()[v.kinds().len() - 2..],
        ["message_delta", "message_stop"]
    );
    assert_eq!(v.message["stop_reason"], "end_turn");
    assert_eq!(v.blocks()[0]["type"], "text");
}

#[test]
fn collapsed_call_with_invalid_input_is_denied_invalid_args() {
    let rounds = [
        round(
            "msg_1",
            1,
            vec![tool_use(0, "toolu_1", "Read", &["{\"file_path\":"])],
            "max_tokens",
            1,
        ),
        round("msg_2", 1, vec![text(0, &["ok"])], "end_turn", 1),
    ];
    let run = run_every_cut(&code(), 2, &rounds, None);
    let RoundEnd::Repair { messages } = &run.ends[0] else {
        panic!("expected a repair")
    };
    let answer = messages[1]["content"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(answer.starts_with("INVALID_ARGS:"), "{answer}");
    assert_eq!(
        messages[0]["content"][0]["input"],
        json!({}),
        "the replayed block holds an input the API takes"
    );
}

fn program_round() -> Vec<u8> {
    round(
        "msg_1",
        12,
        vec![
            thinking(0),
            text(1, &["Let me ", "look."]),
            tool_use(
                2,
                "toolu_2",
                "run_code",
                &["{\"code\": \"await tools.read({file_path: 'a'})\"}"],
            ),
        ],
        "tool_use",
        6,
    )
}

#[test]
fn a_program_ends_the_round_with_its_thinking_kept_byte_for_byte() {
    let run = run_every_cut(&embedded(), 2, &[program_round()], None);
    let RoundEnd::Program(program) = &run.ends[0] else {
        panic!("expected a program, got {:?}", run.ends[0])
    };
    assert_eq!(program.id, "toolu_2");
    assert_eq!(
        program.arguments, "{\"code\": \"await tools.read({file_path: 'a'})\"}",
        "the input as the model wrote it"
    );
    assert_eq!(program.content.as_deref(), Some("Let me look."));
    assert_eq!(program.response_id, None);
    let turn = program.turn.as_ref().unwrap();
    assert_eq!(turn["role"], "assistant");
    let content = turn["content"].as_array().unwrap();
    assert_eq!(content.len(), 3);
    assert_eq!(content[0]["thinking"], THINKING);
    assert_eq!(content[0]["signature"], SIGNATURE);
    assert_eq!(content[1], json!({"type": "text", "text": "Let me look."}));
    assert_eq!(
        content[2]["input"],
        json!({"code": "await tools.read({file_path: 'a'})"})
    );
    assert!(program.denied_calls.is_empty());
    let v = view(&embedded(), &run.bytes);
    assert_eq!(v.count("message_delta"), 0, "the round's end stays hidden");
    assert_eq!(v.count("message_stop"), 0);
    assert_no_trace(&run.bytes, &["toolu_2", "run_code"]);
    assert_eq!(v.text(), "Let me look.");
}

/// A round calling `Bash` (which code mode denies), then `run_code`,
/// with `tokens` in and out.
fn bash_beside_run_code(tokens: u64) -> Vec<u8> {
    round(
        "msg_1",
        tokens,
        vec![
            tool_use(0, "toolu_1", "Bash", &["{\"command\":\"ls\"}"]),
            tool_use(1, "toolu_2", "run_code", &["{\"code\":\"1\"}"]),
        ],
        "tool_use",
        tokens,
    )
}

#[test]
fn a_program_beside_a_denied_call_carries_the_denial() {
    let rounds = [bash_beside_run_code(1)];
    let run = run_every_cut(&embedded(), 2, &rounds, None);
    let RoundEnd::Program(program) = &run.ends[0] else {
        panic!("expected a program, got {:?}", run.ends[0])
    };
    assert_eq!(program.denied_calls[0]["name"], "Bash");
    assert_eq!(program.denials[0]["tool_use_id"], "toolu_1");
    assert_no_trace(&run.bytes, &["Bash", "run_code"]);
}

fn nested_turn() -> Value {
    json!({"id": "msg_cm_e1", "type": "message", "role": "assistant",
           "content": [
               {"type": "tool_use", "id": "toolu_cm_e1_1", "name": "Read", "input": {"file_path": "a"}},
               {"type": "tool_use", "id": "toolu_cm_e1_2", "name": "Read", "input": {"file_path": "b"}}
           ],
           "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1}})
}

#[test]
fn hand_off_ends_the_stream_with_the_programs_calls() {
    let turn = nested_turn();
    let run = run_every_cut(&embedded(), 2, &[program_round()], Some(&turn));
    let v = view(&embedded(), &run.bytes);
    let blocks = v.blocks();
    assert_eq!(blocks.len(), 4, "thinking, text, two nested calls");
    assert_eq!(blocks[2], turn["content"][0]);
    assert_eq!(blocks[3], turn["content"][1]);
    assert_eq!(v.message["id"], "msg_1");
    assert_eq!(v.message["stop_reason"], "tool_use");
    assert_eq!(v.message["usage"]["input_tokens"], 12);
    assert_eq!(v.message["usage"]["output_tokens"], 6);
    let kinds = v.kinds();
    let call = [
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    ];
    let tail: Vec<&str> = call
        .iter()
        .chain(&call)
        .chain(&["message_delta", "message_stop"])
        .copied()
        .collect();
    assert_eq!(&kinds[kinds.len() - 8..], &tail[..]);
}

#[test]
fn a_program_round_then_an_answer_is_one_message() {
    let rounds = [
        program_round(),
        round("msg_2", 30, vec![text(0, &["It says hi."])], "end_turn", 3),
    ];
    let run = run_every_cut(&embedded(), 2, &rounds, None);
    let v = view(&embedded(), &run.bytes);
    assert_eq!(v.message["usage"]["input_tokens"], 42);
    assert_eq!(v.message["usage"]["output_tokens"], 9);
    assert_eq!(
        v.blocks().len(),
        3,
        "thinking, the opening words, the answer"
    );
    assert_eq!(v.blocks()[2]["text"], "It says hi.");
}

#[test]
fn a_mixed_turn_passes_its_allowed_call_and_splices_the_denial() {
    let rounds = [bash_beside_run_code(3)];
    let run = run_every_cut(&code(), 2, &rounds, None);
    let (keys, splice) = done_splice(&run.ends[0]).as_ref().expect("a splice");
    assert_eq!(keys, &["toolu_2"]);
    assert_eq!(splice.denied_calls[0]["name"], "Bash");
    assert_eq!(splice.denied_calls[0]["input"], json!({"command": "ls"}));
    assert_eq!(splice.denials[0]["tool_use_id"], "toolu_1");
    let v = view(&code(), &run.bytes);
    assert_eq!(v.blocks().len(), 1);
    assert_eq!(v.blocks()[0]["id"], "toolu_2");
    assert_eq!(v.message["stop_reason"], "tool_use");
    assert_no_trace(&run.bytes, &["Bash", "toolu_1"]);
}

#[test]
fn an_error_event_passes_and_ends_the_turn() {
    let mut events = start("msg_1", 1);
    events.extend(text(0, &["Par", "tial"]).into_iter().take(3));
    events.push(
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    );
    events.extend(tool_use(1, "toolu_1", "Bash", &["{}"]));
    events.extend(end("tool_use", 1));
    let run = run_every_cut(&code(), 2, &[sse(&events)], None);
    assert!(
        done_splice(&run.ends[0]).is_none(),
        "no repair after an error"
    );
    let v = view(&code(), &run.bytes);
    assert_eq!(v.kinds().last(), Some(&"error"));
    assert_eq!(
        v.events.last().unwrap()["error"]["type"],
        "overloaded_error"
    );
    assert_no_trace(&run.bytes, &["Bash"]);
}

#[test]
fn events_of_withheld_blocks_leave_no_trace() {
    let mut events = start("msg_1", 1);
    events.extend(tool_use(
        0,
        "toolu_1",
        "Bash",
        &["{\"command\":\"rm -rf /\"}"],
    ));
    events.extend(text(1, &["hi"]));
    // A future event type naming the withheld block, and a delta of a
    // block that never opened.
    events.push(json!({"type": "content_block_annotation", "index": 0, "note": "toolu_1"}));
    events.push(json!({"type": "content_block_delta", "index": 7,
                       "delta": {"type": "text_delta", "text": "ghost"}}));
    // Deltas after their block's stop: a client may have acted on it.
    events.push(json!({"type": "content_block_delta", "index": 1,
                       "delta": {"type": "text_delta", "text": "late"}}));
    events.push(json!({"type": "content_block_delta", "index": 1,
                       "delta": {"type": "citations_delta", "citation": {"cited_text": "late"}}}));
    events.extend(end("tool_use", 1));
    let run = run_every_cut(&code(), 2, &[sse(&events)], None);
    assert_no_trace(&run.bytes, &["toolu_1", "rm -rf", "ghost", "late"]);
    let v = view(&code(), &run.bytes);
    assert_eq!(v.blocks()[0]["text"], "hi");
    assert!(matches!(run.ends[0], RoundEnd::Repair { .. }));
}

#[test]
fn server_tool_blocks_pass_and_join_the_turn() {
    let mut events = start("msg_1", 1);
    events.push(
        json!({"type": "content_block_start", "index": 0, "content_block":
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}}),
    );
    events.push(json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": "{\"query\": \"rust\"}"}}));
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.push(
        json!({"type": "content_block_start", "index": 1, "content_block":
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
         "content": [{"type": "web_search_result", "url": "https://rust-lang.org", "title": "Rust",
                      "encrypted_content": "Eo8=", "page_age": null}]}}),
    );
    events.push(json!({"type": "content_block_stop", "index": 1}));
    events.extend(tool_use(2, "toolu_1", "Bash", &["{}"]));
    events.extend(end("tool_use", 1));
    let run = run_every_cut(&code(), 2, &[sse(&events)], None);
    let RoundEnd::Repair { messages } = &run.ends[0] else {
        panic!("expected a repair, got {:?}", run.ends[0])
    };
    let content = messages[0]["content"].as_array().unwrap();
    assert_eq!(content[0]["input"], json!({"query": "rust"}));
    assert_eq!(content[1]["content"][0]["encrypted_content"], "Eo8=");
    let v = view(&code(), &run.bytes);
    assert_eq!(v.blocks().len(), 2);
    assert_eq!(v.blocks()[0]["type"], "server_tool_use");
}

#[test]
fn a_message_start_never_carries_content() {
    let mut events = start("msg_1", 1);
    events[0]["message"]["content"] =
        json!([{"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {}}]);
    events.extend(text(0, &["hi"]));
    events.extend(end("end_turn", 1));
    let run = run_every_cut(&code(), 2, &[sse(&events)], None);
    assert_no_trace(&run.bytes, &["toolu_9", "Bash"]);
}

#[test]
fn a_denied_call_a_message_start_holds_is_repaired_and_its_text_kept() {
    let mut events = start("msg_1", 1);
    events[0]["message"]["content"] = json!([
        {"type": "text", "text": "Looking."},
        {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {}}
    ]);
    events.extend(end("tool_use", 1));
    let run = run_every_cut(&code(), 2, &[sse(&events)], None);
    assert!(
        matches!(&run.ends[0], RoundEnd::Repair { .. }),
        "{:?}",
        run.ends[0]
    );
    assert_no_trace(&run.bytes, &["toolu_9", "Bash"]);
    let v = view(&code(), &run.bytes);
    assert_eq!(v.blocks().len(), 1);
    assert_eq!(v.blocks()[0]["text"], "Looking.");
}

#[test]
fn indices_and_event_lines_are_the_proxys_when_the_upstream_skips() {
    // A withheld block first: every later block moves down one, and a
    // mismatched `event:` line is rewritten to the data's type.
    let mut events = start("msg_1", 1);
    events.extend(tool_use(0, "toolu_1", "Bash", &["{}"]));
    events.extend(thinking(1));
    events.extend(text(2, &["a", "b"]));
    events.extend(tool_use(3, "toolu_2", "run_code", &["{\"code\":\"1\"}"]));
    events.extend(end("tool_use", 1));
    let mut bytes = sse(&events);
    let before = String::from_utf8(bytes.clone()).unwrap();
    let s = before.replacen(
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2",
        "event: message_stop\ndata: {\"type\":\"content_block_delta\",\"index\":2",
        1,
    );
    assert_ne!(s, before, "the fixture holds a mismatched event line");
    bytes = s.into_bytes();
    let run = run_every_cut(&code(), 2, &[bytes], None);
    let v = view(&code(), &run.bytes);
    let blocks = v.blocks();
    assert_eq!(blocks.len(), 3);
    assert_eq!(blocks[0]["signature"], SIGNATURE);
    assert_eq!(blocks[1]["text"], "ab");
    assert_eq!(blocks[2]["input"], json!({"code": "1"}));
    assert!(done_splice(&run.ends[0]).is_some());
}

#[test]
fn an_upstream_failure_is_an_anthropic_error_event() {
    let (bytes, errored) =
        rounds::broken_off_after(MessagesJudge::new(code(), 2), &sse(&start("msg_1", 1)));
    assert!(errored);
    let v = view(&code(), &bytes);
    assert_eq!(
        v.events.last().unwrap(),
        &json!({"type": "error", "error": {"type": "api_error",
                "message": "the upstream stream broke off"}})
    );
}

// ---- driven by the body, as the handler will ----

#[tokio::test]
async fn the_body_drives_a_repair_as_the_pure_judge_does() {
    let rounds = denied_then_text();
    let (bytes, asked) = through_body(|| MessagesJudge::new(code(), 2), &rounds, None).await;
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0][1]["content"][0]["type"], "tool_result");
    view(&code(), &bytes);
}

#[tokio::test]
async fn the_body_hands_a_programs_calls_to_the_client() {
    let turn = nested_turn();
    let (bytes, asked) = through_body(
        || MessagesJudge::new(embedded(), 2),
        &[program_round()],
        Some(turn.clone()),
    )
    .await;
    assert_eq!(asked, vec![vec![json!("toolu_2")]]);
    assert_eq!(view(&embedded(), &bytes).blocks()[3], turn["content"][1]);
}

#[test]
fn a_block_or_message_in_a_shape_no_judge_reads_ends_the_stream() {
    let read = json!({"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}});
    let cases = [
        (
            json!({"type": "content_block_start", "index": 1, "content_block": [read]}),
            "`content_block` is a list, not an object",
        ),
        (
            json!({"type": "content_block_start", "index": 1,
                   "content_block": {"type": "tool_use", "id": "t", "name": ["Read"], "input": {}}}),
            "`content_block.name` is a list, not a string",
        ),
        (
            json!({"type": "message_start", "message": {"id": "msg_2", "content": {"0": read}}}),
            "`message.content` is an object, not a list",
        ),
        (
            json!({"type": "message_start", "message": {"id": "msg_2", "content": [[read]]}}),
            "`message.content[0]` is a list, not an object",
        ),
    ];
    for (unreadable, why) in cases {
        let mut events = start("msg_1", 3);
        events.extend(text(0, &["Before."]));
        events.push(unreadable);
        events.extend(text(2, &["After."]));
        events.extend(end("end_turn", 2));
        let bytes = crate::test_support::refused_mid_stream(
            MessagesJudge::new(messages_plan(Mode::Both, Runtime::Client), 2),
            &sse(&events),
            why,
            "Read",
            "event: error",
        );
        // Anthropic's error event names no code: its message says why.
        assert!(bytes.contains("cannot be judged"), "{bytes}");
    }
}

#[test]
fn a_message_whose_content_or_blocks_no_judge_reads_is_refused() {
    use crate::messages::completion::judge_message;
    let read = json!({"type": "tool_use", "id": "t", "name": "Read", "input": {}});
    for (message, why) in [
        (
            json!({"content": {"0": read}}),
            "`content` is an object, not a list",
        ),
        (
            json!({"content": "Read"}),
            "`content` is a string, not a list",
        ),
        (
            json!({"content": [{"type": "text", "text": "a"}, [read]]}),
            "`content[1]` is a list, not an object",
        ),
        (
            json!({"content": [{"type": "tool_use", "id": "t", "name": {"0": "Read"}}]}),
            "`content[0].name` is an object, not a string",
        ),
    ] {
        let refused = judge_message(message.as_object().unwrap(), &code()).unwrap_err();
        assert_eq!(refused.to_string(), why);
    }
    for message in [
        json!({"content": null}),
        json!({"content": [{"type": "text", "text": "a", "name": 1}]}),
    ] {
        assert!(
            judge_message(message.as_object().unwrap(), &code()).is_ok(),
            "{message}"
        );
    }
}

#[test]
fn a_call_riding_on_an_event_other_than_its_start_never_reaches_the_client() {
    let mut block = text(0, &["Hi"]);
    let stop = block.pop().unwrap();
    let riding = json!({"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {}});
    // On a delta of a passed block, on a type no one documents with and
    // without an index, and a reference to a tool the wire lacks.
    block.push(json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "text_delta", "text": ""}, "content_block": riding}));
    block.push(json!({"type": "content_block_weird", "index": 0, "content_block": riding}));
    block.push(json!({"type": "content_block_weird", "content_block": riding}));
    block.push(json!({"type": "content_block_weird",
        "content_block": {"type": "tool_reference", "tool_name": "Bash"}}));
    block.push(stop);
    let rounds = [round("msg_1", 10, vec![block], "end_turn", 3)];
    let run = run_every_cut(&code(), 2, &rounds, None);
    assert_no_trace(&run.bytes, &["toolu_9", "\"Bash\""]);
    assert_eq!(view(&code(), &run.bytes).text(), "Hi");
}
