//! Anthropic's provider (`CODEMODE_ANTHROPIC_UPSTREAM`,
//! `CODEMODE_ANTHROPIC_API_KEY`) and the shapes a Messages client reads a
//! failure in.

use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::HeaderName;
use serde_json::{json, Value};

use crate::api::{Api, Endpoint, Errors, Paths, Provider, Route};
use crate::error::{anthropic_stream_error_type, ProxyError};
use crate::observe::ledger::ProviderId;
use crate::sse::named_event;

/// The Messages API's routes: a model request, and its token count.
pub(crate) const ROUTES: &[Route] = &[
    Route {
        path: "/v1/messages",
        endpoint: Some(Endpoint::turn(Api::Messages)),
        passes: &["HEAD", "OPTIONS"],
        // `/v1/threads/ID/messages` is another API (Assistants).
        any_prefix: false,
    },
    Route {
        path: "/v1/messages/count_tokens",
        endpoint: Some(Endpoint::count(Api::Messages)),
        passes: &["HEAD", "OPTIONS"],
        any_prefix: true,
    },
];

/// Anthropic: the operator's key goes in `x-api-key` and stands in for a
/// client's `Authorization` too (Claude Code sends either).
pub(crate) static ANTHROPIC: Provider = Provider {
    id: ProviderId::Anthropic,
    trace_name: "anthropic",
    model_in_path: false,
    name: "Anthropic's Messages API (CODEMODE_ANTHROPIC_UPSTREAM)",
    base: |c| &c.anthropic_upstream,
    base_holds_version: true,
    key: |c| c.anthropic_api_key.as_ref(),
    key_var: crate::env_vars::ANTHROPIC_API_KEY,
    key_header: HeaderName::from_static("x-api-key"),
    key_hint: "x-api-key",
    key_param: None,
    replaces: &[AUTHORIZATION],
    // docs/agents.md, "Claude Code and the Messages API".
    claims: |client, _| client.contains_key("anthropic-version"),
    roots: &[],
    credentials: &["x-api-key", "authorization"],
    open: &[
        Paths {
            methods: &["GET", "HEAD"],
            pattern: &["v1", "models", "**"],
        },
        Paths {
            methods: &[],
            pattern: &["v1", "files", "**"],
        },
    ],
    usage: &crate::observe::usage::USAGE,
};

/// `{"type": "error", "error": {"type", "message"}}`, whole or as a
/// stream's final `error` event, typed as the failure's status would be.
pub(crate) const ERRORS: Errors = Errors {
    body: ProxyError::anthropic_body,
    stream: stream_error,
};

fn stream_error(message: &str, code: &str) -> Bytes {
    named_event("error", &stream_error_event(message, code))
}

/// The `error` event ending a Messages stream with `message` and the
/// proxy's `code`, typed as the code's status would be (docs/errors.md).
pub(crate) fn stream_error_event(message: &str, code: &str) -> Value {
    let kind = anthropic_stream_error_type(code);
    json!({"type": "error", "error": {"type": kind, "message": message}})
}
