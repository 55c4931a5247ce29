//! gemini-cli (Google's Gemini CLI, unmodified): where install.sh put it,
//! and whether it can run here.

use std::path::PathBuf;

use super::codex::agents_dir;

/// Where install.sh put the `gemini` binary.
pub fn gemini_bin() -> PathBuf {
    agents_dir().join("node/node_modules/.bin/gemini")
}

/// Whether gemini-cli can run here; under CI it must.
pub fn gemini_ready() -> bool {
    super::needs::agent("gemini-cli", &gemini_bin())
}
