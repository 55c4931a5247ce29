//! The OpenAI Responses API (`POST /v1/responses`) as a dialect of the
//! rule (design.md section 10): its tools, its call items and their
//! outputs, its stream events.

/// A whole response, judged.
pub mod completion;
/// Programs: nested call items, minted responses, events.
pub mod embedded;
/// Programs in a Responses input.
pub mod history;
/// Output items: calls, their answers, the items the proxy writes.
pub mod items;
/// The request: parse, and rewrite for the plan.
pub mod request;
/// The stream judge: events in, the bytes the client sees out.
pub mod stream;
/// Tools: client tools and provider tools.
pub mod tools;

mod choice;

#[cfg(test)]
mod stream_fixtures;
#[cfg(test)]
mod stream_props;
