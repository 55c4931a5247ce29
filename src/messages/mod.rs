//! Anthropic's Messages API (`POST /v1/messages`) as a dialect of the rule
//! (docs/agents.md, "Claude Code and the Messages API"): its tools, its `tool_use` blocks and their
//! `tool_result`s, its stream events.

/// A whole response, judged.
pub mod completion;
/// The dialect the turn core drives.
mod dialect;
/// Programs: nested `tool_use` blocks, minted messages, the model's turn.
pub mod embedded;
/// The events of blocks and messages the proxy writes.
pub mod events;
/// Programs in a Messages conversation.
pub mod history;
/// Content blocks: calls, their answers, repairs.
pub mod items;
/// Its provider, and the shapes its clients read a failure in.
pub(crate) mod provider;
/// The request: parse, and rewrite for the plan.
pub mod request;
/// The stream judge: `content_block_*` events judged as they arrive.
pub mod stream;
/// The tools a request declares: client and server tools.
pub mod tools;

mod choice;

pub use dialect::Messages;
