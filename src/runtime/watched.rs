//! An execution as the inspector reads it ([`Watched`]): names, sizes and
//! the texts it keeps only with payloads on.

use super::Execution;
use crate::observe::inspector::Watched;
use crate::observe::ledger::ProgramEnd;

impl Watched for Execution {
    fn exec_id(&self) -> &str {
        &self.id
    }

    fn run_call_id(&self) -> &str {
        &self.run_call_id
    }

    fn created_ms(&self) -> u64 {
        self.created_ms
    }

    fn code(&self) -> &str {
        &self.code
    }

    fn call_count(&self) -> usize {
        self.calls.len()
    }

    fn call(&self, n: usize) -> (&str, &str, Option<&str>) {
        match self.calls.get(n) {
            Some(c) => (&c.name, &c.args, c.result.as_deref()),
            None => ("", "", None),
        }
    }

    fn outcome(&self) -> Option<&str> {
        self.outcome.as_deref()
    }

    fn console(&self) -> Option<&str> {
        self.outcome.as_deref().map(console_of)
    }

    fn end(&self) -> ProgramEnd {
        ProgramEnd::from(self)
    }
}

/// The console output inside a `run_code` result as
/// [`super::render_outcome`] writes it (`Output:\n...\n\nResult: ...`, or
/// `Error: ...\n\nOutput:\n...`); empty when it has none. A result cut to
/// `CODEMODE_RUN_MAX_OUTPUT` yields what the model got of it.
pub fn console_of(outcome: &str) -> &str {
    if let Some(rest) = outcome.strip_prefix("Output:\n") {
        return match rest.rfind("\n\nResult: ") {
            Some(end) => &rest[..end],
            None => rest,
        };
    }
    if outcome.starts_with("Error: ") {
        if let Some(at) = outcome.find("\n\nOutput:\n") {
            return &outcome[at + "\n\nOutput:\n".len()..];
        }
    }
    ""
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{render_outcome, Limits, RunOutcome};

    #[test]
    fn the_console_is_read_back_from_the_result_the_model_got() {
        let limits = Limits::default();
        let finished = render_outcome(
            &RunOutcome::Finished {
                output: "read 3\nok".into(),
                value: "\"x\"".into(),
            },
            &limits,
        );
        assert_eq!(console_of(&finished), "read 3\nok");
        let failed = render_outcome(
            &RunOutcome::Failed {
                output: "partial".into(),
                error: "TypeError: no".into(),
            },
            &limits,
        );
        assert_eq!(console_of(&failed), "partial");
        assert_eq!(console_of("Result: 5"), "");
        assert_eq!(console_of("Error: TypeError: x"), "");
    }
}
