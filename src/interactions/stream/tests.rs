//! The Interactions stream judge over the shapes the API streams, each fed
//! whole, cut at every byte offset and byte by byte: the client's view is
//! the same every time.

use super::*;
use crate::interactions::test_plan::{plan, plan_with};
use crate::mode::{Mode, Runtime};
use crate::test_support::{same_at_every_cut, Judge, Judged};

impl Judge for InteractionsJudge {
    fn errored(&self) -> bool {
        InteractionsJudge::errored(self)
    }
}

fn judge(mode: Mode, runtime: Runtime) -> impl Fn() -> InteractionsJudge {
    let plan = plan(mode, runtime);
    move || InteractionsJudge::new(plan.clone(), 1)
}

/// Events as the API streams them: `event:` and `data:` with its
/// `event_type`, then `[DONE]`.
fn sse(events: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in events {
        let kind = e["event_type"].as_str().unwrap();
        out.extend_from_slice(format!("event: {kind}\ndata: {e}\n\n").as_bytes());
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

fn ev(kind: &str, fields: Value) -> Value {
    events::event(kind, fields)
}

/// A round: its start, `steps` streamed as the API streams them, its end
/// with `status` and usage.
fn round(id: &str, steps: &[Value], status: &str, tokens: u64) -> Vec<u8> {
    let mut all = vec![
        ev(
            "interaction.created",
            json!({"interaction": {"id": id, "status": "in_progress", "object": "interaction",
                               "model": "gemini-3-flash-preview"}}),
        ),
        ev(
            "interaction.status_update",
            json!({"interaction_id": id, "status": "in_progress"}),
        ),
    ];
    for (i, step) in steps.iter().enumerate() {
        let mut events = events::step_events(i, step);
        // The API streams a call's arguments in pieces.
        if step_type(step) == FUNCTION_CALL {
            let args = events[1]["delta"]["arguments"].as_str().unwrap().to_owned();
            let (a, b) = args.split_at(args.len() / 2);
            events[1]["delta"]["arguments"] = json!(a);
            let mut second = events[1].clone();
            second["delta"]["arguments"] = json!(b);
            events.insert(2, second);
        }
        all.extend(events);
    }
    all.push(ev(
        "interaction.status_update",
        json!({"interaction_id": id, "status": status}),
    ));
    all.push(ev(
        "interaction.completed",
        json!({"interaction": {"id": id, "status": status, "object": "interaction",
                           "usage": {"total_input_tokens": 10, "total_output_tokens": tokens,
                                     "total_tokens": 10 + tokens}}}),
    ));
    sse(&all)
}

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"type": "function_call", "id": id, "name": name, "arguments": args})
}

fn words(text: &str) -> Value {
    steps::text_step(text)
}

fn thought() -> Value {
    json!({"type": "thought", "signature": "c2lnbmF0dXJl"})
}

/// The events the client got, parsed.
fn client_events(run: &Judged) -> Vec<Value> {
    String::from_utf8(run.client.clone())
        .unwrap()
        .split("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event_type"] == kind).collect()
}

#[test]
fn words_pass_and_the_stream_ends_once_with_its_usage() {
    let bytes = round("v1_a", &[thought(), words("Hello there.")], "completed", 4);
    let run = same_at_every_cut("words", &bytes, judge(Mode::Code, Runtime::Client));
    let got = client_events(&run);
    assert_eq!(got[0]["event_type"], "interaction.created");
    let completed = of_type(&got, "interaction.completed");
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["interaction"]["id"], "v1_a");
    assert_eq!(completed[0]["interaction"]["status"], "completed");
    assert_eq!(
        completed[0]["interaction"]["usage"]["total_output_tokens"],
        4
    );
    assert!(run.client.ends_with(b"data: [DONE]\n\n"));
    assert!(matches!(run.end, RoundEnd::Done { splice: None }));
}

#[test]
fn a_native_call_in_code_mode_never_reaches_the_client_and_is_repaired() {
    let bytes = round(
        "v1_a",
        &[
            thought(),
            words("Reading it."),
            call("c1", "read", json!({"path": "a.txt"})),
        ],
        "requires_action",
        9,
    );
    let run = same_at_every_cut("native call", &bytes, judge(Mode::Code, Runtime::Client));
    let text = String::from_utf8_lossy(&run.client);
    assert!(!text.contains("\"read\""), "{text}");
    assert!(!text.contains("interaction.completed"), "{text}");
    assert!(!text.contains("requires_action"), "{text}");
    let RoundEnd::Repair { messages } = &run.end else {
        panic!("a repair: {:?}", run.end);
    };
    // The model's steps as they came (its thought's signature kept, the
    // call's arguments joined), then the answer naming the route.
    assert_eq!(messages[0], thought());
    assert_eq!(messages[2], call("c1", "read", json!({"path": "a.txt"})));
    assert_eq!(messages[3]["type"], "function_result");
    assert_eq!(messages[3]["call_id"], "c1");
    assert!(messages[3]["result"]
        .as_str()
        .unwrap()
        .starts_with("UNKNOWN_TOOL"));
}

#[test]
fn run_code_for_the_client_passes_whole_and_the_end_asks_for_its_result() {
    let bytes = round(
        "v1_a",
        &[call("c1", "run_code", json!({"code": "return 1"}))],
        "requires_action",
        3,
    );
    let run = same_at_every_cut("run_code", &bytes, judge(Mode::Code, Runtime::Client));
    let got = client_events(&run);
    let starts = of_type(&got, "step.start");
    assert_eq!(starts[0]["step"]["name"], "run_code");
    assert_eq!(starts[0]["index"], 0);
    let args: String = of_type(&got, "step.delta")
        .iter()
        .map(|d| d["delta"]["arguments"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(args, r#"{"code":"return 1"}"#);
    let completed = of_type(&got, "interaction.completed");
    assert_eq!(completed[0]["interaction"]["status"], "requires_action");
    assert!(matches!(run.end, RoundEnd::Done { splice: None }));
}

#[test]
fn the_embedded_runtime_holds_the_program_and_hides_the_end() {
    let bytes = round(
        "v1_a",
        &[
            thought(),
            call("c1", "run_code", json!({"code": "return 1"})),
        ],
        "requires_action",
        3,
    );
    let run = same_at_every_cut("program", &bytes, judge(Mode::Code, Runtime::Embedded));
    let text = String::from_utf8_lossy(&run.client);
    assert!(!text.contains("run_code"), "{text}");
    assert!(!text.contains("interaction.completed"), "{text}");
    let RoundEnd::Program(held) = &run.end else {
        panic!("a program: {:?}", run.end);
    };
    assert_eq!(held.response_id.as_deref(), Some("v1_a"));
}

#[test]
fn past_the_repair_bound_the_client_gets_the_note_and_the_end() {
    let bytes = round(
        "v1_a",
        &[call("c1", "bash", json!({"command": "ls"}))],
        "requires_action",
        2,
    );
    let plan = plan(Mode::Code, Runtime::Client);
    let run = same_at_every_cut("give up", &bytes, move || {
        InteractionsJudge::new(plan.clone(), 0)
    });
    let got = client_events(&run);
    let text: String = of_type(&got, "step.delta")
        .iter()
        .filter_map(|d| d["delta"]["text"].as_str())
        .collect();
    assert!(text.contains("[codemode-proxy]"), "{text}");
    let completed = of_type(&got, "interaction.completed");
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["interaction"]["status"], "completed");
    assert!(!String::from_utf8_lossy(&run.client).contains("\"bash\""));
}

#[test]
fn an_unknown_step_is_judged_as_a_call() {
    let bytes = round(
        "v1_a",
        &[json!({"type": "computer_use_call", "id": "c1", "action": "click"})],
        "requires_action",
        2,
    );
    let run = same_at_every_cut("unknown", &bytes, judge(Mode::Code, Runtime::Client));
    assert!(!String::from_utf8_lossy(&run.client).contains("computer_use_call"));
    assert!(matches!(run.end, RoundEnd::Repair { .. }), "{:?}", run.end);
}

#[test]
fn a_step_whose_name_no_judge_reads_ends_the_stream_with_an_error() {
    let bytes = sse(&[ev(
        "step.start",
        json!({"index": 0, "step": {"type": "function_call", "id": "c", "name": ["read"]}}),
    )]);
    let run = same_at_every_cut("unreadable", &bytes, judge(Mode::Code, Runtime::Client));
    assert!(run.refused.is_some());
    assert!(!String::from_utf8_lossy(&run.client).contains("read"));
}

/// The recorded streams (fixtures/streams/interactions), native mode with
/// their tools declared: everything passes, the client reads the calls
/// whole, the same at every cut.
#[test]
fn the_recorded_streams_pass_in_native_mode_at_every_cut() {
    let tools = json!([
        {"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
        {"type": "function", "name": "get_time", "parameters": {"type": "object"}},
    ]);
    let plan = plan_with(tools, Mode::Native, Runtime::Client);
    let mut seen = 0;
    for path in std::fs::read_dir("fixtures/streams/interactions").unwrap() {
        let path = path.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("sse") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let plan = plan.clone();
        let run = same_at_every_cut(&path.display().to_string(), &bytes, move || {
            InteractionsJudge::new(plan.clone(), 1)
        });
        let got = client_events(&run);
        let upstream_starts = bytes
            .windows(b"\"event_type\":\"step.start\"".len())
            .filter(|w| *w == b"\"event_type\":\"step.start\"")
            .count();
        assert_eq!(
            of_type(&got, "step.start").len(),
            upstream_starts,
            "{path:?}"
        );
        assert!(matches!(run.end, RoundEnd::Done { .. }), "{path:?}");
        seen += 1;
    }
    assert!(seen >= 4, "the recorded streams are there");
}
