//! The Responses stream judge over recorded shapes, each fed whole, cut at
//! every byte offset and byte by byte: the client's view is the same.
//!
//! Plans are built from Chat-shaped tools through [`ToolPlan::build`]: the
//! Responses tool parser lands separately, and the names and verdicts are
//! the same.

use super::*;
use crate::mode::{Mode, Runtime};
use crate::sse::SseParser;
use crate::test_support::rounds::{self, done_splice, through_body, Run};
use crate::test_support::standard_plan;

// ---- plans and fixtures ----

fn plan(mode: Mode, runtime: Runtime) -> Arc<ToolPlan> {
    let tool = |name: &str, prop: &str| {
        json!({"type": "function", "function": {"name": name, "parameters":
            {"type": "object", "properties": {prop: {"type": "string"}}, "required": [prop]}}})
    };
    let tools = json!([
        tool("read", "path"),
        tool("bash", "command"),
        tool("run_code", "code")
    ]);
    Arc::new(standard_plan(
        &crate::chat::tools::TOOLS,
        &tools,
        mode,
        runtime,
    ))
}

fn code() -> Arc<ToolPlan> {
    plan(Mode::Code, Runtime::Client)
}

fn embedded() -> Arc<ToolPlan> {
    plan(Mode::Code, Runtime::Embedded)
}

/// The events as an upstream sends them, numbered from 0.
fn sse(events: Vec<Value>) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, mut e) in events.into_iter().enumerate() {
        e["sequence_number"] = json!(i);
        let kind = e["type"].as_str().unwrap().to_owned();
        out.extend_from_slice(format!("event: {kind}\ndata: {e}\n\n").as_bytes());
    }
    out
}

fn response(id: &str, status: &str) -> Value {
    json!({"id": id, "object": "response", "created_at": 1, "status": status, "model": "gpt-5",
           "output": [], "usage": null})
}

fn start(id: &str) -> Vec<Value> {
    vec![
        json!({"type": "response.created", "response": response(id, "in_progress")}),
        json!({"type": "response.in_progress", "response": response(id, "in_progress")}),
    ]
}

fn usage(input: u64, output: u64) -> Value {
    json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": 0},
           "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 1},
           "total_tokens": input + output})
}

fn completed(id: &str, output: &[Value], u: Value) -> Value {
    let mut r = response(id, "completed");
    r["output"] = json!(output);
    r["usage"] = u;
    json!({"type": "response.completed", "response": r})
}

fn message_item(id: &str, text: &str) -> Value {
    json!({"type": "message", "id": id, "status": "completed", "role": "assistant",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// A message item's events, its text in `pieces`.
fn message(index: u64, id: &str, pieces: &[&str]) -> (Vec<Value>, Value) {
    let text: String = pieces.concat();
    let whole = message_item(id, &text);
    let mut ev = vec![
        json!({"type": "response.output_item.added", "output_index": index,
               "item": {"type": "message", "id": id, "status": "in_progress", "role": "assistant", "content": []}}),
        json!({"type": "response.content_part.added", "item_id": id, "output_index": index, "content_index": 0,
               "part": {"type": "output_text", "text": "", "annotations": []}}),
    ];
    for p in pieces {
        ev.push(
            json!({"type": "response.output_text.delta", "item_id": id, "output_index": index,
                       "content_index": 0, "delta": p, "logprobs": []}),
        );
    }
    ev.push(
        json!({"type": "response.output_text.done", "item_id": id, "output_index": index,
                   "content_index": 0, "text": text}),
    );
    ev.push(
        json!({"type": "response.content_part.done", "item_id": id, "output_index": index,
                   "content_index": 0, "part": whole["content"][0]}),
    );
    ev.push(json!({"type": "response.output_item.done", "output_index": index, "item": whole}));
    (ev, whole)
}

fn reasoning(index: u64, id: &str) -> (Vec<Value>, Value) {
    let whole = json!({"type": "reasoning", "id": id, "summary": [{"type": "summary_text", "text": "Thinking."}],
                       "encrypted_content": "gAAAAB-opaque=="});
    let ev = vec![
        json!({"type": "response.output_item.added", "output_index": index,
               "item": {"type": "reasoning", "id": id, "summary": []}}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": id, "output_index": index,
               "summary_index": 0, "delta": "Thinking."}),
        json!({"type": "response.output_item.done", "output_index": index, "item": whole}),
    ];
    (ev, whole)
}

fn call(index: u64, id: &str, call_id: &str, name: &str, pieces: &[&str]) -> (Vec<Value>, Value) {
    let args: String = pieces.concat();
    let whole = json!({"type": "function_call", "id": id, "call_id": call_id, "name": name,
                       "arguments": args, "status": "completed"});
    let mut ev = vec![
        json!({"type": "response.output_item.added", "output_index": index,
        "item": {"type": "function_call", "id": id, "call_id": call_id, "name": name, "arguments": "",
                 "status": "in_progress"}}),
    ];
    for p in pieces {
        ev.push(
            json!({"type": "response.function_call_arguments.delta", "item_id": id,
                       "output_index": index, "delta": p}),
        );
    }
    ev.push(
        json!({"type": "response.function_call_arguments.done", "item_id": id,
                   "output_index": index, "arguments": args}),
    );
    ev.push(json!({"type": "response.output_item.done", "output_index": index, "item": whole}));
    (ev, whole)
}

/// One round: its start, its items' events, its completion.
fn round(id: &str, parts: Vec<(Vec<Value>, Value)>, u: Value) -> Vec<u8> {
    let mut ev = start(id);
    let mut output = Vec::new();
    for (e, whole) in parts {
        ev.extend(e);
        output.push(whole);
    }
    ev.push(completed(id, &output, u));
    sse(ev)
}

// ---- driving the judge as the body does ----

/// [`rounds::every_cut`] with a fresh Responses judge, the invariants of
/// every client view checked on the whole run.
fn run_every_cut(
    plan: &Arc<ToolPlan>,
    max_repairs: u32,
    rounds: &[Vec<u8>],
    hand_off: Option<&Value>,
) -> Run {
    let run = rounds::every_cut(
        || ResponsesJudge::new(plan.clone(), max_repairs),
        rounds,
        hand_off,
    );
    view(&run.bytes);
    run
}

// ---- the client's view ----

struct View {
    events: Vec<Value>,
    done: usize,
}

const TERMINALS: [&str; 3] = [
    "response.completed",
    "response.incomplete",
    "response.failed",
];

/// Reads the client's bytes as a client does, checking what holds for
/// every stream: an `event:` line naming each event's type, the proxy's
/// `sequence_number` rising from 0, one response id, contiguous
/// `output_index`, nothing after a terminal but `[DONE]`, and the
/// terminal's `output` = the items the client completed.
fn view(bytes: &[u8]) -> View {
    let mut parser = SseParser::new(1 << 20);
    let mut raw = Vec::new();
    parser.push(bytes, &mut raw).unwrap();
    parser.finish(&mut raw);
    let mut events = Vec::new();
    let mut done = 0;
    let mut id: Option<String> = None;
    let mut opened = 0u64;
    let mut index_of: std::collections::HashMap<String, Value> = Default::default();
    let mut completed: Vec<Value> = Vec::new();
    let mut ended = false;
    for ev in raw {
        let Some(data) = ev.data.as_deref() else {
            continue;
        };
        assert_eq!(done, 0, "nothing after [DONE]");
        if ev.is_done() {
            done += 1;
            continue;
        }
        assert!(!ended, "nothing after the terminal event but [DONE]");
        let e: Value = serde_json::from_str(data).unwrap();
        assert_eq!(
            ev.event.as_deref(),
            e["type"].as_str(),
            "event line names the type"
        );
        assert_eq!(
            e["sequence_number"],
            json!(events.len()),
            "sequence_number rises from 0"
        );
        if let Some(r) = e.get("response") {
            let rid = r["id"].as_str().unwrap().to_owned();
            assert_eq!(id.get_or_insert(rid.clone()), &rid, "one response id");
        }
        let kind = e["type"].as_str().unwrap();
        if kind == "response.output_item.added" {
            assert_eq!(e["output_index"], json!(opened), "contiguous output_index");
            if let Some(id) = e["item"]["id"].as_str() {
                index_of.insert(id.to_owned(), json!(opened));
            }
            opened += 1;
        } else if let Some(i) = e.get("output_index") {
            assert!(
                i.as_u64().unwrap() < opened,
                "an event of an item the client has"
            );
            if let Some(id) = e.get("item_id").and_then(Value::as_str) {
                assert_eq!(
                    index_of.get(id),
                    Some(i),
                    "an item's events carry its index"
                );
            }
        }
        if kind == "response.output_item.done" {
            completed.push(e["item"].clone());
        }
        if TERMINALS.contains(&kind) || kind == "error" {
            ended = true;
            if kind != "error" && kind != "response.failed" {
                assert_eq!(
                    e["response"]["output"],
                    json!(completed),
                    "the terminal holds what the client saw"
                );
            }
        }
        events.push(e);
    }
    View { events, done }
}

impl View {
    fn kinds(&self) -> Vec<&str> {
        self.events
            .iter()
            .map(|e| e["type"].as_str().unwrap())
            .collect()
    }

    fn terminal(&self) -> &Value {
        self.events
            .iter()
            .rev()
            .find(|e| TERMINALS.contains(&e["type"].as_str().unwrap()))
            .expect("a terminal event")
    }

    fn text(&self) -> String {
        self.events
            .iter()
            .filter(|e| e["type"] == "response.output_text.delta")
            .map(|e| e["delta"].as_str().unwrap())
            .collect()
    }

    fn items(&self) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| e["type"] == "response.output_item.done")
            .map(|e| &e["item"])
            .collect()
    }
}

// ---- fixtures ----

#[test]
fn a_text_only_turn_passes_as_it_came() {
    let rounds = [round(
        "resp_1",
        vec![message(0, "msg_1", &["Hel", "lo ", "world"])],
        usage(9, 3),
    )];
    let run = run_every_cut(&code(), 2, &rounds, None);
    assert!(done_splice(&run.ends[0]).is_none());
    let v = view(&run.bytes);
    assert_eq!(v.text(), "Hello world");
    assert_eq!(
        v.events.len(),
        11,
        "every upstream event reaches the client"
    );
    assert_eq!(v.terminal()["response"]["usage"], usage(9, 3));
    // Only sequence numbers were the proxy's to write: the upstream's
    // numbering was already the client's, so each event's data is unchanged.
    let upstream = view(&rounds[0]);
    assert_eq!(upstream.events, v.events);
}

#[test]
fn a_passed_call_streams_through_with_its_reasoning() {
    let rounds = [round(
        "resp_1",
        vec![
            reasoning(0, "rs_1"),
            call(1, "fc_1", "call_1", "run_code", &["{\"code\":", "\"1\"}"]),
        ],
        usage(10, 4),
    )];
    let run = run_every_cut(&code(), 2, &rounds, None);
    assert!(done_splice(&run.ends[0]).is_none());
    let v = view(&run.bytes);
    let items = v.items();
    assert_eq!(items[0]["encrypted_content"], "gAAAAB-opaque==");
    assert_eq!(items[1]["name"], "run_code");
    assert_eq!(items[1]["arguments"], "{\"code\":\"1\"}");
    assert!(v
        .kinds()
        .contains(&"response.function_call_arguments.delta"));
}

fn denied_then_text() -> [Vec<u8>; 2] {
    [
        round(
            "resp_1",
            vec![
                reasoning(0, "rs_1"),
                call(1, "fc_1", "call_1", "bash", &["{\"command\":", "\"ls\"}"]),
            ],
            usage(10, 5),
        ),
        round(
            "resp_2",
            vec![message(0, "msg_2", &["Done", "."])],
            usage(20, 7),
        ),
    ]
}

#[test]
fn a_denied_call_is_repaired_inside_one_response() {
    let run = run_every_cut(&code(), 2, &denied_then_text(), None);
    let RoundEnd::Repair { messages } = &run.ends[0] else {
        panic!("expected a repair, got {:?}", run.ends[0])
    };
    assert_eq!(
        messages[0]["type"], "reasoning",
        "the reasoning item is replayed with the call"
    );
    assert_eq!(messages[0]["encrypted_content"], "gAAAAB-opaque==");
    assert_eq!(messages[1]["name"], "bash");
    assert_eq!(messages[1]["arguments"], "{\"command\":\"ls\"}");
    assert_eq!(messages[2]["type"], "function_call_output");
    assert_eq!(messages[2]["call_id"], "call_1");
    assert!(messages[2]["output"]
        .as_str()
        .unwrap()
        .starts_with("UNKNOWN_TOOL:"));
    assert!(done_splice(&run.ends[1]).is_none());

    let v = view(&run.bytes);
    let text = String::from_utf8_lossy(&run.bytes);
    for trace in ["bash", "fc_1", "call_1", "resp_2", "function_call"] {
        assert!(
            !text.contains(trace),
            "the denied call left a trace: {trace}"
        );
    }
    let kinds = v.kinds();
    assert_eq!(
        kinds.iter().filter(|k| **k == "response.created").count(),
        1
    );
    assert_eq!(
        kinds.iter().filter(|k| **k == "response.completed").count(),
        1
    );
    let terminal = v.terminal();
    assert_eq!(terminal["response"]["id"], "resp_1");
    assert_eq!(terminal["response"]["usage"]["input_tokens"], 30);
    assert_eq!(terminal["response"]["usage"]["output_tokens"], 12);
    assert_eq!(terminal["response"]["usage"]["total_tokens"], 42);
    assert_eq!(
        terminal["response"]["usage"]["output_tokens_details"]["reasoning_tokens"],
        2
    );
    let output = terminal["response"]["output"].as_array().unwrap();
    assert_eq!(output.len(), 2);
    assert_eq!(output[0]["type"], "reasoning");
    assert_eq!(output[1]["id"], "msg_2");
    assert_eq!(v.text(), "Done.");
}

#[test]
fn a_trailing_done_goes_out_once_at_the_very_end() {
    let [mut first, mut second] = denied_then_text();
    first.extend_from_slice(b"data: [DONE]\n\n");
    second.extend_from_slice(b"data: [DONE]\n\n");
    let run = run_every_cut(&code(), 2, &[first, second], None);
    let v = view(&run.bytes);
    assert_eq!(v.done, 1);
    assert!(run.bytes.ends_with(b"data: [DONE]\n\n"));
}

#[test]
fn repairs_past_the_bound_give_up_with_a_note() {
    let denied = |id: &str| {
        round(
            id,
            vec![call(0, "fc_1", "call_1", "bash", &["{\"command\":\"ls\"}"])],
            usage(5, 1),
        )
    };
    let run = run_every_cut(&code(), 1, &[denied("resp_1"), denied("resp_2")], None);
    assert!(matches!(run.ends[0], RoundEnd::Repair { .. }));
    assert!(done_splice(&run.ends[1]).is_none());
    let v = view(&run.bytes);
    let items = v.items();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["type"], "message");
    assert!(items[0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("bash"));
    assert_eq!(v.terminal()["response"]["status"], "completed");
    assert_eq!(v.terminal()["response"]["usage"]["input_tokens"], 10);
    assert!(!String::from_utf8_lossy(&run.bytes).contains("fc_1"));
}

#[test]
fn a_body_that_ends_without_its_terminal_still_gives_up_with_a_terminal() {
    let mut events = start("resp_1");
    events.extend(call(0, "fc_1", "call_1", "bash", &["{\"command\":\"ls\"}"]).0);
    let run = run_every_cut(&code(), 0, &[sse(events)], None);
    let v = view(&run.bytes);
    assert_eq!(v.terminal()["type"], "response.completed");
    assert_eq!(v.terminal()["response"]["id"], "resp_1");
    assert_eq!(v.items()[0]["type"], "message");
}

#[test]
fn collapsed_call_with_invalid_arguments_is_denied_invalid_args() {
    let rounds = [
        round(
            "resp_1",
            vec![call(0, "fc_1", "call_1", "read", &["{\"path\":"])],
            usage(1, 1),
        ),
        round("resp_2", vec![message(0, "msg_2", &["ok"])], usage(1, 1)),
    ];
    let run = run_every_cut(&code(), 2, &rounds, None);
    let RoundEnd::Repair { messages } = &run.ends[0] else {
        panic!("expected a repair")
    };
    assert!(
        messages[1]["output"]
            .as_str()
            .unwrap()
            .starts_with("INVALID_ARGS:"),
        "{}",
        messages[1]
    );
}

fn program_round() -> Vec<u8> {
    round(
        "resp_1",
        vec![
            reasoning(0, "rs_1"),
            message(1, "msg_1", &["Let me ", "look."]),
            call(
                2,
                "fc_2",
                "call_2",
                "run_code",
                &["{\"code\":\"await tools.read({path: 'a'})\"}"],
            ),
        ],
        usage(12, 6),
    )
}

#[test]
fn a_program_ends_the_round_with_its_reasoning_in_the_turn() {
    let run = run_every_cut(&embedded(), 2, &[program_round()], None);
    let RoundEnd::Program(program) = &run.ends[0] else {
        panic!("expected a program, got {:?}", run.ends[0])
    };
    assert_eq!(program.id, "call_2");
    assert_eq!(
        program.arguments,
        "{\"code\":\"await tools.read({path: 'a'})\"}"
    );
    assert_eq!(program.content.as_deref(), Some("Let me look."));
    let turn = program.turn.as_ref().unwrap().as_array().unwrap();
    assert_eq!(turn.len(), 3);
    assert_eq!(turn[0]["encrypted_content"], "gAAAAB-opaque==");
    assert_eq!(turn[2]["name"], "run_code");
    assert!(program.denied_calls.is_empty());
    let v = view(&run.bytes);
    assert!(
        !v.kinds().contains(&"response.completed"),
        "the round's end stays hidden"
    );
    assert!(!String::from_utf8_lossy(&run.bytes).contains("fc_2"));
    assert_eq!(v.text(), "Let me look.");
}

#[test]
fn hand_off_ends_the_stream_with_the_programs_calls() {
    let nested = json!({"type": "function_call", "id": "fc_cm_e1_1", "call_id": "cm_e1_1", "name": "read",
                        "arguments": "{\"path\":\"a\"}", "status": "completed"});
    let turn = json!({"id": "resp_cm_e1", "object": "response", "status": "completed", "output": [nested]});
    let run = run_every_cut(&embedded(), 2, &[program_round()], Some(&turn));
    let v = view(&run.bytes);
    let terminal = v.terminal();
    assert_eq!(terminal["type"], "response.completed");
    assert_eq!(terminal["response"]["id"], "resp_1");
    assert_eq!(terminal["response"]["status"], "completed");
    assert_eq!(terminal["response"]["usage"], usage(12, 6));
    let output = terminal["response"]["output"].as_array().unwrap();
    assert_eq!(output.last().unwrap(), &nested);
    assert_eq!(v.items().last().unwrap(), &&nested);
    let kinds = v.kinds();
    // A minted call streams as providers stream one: opened without its
    // arguments, the arguments as a delta and a done, then completed.
    assert_eq!(
        &kinds[kinds.len() - 5..],
        [
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
}

#[test]
fn a_program_round_then_an_answer_is_one_response() {
    let rounds = [
        program_round(),
        round(
            "resp_2",
            vec![message(0, "msg_2", &["It says hi."])],
            usage(30, 3),
        ),
    ];
    let run = run_every_cut(&embedded(), 2, &rounds, None);
    let v = view(&run.bytes);
    assert_eq!(v.terminal()["response"]["usage"]["input_tokens"], 42);
    assert_eq!(
        v.items().len(),
        3,
        "reasoning, the opening words, the answer"
    );
}

#[test]
fn a_mixed_turn_passes_its_allowed_call_and_splices_the_denial() {
    let rounds = [round(
        "resp_1",
        vec![
            call(0, "fc_1", "call_1", "bash", &["{\"command\":\"ls\"}"]),
            call(1, "fc_2", "call_2", "run_code", &["{\"code\":\"1\"}"]),
        ],
        usage(3, 3),
    )];
    let run = run_every_cut(&code(), 2, &rounds, None);
    let (keys, splice) = done_splice(&run.ends[0]).as_ref().expect("a splice");
    assert_eq!(keys, &["call_2"]);
    assert_eq!(splice.denied_calls[0]["name"], "bash");
    assert_eq!(splice.denials[0]["call_id"], "call_1");
    let v = view(&run.bytes);
    let items = v.items();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["call_id"], "call_2");
    assert!(!String::from_utf8_lossy(&run.bytes).contains("bash"));
}

#[test]
fn a_failed_response_passes_and_ends_the_turn() {
    let mut events = start("resp_1");
    let (msg, _) = message(0, "msg_1", &["Par", "tial"]);
    events.extend(msg.into_iter().take(3));
    let mut failed = response("resp_1", "failed");
    failed["error"] = json!({"code": "server_error", "message": "The model failed."});
    events.push(json!({"type": "response.failed", "response": failed}));
    let mut bytes = sse(events);
    bytes.extend_from_slice(b"data: [DONE]\n\n");
    let run = run_every_cut(&code(), 2, &[bytes], None);
    assert!(done_splice(&run.ends[0]).is_none());
    let v = view(&run.bytes);
    assert_eq!(v.terminal()["type"], "response.failed");
    assert_eq!(v.terminal()["response"]["error"]["code"], "server_error");
    assert_eq!(v.done, 1);
}

#[test]
fn an_error_event_passes_and_nothing_after_it_is_judged() {
    let mut events = start("resp_1");
    events.push(json!({"type": "error", "code": "rate_limit_exceeded", "message": "Slow down.", "param": null}));
    events.extend(call(0, "fc_1", "call_1", "bash", &["{}"]).0);
    let run = run_every_cut(&code(), 2, &[sse(events)], None);
    assert!(
        done_splice(&run.ends[0]).is_none(),
        "no repair after an error"
    );
    let v = view(&run.bytes);
    assert_eq!(v.kinds().last(), Some(&"error"));
    assert!(!String::from_utf8_lossy(&run.bytes).contains("bash"));
}

#[test]
fn a_call_whose_whole_item_is_denied_never_completes_for_the_client() {
    let mut events = start("resp_1");
    events.push(json!({"type": "response.output_item.added", "output_index": 0,
        "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "run_code", "arguments": ""}}));
    events.push(json!({"type": "response.output_item.done", "output_index": 0,
        "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "bash", "arguments": "{}"}}));
    events.push(completed("resp_1", &[], usage(1, 1)));
    let run = run_every_cut(&code(), 2, &[sse(events)], None);
    let v = view(&run.bytes);
    assert!(v.items().is_empty());
    assert!(!String::from_utf8_lossy(&run.bytes).contains("bash"));
    assert!(matches!(run.ends[0], RoundEnd::Repair { .. }));
}

#[test]
fn events_of_withheld_items_leave_no_trace_by_index_or_item_id() {
    let mut events = start("resp_1");
    events.extend(call(0, "fc_1", "call_1", "bash", &["{}"]).0);
    events.extend(message(1, "msg_1", &["hi"]).0);
    // Naming the denied item by id only, or by index with another id.
    events.push(json!({"type": "response.output_text.annotation.added", "item_id": "fc_1", "annotation": {}}));
    events.push(json!({"type": "response.output_text.annotation.added", "output_index": 0, "item_id": "msg_1"}));
    events.push(json!({"type": "response.output_text.annotation.added", "output_index": 1, "item_id": "fc_1"}));
    events.push(json!({"type": "response.output_text.delta", "output_index": 7, "item_id": "msg_9", "delta": "x"}));
    events.push(completed("resp_1", &[], usage(1, 1)));
    let run = run_every_cut(&code(), 2, &[sse(events)], None);
    assert!(!String::from_utf8_lossy(&run.bytes).contains("fc_1"));
    assert!(!String::from_utf8_lossy(&run.bytes).contains("msg_9"));
}

#[test]
fn an_upstream_failure_is_a_typed_error_event() {
    let (bytes, _) =
        rounds::broken_off_after(ResponsesJudge::new(code(), 2), &sse(start("resp_1")));
    let v = view(&bytes);
    let last = v.events.last().unwrap();
    assert_eq!(
        last,
        &json!({"type": "error", "code": "upstream_stream_broken",
                "message": "the upstream stream broke off", "sequence_number": 2})
    );
}

#[test]
fn a_type_that_would_break_the_event_line_is_dropped() {
    let mut events = start("resp_1");
    events.push(json!({"type": "x\nevent: response.completed", "output_index": 0}));
    events.extend(message(0, "msg_1", &["hi"]).0);
    events.push(json!({"type": "response.output_text.delta", "output_index": 0, "item_id": "msg_1", "delta": "x", "k": "a\nb"}));
    events.push(completed("resp_1", &[], usage(1, 1)));
    let run = run_every_cut(&code(), 2, &[sse(events)], None);
    let v = view(&run.bytes);
    assert_eq!(v.text(), "hix");
}

#[test]
fn a_whole_item_that_never_opened_is_opened_for_the_client() {
    let mut events = start("resp_1");
    let (_, text) = message(0, "msg_1", &["hi"]);
    events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": text}));
    let (_, bash) = call(1, "fc_1", "call_1", "bash", &["{}"]);
    events.push(json!({"type": "response.output_item.done", "output_index": 1, "item": bash}));
    events.push(completed("resp_1", &[], usage(1, 1)));
    let run = run_every_cut(&code(), 2, &[sse(events)], None);
    let v = view(&run.bytes);
    assert_eq!(
        v.kinds()[2..4],
        ["response.output_item.added", "response.output_item.done"]
    );
    assert!(!String::from_utf8_lossy(&run.bytes).contains("fc_1"));
    assert!(
        matches!(run.ends[0], RoundEnd::Repair { .. }),
        "text stays sent, the call is repaired"
    );
}

// ---- driven by the body, as the handler will ----

#[tokio::test]
async fn the_body_drives_a_repair_as_the_pure_judge_does() {
    let rounds = denied_then_text();
    let (bytes, asked) = through_body(|| ResponsesJudge::new(code(), 2), &rounds, None).await;
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0][2]["type"], "function_call_output");
    view(&bytes);
}

#[tokio::test]
async fn the_body_hands_a_programs_calls_to_the_client() {
    let nested = json!({"type": "function_call", "id": "fc_cm_e1_1", "call_id": "cm_e1_1", "name": "read",
                        "arguments": "{\"path\":\"a\"}", "status": "completed"});
    let turn = json!({"id": "resp_cm_e1", "object": "response", "output": [nested]});
    let (bytes, asked) = through_body(
        || ResponsesJudge::new(embedded(), 2),
        &[program_round()],
        Some(turn.clone()),
    )
    .await;
    assert_eq!(asked, vec![vec![json!("call_2")]]);
    assert_eq!(view(&bytes).terminal()["response"]["output"][2], nested);
}

#[test]
fn custom_and_built_in_calls_are_withheld_with_their_own_answers() {
    let mut events = start("resp_1");
    events.push(json!({"type": "response.output_item.added", "output_index": 0,
        "item": {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_c", "name": "bash", "input": ""}}));
    events.push(json!({"type": "response.custom_tool_call_input.delta", "item_id": "ctc_1", "output_index": 0, "delta": "rm -rf "}));
    events.push(json!({"type": "response.custom_tool_call_input.delta", "item_id": "ctc_1", "output_index": 0, "delta": "/tmp/x"}));
    events.push(json!({"type": "response.custom_tool_call_input.done", "item_id": "ctc_1", "output_index": 0, "input": "rm -rf /tmp/x"}));
    // No `output_item.done` for it: its input is what streamed.
    events.push(json!({"type": "response.output_item.added", "output_index": 1,
        "item": {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_l", "status": "in_progress",
                 "action": {"type": "exec", "command": ["ls"]}}}));
    events.push(json!({"type": "response.output_item.done", "output_index": 1,
        "item": {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_l", "status": "completed",
                 "action": {"type": "exec", "command": ["ls"]}}}));
    events.push(completed("resp_1", &[], usage(1, 1)));
    let run = run_every_cut(&code(), 2, &[sse(events)], None);
    let RoundEnd::Repair { messages } = &run.ends[0] else {
        panic!("expected a repair, got {:?}", run.ends[0])
    };
    assert_eq!(messages[0]["input"], "rm -rf /tmp/x");
    assert_eq!(messages[2]["type"], "custom_tool_call_output");
    assert_eq!(messages[2]["call_id"], "call_c");
    assert_eq!(messages[3]["type"], "local_shell_call_output");
    assert_eq!(messages[3]["call_id"], "call_l");
    let text = String::from_utf8_lossy(&run.bytes);
    for trace in [
        "ctc_1",
        "rm -rf",
        "lsh_1",
        "custom_tool_call",
        "local_shell",
    ] {
        assert!(
            !text.contains(trace),
            "a withheld call left a trace: {trace}"
        );
    }
}

#[test]
fn numbers_are_written_in_as_many_digits_as_counted() {
    for n in [0, 9, 10, 99, 100, 12345, u64::MAX] {
        let mut out = Vec::new();
        push_number(&mut out, n);
        assert_eq!(out, n.to_string().into_bytes());
        assert_eq!(digits(n), out.len());
    }
}

#[test]
fn an_item_or_response_in_a_shape_no_judge_reads_ends_the_stream() {
    let read = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read",
                      "arguments": "{}", "status": "completed"});
    let (text, _) = message(0, "msg_1", &["Before."]);
    let cases = [
        (
            json!({"type": "response.output_item.added", "output_index": 1, "item": [read]}),
            "`item` is a list, not an object",
        ),
        (
            json!({"type": "response.output_item.done", "output_index": 1,
                   "item": {"type": "function_call", "call_id": "c", "name": ["read"]}}),
            "`item.name` is a list, not a string",
        ),
        (
            json!({"type": "response.output_item.added", "output_index": 1,
                   "item": {"type": "function_call", "call_id": "c", "name": "x",
                            "namespace": {"0": "read"}}}),
            "`item.namespace` is an object, not a string",
        ),
        (
            json!({"type": "response.in_progress",
                   "response": {"id": "resp_1", "output": {"0": read}}}),
            "`response.output` is an object, not a list",
        ),
        (
            json!({"type": "response.completed", "response": [{"output": [read]}]}),
            "`response` is a list, not an object",
        ),
    ];
    for (unreadable, why) in cases {
        let mut events = start("resp_1");
        events.extend(text.clone());
        events.push(unreadable);
        events.push(completed(
            "resp_1",
            &[message_item("msg_2", "After.")],
            usage(1, 1),
        ));
        crate::test_support::refused_mid_stream(
            ResponsesJudge::new(plan(Mode::Both, Runtime::Client), 2),
            &sse(events),
            why,
            "\"read\"",
            "upstream_invalid_response",
        );
    }
}

#[test]
fn a_response_whose_output_or_items_no_judge_reads_is_refused() {
    use crate::responses::completion::judge_response;
    let read = json!({"type": "function_call", "call_id": "c", "name": "read", "arguments": "{}"});
    for (response, why) in [
        (
            json!({"output": {"0": read}}),
            "`output` is an object, not a list",
        ),
        (
            json!({"output": [message_item("m", "hi"), [read]]}),
            "`output[1]` is a list, not an object",
        ),
        (
            json!({"output": [{"type": "function_call", "call_id": "c", "name": 1}]}),
            "`output[0].name` is a number, not a string",
        ),
    ] {
        let refused = judge_response(response.as_object().unwrap(), &code()).unwrap_err();
        assert_eq!(refused.to_string(), why);
    }
    // `null` is absent; a message's fields are no call's.
    for response in [
        json!({"output": null}),
        json!({"output": [{"type": "message", "name": ["x"], "content": []}]}),
        json!({"output": [{"type": "function_call", "call_id": "c", "name": "run_code",
                           "namespace": null, "arguments": "{}"}]}),
    ] {
        assert!(
            judge_response(response.as_object().unwrap(), &code()).is_ok(),
            "{response}"
        );
    }
}

#[test]
fn a_call_riding_on_an_event_of_another_type_never_reaches_the_client() {
    let (mut events, whole) = message(0, "msg_1", &["Hi"]);
    let mut all = start("resp_1");
    // Before the item's end, on its index: a type no one documents, and
    // a documented one no call comes on, each carrying a denied call.
    let done = events.pop().unwrap();
    for kind in ["response.output_item.weird", "response.output_text.delta"] {
        events.push(json!({"type": kind, "output_index": 0, "item_id": "msg_1",
            "content_index": 0, "delta": "",
            "item": {"type": "function_call", "id": "fc_9", "call_id": "call_9",
                     "name": "read", "arguments": "{}"}}));
    }
    events.push(done);
    all.extend(events);
    all.push(completed("resp_1", &[whole], usage(3, 1)));
    let rounds = [sse(all)];
    let run = run_every_cut(&code(), 2, &rounds, None);
    let text = String::from_utf8_lossy(&run.bytes);
    assert!(!text.contains("call_9"), "{text}");
    assert_eq!(view(&run.bytes).text(), "Hi");
}
