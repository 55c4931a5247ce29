//! The shapes a Responses client reads a failure in (its provider is
//! OpenAI's, [`crate::chat::provider::OPENAI`]).

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::api::{Api, Endpoint, Errors, Route};
use crate::error::ProxyError;
use crate::sse::named_event;

/// The Responses API's routes: a model request, its token count, and a
/// compaction (Codex's, when its context fills): a model turn over the
/// same body, whose answer replaces the history, so judged as one.
pub(crate) const ROUTES: &[Route] = &[
    Route {
        path: "/v1/responses",
        endpoint: Some(Endpoint::turn(Api::Responses)),
        passes: &["HEAD", "OPTIONS"],
        any_prefix: true,
    },
    Route {
        path: "/v1/responses/input_tokens",
        endpoint: Some(Endpoint::count(Api::Responses)),
        passes: &["HEAD", "OPTIONS"],
        any_prefix: true,
    },
    Route {
        path: "/v1/responses/compact",
        endpoint: Some(Endpoint::turn(Api::Responses)),
        passes: &["HEAD", "OPTIONS"],
        any_prefix: true,
    },
];

/// OpenAI's error body, and a stream's final `error` event (`type`,
/// `code`, `message`), as the Responses API writes one. A relayed stream's
/// numbering is the provider's, so the event carries none.
pub(crate) const ERRORS: Errors = Errors {
    body: ProxyError::body,
    stream: stream_error,
};

fn stream_error(message: &str, code: &str) -> Bytes {
    named_event("error", &Value::Object(stream_error_event(message, code)))
}

/// The `error` event ending a Responses stream with `message` and the
/// proxy's `code`; `sequence_number` null until a judge numbers it.
pub(crate) fn stream_error_event(message: &str, code: &str) -> Map<String, Value> {
    let mut event = Map::new();
    event.insert("type".into(), json!("error"));
    event.insert("code".into(), json!(code));
    event.insert("message".into(), json!(message));
    event.insert("sequence_number".into(), Value::Null);
    event
}
