//! Talking to the upstream: headers, addressing, timeouts, relaying.

use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response};
use http_body_util::{BodyExt, Limited};

use super::{State, Upstream};
use crate::api::{Errors, Provider};
use crate::body::{full, ProxyBody, SseErrorTail, UpstreamIdle};
use crate::error::ProxyError;
use crate::select::HEADER_PREFIX;

/// Whether `name` describes one connection, not the message (RFC 9110
/// section 7.6.1), or asks to change protocol.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    name == header::CONNECTION
        || name == header::PROXY_AUTHENTICATE
        || name == header::PROXY_AUTHORIZATION
        || name == header::TE
        || name == header::TRAILER
        || name == header::TRANSFER_ENCODING
        || name == header::UPGRADE
        || matches!(name.as_str(), "keep-alive" | "proxy-connection")
}

/// The headers a `Connection` header names as hop-by-hop (usually none).
fn connection_named(headers: &HeaderMap) -> Vec<HeaderName> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::try_from(t.trim()).ok())
        .collect()
}

/// Removes hop-by-hop headers, including those the `Connection` header names.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named = connection_named(headers);
    // One pass over the few names present, not a lookup per name that might be.
    let doomed: Vec<HeaderName> = headers
        .keys()
        .filter(|k| is_hop_by_hop(k) || named.contains(k))
        .cloned()
        .collect();
    for name in doomed {
        headers.remove(name);
    }
}

/// The headers sent to `provider` for a client request.
///
/// `rewritten` drops the body's length and coding (the proxy writes it
/// anew, uncompressed) and asks for `accept-encoding: identity`: the proxy
/// must be able to read what comes back.
/// `operator_key`: whether the operator's key stands in for the client's
/// credential (judged routes), or the client's own goes (pass-through).
pub(crate) fn provider_headers(
    state: &State,
    provider: &Provider,
    client: &HeaderMap,
    rewritten: bool,
    operator_key: bool,
) -> HeaderMap {
    let named = connection_named(client);
    let key = (provider.key)(&state.config).filter(|_| operator_key);
    let replaced = |name: &HeaderName| {
        (rewritten
            && (name == header::CONTENT_LENGTH
                || name == header::ACCEPT_ENCODING
                || name == header::CONTENT_ENCODING
                || name == header::CONTENT_TYPE))
            || (key.is_some() && (*name == provider.key_header || provider.replaces.contains(name)))
    };
    // One pass over the names the client sent, instead of a copy and then
    // a removal for every name that might be among them.
    let mut headers = HeaderMap::with_capacity(client.keys_len() + 2);
    for (name, value) in client {
        let dropped = is_hop_by_hop(name)
            || name == header::HOST
            || name.as_str().starts_with(HEADER_PREFIX)
            || named.contains(name)
            || replaced(name);
        if !dropped {
            let value = match rewritten {
                true => detached(value),
                false => value.clone(),
            };
            headers.append(name.clone(), value);
        }
    }
    if rewritten {
        // Judged responses are read as they come: ask for them uncompressed.
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    if let Some(key) = key {
        headers.insert(provider.key_header.clone(), key.clone());
    }
    headers
}

/// A copy of `value` that shares no buffer with the client's request head.
/// hyper's header values are slices of the connection's read buffer; a
/// judged request's stream holds its provider headers to its end (a
/// re-ask sends them again), and one shared value would keep that whole
/// buffer, and have hyper read the connection's next bytes into another
/// (8 KB more per open stream, BENCHMARKS.md, "Memory per idle stream").
fn detached(value: &HeaderValue) -> HeaderValue {
    let mut copy = HeaderValue::from_bytes(value.as_bytes()).unwrap_or_else(|_| value.clone());
    copy.set_sensitive(value.is_sensitive());
    copy
}

/// Whether the client sent a credential of its own (OpenAI's and
/// Anthropic's headers, Azure's `api-key`, the provider's own key header,
/// or its key in the query).
fn has_credential(
    provider: &crate::api::Provider,
    client: &HeaderMap,
    query: Option<&str>,
) -> bool {
    [header::AUTHORIZATION.as_str(), "x-api-key", "api-key"]
        .iter()
        .copied()
        .chain([provider.key_header.as_str()])
        .any(|name| client.get(name).is_some_and(|v| !v.is_empty()))
        || provider
            .key_param
            .is_some_and(|p| crate::api::has_param(query, p))
}

/// Sends `req` upstream; a missing answer within `timeout` is a 504.
/// The call runs in the request's `chat` span, if it has one
/// ([`crate::telemetry::Round`]).
pub(crate) async fn send(
    inner: Upstream,
    mut req: Request<ProxyBody>,
    timeout: Duration,
) -> Result<Response<ProxyBody>, ProxyError> {
    if let Some(id) = crate::observe::ledger::request_id() {
        req.headers_mut()
            .insert(&crate::observe::ledger::REQUEST_ID, id);
    }
    let round = crate::telemetry::Round::take(&mut req);
    let started = std::time::Instant::now();
    let call = tokio::time::timeout(timeout, inner.call(req));
    let sent = tracing::Instrument::instrument(call, round.span().clone()).await;
    crate::observe::ledger::upstream_round(started);
    let sent = match sent {
        Err(_) => Err(ProxyError::UpstreamTimeout(timeout.as_secs())),
        Ok(Err(e)) => Err(ProxyError::UpstreamUnreachable(error_chain(e.inner()))),
        Ok(Ok(res)) => Ok(res),
    };
    round.finish(sent)
}

/// Reads a whole upstream body of at most `limit` bytes within `timeout`.
pub(crate) async fn read_upstream_body(
    body: ProxyBody,
    timeout: Duration,
    limit: usize,
) -> Result<Bytes, ProxyError> {
    match tokio::time::timeout(timeout, Limited::new(body, limit).collect()).await {
        Err(_) => Err(ProxyError::UpstreamTimeout(timeout.as_secs())),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err(ProxyError::UpstreamInvalid(format!(
                "the response body is larger than {limit} bytes (CODEMODE_MAX_UPSTREAM_BODY_BYTES)"
            )))
        }
        Ok(Err(e)) => match UpstreamIdle::find(&*e) {
            Some(idle) => Err(ProxyError::UpstreamStalled(idle.0)),
            None => Err(ProxyError::UpstreamUnreachable(format!(
                "the response body broke off: {}",
                error_chain(&*e)
            ))),
        },
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

/// Reads a client body of at most `limit` bytes.
pub(crate) async fn read_client_body(
    headers: &HeaderMap,
    body: ProxyBody,
    limit: usize,
) -> Result<Bytes, ProxyError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ProxyError::BodyTooLarge { limit });
    }
    match Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            Err(ProxyError::BodyTooLarge { limit })
        }
        Err(e) => Err(ProxyError::ClientBody(error_chain(&*e))),
    }
}

/// The upstream response with its headers cleaned and its body untouched
/// (for bodies the proxy judges itself).
pub(crate) fn relay_head(res: Response<ProxyBody>) -> Response<ProxyBody> {
    let (mut parts, body) = res.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    Response::from_parts(parts, body)
}

/// The upstream response as the client gets it: headers cleaned, body as it
/// comes; an event stream that fails ends with a final error event in
/// `errors`' shape.
pub(crate) fn relay(res: Response<ProxyBody>, errors: &Errors) -> Response<ProxyBody> {
    let (mut parts, body) = res.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    let is_event_stream = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let body = if is_event_stream {
        crate::body::boxed(SseErrorTail::new(body, errors.stream))
    } else {
        body
    };
    Response::from_parts(parts, body)
}

/// A response with `body` and the upstream's headers (length recomputed).
pub(crate) fn respond_with(mut parts: http::response::Parts, body: Bytes) -> Response<ProxyBody> {
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, full(body))
}

/// Any other `/v1/*` request: both bodies stream through unchanged.
///
/// `api`'s provider gets it (`super::destination::passthrough`); `segments`
/// are its path as the provider reads it.
pub(crate) async fn passthrough(
    state: &State,
    inner: Upstream,
    api: crate::api::Api,
    segments: &[String],
    path: String,
    req: Request<ProxyBody>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let (parts, body) = req.into_parts();
    let (provider, errors) = (super::dialects::provider(api), super::dialects::errors(api));
    reads_usage_of(provider.usage);
    let spends = crate::route::spends_operator_key(&parts.method, segments);
    let held = (provider.key)(&state.config).is_some();
    // A pre-flight never carries a credential; the provider answers it.
    if held
        && !spends
        && parts.method != http::Method::OPTIONS
        && !has_credential(provider, &parts.headers, parts.uri.query())
    {
        return Err(ProxyError::OwnCredentialRequired {
            route: format!("{} {path}", parts.method),
            key_var: provider.key_var,
            header: provider.key_hint,
        });
    }
    let headers = provider_headers(state, provider, &parts.headers, false, spends);
    let mut up = Request::new(body);
    *up.method_mut() = parts.method;
    *up.uri_mut() = provider.uri(&state.config, &path, parts.uri.query(), spends)?;
    *up.headers_mut() = headers;
    let res = send(inner, up, state.config.upstream_timeout).await?;
    Ok(relay(res, errors))
}

/// The current request's upstream bodies name their token counts as
/// `provider`'s answers do.
pub(crate) fn reads_usage_of(shape: &'static crate::observe::usage::Shape) {
    if let Some(ledger) = crate::observe::ledger::current() {
        ledger.set_usage_shape(shape);
    }
}

/// An error and its sources, for messages (none of which carry secrets).
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detached_value_is_equal_keeps_its_sensitivity_and_shares_nothing() {
        let head = Bytes::from_static(b"Bearer sk-secret").slice(0..);
        let mut shared = HeaderValue::from_maybe_shared(head.clone()).unwrap();
        shared.set_sensitive(true);
        let copy = detached(&shared);
        assert_eq!(copy, shared);
        assert!(copy.is_sensitive());
        assert_ne!(copy.as_bytes().as_ptr(), head.as_ptr());
    }
}
