//! The Gemini stream judge over the shapes the Gemini API streams, each
//! fed whole, cut at every byte offset and byte by byte: the client's view
//! is the same every time.

use super::*;
use crate::mode::{Mode, Runtime};
use crate::test_support::{gemini_plan, same_at_every_cut, Judged};

fn judge(mode: Mode, runtime: Runtime) -> impl Fn() -> GeminiJudge {
    let plan = gemini_plan(mode, runtime);
    move || GeminiJudge::with_ids(plan.clone(), 1, CallIds::under("call_cmT".into()))
}

/// Chunks as the Gemini API streams them: `data:` lines ending in CRLF.
fn sse(chunks: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in chunks {
        out.extend_from_slice(format!("data: {c}\r\n\r\n").as_bytes());
    }
    out
}

fn chunk(parts: Value, finish: Option<&str>, prompt: u64, out: u64) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(f) = finish {
        candidate["finishReason"] = json!(f);
    }
    json!({"candidates": [candidate],
           "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": out,
                             "totalTokenCount": prompt + out},
           "modelVersion": "gemini-2.5-pro", "responseId": "r1"})
}

/// The chunks the client got, parsed.
fn chunks(run: &Judged) -> Vec<Value> {
    String::from_utf8(run.client.clone())
        .unwrap()
        .replace("\r\n", "\n")
        .split("\n\n")
        .filter_map(|e| e.trim().strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

fn parts_of(chunks: &[Value]) -> Vec<Value> {
    chunks
        .iter()
        .flat_map(|c| {
            c["candidates"][0]["content"]["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

#[test]
fn text_passes_as_the_providers_bytes() {
    let bytes = sse(&[
        chunk(json!([{"text": "Hel"}]), None, 5, 1),
        chunk(json!([{"text": "lo"}]), Some("STOP"), 5, 2),
    ]);
    let run = same_at_every_cut("text", &bytes, judge(Mode::Code, Runtime::Client));
    // Unchanged chunks go out byte for byte; the held end, decided, as
    // the proxy writes it.
    assert!(run.client.starts_with(&bytes[..bytes.len() / 2 - 20]));
    let got = chunks(&run);
    assert_eq!(got.len(), 2);
    assert_eq!(got[1]["candidates"][0]["finishReason"], "STOP");
    assert_eq!(got[1]["usageMetadata"]["candidatesTokenCount"], 2);
    assert!(matches!(run.end, RoundEnd::Done { splice: None }));
}

#[test]
fn a_native_call_in_code_mode_never_reaches_the_client_and_is_repaired() {
    let bytes = sse(&[
        chunk(json!([{"text": "Let me read it."}]), None, 5, 1),
        chunk(
            json!([{"functionCall": {"name": "read_file", "args": {"path": "a.txt"}},
                    "thoughtSignature": "sig1"}]),
            Some("STOP"),
            5,
            9,
        ),
    ]);
    let run = same_at_every_cut("native call", &bytes, judge(Mode::Code, Runtime::Client));
    let text = String::from_utf8_lossy(&run.client);
    assert!(!text.contains("read_file"), "{text}");
    assert!(
        !text.contains("finishReason"),
        "the round's end is hidden: {text}"
    );
    assert!(!text.contains("usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":9"));
    let RoundEnd::Repair { messages } = &run.end else {
        panic!("a repair: {:?}", run.end);
    };
    // The model's turn as it came (its signature kept, no id it did not
    // write), then the answer naming the route through run_code, by name
    // and place as the model named its call.
    assert_eq!(messages[0]["parts"][1]["thoughtSignature"], "sig1");
    assert_eq!(
        messages[0]["parts"][1]["functionCall"],
        json!({"name": "read_file", "args": {"path": "a.txt"}})
    );
    let answer = &messages[1]["parts"][0]["functionResponse"];
    assert!(answer.get("id").is_none(), "{answer}");
    assert_eq!(answer["name"], "read_file");
    assert!(answer["response"]["error"]
        .as_str()
        .unwrap()
        .starts_with("UNKNOWN_TOOL"));
}

#[test]
fn run_code_passes_with_an_id_and_the_end_carries_the_usage() {
    let bytes = sse(&[
        chunk(
            json!([{"functionCall": {"name": "run_code", "args": {"code": "return 1"}},
                    "thoughtSignature": "s"}]),
            None,
            7,
            3,
        ),
        chunk(json!([{"text": ""}]), Some("STOP"), 7, 4),
        json!({"usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 5,
                                 "totalTokenCount": 12}, "modelVersion": "gemini-2.5-pro"}),
    ]);
    let run = same_at_every_cut("run_code", &bytes, judge(Mode::Code, Runtime::Client));
    let got = chunks(&run);
    let parts = parts_of(&got);
    assert_eq!(parts[0]["functionCall"]["id"], "call_cmT_1");
    assert_eq!(parts[0]["thoughtSignature"], "s");
    assert_eq!(
        got.last().unwrap()["usageMetadata"]["candidatesTokenCount"],
        5
    );
    assert!(matches!(run.end, RoundEnd::Done { splice: None }));
}

#[test]
fn parallel_calls_with_one_signature_splice_the_denied_one() {
    let bytes = sse(&[chunk(
        json!([
            {"functionCall": {"name": "run_code", "args": {"code": "1"}, "id": "a"},
             "thoughtSignature": "s"},
            {"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}, "id": "b"}}
        ]),
        Some("STOP"),
        3,
        3,
    )]);
    let run = same_at_every_cut("parallel", &bytes, judge(Mode::Code, Runtime::Client));
    let parts = parts_of(&chunks(&run));
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0]["functionCall"]["id"], "a");
    let RoundEnd::Done {
        splice: Some((keys, splice)),
    } = &run.end
    else {
        panic!("a splice: {:?}", run.end);
    };
    assert_eq!(keys, &["a".to_owned()]);
    assert_eq!(splice.denied_calls[0]["functionCall"]["id"], "b");
    assert_eq!(splice.denials[0]["functionResponse"]["id"], "b");
}

#[test]
fn a_passed_call_with_its_id_goes_out_as_the_providers_bytes() {
    let call = chunk(
        json!([{"functionCall": {"id": "g1", "name": "run_code", "args": {"code": "return 1"}},
                "thoughtSignature": "s"}]),
        None,
        7,
        3,
    );
    let bytes = sse(&[
        call.clone(),
        chunk(json!([{"text": ""}]), Some("STOP"), 7, 4),
    ]);
    let run = same_at_every_cut("id", &bytes, judge(Mode::Code, Runtime::Client));
    // Nothing to change in it: the judge took no copy to write.
    assert!(run.client.starts_with(&sse(&[call])), "{run:?}");
    // Without its id, the chunk is written anew with the one the proxy gives.
    let bare = chunk(
        json!([{"functionCall": {"name": "run_code", "args": {"code": "return 1"}}}]),
        None,
        7,
        3,
    );
    let bytes = sse(&[
        bare.clone(),
        chunk(json!([{"text": ""}]), Some("STOP"), 7, 4),
    ]);
    let run = same_at_every_cut("no id", &bytes, judge(Mode::Code, Runtime::Client));
    assert!(!run.client.starts_with(&sse(&[bare])));
    assert_eq!(
        parts_of(&chunks(&run))[0]["functionCall"]["id"],
        "call_cmT_1"
    );
}

#[test]
fn past_the_repair_bound_the_client_gets_the_note_and_a_stop() {
    let bytes = sse(&[chunk(
        json!([{"functionCall": {"name": "read_file", "args": {"path": "a"}}}]),
        Some("STOP"),
        3,
        3,
    )]);
    let plan = gemini_plan(Mode::Code, Runtime::Client);
    let run = same_at_every_cut("give up", &bytes, move || {
        GeminiJudge::with_ids(plan.clone(), 0, CallIds::under("call_cmT".into()))
    });
    let got = chunks(&run);
    let parts = parts_of(&got);
    assert_eq!(parts.len(), 1);
    assert!(parts[0]["text"].as_str().unwrap().contains("repair limit"));
    assert_eq!(got[0]["candidates"][0]["finishReason"], "STOP");
    assert!(matches!(run.end, RoundEnd::Done { splice: None }));
}

#[test]
fn an_unknown_part_is_judged_as_a_call() {
    let bytes = sse(&[chunk(
        json!([{"toolCall": {"name": "read_file", "args": {}}}]),
        Some("STOP"),
        3,
        3,
    )]);
    let run = same_at_every_cut("unknown part", &bytes, judge(Mode::Code, Runtime::Client));
    assert!(!String::from_utf8_lossy(&run.client).contains("toolCall"));
    assert!(matches!(run.end, RoundEnd::Repair { .. }));
}

#[test]
fn the_embedded_runtime_holds_the_program_and_hides_the_end() {
    let bytes = sse(&[
        chunk(json!([{"text": "Running."}]), None, 3, 1),
        chunk(
            json!([{"functionCall": {"name": "run_code", "args": {"code": "return 2"}}}]),
            Some("STOP"),
            3,
            3,
        ),
    ]);
    let run = same_at_every_cut("program", &bytes, judge(Mode::Code, Runtime::Embedded));
    let text = String::from_utf8_lossy(&run.client);
    assert!(
        text.contains("Running.") && !text.contains("run_code"),
        "{text}"
    );
    let RoundEnd::Program(program) = &run.end else {
        panic!("a program: {:?}", run.end);
    };
    assert_eq!(program.id, "call_cmT_1");
    assert_eq!(program.arguments, r#"{"code":"return 2"}"#);
}

#[test]
fn an_error_chunk_reaches_the_client_and_ends_the_turn() {
    let mut bytes = sse(&[chunk(json!([{"text": "Hi"}]), None, 3, 1)]);
    bytes.extend_from_slice(
        b"data: {\"error\":{\"code\":503,\"message\":\"overloaded\",\"status\":\"UNAVAILABLE\"}}\r\n\r\n",
    );
    let run = same_at_every_cut("error", &bytes, judge(Mode::Code, Runtime::Client));
    assert!(run.errored);
    assert!(String::from_utf8_lossy(&run.client).contains("UNAVAILABLE"));
}

/// Found by fuzzing: a call that passes must not carry another beside it,
/// and an error chunk's candidates are judged too.
#[test]
fn a_call_beside_run_code_or_an_error_is_judged() {
    for part in [
        json!({"functionCall": {"name": "run_code", "args": {"code": "1"}},
               "toolCall": {"toolType": "LOCAL_SHELL", "args": {"command": "id"}}}),
        json!({"functionCall": {"name": "run_code", "args": {"code": "1"}},
               "function_call": {"name": "read_file", "args": {}}}),
    ] {
        let bytes = sse(&[chunk(json!([part]), Some("STOP"), 3, 3)]);
        let run = same_at_every_cut("beside", &bytes, judge(Mode::Code, Runtime::Client));
        let text = String::from_utf8_lossy(&run.client);
        assert!(
            !text.contains("LOCAL_SHELL") && !text.contains("read_file"),
            "{text}"
        );
        assert!(matches!(run.end, RoundEnd::Repair { .. }), "{:?}", run.end);
    }
    let mut bytes =
        b"data: {\"error\":{\"code\":500},\"candidates\":[{\"content\":{\"parts\":".to_vec();
    bytes.extend_from_slice(b"[{\"functionCall\":{\"name\":\"read_file\"}}]}}]}\r\n\r\n");
    let run = same_at_every_cut("error beside", &bytes, judge(Mode::Code, Runtime::Client));
    assert!(run.errored);
    let text = String::from_utf8_lossy(&run.client);
    assert!(
        !text.contains("read_file") && text.contains("error"),
        "{text}"
    );
}

#[test]
fn a_chunk_whose_candidates_no_judge_reads_ends_the_stream_with_an_error() {
    // `@google/genai` reads `candidates` keyed "0" as the first candidate.
    let keyed = json!({"candidates": {"0": {"content": {"role": "model", "parts": [
        {"functionCall": {"name": "read_file", "args": {"path": "a"}}}]}, "index": 0}}});
    let bytes = sse(&[
        chunk(json!([{"text": "Reading."}]), None, 5, 1),
        keyed,
        chunk(json!([{"text": "Done."}]), Some("STOP"), 5, 2),
    ]);
    let run = same_at_every_cut(
        "keyed candidates",
        &bytes,
        judge(Mode::Code, Runtime::Client),
    );
    let text = String::from_utf8_lossy(&run.client);
    assert!(!text.contains("read_file"), "{text}");
    assert!(!text.contains("Done."), "nothing after it goes out: {text}");
    let got = chunks(&run);
    assert_eq!(got.len(), 2, "{text}");
    assert_eq!(
        got[0]["candidates"][0]["content"]["parts"][0]["text"],
        "Reading."
    );
    let error = &got[1]["error"];
    assert_eq!(error["code"], 502);
    assert_eq!(error["details"][0]["reason"], "upstream_invalid_response");
    assert!(error["message"]
        .as_str()
        .unwrap()
        .contains("`candidates` is an object, not a list"));
    assert!(run.refused.is_some());
}

#[test]
fn a_chunk_that_is_no_json_object_ends_the_stream_with_an_error() {
    // Python's `json` reads NaN; serde reads no JSON out of it.
    for data in [
        r#"{"candidates": [{"content": {"parts": [{"functionCall": {"name": "read_file"}}]}}], "x": NaN}"#,
        r#"[{"candidates": [{"content": {"parts": [{"functionCall": {"name": "read_file"}}]}}]}]"#,
    ] {
        let bytes = format!("data: {data}\r\n\r\n");
        let run = same_at_every_cut(data, bytes.as_bytes(), judge(Mode::Code, Runtime::Client));
        let text = String::from_utf8_lossy(&run.client);
        assert!(!text.contains("read_file"), "{text}");
        assert!(text.contains("upstream_invalid_response"), "{text}");
    }
}
