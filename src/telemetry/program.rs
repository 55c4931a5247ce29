//! The spans of a program's runs and of the nested calls it hands to the
//! client, and the event of a denied call.

use tracing::field::Empty;
use tracing::Span;

use super::TARGET;

/// The `execute_tool run_code` span of one run of a program (its start or
/// a resume); `run_call` is the model's `run_code` call id.
pub(crate) fn program_span(run_call: &str) -> Span {
    tracing::debug_span!(
        target: TARGET,
        "execute_tool",
        otel.name = "execute_tool run_code",
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = crate::mode::RUN_CODE,
        gen_ai.tool.call.id = run_call,
        gen_ai.tool.type = "function",
        error.type = Empty,
    )
}

/// What a run came to, on its span: a program that failed is an error.
pub(crate) fn program_ended(span: &Span, failed: bool) {
    if failed {
        span.record("otel.status_code", "error");
        span.record("error.type", "program_error");
    }
}

/// One `execute_tool {name}` span, child of `parent`, per nested call the
/// program hands to the client: its tool's name and minted id, never its
/// arguments.
pub(crate) fn handed_out<'a>(parent: &Span, calls: impl Iterator<Item = (&'a str, String)>) {
    if parent.is_disabled() {
        return;
    }
    for (name, id) in calls {
        let span = tracing::debug_span!(
            target: TARGET,
            parent: parent,
            "execute_tool",
            otel.name = format!("execute_tool {name}"),
            otel.kind = "internal",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = name,
            gen_ai.tool.call.id = id,
            gen_ai.tool.type = "function",
        );
        drop(span);
    }
}

/// A denied call, as an event of the current span (the round that made it):
/// the tool's name and the denial's code, never the arguments.
pub(crate) fn denied(tool: &str, code: impl std::fmt::Display) {
    tracing::event!(
        target: TARGET,
        tracing::Level::DEBUG,
        gen_ai.tool.name = tool,
        codemode.denial.code = %code,
        "codemode.denial"
    );
}
