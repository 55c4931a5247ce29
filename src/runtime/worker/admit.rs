//! A worker's answer, checked again in the proxy: a worker is untrusted (a
//! program that broke out of QuickJS owns it), so the checks the host made
//! on each call inside it are made again here before a call can reach the
//! client.

use crate::runtime::sandbox::{admitted, RunOutcome};
use crate::runtime::Limits;

/// Whether `outcome` is one the host would have given: every call one the
/// host admits ([`admitted`]) with no result yet, at least one call when
/// it waits, within the call budget, and output within its cap.
pub(super) fn admissible(
    outcome: &RunOutcome,
    tools: &[String],
    freeform: &[String],
    replayed: usize,
    limits: &Limits,
) -> Result<(), String> {
    let output = match outcome {
        RunOutcome::Finished { output, .. } | RunOutcome::Failed { output, .. } => output,
        RunOutcome::Blocked { output, calls } => {
            if calls.is_empty() {
                return Err("it waits on no call".to_owned());
            }
            if replayed + calls.len() > limits.max_calls {
                return Err(format!(
                    "it made {} calls, past the budget",
                    replayed + calls.len()
                ));
            }
            for call in calls {
                admitted(&call.name, &call.args, tools, freeform)?;
                if call.result.is_some() {
                    return Err(format!("its call to `{}` came with a result", call.name));
                }
            }
            output
        }
    };
    // The host keeps twice the model's share, and says it cut the rest.
    if output.len() > limits.max_output_bytes.saturating_mul(2) + 64 {
        return Err("its console output is past the cap".to_owned());
    }
    Ok(())
}
