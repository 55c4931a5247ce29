//! Every integration test in one binary (as linkerd2-proxy does): the shared
//! harness in `common` is compiled once and one executable is linked, where
//! one binary per file compiled and linked `common` forty times.
//! `tests/sandbox_boundary.rs` is the one test kept apart: it measures the
//! test process's own peak memory, which other tests would share.

mod advanced_tool_use;
mod binary;
mod bursts;
mod claude;
mod claude_traffic;
mod code_mode;
mod codex;
mod codex_traffic;
mod common;
mod compact_sdk;
mod configure;
mod conformance;
mod connections;
mod conversations;
mod dry_run;
mod echoes;
mod egress;
mod embedded;
mod errors;
mod fail_closed;
mod gemini;
mod headers;
mod inspector;
mod inspector_browser;
mod interactions;
mod interactions_clients;
mod locked_routes;
mod logs;
mod messages;
mod metrics;
mod otel;
mod provider_state;
mod python_client;
mod real_agents;
mod replicas;
mod replicas_ha;
mod request_hardening;
mod request_ids;
mod response_shapes;
mod responses;
mod run;
mod run_agents;
mod sandbox_workers;
mod scenarios;
mod schema_hardening;
mod sdk_clients;
mod selection;
mod stores;
mod streaming;
mod threads;
mod timeouts;
mod unchanged;
mod unreadable;
