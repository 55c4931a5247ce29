//! The embedded runtime on the Interactions API: a program's calls reach
//! the client as `function_call` steps of an interaction the proxy mints
//! (status `requires_action`); their `function_result`s resume the program.

use serde_json::{json, Value};

use crate::runtime::Execution;

/// The id of the interaction the proxy mints to hand out `exec`'s calls
/// from `start` on: `v1_` as Google's, then hex that reads back.
pub fn interaction_id(exec: &Execution, start: usize) -> String {
    crate::runtime::hex_answer_id("v1_", &exec.id, start)
}

/// The execution an interaction id minted by [`interaction_id`] names.
pub fn minted_interaction(id: &str) -> Option<String> {
    crate::runtime::parse_hex_answer_id("v1_", id).map(|(exec, _)| exec)
}

/// The step through which call `n` of `exec` reaches the client.
pub fn nested_step(exec: &Execution, n: usize) -> Value {
    let call = &exec.calls[n];
    super::steps::function_call(&exec.call_id(n), &call.name, &call.args)
}

/// The interaction that hands a program's waiting calls to the client.
/// With `model_steps`, the first batch carries the model's own steps other
/// than calls (its thoughts and words; a stream has sent them already); a
/// later batch, no model having been asked, reports zero tokens.
pub fn client_interaction(
    exec: &Execution,
    range: std::ops::Range<usize>,
    model: &Value,
    usage: Option<Value>,
    model_steps: bool,
) -> Value {
    let mut steps = Vec::new();
    if range.start == 0 && model_steps {
        if let Some(Value::Array(turn)) = exec.kept_turn() {
            steps.extend(
                turn.into_iter()
                    .filter(|s| !super::steps::is_judged_step(s)),
            );
        }
    }
    let start = range.start;
    steps.extend(range.map(|n| nested_step(exec, n)));
    let now = iso_utc(crate::runtime::now_ms() / 1000);
    json!({
        "id": interaction_id(exec, start),
        "object": "interaction",
        "status": "requires_action",
        "model": model,
        "created": now,
        "updated": now,
        "steps": steps,
        "usage": usage.unwrap_or_else(zero_usage),
    })
}

/// The usage of an interaction no model answered.
pub fn zero_usage() -> Value {
    json!({"total_input_tokens": 0, "total_output_tokens": 0, "total_tokens": 0})
}

/// `secs` since the epoch as Google writes a time (`2026-06-09T12:01:25Z`).
fn iso_utc(secs: u64) -> String {
    let second = crate::observe::lines::date_and_second(secs);
    format!("{}Z", second.trim_end_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_google_writes_them() {
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso_utc(1_781_006_485), "2026-06-09T12:01:25Z");
        assert_eq!(iso_utc(951_782_400), "2000-02-29T00:00:00Z");
    }
}
