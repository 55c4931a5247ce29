//! codemode-proxy: an OpenAI-compatible reverse proxy that gives any agent
//! Code Mode by changing one base URL.
//!
//! The model sees `run_code` (and, in its system prompt, an SDK of the
//! agent's tools); what the wire announces and what reaches the client's
//! executor always agree. `README.md` and `docs/` are the contract: what a
//! user relies on (variables, headers, endpoints, behaviour).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

// The supported surface: the layer and its service, the configuration,
// the server helpers, the errors, the modes, and the store traits a shared
// store implements.
pub mod config;
pub mod error;
pub mod layer;
pub mod observe;
pub mod server;
pub mod telemetry;

mod api;
mod api_name;
mod body;
mod cache;
mod chat;
mod classify;
mod conversation;
mod env_vars;
mod gemini;
mod interactions;
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
mod tenant;
mod tools;
mod turn;
mod verdict;
mod wire;

#[cfg(test)]
mod test_support;

pub use body::{BoxedError, ProxyBody};
pub use cache::set_allocator_trim;
pub use config::Config;
pub use layer::{CodeModeLayer, CodeModeLayerBuilder, CodeModeService, PeerAddr};
pub use mode::{Mode, Runtime};
/// The sandbox worker's main, for the binary's hidden `sandbox-worker`
/// subcommand: not an API.
#[doc(hidden)]
pub use runtime::worker::serve as sandbox_worker;

/// What a shared store implements, and the in-memory ones the proxy uses
/// when none is given (see [`CodeModeLayer::builder`]).
pub mod store {
    pub use crate::runtime::{
        CallRecord, Execution, ExecutionLookup, ExecutionStore, MemoryExecutionStore, StoreError,
        StoreFuture,
    };
    pub use crate::splice::{MemorySpliceStore, Splice, SpliceKey, SpliceLookup, SpliceStore};
    pub use crate::tenant::Tenant;
}

/// What the benchmarks and fuzz targets drive directly, with the
/// `bench-internals` feature only: not a supported API (no stability
/// promise), and each module holds only what they use.
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod internals {
    pub mod chat {
        pub use crate::chat::history;
        pub use crate::chat::tools::TOOLS;
    }
    pub mod classify {
        pub use crate::classify::{classify, Visibility};
    }
    pub mod api {
        pub use crate::api::Api;
    }
    pub mod gemini {
        pub use crate::gemini::tools::TOOLS;
        pub mod request {
            pub use crate::gemini::request::GeminiRequest;
        }
        pub mod stream {
            pub use crate::gemini::stream::GeminiJudge;
        }
    }
    pub mod messages {
        pub use crate::messages::tools::TOOLS;
        pub mod request {
            pub use crate::messages::request::MessagesRequest;
        }
        pub mod stream {
            pub use crate::messages::stream::MessagesJudge;
        }
    }
    pub mod mode {
        pub use crate::mode::{Mode, Runtime, RUN_CODE};
    }
    pub mod plan {
        pub use crate::plan::{PlanCache, ToolPlan};
    }
    pub mod preset {
        pub use crate::preset::{Catalog, ConfigFile, Preset, PresetSpec};
    }
    pub mod responses {
        pub use crate::responses::tools::TOOLS;
        pub mod request {
            pub use crate::responses::request::ResponsesRequest;
        }
        pub mod stream {
            pub use crate::responses::stream::ResponsesJudge;
        }
    }
    pub mod rewrite {
        pub use crate::chat::ChatRequest;
        pub use crate::turn::WireRequest;
    }
    pub mod runtime {
        pub use crate::runtime::program::prepare;
        pub use crate::runtime::{
            alias_key, history, sandbox, worker, CallRecord, Execution, ExecutionLookup,
            ExecutionStore, Limits, MemoryExecutionStore, RunOutcome,
        };
    }
    pub mod sdk {
        pub use crate::sdk::{
            render_compact, render_declarations, render_docs, SdkStyle, ToolDocs, ToolSchema,
            SDK_MAX_BYTES, TOOL_MAX_BYTES,
        };
    }
    pub mod sections {
        pub use crate::sections::{render, RenderedSection, SdkParts, CODE_ONLY_ID, SDK_ID};
    }
    pub mod splice {
        pub use crate::splice::{MemorySpliceStore, TenantSplices};
    }
    pub mod sse {
        pub use crate::sse::{SseEvent, SseParser};
    }
    pub mod store_redis {
        pub use crate::store_redis::{encode_execution, Keys, RecordLimits, RedisStore};
    }
    pub mod stream {
        pub use crate::chat::StreamJudge;
        pub use crate::turn::{RoundEnd, RoundJudge};
    }
    pub mod tenant {
        pub use crate::tenant::Tenant;
    }
    pub mod wire {
        pub use crate::wire::RawObject;
    }
}
