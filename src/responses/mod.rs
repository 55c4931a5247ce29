//! The OpenAI Responses API (`POST /v1/responses`) as a dialect of the
//! rule (docs/agents.md, "Codex and the Responses API"): its tools, its call items and their
//! outputs, its stream events.

/// A whole response, judged.
pub mod completion;
/// The dialect the turn core drives.
mod dialect;
/// Programs: nested call items, minted responses, events.
pub mod embedded;
/// The events of items the proxy writes.
pub mod events;
/// Programs in a Responses input.
pub mod history;
/// Output items: calls, their answers, the items the proxy writes.
pub mod items;
/// Its provider, and the shapes its clients read a failure in.
pub(crate) mod provider;
/// The request: parse, and rewrite for the plan.
pub mod request;
/// The stream judge: events in, the bytes the client sees out.
pub mod stream;
/// The tools a request declares: client, provider, unknown.
pub mod tools;

mod choice;

pub use dialect::Responses;
