//! One entry point per adapter operation, dispatched on the dialect.

use serde_json::Value;

use crate::scenarios::model::{ClientView, Dialect, ErrorView, ProviderView, Turn};
use crate::scenarios::wire::{http_error, Event};
use crate::scenarios::{chat, gemini, interactions, messages, responses};

impl Dialect {
    /// The client's first request: `prompt`, the native tools `read` and
    /// `write`, and `run_code` when the client runs programs itself.
    pub fn request(self, prompt: &str, client_runtime: bool, stream: bool) -> Value {
        match self {
            Dialect::Chat => chat::request(prompt, client_runtime, stream),
            Dialect::Responses => responses::request(prompt, client_runtime, stream),
            Dialect::Messages => messages::request(prompt, client_runtime, stream),
            Dialect::Gemini => gemini::request(prompt, client_runtime, stream),
            Dialect::Interactions => interactions::request(prompt, client_runtime, stream, false),
            Dialect::InteractionsStored => {
                interactions::request(prompt, client_runtime, stream, true)
            }
        }
    }

    /// The client's next request: `prev`, the turn it got, its results.
    pub fn continued(self, prev: &Value, view: &ClientView, results: &[&str]) -> Value {
        match self {
            Dialect::Chat => chat::continued(prev, view, results),
            Dialect::Responses => responses::continued(prev, view, results),
            Dialect::Messages => messages::continued(prev, view, results),
            Dialect::Gemini => gemini::continued(prev, view, results),
            Dialect::Interactions | Dialect::InteractionsStored => {
                interactions::continued(prev, view, results)
            }
        }
    }

    /// The provider's JSON answer for a round (`round` from 1).
    pub fn render_json(self, t: &Turn, round: usize) -> Value {
        match self {
            Dialect::Chat => chat::render_json(t, round),
            Dialect::Responses => responses::render_json(t, round),
            Dialect::Messages => messages::render_json(t, round),
            Dialect::Gemini => gemini::render_json(t, round),
            Dialect::Interactions | Dialect::InteractionsStored => {
                interactions::render_json(t, round)
            }
        }
    }

    /// The provider's event stream for a round, answering `req`.
    pub fn render_sse(self, t: &Turn, round: usize, req: &Value) -> String {
        match self {
            Dialect::Chat => chat::render_sse(t, round, req),
            Dialect::Responses => responses::render_sse(t, round, req),
            Dialect::Messages => messages::render_sse(t, round, req),
            Dialect::Gemini => gemini::render_sse(t, round, req),
            Dialect::Interactions | Dialect::InteractionsStored => {
                interactions::render_sse(t, round, req)
            }
        }
    }

    /// The first events of a stream, before any word or call.
    pub fn preamble(self, round: usize) -> String {
        match self {
            Dialect::Chat => chat::preamble(round),
            Dialect::Responses => responses::preamble(round),
            Dialect::Messages => messages::preamble(round),
            Dialect::Gemini => gemini::preamble(round),
            Dialect::Interactions | Dialect::InteractionsStored => interactions::preamble(round),
        }
    }

    /// The provider's error body for `status`, in the dialect's shape.
    pub fn error_body(self, status: u16) -> Value {
        match self {
            Dialect::Chat => chat::error_body(status),
            Dialect::Responses => responses::error_body(status),
            Dialect::Messages => messages::error_body(status),
            Dialect::Gemini => gemini::error_body(status),
            Dialect::Interactions | Dialect::InteractionsStored => interactions::error_body(status),
        }
    }

    /// What a client reads out of a 2xx JSON body.
    pub fn reduce_json(self, v: &Value) -> ClientView {
        match self {
            Dialect::Chat => chat::reduce_json(v),
            Dialect::Responses => responses::reduce_json(v),
            Dialect::Messages => messages::reduce_json(v),
            Dialect::Gemini => gemini::reduce_json(v),
            Dialect::Interactions | Dialect::InteractionsStored => interactions::reduce_json(v),
        }
    }

    /// What a client reads out of a whole stream.
    pub fn reduce_sse(self, events: &[Event]) -> ClientView {
        match self {
            Dialect::Chat => chat::reduce_sse(events),
            Dialect::Responses => responses::reduce_sse(events),
            Dialect::Messages => messages::reduce_sse(events),
            Dialect::Gemini => gemini::reduce_sse(events),
            Dialect::Interactions | Dialect::InteractionsStored => interactions::reduce_sse(events),
        }
    }

    /// The stream's shape, as the dialect's clients rely on it.
    pub fn check_stream(self, events: &[Event]) -> Result<(), String> {
        match self {
            Dialect::Chat => chat::check_stream(events),
            Dialect::Responses => responses::check_stream(events),
            Dialect::Messages => messages::check_stream(events),
            Dialect::Gemini => gemini::check_stream(events),
            Dialect::Interactions | Dialect::InteractionsStored => {
                interactions::check_stream(events)
            }
        }
    }

    /// A request the provider got, reduced.
    pub fn reduce_request(self, body: &Value) -> ProviderView {
        match self {
            Dialect::Chat => chat::reduce_request(body),
            Dialect::Responses => responses::reduce_request(body),
            Dialect::Messages => messages::reduce_request(body),
            Dialect::Gemini => gemini::reduce_request(body),
            Dialect::Interactions | Dialect::InteractionsStored => {
                interactions::reduce_request(self, body)
            }
        }
    }

    /// An error response as the dialect's client reads it.
    pub fn http_error(self, status: u16, body: &[u8]) -> ErrorView {
        match self {
            Dialect::Gemini => gemini::http_error(status, body),
            Dialect::Interactions | Dialect::InteractionsStored => {
                interactions::http_error(status, body)
            }
            _ => http_error(status, body, self.anthropic()),
        }
    }
}
