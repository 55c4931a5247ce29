//! Google's Gemini API as a provider (`CODEMODE_GEMINI_UPSTREAM`,
//! `CODEMODE_GEMINI_API_KEY`), its routes, and the shapes a Gemini client
//! reads a failure in.

use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::HeaderName;
use serde_json::{json, Value};

use crate::api::{Api, Endpoint, Errors, Paths, Provider, Route};
use crate::error::ProxyError;
use crate::observe::ledger::ProviderId;
use crate::observe::usage::Shape;

/// The Gemini API's routes: a model request, streamed or whole, and its
/// token count, in each version Google serves (its SDKs call `/v1beta` or
/// `/v1` by default, `/v1alpha` for preview features). A model's name is a
/// path segment; the stream's `?alt=sse` stays in the query, forwarded as
/// it came, and the path goes to Google as it came, version included.
pub(crate) const ROUTES: &[Route] = &[
    turn("/v1beta/models/{model}:generateContent"),
    turn("/v1beta/models/{model}:streamGenerateContent"),
    count("/v1beta/models/{model}:countTokens"),
    turn("/v1/models/{model}:generateContent"),
    turn("/v1/models/{model}:streamGenerateContent"),
    count("/v1/models/{model}:countTokens"),
    turn("/v1alpha/models/{model}:generateContent"),
    turn("/v1alpha/models/{model}:streamGenerateContent"),
    count("/v1alpha/models/{model}:countTokens"),
];

/// A model request at `path`.
const fn turn(path: &'static str) -> Route {
    Route {
        path,
        endpoint: Some(Endpoint::turn(Api::Gemini)),
        passes: &["HEAD", "OPTIONS"],
        // A Vertex AI path (`/v1/projects/P/locations/L/publishers/google/
        // models/M:generateContent`) ends the same way: refused, not passed.
        any_prefix: true,
    }
}

/// A token count at `path`.
const fn count(path: &'static str) -> Route {
    Route {
        path,
        endpoint: Some(Endpoint::count(Api::Gemini)),
        passes: &["HEAD", "OPTIONS"],
        any_prefix: true,
    }
}

/// How a Gemini answer names its token counts (running totals on every
/// streamed chunk; the last one holds the round's).
pub(crate) static USAGE: Shape = Shape {
    key: "\"usageMetadata\"",
    input: &["promptTokenCount"],
    output: &["candidatesTokenCount"],
    finders: std::sync::OnceLock::new(),
};

/// Google: the operator's key goes in `x-goog-api-key`. Google refuses an
/// `Authorization` beside a key, so the key stands in for it too; a
/// client's `?key=` is dropped from the query when the operator's is sent
/// ([`super::Gemini`]'s request path).
pub(crate) static GOOGLE: Provider = Provider {
    id: ProviderId::Google,
    trace_name: "gcp.gemini",
    model_in_path: true,
    name: "Google's Gemini API (CODEMODE_GEMINI_UPSTREAM)",
    base: |c| &c.gemini_upstream,
    base_holds_version: false,
    key: |c| c.gemini_api_key.as_ref(),
    key_var: crate::env_vars::GEMINI_API_KEY,
    key_header: HeaderName::from_static("x-goog-api-key"),
    key_hint: "x-goog-api-key",
    key_param: Some("key"),
    replaces: &[AUTHORIZATION],
    // docs/agents.md, "gemini-cli and the Gemini API".
    claims: |client, query| {
        client.contains_key("x-goog-api-key") || crate::api::has_param(query, "key")
    },
    // Google's own API versions, and its upload path.
    roots: &["v1beta", "v1alpha", "upload"],
    // `authorization` holds an OAuth token, for tuned models and Vertex.
    credentials: &["x-goog-api-key", "authorization"],
    open: OPEN,
    usage: &USAGE,
};

/// The Gemini API's routes that declare no tools and return no model's
/// calls, in every version Google serves (docs/security.md, "Routes").
const OPEN: &[Paths] = &[
    Paths {
        methods: &["GET", "HEAD"],
        pattern: &["v1beta|v1alpha|v1", "models"],
    },
    // A model, not a method called on it.
    Paths {
        methods: &["GET", "HEAD"],
        pattern: &["v1beta|v1alpha|v1", "models", "{name}"],
    },
    Paths {
        methods: &["POST"],
        pattern: &[
            "v1beta|v1alpha|v1",
            "models",
            "*:embedContent|*:batchEmbedContents|*:predict|*:predictLongRunning",
        ],
    },
    Paths {
        methods: &[],
        pattern: &["v1beta|v1alpha|v1", "files|fileSearchStores", "**"],
    },
    Paths {
        methods: &[],
        pattern: &[
            "upload",
            "v1beta|v1alpha|v1",
            "files|fileSearchStores",
            "**",
        ],
    },
];

/// `{"error": {"code", "message", "status", "details"}}`, whole or as a
/// stream's final `data:` event; the proxy's own code is the `reason` of
/// the `ErrorInfo` detail (docs/errors.md).
pub(crate) const ERRORS: Errors = Errors {
    body: error_body,
    stream: stream_error,
};

fn error_body(e: &ProxyError) -> Bytes {
    Bytes::from(error_object(e.status().as_u16(), &e.to_string(), e.code()).to_string())
}

fn stream_error(message: &str, code: &str) -> Bytes {
    crate::sse::data_event(&stream_error_event(message, code))
}

/// The event ending a Gemini stream with `message` and the proxy's `code`,
/// its status the one the code's HTTP status would give.
pub(crate) fn stream_error_event(message: &str, code: &str) -> Value {
    let status = match code {
        "upstream_stream_idle" | "upstream_timeout" => 504,
        "runtime_busy" | "store_unavailable" => 503,
        "store_record_too_large" | "body_too_large" => 413,
        "resume_conflict" => 409,
        "invalid_request" | "invalid_json" => 400,
        _ => 502,
    };
    error_object(status, message, code)
}

/// Google's error object for HTTP `status`, with the proxy's `code`.
fn error_object(status: u16, message: &str, code: &str) -> Value {
    json!({"error": {
        "code": status,
        "message": message,
        "status": google_status(status),
        "details": [{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": code,
            "domain": "codemode-proxy",
        }],
    }})
}

/// The `google.rpc.Code` name Google's APIs give an HTTP status.
fn google_status(status: u16) -> &'static str {
    match status {
        400 | 405 | 413 | 415 | 422 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_googles_shape_with_the_proxys_code() {
        let e = ProxyError::InvalidRequest("`contents` must be an array".into());
        let body: Value = serde_json::from_slice(&error_body(&e)).unwrap();
        assert_eq!(body["error"]["code"], 400);
        assert_eq!(body["error"]["status"], "INVALID_ARGUMENT");
        assert_eq!(body["error"]["details"][0]["reason"], "invalid_request");
        let ev = stream_error_event("the upstream went quiet", "upstream_stream_idle");
        assert_eq!(ev["error"]["status"], "DEADLINE_EXCEEDED");
        assert_eq!(ev["error"]["details"][0]["reason"], "upstream_stream_idle");
    }
}
