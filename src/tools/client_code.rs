//! A client's own code mode: a client whose tools are already a code
//! runner (Codex's `exec`, a freeform JavaScript tool, and `wait`) is
//! respected, never wrapped in `run_code` (docs/modes.md, "A client's own
//! code mode"). The request is presented as the client wrote it, and the
//! rule holds on the surface it announced: a direct call to a name it
//! declares nowhere is `UNKNOWN_TOOL`.
//!
//! The list below is the one place these are recognised.

use super::ToolEntry;

/// A client's code mode, recognised by the tools that make it up.
#[derive(Debug)]
pub struct ClientCodeMode {
    /// The client, as logs and metrics name it.
    pub client: &'static str,
    /// The freeform (custom) tool that runs the client's programs.
    pub runner: &'static str,
    /// Tools that come with it, every one declared.
    pub with: &'static [&'static str],
}

/// Every client code mode the proxy recognises.
pub const CLIENT_CODE_MODES: &[ClientCodeMode] = &[ClientCodeMode {
    client: "codex",
    runner: "exec",
    with: &["wait"],
}];

/// The client code mode `entries` (a request's client tools) make up, if any.
pub(crate) fn recognise(entries: &[ToolEntry]) -> Option<&'static ClientCodeMode> {
    let declared = |name: &str, freeform: Option<bool>| {
        entries.iter().any(|e| {
            !e.provider && e.schema.name == name && freeform.is_none_or(|f| e.schema.freeform == f)
        })
    };
    CLIENT_CODE_MODES
        .iter()
        .find(|m| declared(m.runner, Some(true)) && m.with.iter().all(|w| declared(w, None)))
}
