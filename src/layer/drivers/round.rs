//! One upstream round of a judged request, shared by every dialect: where
//! it goes, the checks its response must pass, the headers the client's
//! response gets.

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE};
use http::{Request, Response, Uri};
use serde_json::Value;

use super::stream_body::Next;
use crate::body::{full, ProxyBody};
use crate::error::ProxyError;
use crate::layer::forward::{read_upstream_body, send};
use crate::layer::Upstream;
use crate::select::Selection;
use crate::turn::Dialect;
use crate::turn::WireRequest;

/// Response header: the mode that governed the request.
pub const RESPONSE_MODE: &str = "x-codemode-mode";
/// Response header: the preset that governed the request.
pub const RESPONSE_PRESET: &str = "x-codemode-preset";
/// Response header: how many repair rounds ran.
pub const RESPONSE_REPAIRS: &str = "x-codemode-repairs";

/// Where one request goes upstream, built once and reused by repair rounds.
pub(crate) struct Target {
    pub(crate) uri: Uri,
    pub(crate) headers: HeaderMap,
    /// Who it goes to, as traces name it.
    pub(crate) provider: &'static crate::api::Provider,
}

impl Target {
    pub(crate) fn request(&self, body: Bytes) -> Request<ProxyBody> {
        let round = crate::telemetry::Round::start(
            self.provider.trace_name,
            self.provider.model_in_path,
            &self.uri,
            &body,
        );
        let mut req = Request::new(full(body));
        round.attach(&mut req);
        *req.method_mut() = http::Method::POST;
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }
}

pub(crate) fn check_event_stream(res: &Response<ProxyBody>) -> Result<(), ProxyError> {
    check_identity(res.headers())?;
    let content_type = res
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type.starts_with("text/event-stream") {
        Ok(())
    } else {
        Err(ProxyError::UpstreamInvalid(format!(
            "a stream was asked for but the response is `{content_type}`"
        )))
    }
}

/// A judged body must be readable as it came: the proxy asks for
/// `accept-encoding: identity`, and refuses a compressed answer rather than
/// forward bytes it cannot judge.
pub(crate) fn check_identity(headers: &HeaderMap) -> Result<(), ProxyError> {
    // hyper takes `chunked` off; any other transfer coding (`gzip,
    // chunked`) would leave bytes the judge cannot read.
    for value in headers.get_all(http::header::TRANSFER_ENCODING) {
        let value = String::from_utf8_lossy(value.as_bytes());
        let coding = value.split(',').map(str::trim).find(|c| {
            !c.is_empty()
                && !c.eq_ignore_ascii_case("chunked")
                && !c.eq_ignore_ascii_case("identity")
        });
        if let Some(coding) = coding {
            return Err(ProxyError::UpstreamInvalid(format!(
                "the upstream answered with `transfer-encoding: {value}`; a `{coding}` transfer \
                 coding cannot be checked for tool calls, so it is refused. Configure the \
                 provider (or the gateway in front of it) to send `chunked` only"
            )));
        }
    }
    for value in headers.get_all(http::header::CONTENT_ENCODING) {
        let value = String::from_utf8_lossy(value.as_bytes());
        let coding = value
            .split(',')
            .map(str::trim)
            .find(|c| !c.is_empty() && !c.eq_ignore_ascii_case("identity"));
        if let Some(coding) = coding {
            return Err(ProxyError::UpstreamInvalid(format!(
                "the upstream answered with `content-encoding: {coding}` although the proxy asked \
                 for `accept-encoding: identity`; a compressed response cannot be checked for tool \
                 calls, so it is refused. Configure the provider (or the gateway in front of it) \
                 not to compress responses"
            )));
        }
    }
    Ok(())
}

/// Sends the next round; a refusal ends the stream with the upstream's error.
pub(crate) async fn next_round(
    inner: Upstream,
    req: Request<ProxyBody>,
    timeout: std::time::Duration,
    max_body: usize,
) -> Result<Next, ProxyError> {
    let res = send(inner, req, timeout).await?;
    if !res.status().is_success() {
        let status = res.status().as_u16();
        let body = read_upstream_body(res.into_body(), timeout, max_body).await?;
        return Err(ProxyError::UpstreamRepairRejected(
            status,
            String::from_utf8_lossy(&body).into_owned(),
        ));
    }
    check_event_stream(&res)?;
    Ok(Next::Stream(res))
}

/// The upstream's response head, cleaned for a body the proxy wrote.
pub(crate) fn response_parts(mut parts: http::response::Parts) -> http::response::Parts {
    crate::layer::forward::strip_hop_by_hop(&mut parts.headers);
    parts
}

/// An answer the proxy wrote, as JSON or as the event stream the client
/// asked for, in the head of `parts`.
pub(crate) fn respond<D: Dialect>(
    mut parts: http::response::Parts,
    request: &D::Request,
    answer: &Value,
) -> Response<ProxyBody> {
    parts.headers.remove(CONTENT_LENGTH);
    parts.headers.remove(CONTENT_ENCODING);
    let (content_type, body) = if request.streams() {
        ("text/event-stream", D::as_sse(answer, request))
    } else {
        // Straight into a buffer: `Display` goes through a formatter per write.
        let body = serde_json::to_vec(answer).unwrap_or_default();
        ("application/json", Bytes::from(body))
    };
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    Response::from_parts(parts, full(body))
}

/// Adds the response headers that say what governed the request.
pub(crate) fn tag(
    mut res: Response<ProxyBody>,
    selection: &Selection,
    repairs: Option<u32>,
) -> Response<ProxyBody> {
    let h = res.headers_mut();
    h.insert(
        RESPONSE_MODE,
        HeaderValue::from_static(selection.mode.as_str()),
    );
    if let Ok(v) = HeaderValue::try_from(selection.preset.name.as_str()) {
        h.insert(RESPONSE_PRESET, v);
    }
    if let Some(n) = repairs {
        h.insert(RESPONSE_REPAIRS, HeaderValue::from(n));
    }
    res
}
