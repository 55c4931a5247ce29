//! The chat judge's reading of chunks: which can hold a call (the fast
//! path's byte check), the borrowed view that lets a call's continuation
//! go out as it came, and the cleaning of chunks a client must not read
//! calls out of.

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::calls::DeltaView;
use super::StreamJudge;
use crate::chat::completion::check_calls;
use crate::sse::data_event as sse_data;
use crate::turn::{shape, Obj, Step, Unreadable};

impl StreamJudge {
    /// The common chunk in a tool stream continues a call the client already
    /// has: read it through a borrowed view and let its bytes go out as they
    /// came, without building a JSON tree. Anything else returns false.
    pub(super) fn forward_unchanged(&mut self, data: &str) -> bool {
        if self.turn.rounds.before() > 0
            || self.turn.decision.is_some()
            || self.completion_id.is_none()
        {
            return false;
        }
        // Views read only objects where objects go (serde's derive would
        // also take a list of the fields), so nothing the full path refuses
        // goes out here as it came.
        let Ok(Obj(view)) = serde_json::from_str::<Obj<ChunkView<'_>>>(data) else {
            return false;
        };
        let present = |v: &Option<&RawValue>| v.is_some_and(|v| v.get() != "null");
        if present(&view.error) || present(&view.usage) {
            return false;
        }
        let [Obj(choice)] = view.choices.as_slice() else {
            return false;
        };
        if present(&choice.finish_reason)
            || present(&choice.message)
            || choice.index.is_some_and(|i| i.get() != "0")
        {
            return false;
        }
        let Some(Obj(delta)) = &choice.delta else {
            return false;
        };
        if present(&delta.function_call) {
            return false;
        }
        if delta.tool_calls.is_empty()
            || !self.turn.round.calls.continue_unchanged(&delta.tool_calls)
        {
            return false;
        }
        if let Some(text) = delta.content.as_deref().filter(|t| !t.is_empty()) {
            let mut fields = Map::new();
            fields.insert("content".into(), json!(text));
            self.turn.emitted_text |= self.turn.round.on_delta_fields(&fields);
        }
        true
    }
}

/// Whether a client could read a tool call out of `data`, however it is
/// spelled: the keys by name, or any key through an escape that decodes to
/// ASCII (`"tool\u005fcalls"`). Escapes of other characters (`\u00e9`) are
/// text and keep ordinary chunks on the fast path.
pub(super) fn may_hold_call(data: &str) -> bool {
    // `_call` is in both `tool_calls` and `function_call`: one scan for both.
    data.contains("_call") || (data.contains('\\') && has_ascii_escape(data))
}

fn has_ascii_escape(data: &str) -> bool {
    let bytes = data.as_bytes();
    let mut at = 0;
    while let Some(found) = data[at..].find("\\u") {
        let i = at + found;
        // `\u00XX` with XX below 0x80; anything unreadable counts too.
        match bytes.get(i + 2..i + 6) {
            Some([b'0', b'0', b'0'..=b'7', _]) => return true,
            Some([a, b, c, d]) if [a, b, c, d].iter().all(|x| x.is_ascii_hexdigit()) => {}
            _ => return true,
        }
        at = i + 2;
    }
    false
}

/// Forwards an event nobody judges (after an upstream error): as it came
/// when no call can be in it, else without its choices, else not at all.
pub(super) fn forward_inert(data: &str, raw: Bytes, out: &mut Vec<Bytes>) {
    if !may_hold_call(data) {
        out.push(raw);
        return;
    }
    if let Ok(Value::Object(mut chunk)) = serde_json::from_str::<Value>(data) {
        chunk.remove("choices");
        out.push(sse_data(&Value::Object(chunk)));
    }
}

/// Reads a chunk where a call could stand as a judge may
/// (`crate::turn::shape`): `choices` a list whose first entry (the one
/// kept: [`only_first_choice`]) is an object, its `delta` and `message`
/// objects whose calls [`check_calls`] reads; `null` is absent.
pub(super) fn check_chunk(chunk: &Value) -> Result<(), Unreadable> {
    use Step::{Index, Key};
    let choices = shape::list(chunk.get("choices"), &[Key("choices")])?;
    let Some(choice) = choices.first() else {
        return Ok(());
    };
    let choice = shape::entry(choice, &[Key("choices"), Index(0)])?;
    for part in ["delta", "message"] {
        let at = [Key("choices"), Index(0), Key(part)];
        if let Some(fields) = shape::object(choice.get(part), &at)? {
            check_calls(fields).map_err(|e| e.under(&at))?;
        }
    }
    Ok(())
}

/// Keeps only the first choice of a chunk, as choice 0, without a whole
/// `message` holding calls. `n = 1` is enforced wherever a call can be
/// denied, so any other choice is nothing a client asked for; forwarded, it
/// would be a call nobody judged.
pub(super) fn only_first_choice(chunk: &mut Value) {
    let Some(obj) = chunk.as_object_mut() else {
        return;
    };
    let choices = match obj.get_mut("choices") {
        None | Some(Value::Null) => return,
        Some(Value::Array(choices)) => choices,
        Some(_) => {
            obj.remove("choices");
            return;
        }
    };
    choices.truncate(1);
    match choices.first_mut() {
        Some(Value::Object(choice)) => {
            if choice.get("index").is_some_and(|i| i != &json!(0)) {
                choice.insert("index".into(), json!(0));
            }
            // A whole `message` in a chunk is no delta the judge follows; a
            // client that reads one must not find calls in it.
            let holds_calls = choice
                .get("message")
                .is_some_and(|m| m.get("tool_calls").is_some() || m.get("function_call").is_some());
            if holds_calls {
                choice.remove("message");
            }
        }
        Some(_) => choices.clear(),
        None => {}
    }
}

/// The fields of a chunk the fast path reads, borrowed from its text.
#[derive(serde::Deserialize)]
struct ChunkView<'a> {
    #[serde(borrow)]
    error: Option<&'a RawValue>,
    #[serde(borrow)]
    usage: Option<&'a RawValue>,
    #[serde(borrow, default)]
    choices: Vec<Obj<ChoiceView<'a>>>,
}

#[derive(serde::Deserialize)]
struct ChoiceView<'a> {
    #[serde(borrow)]
    index: Option<&'a RawValue>,
    #[serde(borrow)]
    message: Option<&'a RawValue>,
    #[serde(borrow)]
    finish_reason: Option<&'a RawValue>,
    #[serde(borrow)]
    delta: Option<Obj<DeltaHead<'a>>>,
}

#[derive(serde::Deserialize)]
struct DeltaHead<'a> {
    #[serde(borrow)]
    content: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Vec<Obj<DeltaView<'a>>>,
    #[serde(borrow)]
    function_call: Option<&'a RawValue>,
}

pub(super) fn template_of(chunk: &Value) -> Value {
    let mut t = json!({});
    for key in ["id", "object", "created", "model", "system_fingerprint"] {
        if let Some(v) = chunk.get(key) {
            t[key] = v.clone();
        }
    }
    t
}

/// The final event of a stream that failed after it started.
pub fn error_event(message: &str, code: &str) -> Bytes {
    sse_data(
        &json!({"error": {"message": message, "type": "upstream_error", "param": null, "code": code}}),
    )
}

#[cfg(test)]
mod tests {
    use super::may_hold_call;
    use crate::mode::Mode;
    use crate::test_support::{agent_plan, judge_pieces, StreamJudge};
    use serde_json::json;

    fn chunk(delta: serde_json::Value) -> String {
        let c = json!({"id": "c1", "object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
        format!("data: {c}\n\n")
    }

    #[test]
    fn a_chunk_with_calls_in_a_shape_no_judge_reads_ends_the_stream() {
        let read = json!({"index": 0, "id": "c", "type": "function",
                          "function": {"name": "read", "arguments": "{}"}});
        for (unreadable, why) in [
            (
                chunk(json!({"tool_calls": {"0": read}})),
                "`choices[0].delta.tool_calls` is an object, not a list",
            ),
            (
                chunk(json!([{"tool_calls": [read]}])),
                "`choices[0].delta` is a list, not an object",
            ),
            (
                format!(
                    "data: {}\n\n",
                    json!({"id": "c1", "choices": {"0": {"delta": {"tool_calls": [read]}}}})
                ),
                "`choices` is an object, not a list",
            ),
            (
                chunk(json!({"tool_calls": [{"index": 0, "function": {"name": ["read"]}}]})),
                "`choices[0].delta.tool_calls[0].function.name` is a list, not a string",
            ),
            (
                chunk(json!({"function_call": [{"name": "read"}]})),
                "`choices[0].delta.function_call` is a list, not an object",
            ),
            (
                // Python's `json` reads NaN; serde reads no JSON out of it.
                chunk(json!({"tool_calls": [read]})).replacen("{", "{\"x\":NaN,", 1),
                "it is no JSON, not an object",
            ),
        ] {
            let stream = chunk(json!({"role": "assistant", "content": "Before."}))
                + &unreadable
                + &chunk(json!({"content": "After."}))
                + "data: [DONE]\n\n";
            let run = judge_pieces(
                StreamJudge::new(agent_plan(Mode::Both), 2),
                &[stream.as_bytes()],
            );
            let text = String::from_utf8_lossy(&run.client);
            assert_eq!(
                run.refused.map(|e| e.to_string()).as_deref(),
                Some(why),
                "{text}"
            );
            assert!(!text.contains("read") && !text.contains("After."), "{text}");
            assert!(
                text.contains("Before.") && text.contains("upstream_invalid_response"),
                "{text}"
            );
        }
    }

    #[test]
    fn only_ascii_escapes_and_call_keys_leave_the_fast_path() {
        assert!(may_hold_call(r#"{"tool_calls":[]}"#));
        assert!(may_hold_call(r#"{"function_call":{}}"#));
        assert!(may_hold_call(r#"{"tool\u005fcalls":[]}"#));
        assert!(may_hold_call(r#"{"\u0074ool_calls":[]}"#));
        assert!(may_hold_call(r#"{"a":"\u00"}"#));
        assert!(!may_hold_call(r#"{"content":"caf\u00e9 \u4e2d \n \""}"#));
        assert!(!may_hold_call(
            r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":null}]}"#
        ));
    }
}
