//! The variables the binary itself sets or reads, beside the library's
//! `Config::from_env`: their names are the contract (docs/configuration.md),
//! and the library keeps its own list private.

/// The listen address (`run` picks a free port).
pub const LISTEN: &str = "CODEMODE_LISTEN";
/// The default tool mode (`run --mode`).
pub const MODE: &str = "CODEMODE_MODE";
/// Where programs run (`run --runtime`).
pub const RUNTIME: &str = "CODEMODE_RUNTIME";
/// The presets file (`run --config`).
pub const CONFIG: &str = "CODEMODE_CONFIG";
/// The Chat Completions and Responses provider.
pub const UPSTREAM: &str = "CODEMODE_UPSTREAM";
/// The Anthropic Messages provider.
pub const ANTHROPIC_UPSTREAM: &str = "CODEMODE_ANTHROPIC_UPSTREAM";
/// The Gemini API's host (the whole `/v1beta/...` path goes under it).
pub const GEMINI_UPSTREAM: &str = "CODEMODE_GEMINI_UPSTREAM";
/// The operator's Gemini API key (sent as `x-goog-api-key`).
pub const GEMINI_API_KEY: &str = "CODEMODE_GEMINI_API_KEY";
/// Deprecated and ignored: the binary warns when it is set.
pub const SPLICE_CAPACITY: &str = "CODEMODE_SPLICE_CAPACITY";
