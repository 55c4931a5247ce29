//! The OpenAI Responses API (`POST /v1/responses`) as a dialect of the
//! rule (design.md section 10): its tools, its call items and their
//! outputs, its stream events.

/// Output items: calls, their answers, the items the proxy writes.
pub mod items;
/// The request: parse, and rewrite for the plan.
pub mod request;
/// Tools: client tools and provider tools.
pub mod tools;

mod choice;
