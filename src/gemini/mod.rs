//! Google's Gemini API (`POST /v1beta/models/{model}:generateContent`,
//! `:streamGenerateContent?alt=sse`, `:countTokens`) as a dialect of the
//! rule (docs/agents.md, "gemini-cli and the Gemini API"): its tools
//! (`functionDeclarations`), its `functionCall` parts and their
//! `functionResponse`s, its stream of whole answers.

/// A whole answer, judged.
pub mod answer;
/// The dialect the turn core drives.
mod dialect;
/// Programs: nested `functionCall` parts, minted turns, the model's turn.
pub mod embedded;
/// Programs in a Gemini conversation.
pub mod history;
/// Parts: calls, their answers, ids.
pub mod parts;
/// Its provider, routes, and the shapes its clients read a failure in.
pub(crate) mod provider;
/// The request: parse, and rewrite for the plan.
pub mod request;
/// The stream judge: chunks judged as they arrive.
pub mod stream;
/// The tools a request declares: function declarations and Google's own.
pub mod tools;

pub use dialect::Gemini;
