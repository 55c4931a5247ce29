//! Operations: per-request ids and records, the access log, metrics, log
//! format (docs/operations.md).
//!
//! The service gives each request a `ledger::RequestLedger`, current for
//! the handler and for every poll of the response body, so the code that
//! counts something calls a free function (`ledger::turn_decided`,
//! `ledger::program_ended`, ...) without a ledger parameter, and a log
//! line finds its request's id there ([`logging`]). The response body's end
//! writes the one access-log line (target `codemode::access`) and updates
//! `metrics::Metrics`, which `GET /metrics` encodes. A tracing span per
//! request exists only for trace export (`request_span`).

pub(crate) mod body;
pub(crate) mod counted;
pub(crate) mod inspector;
pub(crate) mod ledger;
pub(crate) mod lines;
mod log_writer;
pub mod logging;
pub(crate) mod metrics;
pub(crate) mod usage;

use std::future::Future;
use std::sync::Arc;

use http::{HeaderName, HeaderValue, Response};
use http_body_util::combinators::UnsyncBoxBody;
use tracing::{Instrument, Span};

use crate::body::ProxyBody;
use ledger::{RequestLedger, REQUEST_ID};

pub use logging::LogFormat;
pub use metrics::Totals;

/// Response header: the nested calls of the programs that ended during the request.
pub(crate) static RESPONSE_NESTED_CALLS: HeaderName =
    HeaderName::from_static("x-codemode-nested-calls");
/// Response header: bytes of nested results those programs kept out of the model's context.
pub(crate) static RESPONSE_CONTEXT_BYTES_SAVED: HeaderName =
    HeaderName::from_static("x-codemode-context-bytes-saved");

/// Response header: the provider's own `x-request-id`, when it sent one.
pub(crate) static UPSTREAM_REQUEST_ID: HeaderName =
    HeaderName::from_static("x-upstream-request-id");

/// The target of the request span.
pub(crate) const REQUEST_TARGET: &str = "codemode::request";

/// The request's span, the parent of its exported trace spans. Only a
/// trace exporter takes it (log lines find the request id in the ledger:
/// [`logging`]), so without one it is never built.
pub(crate) fn request_span(ledger: &RequestLedger) -> Span {
    tracing::span!(
        target: REQUEST_TARGET,
        tracing::Level::ERROR,
        "request",
        request_id = ledger.id_str()
    )
}

/// `fut` run inside the request's span with its ledger current.
pub(crate) fn scoped<F: Future>(
    ledger: Arc<RequestLedger>,
    span: Span,
    fut: F,
) -> impl Future<Output = F::Output> {
    ledger::scope(ledger, fut.instrument(span))
}

/// The response as the client gets it: its id and savings headers, and a
/// body that finishes the ledger when it ends.
pub(crate) fn respond(
    res: Response<ProxyBody>,
    ledger: Arc<RequestLedger>,
    span: Span,
) -> Response<ProxyBody> {
    let (mut parts, body) = res.into_parts();
    ledger.set_status(parts.status.as_u16());
    // A provider's own id (OpenAI answers with one) stays readable.
    if let Some(upstream) = parts.headers.insert(&REQUEST_ID, ledger.id().clone()) {
        if upstream != ledger.id() {
            parts.headers.insert(&UPSTREAM_REQUEST_ID, upstream);
        }
    }
    if let Some((nested, saved)) = ledger.savings() {
        parts
            .headers
            .insert(&RESPONSE_NESTED_CALLS, HeaderValue::from(nested));
        parts
            .headers
            .insert(&RESPONSE_CONTEXT_BYTES_SAVED, HeaderValue::from(saved));
    }
    let body = UnsyncBoxBody::new(body::observed(body, ledger, span));
    Response::from_parts(parts, body)
}
