//! Tool modes and where `run_code` runs.

use std::fmt;
use std::str::FromStr;

/// The name of the reserved transport tool, in every mode.
pub const RUN_CODE: &str = "run_code";

/// What the model sees and may call directly (docs/modes.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// The client's tools, untouched; the proxy is transparent.
    Native,
    /// Only `run_code`; every other name is denied.
    Code,
    /// The client's tools plus `run_code`.
    Both,
}

impl Mode {
    /// The value as it is written in env vars, headers and config files.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::Code => "code",
            Mode::Both => "both",
        }
    }

    /// Whether the model is shown `run_code` and the SDK.
    pub fn is_code_capable(self) -> bool {
        match self {
            Mode::Native => false,
            Mode::Code | Mode::Both => true,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode string that is none of `native`, `code`, `both`.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a tool mode; use native, code or both")]
pub struct InvalidMode(pub String);

impl FromStr for Mode {
    type Err = InvalidMode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "native" => Ok(Mode::Native),
            "code" => Ok(Mode::Code),
            "both" => Ok(Mode::Both),
            other => Err(InvalidMode(other.to_owned())),
        }
    }
}

/// Where `run_code` runs (`CODEMODE_RUNTIME`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// The proxy runs `run_code` in its sandbox; programs' tool calls go to
    /// the client as native calls.
    Embedded,
    /// The client declares `run_code` and executes it itself.
    Client,
    /// No runtime: code-capable modes are refused at start-up.
    None,
}

impl Runtime {
    /// The value as it is written in `CODEMODE_RUNTIME`.
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Embedded => "embedded",
            Runtime::Client => "client",
            Runtime::None => "none",
        }
    }
}
