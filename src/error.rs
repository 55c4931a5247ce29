//! Errors a client can see, and the one place they become responses.
//!
//! Every error is OpenAI-shaped: `{"error": {"message", "type", "code"}}`,
//! with a message that says what to do.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use serde_json::json;

use crate::body::{full, ProxyBody};
use crate::mode::Mode;
use crate::store_error::StoreError;
use crate::wire::{ParseError, Repeat};

/// An error the proxy answers a client with.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The body is not JSON, or not a JSON object.
    #[error("the request body is not valid JSON ({0}); send the request as one JSON object")]
    InvalidJson(String),
    /// The body is JSON but not a usable request of its route's API.
    #[error("{0}")]
    InvalidRequest(String),
    /// The client's body could not be read.
    #[error("the request body could not be read ({0}); send it again")]
    ClientBody(String),
    /// The body exceeds `CODEMODE_MAX_BODY_BYTES`.
    #[error("the request body is larger than {limit} bytes; send a shorter conversation or raise CODEMODE_MAX_BODY_BYTES")]
    BodyTooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// No preset has this name.
    #[error("there is no preset named `{name}`; known presets: {}", known.join(", "))]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// Every preset, in picker order.
        known: Vec<String>,
    },
    /// `x-codemode-mode` holds something other than a mode.
    #[error("x-codemode-mode is `{0}`; use native, code or both")]
    InvalidModeHeader(String),
    /// The client tried to select a preset or mode under `CODEMODE_CLIENT_SELECT=deny`.
    #[error("this proxy does not let clients choose {0} (CODEMODE_CLIENT_SELECT=deny); remove it, or ask the operator to bind your x-codemode-scope to a preset")]
    SelectionDenied(&'static str),
    /// A code-capable request on the client runtime did not declare `run_code`.
    #[error("mode `{0}` with CODEMODE_RUNTIME=client needs the client to declare a `run_code` tool, the transport that runs programs; add a function tool named run_code, or use mode native")]
    MissingRunCode(Mode),
    /// `n > 1` where calls may be denied.
    #[error("n = {0} is not supported in a mode that can deny tool calls (each choice would need its own repair); send n = 1, or use mode native")]
    UnsupportedN(u64),
    /// The upstream refused a repair round after the client stream started.
    #[error("the upstream provider answered {0} to a repair round: {1}")]
    UpstreamRepairRejected(u16, String),
    /// No route.
    #[error(
        "no route for {0}; the proxy serves /v1/*, /preset/NAME/v1/*, /healthz and /codemode/*"
    )]
    NotFound(String),
    /// `/codemode/inspector` or `/codemode/api/*` while `CODEMODE_ADMIN_TOKEN` is unset.
    #[error("the inspector is off: {0} is served only when the proxy runs with CODEMODE_ADMIN_TOKEN set")]
    InspectorOff(String),
    /// The inspector's API without the admin token, or with a wrong one.
    #[error("{}", if *.0 {
        "the admin token is not right: send the value of CODEMODE_ADMIN_TOKEN as `Authorization: Bearer <token>`, or open /codemode/inspector?token=<token> again in a browser"
    } else {
        "this endpoint needs the admin token: send `Authorization: Bearer <token>` with the value of CODEMODE_ADMIN_TOKEN, or open /codemode/inspector?token=<token> once in a browser"
    })]
    AdminUnauthorized(bool),
    /// The inspector keeps no execution with this id.
    #[error("the inspector keeps no execution `{0}` on this replica: it may be older than what CODEMODE_INSPECTOR_MB keeps, or another replica served it; list what it keeps with GET /codemode/api/executions")]
    NoSuchExecution(String),
    /// A response the proxy minted was asked for: no provider holds it.
    #[error(
        "response `{0}` was written by codemode-proxy to hand a program's tool calls to the \
         client; it is not stored anywhere and cannot be retrieved, cancelled or deleted. Send \
         the calls' outputs in the next request (or with `previous_response_id` set to it) to \
         continue the program"
    )]
    MintedResponse(String),
    /// Wrong method on a proxy endpoint.
    #[error("{0}")]
    MethodNotAllowed(&'static str),
    /// A key of the body occurs twice in one object (at the top level, or
    /// below it where the proxy reads or the provider acts), or twice in
    /// two spellings the provider reads as one field; the proxy and the
    /// provider could read different values.
    #[error("{}", repeated_key(path, also.as_deref()))]
    DuplicateKey {
        /// Where the key stands (`toolConfig.functionCallingConfig`).
        path: String,
        /// The same field's path in its other spelling, if it has one.
        also: Option<String>,
    },
    /// A path that a lenient provider would serve as an intercepted route,
    /// spelled another way.
    #[error("the path `{path}` is another spelling of {canonical}; send the request to {canonical} exactly (no trailing slash, empty or dot segments, percent-encoding, `;` parameters or other case)")]
    NonCanonicalPath {
        /// The path as the client sent it.
        path: String,
        /// The path to send instead.
        canonical: String,
    },
    /// An intercepted route asked for with a method it does not serve.
    #[error("{method} is not served on {path}; send POST {path}")]
    RouteMethod {
        /// The method the client used.
        method: String,
        /// The route's canonical path.
        path: String,
    },
    /// The upstream could not be reached.
    #[error("the upstream provider could not be reached ({0}); check CODEMODE_UPSTREAM and that the provider is up")]
    UpstreamUnreachable(String),
    /// The upstream did not answer in time.
    #[error("the upstream provider did not answer within {0} s; retry, or raise CODEMODE_UPSTREAM_TIMEOUT_SECS")]
    UpstreamTimeout(u64),
    /// The upstream began its answer, then went silent.
    #[error("the upstream provider sent part of its answer, then nothing for {0} s; retry, or raise CODEMODE_UPSTREAM_IDLE_SECS")]
    UpstreamStalled(u64),
    /// Every program slot and queue place is taken; the request can be retried as it is.
    #[error("the proxy is running as many programs as it may ({0}); nothing was lost: send the same request again in a moment")]
    RuntimeBusy(String),
    /// The shared store (`CODEMODE_STORE`) did not answer; the request can be retried as it is.
    #[error("the proxy's shared store is out of reach ({0}); nothing was lost: send the same request again in a moment (check CODEMODE_STORE and that the store is up)")]
    StoreUnavailable(String),
    /// A record of this conversation is above the shared store's size limit.
    #[error("{0}")]
    StoreRecordTooLarge(String),
    /// Another request moved the same program on at the same moment.
    #[error(
        "another request is resuming this program at the same moment; send the same request again"
    )]
    ResumeConflict,
    /// The upstream answered something the proxy cannot check.
    #[error(
        "the upstream provider sent a response the proxy cannot check ({0}); nothing was passed on"
    )]
    UpstreamInvalid(String),
    /// A client the proxy does not serve: a foreign `Host`, a page of
    /// another site (docs/security.md, "Who may call").
    #[error("{0}")]
    CallerRefused(String),
    /// A judged request whose body is not JSON by its content type.
    #[error("a model request is JSON: send it with `content-type: application/json` (got `{0}`)")]
    UnsupportedMediaType(String),
    /// A judged request whose body comes with a `content-encoding`: the
    /// proxy reads what the provider would act on, and does not decode.
    #[error("a model request is read as it is sent: send it without `content-encoding` (got `{0}`), as plain JSON")]
    UnsupportedEncoding(String),
    /// A Messages request continuing a thread Anthropic keeps, in a mode
    /// that can deny: the code is the one clients answer by resending the
    /// turn whole, without a thread (docs/agents.md).
    #[error("`{0}` keeps the conversation at Anthropic, out of codemode-proxy's reading in this tool mode; resend the whole conversation in `messages`, without `thread` or `previous_message_id`")]
    ThreadUnsupported(&'static str),
    /// A request that would carry one provider's credential, or head, to
    /// another (docs/security.md, "Whose key goes where").
    #[error(
        "the request carries {what}, which {goes_to} does not read, and it goes there: a key \
         reaches only its own provider. Send Gemini requests under /v1beta (its key in \
         `x-goog-api-key` or `?key=`), Anthropic's with `anthropic-version` (its key in \
         `x-api-key`), OpenAI's with `Authorization: Bearer`"
    )]
    CredentialElsewhere {
        /// What the request carries that is another provider's.
        what: String,
        /// The provider it would reach, as `Provider::name` says.
        goes_to: &'static str,
    },
    /// A pass-through route asked for without a credential of the
    /// caller's own while the proxy holds the operator's key, which it
    /// spends only on what it judges (docs/security.md, "Whose key pays").
    #[error(
        "{route} passes through to the provider unjudged, so it is sent with your own \
         credential, never the proxy's {key_var}; send your provider key ({header}) with the \
         request"
    )]
    OwnCredentialRequired {
        /// Method and path, as the client sent them.
        route: String,
        /// The variable holding the key that is not spent.
        key_var: &'static str,
        /// Where the provider reads a key.
        header: &'static str,
    },
    /// A route whose tools or calls the proxy cannot judge, asked for in a
    /// mode that can deny a call (docs/security.md, "Routes").
    #[error(
        "{what} is refused under tool mode `{mode}`: the proxy cannot judge the tool calls it \
         carries, so they would reach your tools unchecked. Use it in native mode (header \
         `x-codemode-mode: native`, or a preset or scope bound to `tool_mode = \"native\"`, \
         where the operator allows it), or send it to the provider directly"
    )]
    LockedRoute {
        /// The route, as `SideRoute::what` names it or as the request
        /// named it.
        what: std::borrow::Cow<'static, str>,
        /// The request's mode.
        mode: Mode,
    },
}

impl From<StoreError> for ProxyError {
    fn from(e: StoreError) -> ProxyError {
        match e {
            StoreError::Unavailable(what) => ProxyError::StoreUnavailable(what),
            StoreError::TooLarge(what) => ProxyError::StoreRecordTooLarge(what),
        }
    }
}

impl From<Repeat> for ProxyError {
    fn from(r: Repeat) -> ProxyError {
        ProxyError::DuplicateKey {
            path: r.path,
            also: r.also,
        }
    }
}

/// A client body that is not one JSON object with distinct keys.
impl From<ParseError> for ProxyError {
    fn from(e: ParseError) -> ProxyError {
        match e {
            ParseError::Json(e) => ProxyError::InvalidJson(e.to_string()),
            ParseError::DuplicateKey(path) => ProxyError::DuplicateKey { path, also: None },
        }
    }
}

/// What [`ProxyError::DuplicateKey`] says.
fn repeated_key(path: &str, also: Option<&str>) -> String {
    match also {
        None => format!(
            "the request body has the key `{path}` more than once; readers disagree on which \
             one counts, so send it once"
        ),
        Some(also) => format!(
            "the request body has both `{path}` and `{also}`, two spellings the provider reads \
             as one field; readers disagree on which one counts, so send it once, in one spelling"
        ),
    }
}

impl ProxyError {
    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            ProxyError::InvalidJson(_)
            | ProxyError::InvalidRequest(_)
            | ProxyError::ClientBody(_)
            | ProxyError::UnknownPreset { .. }
            | ProxyError::InvalidModeHeader(_)
            | ProxyError::MissingRunCode(_)
            | ProxyError::UnsupportedN(_)
            | ProxyError::DuplicateKey { .. }
            | ProxyError::CredentialElsewhere { .. }
            | ProxyError::ThreadUnsupported(_)
            | ProxyError::NonCanonicalPath { .. } => StatusCode::BAD_REQUEST,
            ProxyError::BodyTooLarge { .. } | ProxyError::StoreRecordTooLarge(_) => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            ProxyError::SelectionDenied(_)
            | ProxyError::LockedRoute { .. }
            | ProxyError::CallerRefused(_) => StatusCode::FORBIDDEN,
            ProxyError::UnsupportedMediaType(_) | ProxyError::UnsupportedEncoding(_) => {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            }
            ProxyError::AdminUnauthorized(_) | ProxyError::OwnCredentialRequired { .. } => {
                StatusCode::UNAUTHORIZED
            }
            ProxyError::NotFound(_)
            | ProxyError::MintedResponse(_)
            | ProxyError::InspectorOff(_)
            | ProxyError::NoSuchExecution(_) => StatusCode::NOT_FOUND,
            ProxyError::MethodNotAllowed(_) | ProxyError::RouteMethod { .. } => {
                StatusCode::METHOD_NOT_ALLOWED
            }
            ProxyError::UpstreamUnreachable(_)
            | ProxyError::UpstreamInvalid(_)
            | ProxyError::UpstreamRepairRejected(..) => StatusCode::BAD_GATEWAY,
            ProxyError::UpstreamTimeout(_) | ProxyError::UpstreamStalled(_) => {
                StatusCode::GATEWAY_TIMEOUT
            }
            ProxyError::RuntimeBusy(_) | ProxyError::StoreUnavailable(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ProxyError::ResumeConflict => StatusCode::CONFLICT,
        }
    }

    /// The OpenAI `type` field.
    pub fn kind(&self) -> &'static str {
        match self.status() {
            StatusCode::UNAUTHORIZED => "authentication_error",
            StatusCode::FORBIDDEN => "permission_error",
            StatusCode::NOT_FOUND => "not_found_error",
            StatusCode::SERVICE_UNAVAILABLE => "server_error",
            s if s.is_server_error() => "upstream_error",
            _ => "invalid_request_error",
        }
    }

    /// The machine-readable `code` field.
    pub fn code(&self) -> &'static str {
        match self {
            ProxyError::InvalidJson(_) => "invalid_json",
            ProxyError::InvalidRequest(_) => "invalid_request",
            ProxyError::ClientBody(_) => "client_body_error",
            ProxyError::BodyTooLarge { .. } => "body_too_large",
            ProxyError::UnknownPreset { .. } => "unknown_preset",
            ProxyError::InvalidModeHeader(_) => "invalid_mode",
            ProxyError::SelectionDenied(_) => "client_select_denied",
            ProxyError::MissingRunCode(_) => "run_code_missing",
            ProxyError::UnsupportedN(_) => "unsupported_n",
            ProxyError::UpstreamRepairRejected(..) => "upstream_repair_rejected",
            ProxyError::NotFound(_)
            | ProxyError::MintedResponse(_)
            | ProxyError::InspectorOff(_)
            | ProxyError::NoSuchExecution(_) => "not_found",
            ProxyError::AdminUnauthorized(true) => "invalid_admin_token",
            ProxyError::AdminUnauthorized(false) => "admin_token_required",
            ProxyError::MethodNotAllowed(_) | ProxyError::RouteMethod { .. } => {
                "method_not_allowed"
            }
            ProxyError::DuplicateKey { .. } => "duplicate_key",
            ProxyError::NonCanonicalPath { .. } => "non_canonical_path",
            ProxyError::UpstreamUnreachable(_) => "upstream_unreachable",
            ProxyError::UpstreamTimeout(_) | ProxyError::UpstreamStalled(_) => "upstream_timeout",
            ProxyError::UpstreamInvalid(_) => "upstream_invalid_response",
            ProxyError::RuntimeBusy(_) => "runtime_busy",
            ProxyError::StoreUnavailable(_) => "store_unavailable",
            ProxyError::StoreRecordTooLarge(_) => "store_record_too_large",
            ProxyError::ResumeConflict => "resume_conflict",
            ProxyError::LockedRoute { .. } => "route_locked",
            ProxyError::CallerRefused(_) => "caller_refused",
            ProxyError::OwnCredentialRequired { .. } => "own_credential_required",
            ProxyError::UnsupportedMediaType(_) => "unsupported_media_type",
            ProxyError::UnsupportedEncoding(_) => "unsupported_content_encoding",
            ProxyError::CredentialElsewhere { .. } => "credential_elsewhere",
            ProxyError::ThreadUnsupported(_) => "thread_unsupported_request",
        }
    }

    /// The JSON body: `{"error": {"message", "type", "code"}}`.
    pub fn body(&self) -> Bytes {
        let v = json!({"error": {
            "message": self.to_string(),
            "type": self.kind(),
            "param": null,
            "code": self.code(),
        }});
        Bytes::from(v.to_string())
    }

    /// The body in Anthropic's shape, for the Messages routes:
    /// `{"type": "error", "error": {"type", "message"}}`.
    pub fn anthropic_body(&self) -> Bytes {
        let kind = anthropic_type(self.status());
        let mut v = json!({"type": "error", "error": {"type": kind, "message": self.to_string()}});
        // Where Anthropic's clients act on the error's code, it is where
        // they read it.
        if let ProxyError::ThreadUnsupported(_) = self {
            v["error"]["details"] = json!({"error_code": self.code()});
        }
        Bytes::from(v.to_string())
    }

    /// The whole response, in Anthropic's shape (the Messages routes).
    pub fn into_anthropic_response(self) -> Response<ProxyBody> {
        let body = self.anthropic_body();
        self.respond_with(body)
    }

    /// The whole response, its body written by `body` (the shape of the
    /// API the client speaks).
    pub(crate) fn into_response_in(self, body: fn(&ProxyError) -> Bytes) -> Response<ProxyBody> {
        let body = body(&self);
        self.respond_with(body)
    }

    /// The whole response.
    pub fn into_response(self) -> Response<ProxyBody> {
        let body = self.body();
        self.respond_with(body)
    }

    fn respond_with(self, body: Bytes) -> Response<ProxyBody> {
        let mut res = Response::new(full(body));
        *res.status_mut() = self.status();
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if matches!(
            self,
            ProxyError::RuntimeBusy(_)
                | ProxyError::StoreUnavailable(_)
                | ProxyError::ResumeConflict
        ) {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if matches!(self, ProxyError::AdminUnauthorized(_)) {
            res.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"codemode-inspector\""),
            );
        }
        res
    }
}

/// Anthropic's error type for a status (docs/errors.md).
fn anthropic_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 405 | 409 | 415 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        504 => "timeout_error",
        _ => "api_error",
    }
}

/// Anthropic's error type for a failure that ends a stream the client
/// already has, by the code the proxy gives it: the codes a stream alone
/// has (docs/errors.md, after the table), and a [`ProxyError`]'s code
/// typed as its status would be.
pub(crate) fn anthropic_stream_error_type(code: &str) -> &'static str {
    match code {
        "upstream_stream_idle" | "upstream_timeout" => "timeout_error",
        "runtime_busy" | "store_unavailable" => "overloaded_error",
        "store_record_too_large" | "body_too_large" => "request_too_large",
        "resume_conflict" | "invalid_request" | "invalid_json" => "invalid_request_error",
        // upstream_stream_broken, upstream_event_too_large,
        // stream_state_too_large, upstream_repair_rejected,
        // upstream_unreachable, upstream_invalid_response: the provider's
        // side failed, as a 502 would say.
        _ => "api_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_openai_shaped() {
        let e = ProxyError::UnknownPreset {
            name: "x".into(),
            known: vec!["standard".into(), "code".into()],
        };
        let v: serde_json::Value = serde_json::from_slice(&e.body()).unwrap();
        assert_eq!(v["error"]["code"], "unknown_preset");
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("standard, code"));
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn a_stream_failure_has_the_anthropic_type_its_status_would_give() {
        // What a later round of a stream can fail with (the stream body
        // passes on its code).
        let round_failures = [
            ProxyError::UpstreamRepairRejected(429, "slow down".into()),
            ProxyError::UpstreamUnreachable("refused".into()),
            ProxyError::UpstreamTimeout(60),
            ProxyError::UpstreamStalled(60),
            ProxyError::UpstreamInvalid("not a stream".into()),
            ProxyError::RuntimeBusy("full".into()),
            ProxyError::StoreUnavailable("redis".into()),
            ProxyError::StoreRecordTooLarge("big".into()),
            ProxyError::ResumeConflict,
            ProxyError::InvalidRequest("bad".into()),
            ProxyError::InvalidJson("bad".into()),
        ];
        for e in round_failures {
            assert_eq!(
                anthropic_stream_error_type(e.code()),
                anthropic_type(e.status()),
                "{}",
                e.code()
            );
        }
        assert_eq!(
            anthropic_stream_error_type("upstream_stream_idle"),
            "timeout_error"
        );
        for code in [
            "upstream_stream_broken",
            "upstream_event_too_large",
            "stream_state_too_large",
        ] {
            assert_eq!(anthropic_stream_error_type(code), "api_error", "{code}");
        }
    }
}
