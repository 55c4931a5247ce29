//! The shapes a Responses client reads a failure in (its provider is
//! OpenAI's, [`crate::chat::provider::OPENAI`]).

use bytes::Bytes;
use serde_json::json;

use crate::api::Errors;
use crate::error::ProxyError;
use crate::sse::named_event;

/// OpenAI's error body, and a stream's final `error` event (`type`,
/// `code`, `message`), as the Responses API writes one. A relayed stream's
/// numbering is the provider's, so the event carries none.
pub(crate) const ERRORS: Errors = Errors {
    body: ProxyError::body,
    stream: stream_error,
};

fn stream_error(message: &str, code: &str) -> Bytes {
    let event = json!({"type": "error", "code": code, "message": message, "param": null, "sequence_number": null});
    named_event("error", &event)
}
