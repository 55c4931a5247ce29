//! Google's Interactions API (`POST /v1/interactions`, `/v1beta/interactions`)
//! as a dialect of the rule (docs/agents.md, "The Interactions API"): flat
//! `function` tools, a turn of steps (`thought`, `model_output`,
//! `function_call`), `function_result` steps answering calls, `step.*`
//! stream events, and a conversation the provider may keep
//! (`previous_interaction_id`).

/// A whole interaction, judged.
pub mod answer;
/// The dialect the turn core drives.
mod dialect;
/// Programs: nested `function_call` steps in an interaction the proxy mints.
pub mod embedded;
/// An interaction as the event stream a streaming client reads.
pub mod events;
/// Programs in an Interactions history.
pub mod history;
/// Its routes, and the shapes its clients read a failure in.
pub(crate) mod provider;
/// The request: parse, and rewrite for the plan.
pub mod request;
/// Steps: calls, their answers.
pub mod steps;
/// The stream judge: `step.*` events judged as they arrive.
pub mod stream;
/// The plan the folder's unit tests judge under.
#[cfg(test)]
pub(crate) mod test_plan;
/// The tools a request declares: functions and Google's own.
pub mod tools;

pub use dialect::Interactions;
