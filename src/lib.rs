//! codemode-proxy: an OpenAI-compatible reverse proxy that gives any agent
//! Code Mode by changing one base URL.
//!
//! The model sees `run_code` (and, in its system prompt, an SDK of the
//! agent's tools); what the wire announces and what reaches the client's
//! executor always agree. See `README.md` and `design.md` for the contract.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod body;
pub mod classify;
pub mod config;
pub mod demo;
pub mod dialect;
pub mod error;
pub mod intercept;
pub mod layer;
pub mod mode;
pub mod plan;
pub mod preset;
pub mod responses;
pub mod rewrite;
pub mod route;
pub mod runtime;
pub mod sdk;
pub mod sections;
pub mod select;
pub mod server;
pub mod splice;
pub mod sse;
pub mod stream;
pub mod tenant;
pub mod turn;
pub mod wire;

pub use config::Config;
pub use layer::{CodeModeLayer, CodeModeService};
pub use mode::{Mode, Runtime};
