//! OpenAI's provider (`CODEMODE_UPSTREAM`, `CODEMODE_UPSTREAM_API_KEY`),
//! which serves Chat Completions and Responses, and the shapes chat's
//! clients read a failure in.

use http::header::AUTHORIZATION;

use crate::api::{Api, Endpoint, Errors, Provider, Route};
use crate::error::ProxyError;

/// OpenAI, or any provider that speaks its API: the operator's key goes as
/// the `Authorization` value the configuration holds (`Bearer KEY`).
pub(crate) static OPENAI: Provider = Provider {
    base: |c| &c.upstream,
    base_holds_version: true,
    key: |c| c.upstream_api_key.as_ref(),
    key_var: crate::env_vars::UPSTREAM_API_KEY,
    key_header: AUTHORIZATION,
    key_hint: "Authorization: Bearer",
    key_param: None,
    replaces: &[],
    // The default: what no other provider claims.
    claims: |_| false,
    usage: &crate::observe::usage::USAGE,
};

/// Chat Completions' route.
pub(crate) const ROUTES: &[Route] = &[Route {
    path: "/v1/chat/completions",
    endpoint: Some(Endpoint::turn(Api::Chat)),
    // GET lists stored completions; HEAD and OPTIONS (CORS preflight)
    // cannot create a turn either.
    passes: &["GET", "HEAD", "OPTIONS"],
    any_prefix: true,
}];

/// `{"error": {"message", "type", "code"}}`, and a stream's final
/// `data: {"error": ...}` event, which every OpenAI client reads.
pub(crate) const ERRORS: Errors = Errors {
    body: ProxyError::body,
    stream: super::stream::error_event,
};
