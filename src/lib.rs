//! codemode-proxy: an OpenAI-compatible reverse proxy that gives any agent
//! Code Mode by changing one base URL.
//!
//! The model sees `run_code` (and, in its system prompt, an SDK of the
//! agent's tools); what the wire announces and what reaches the client's
//! executor always agree. See `README.md` and `design.md` for the contract.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

// The supported surface: the layer and its service, the configuration,
// the server helpers, the errors, the modes, and the store traits a shared
// store implements.
pub mod config;
pub mod demo;
pub mod error;
pub mod layer;
pub mod observe;
pub mod server;
pub mod telemetry;

mod body;
mod cache;
mod chat;
mod classify;
mod dialect;
mod env_vars;
mod messages;
mod mode;
mod plan;
mod preset;
mod responses;
mod route;
mod runtime;
mod sdk;
mod sections;
mod select;
mod splice;
mod sse;
mod store_error;
mod store_redis;
mod stream;
mod tenant;
mod tools;
mod turn;
mod wire;

pub use config::Config;
pub use layer::{CodeModeLayer, CodeModeService};
pub use mode::{Mode, Runtime};

/// What a shared store implements, and the in-memory ones the proxy uses
/// when none is given (see [`CodeModeLayer::with_stores`]).
pub mod store {
    pub use crate::runtime::{
        CallRecord, Execution, ExecutionLookup, ExecutionStore, MemoryExecutionStore,
    };
    pub use crate::splice::{MemorySpliceStore, Splice, SpliceKey, SpliceLookup, SpliceStore};
    pub use crate::store_error::{StoreError, StoreFuture};
    pub use crate::tenant::Tenant;
}

/// The proxy's internals, for its own tests, benchmarks and fuzz targets:
/// not a supported API (no stability promise).
#[doc(hidden)]
pub mod internals {
    pub mod body {
        pub use crate::body::*;
    }
    pub mod chat {
        pub use crate::chat::*;
    }
    pub mod classify {
        pub use crate::classify::*;
    }
    pub mod dialect {
        pub use crate::dialect::*;
    }
    pub mod intercept {
        pub use crate::chat::completion::*;
    }
    pub mod messages {
        pub use crate::messages::*;
    }
    pub mod observe {
        pub use crate::observe::*;
    }
    pub mod mode {
        pub use crate::mode::*;
    }
    pub mod plan {
        pub use crate::plan::*;
    }
    pub mod preset {
        pub use crate::preset::*;
    }
    pub mod responses {
        pub use crate::responses::*;
    }
    pub mod rewrite {
        pub use crate::chat::request::*;
    }
    pub mod route {
        pub use crate::route::*;
    }
    pub mod runtime {
        pub use crate::runtime::*;
    }
    pub mod sdk {
        pub use crate::sdk::*;
    }
    pub mod sections {
        pub use crate::sections::*;
    }
    pub mod select {
        pub use crate::select::*;
    }
    pub mod splice {
        pub use crate::splice::*;
    }
    pub mod sse {
        pub use crate::sse::*;
    }
    pub mod store_redis {
        pub use crate::store_redis::*;
    }
    pub mod stream {
        pub use crate::chat::StreamJudge;
        pub use crate::stream::*;
    }
    pub mod tenant {
        pub use crate::tenant::*;
    }
    pub mod turn {
        pub use crate::turn::*;
    }
    pub mod wire {
        pub use crate::wire::*;
    }
}
