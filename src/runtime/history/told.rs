//! What the model is told of a program it cannot see end in its history:
//! one the client stopped (interrupted), and one whose record is gone.
//!
//! Agents end tool loops for their own reasons (a step limit, a user who
//! moves on), so a history may hold a program that never finished: the
//! model is then told it was interrupted, with the calls it made and the
//! results the agent sent, and the conversation stays well formed.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::runtime::{limit_output, minted_for, now_ms, Execution, Limits};
use crate::sdk::program_call;
use crate::tenant::Tenant;

/// Bytes of one call's result quoted in an interruption.
const QUOTED_RESULT_BYTES: usize = 2_000;

/// The result of a program the client stopped: the calls it made, with the
/// results the client sent for them.
pub(crate) fn interrupted(e: &Execution, sent: &BTreeMap<usize, &str>, limits: &Limits) -> String {
    let mut text = String::from(
        "Error: InterruptedError: the program was interrupted before it finished: the client \
         ended its tool loop (a step limit, or the user moved on) while the program waited on \
         tool calls, so it returned no value.",
    );
    if !e.calls.is_empty() {
        text.push_str(" The calls it made, in order:");
    }
    for (n, call) in e.calls.iter().enumerate() {
        let args = serde_json::from_str(&call.args).unwrap_or(Value::String(call.args.clone()));
        text.push_str(&format!("\n{}. {}", n + 1, program_call(&call.name, &args)));
        match call.result.as_deref().or_else(|| sent.get(&n).copied()) {
            Some(result) => {
                text.push_str(" returned: ");
                text.push_str(&quoted(result));
            }
            None => text.push_str(" got no result (it may not have run)"),
        }
    }
    text.push_str("\nRun a new program for whatever is still needed.");
    limit_output(text, limits)
}

fn quoted(result: &str) -> String {
    if result.len() <= QUOTED_RESULT_BYTES {
        return result.to_owned();
    }
    let mut cut = QUOTED_RESULT_BYTES;
    while !result.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… [{} bytes in all]", &result[..cut], result.len())
}

/// What the model is told of a program whose record `tenant` does not
/// have, in any dialect: an error it can act on (run it again).
pub fn missing_text(exec_id: &str, tenant: &Tenant, lifetime: std::time::Duration) -> &'static str {
    let created = minted_for(exec_id, tenant).map(|m| m.created_ms);
    match created {
        Some(None) => {
            "Error: the proxy no longer holds the record of this program: it expired, or the \
             proxy lost the record (it restarted, or ran short of memory) before the program \
             finished; its result is unknown. Run the program again if its result is still \
             needed."
        }
        Some(Some(created)) if now_ms().saturating_sub(created) <= lifetime.as_millis() as u64 => {
            "Error: the proxy lost the record of this program (it restarted, or ran short of \
             memory) before the program finished; its result is unknown. Run the program again \
             if its result is still needed."
        }
        Some(_) => {
            "Error: the record of this program has expired; its result is no longer available. \
             Run the program again if its result is still needed."
        }
        None => "Error: this program's record is not available; its result is unknown.",
    }
}
