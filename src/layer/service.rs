//! The service: routes each request to its endpoint.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{header, HeaderValue, Method, Request, Response};

use super::admin::{dry_run, endpoints as admin, inspector};
use super::drivers::entry::Route as Judged;
use super::{destination, dialects, forward, State, Upstream};
use crate::api::{Api, Errors};
use crate::body::{boxed, BoxError, ProxyBody};
use crate::error::ProxyError;
use crate::mode::Mode;
use crate::observe::ledger::{RequestLedger, Route};
use crate::route::{Endpoint, Routed};
use crate::select::split_preset_path;

/// The proxy as a tower service; built by [`super::CodeModeLayer`].
#[derive(Clone)]
pub struct CodeModeService {
    inner: Upstream,
    state: Arc<State>,
}

impl CodeModeService {
    pub(crate) fn new(inner: Upstream, state: Arc<State>) -> CodeModeService {
        CodeModeService { inner, state }
    }

    /// The time limits the server applies to client connections.
    pub fn connection_limits(&self) -> crate::config::ConnectionLimits {
        self.state.config.connections
    }

    /// What the proxy did so far (programs, nested calls, savings,
    /// denials), summed over every request this service served.
    pub fn totals(&self) -> crate::observe::Totals {
        self.state.metrics.totals()
    }
}

impl<B> tower::Service<Request<B>> for CodeModeService
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<ProxyBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ProxyBody>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // A chat request may call the upstream several times (repair rounds),
        // so each call drives a clone of it to readiness inside its future,
        // where an upstream failure can become a 502 instead of a dropped
        // connection.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let inner = self.inner.clone();
        let state = self.state.clone();
        let req = req.map(boxed);
        let errors = errors_for(&req);
        // One record and one span per request: current for the handler and
        // for every poll of the response body.
        let ledger = Arc::new(
            RequestLedger::new(req.headers(), state.metrics.clone())
                .watched_by(state.inspector.as_ref()),
        );
        let span = crate::observe::request_span(&ledger);
        let (mine, body_span) = (ledger.clone(), span.clone());
        Box::pin(crate::observe::scoped(ledger, span, async move {
            let res = route(state, inner, req, &mine)
                .await
                .unwrap_or_else(|e| error_response(e, errors));
            Ok(crate::observe::respond(res, mine, body_span))
        }))
    }
}

/// The error's response in `errors`' shape; a 405 on a judged route says
/// which methods it takes.
fn error_response(e: ProxyError, errors: &Errors) -> Response<ProxyBody> {
    let allow = match &e {
        ProxyError::RouteMethod { path, .. } => dialects::routes().allowed_methods(path),
        _ => None,
    };
    let mut res = e.into_response_in(errors.body);
    if let Some(v) = allow.and_then(|a| HeaderValue::try_from(a).ok()) {
        res.headers_mut().insert(header::ALLOW, v);
    }
    res
}

async fn route(
    state: Arc<State>,
    inner: Upstream,
    req: Request<ProxyBody>,
    ledger: &RequestLedger,
) -> Result<Response<ProxyBody>, ProxyError> {
    let full_path = req.uri().path().to_owned();
    // Liveness and readiness answer any prober; everything else, only the
    // clients the proxy serves.
    if !matches!(full_path.as_str(), "/healthz" | "/readyz") {
        super::callers::check(&req, state.config.listen, &state.config.callers)?;
    }
    // Judged routes first: the canonical spelling is intercepted, any other
    // spelling refused, so none reaches the provider unjudged.
    match dialects::routes().classify(req.method(), &full_path)? {
        Routed::Intercept {
            endpoint,
            path,
            preset,
        } => {
            ledger.set_route(route_label(endpoint));
            ledger.set_provider(dialects::provider(endpoint.api).id);
            let selection = state.select(req.headers(), preset)?;
            ledger.select(&selection);
            let route = Judged {
                path: path.to_owned(),
                counting: endpoint.counting,
            };
            return super::drivers::entry::serve(
                endpoint.api,
                &state,
                inner,
                selection,
                route,
                req,
            )
            .await;
        }
        Routed::Other => {}
    }
    let (path_preset, path) = match split_preset_path(&full_path) {
        Some((name, rest)) => (Some(name), rest),
        None => (None, full_path.as_str()),
    };
    let is_api = dialects::routes().under_api_root(path) || destination::owning_raw(path).is_some();
    match (req.method(), path) {
        (&Method::GET, "/healthz") if path_preset.is_none() => {
            ledger.set_route(Route::Admin);
            Ok(admin::healthz())
        }
        (&Method::GET, "/readyz") if path_preset.is_none() => {
            ledger.set_route(Route::Admin);
            admin::readyz(&state).await
        }
        (&Method::GET, "/metrics") if path_preset.is_none() => {
            ledger.set_route(Route::Admin);
            Ok(admin::metrics(&state))
        }
        (&Method::GET, "/codemode/presets") => {
            ledger.set_route(Route::Admin);
            Ok(admin::presets(&state))
        }
        (&Method::POST, "/codemode/dry-run") => {
            ledger.set_route(Route::Admin);
            dry_run::dry_run(&state, path_preset, req).await
        }
        (_, p) if path_preset.is_none() && inspector::serves(p) => {
            ledger.set_route(Route::Admin);
            inspector::serve(&state, req, p).await
        }
        (_, "/healthz" | "/readyz" | "/metrics" | "/codemode/presets" | "/codemode/dry-run") => {
            Err(ProxyError::MethodNotAllowed(
                "use GET for /healthz, /readyz, /metrics and /codemode/presets, POST for /codemode/dry-run",
            ))
        }
        (_, p) if p.starts_with("/v1/responses/") && minted_response(p) => Err(
            ProxyError::MintedResponse(p.trim_start_matches("/v1/responses/").to_owned()),
        ),
        _ if is_api => {
            ledger.set_route(Route::Passthrough);
            // Selection is checked so a mistyped preset path fails loudly here too.
            let selection = state.select(req.headers(), path_preset)?;
            ledger.select(&selection);
            let segments = crate::route::normalise(path);
            let (headers, query) = (req.headers(), req.uri().query());
            let api = destination::passthrough(&segments, headers, query)?;
            ledger.set_provider(dialects::provider(api).id);
            destination::check_credential(dialects::provider(api), headers, query)?;
            if selection.mode == Mode::Code || selection.preset.restricts_tools() {
                destination::check_open(api, req.method(), &segments, headers, selection.mode)?;
            }
            if dialects::routes().is_judged_path(path) {
                // A read on a judged route: a body there could be served as a
                // model turn by a gateway that honours a method override.
                if destination::has_body(headers) {
                    return Err(ProxyError::InvalidRequest(format!(
                        "{} {path} takes no body; send the request as POST {path}",
                        req.method()
                    )));
                }
                destination::check_no_override(req.method(), headers)?;
            }
            forward::passthrough(&state, inner, api, &segments, path.to_owned(), req).await
        }
        _ => Err(ProxyError::NotFound(format!(
            "{} {full_path}",
            req.method()
        ))),
    }
}

/// Whether `path` names a response the proxy minted (a program's calls
/// handed to the client): no provider holds it.
fn minted_response(path: &str) -> bool {
    let id = path.trim_start_matches("/v1/responses/");
    let id = id.split('/').next().unwrap_or("");
    crate::responses::embedded::minted_response(id).is_some()
}

/// The shapes a request's client reads errors in: those of the provider
/// whose own path it is on (Gemini's `/v1beta`); else those of the judged
/// route its path names or lies under; else of the provider its head or
/// query names (an `anthropic-version` header is Anthropic's); else the
/// first API's.
fn errors_for<B>(req: &Request<B>) -> &'static Errors {
    let path = req.uri().path();
    let api = destination::owning_raw(split_preset_path(path).map_or(path, |(_, rest)| rest))
        .or_else(|| dialects::routes().api_under(path))
        .or_else(|| dialects::claiming(req.headers(), req.uri().query()));
    dialects::errors(api.unwrap_or(Api::ALL[0]))
}

/// The route a judged request is counted under.
fn route_label(endpoint: Endpoint) -> Route {
    match (endpoint.api, endpoint.counting) {
        (_, true) => Route::CountTokens,
        (api, false) => Route::Turn(api),
    }
}
