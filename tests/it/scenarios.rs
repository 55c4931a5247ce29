//! One scenario table, run on every dialect (Chat Completions, Responses,
//! Messages, Gemini, Interactions with a stateless and with a stateful
//! client) as JSON and as SSE: twelve runs per scenario.
//!
//! A scenario is dialect-neutral: the model's turn per round (text, calls
//! by name and arguments, usage) or a provider fault, the client's requests,
//! and what the client and the provider must see. A per-dialect adapter
//! renders each round as that dialect's JSON body or event stream, builds
//! the client's requests (native tools `read` and `write`, plus `run_code`
//! on the client runtime) and reduces what the client received to one
//! neutral view: text, calls, usage, error. Every run must meet the
//! scenario's expectation, and a dialect's JSON and SSE runs must leave the
//! client with the same text, calls and usage.
//!
//! `turns.rs` holds what the model does (pass, repair, the repair limit, a
//! mixed turn, programs, ONE_PROGRAM, INVALID_ARGS); `faults.rs` what the
//! provider does wrong. Each scenario is a module with the tests `chat`,
//! `responses`, `messages`, `gemini`, `interactions` and
//! `interactions_stored`.

#[path = "scenarios/adapter.rs"]
mod adapter;
#[path = "scenarios/chat.rs"]
mod chat;
#[path = "scenarios/faults.rs"]
mod faults;
#[path = "scenarios/gemini.rs"]
mod gemini;
#[path = "scenarios/harness.rs"]
mod harness;
#[path = "scenarios/interactions.rs"]
mod interactions;
#[path = "scenarios/messages.rs"]
mod messages;
#[path = "scenarios/model.rs"]
pub(crate) mod model;
#[path = "scenarios/provider.rs"]
mod provider;
#[path = "scenarios/responses.rs"]
mod responses;
#[path = "scenarios/turns.rs"]
mod turns;
#[path = "scenarios/wire.rs"]
pub(crate) mod wire;
