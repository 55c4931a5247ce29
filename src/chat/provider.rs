//! OpenAI's provider (`CODEMODE_UPSTREAM`, `CODEMODE_UPSTREAM_API_KEY`),
//! which serves Chat Completions and Responses, and the shapes chat's
//! clients read a failure in.

use http::header::AUTHORIZATION;

use crate::api::{Api, Endpoint, Errors, Paths, Provider, Route};
use crate::error::ProxyError;
use crate::observe::ledger::ProviderId;

/// OpenAI, or any provider that speaks its API: the operator's key goes as
/// the `Authorization` value the configuration holds (`Bearer KEY`).
pub(crate) static OPENAI: Provider = Provider {
    id: ProviderId::OpenAi,
    trace_name: "openai",
    model_in_path: false,
    name: "the OpenAI-compatible provider (CODEMODE_UPSTREAM)",
    base: |c| &c.upstream,
    base_holds_version: true,
    key: |c| c.upstream_api_key.as_ref(),
    key_var: crate::env_vars::UPSTREAM_API_KEY,
    key_header: AUTHORIZATION,
    key_hint: "Authorization: Bearer",
    key_param: None,
    replaces: &[],
    // The default: what no other provider claims.
    claims: |_, _| false,
    roots: &[],
    // Azure's `api-key`, and gateways that take Anthropic's header.
    credentials: &["authorization", "api-key", "x-api-key"],
    open: OPEN,
    usage: &crate::observe::usage::USAGE,
};

/// OpenAI's routes that declare no tools and return no model's calls
/// (docs/security.md, "Routes").
const OPEN: &[Paths] = &[
    Paths {
        methods: &["GET", "HEAD"],
        pattern: &["v1", "models"],
    },
    Paths {
        methods: &["GET", "HEAD", "DELETE"],
        pattern: &["v1", "models", "*"],
    },
    Paths {
        methods: &["POST"],
        pattern: &["v1", "embeddings"],
    },
    Paths {
        methods: &["POST"],
        pattern: &["v1", "moderations"],
    },
    Paths {
        methods: &[],
        pattern: &[
            "v1",
            "files|uploads|audio|images|videos|vector_stores|fine_tuning",
            "**",
        ],
    },
    // A stored response is deleted, never read, here.
    Paths {
        methods: &["DELETE"],
        pattern: &["v1", "responses", "*"],
    },
    // A batch's state; its results are files.
    Paths {
        methods: &["GET", "HEAD"],
        pattern: &["v1", "batches", "**"],
    },
];

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
