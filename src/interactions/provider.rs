//! The Interactions API's routes and the shapes its clients read a failure
//! in. Its provider is Google's, the Gemini API's: the same base URL
//! (`CODEMODE_GEMINI_UPSTREAM`), key and key header.

use bytes::Bytes;
use serde_json::json;

use crate::api::{Api, Endpoint, Errors, Route};
use crate::observe::usage::Shape;

/// A new interaction, in each version Google serves: the SDKs call `/v1`
/// by default, Google's REST examples `/v1beta`. Reading (`GET
/// /v1beta/interactions/{id}`), cancelling and deleting one are no route
/// of the dialect: under the lock they are refused, since a stored
/// interaction holds the model's calls, which the proxy would not judge.
pub(crate) const ROUTES: &[Route] = &[
    create("/v1/interactions"),
    create("/v1beta/interactions"),
    create("/v1alpha/interactions"),
];

/// A new interaction at `path`.
const fn create(path: &'static str) -> Route {
    Route {
        path,
        endpoint: Some(Endpoint::turn(Api::Interactions)),
        passes: &["HEAD", "OPTIONS"],
        any_prefix: false,
    }
}

/// How an interaction names its token counts (`usage.total_input_tokens`,
/// `total_output_tokens`; on a stream, in `interaction.completed`), not as
/// the Gemini API's `usageMetadata`.
pub(crate) static USAGE: Shape = Shape {
    key: "\"usage\"",
    input: &["total_input_tokens"],
    output: &["total_output_tokens"],
    finders: std::sync::OnceLock::new(),
};

/// Google's `{"error": {"code", "message", "status", "details"}}` for a
/// whole answer (as the Gemini API's); a stream that already started ends
/// with the API's own `error` event, `{"event_type": "error", "error":
/// {"code", "message"}}`, its `code` the proxy's (docs/errors.md).
pub(crate) const ERRORS: Errors = Errors {
    body: crate::gemini::provider::ERRORS.body,
    stream: stream_error,
};

fn stream_error(message: &str, code: &str) -> Bytes {
    crate::sse::named_event(
        "error",
        &json!({"event_type": "error", "error": {"code": code, "message": message}}),
    )
}
