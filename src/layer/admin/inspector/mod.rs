//! The inspector: `GET /codemode/inspector` (a page, its script and
//! style embedded in the binary) and the JSON API behind it,
//! `/codemode/api/*`, with live updates as server-sent events.
//!
//! Off unless `CODEMODE_ADMIN_TOKEN` is set: then every path here is a 404
//! and nothing is recorded. The page needs a session ([`auth`]); the API
//! needs the token or the session, else a 401. What it shows comes from
//! [`crate::observe::inspector::Inspector`]: names, sizes, times and the
//! programs' code; payloads only with `CODEMODE_INSPECTOR_PAYLOADS=on`;
//! never a header value or a credential.
//!
//! ```text
//! GET  /codemode/inspector[?token=T]   the page (or the login form, 401)
//! POST /codemode/inspector             the login form (token=T)
//! POST /codemode/inspector/logout      ends the browser's session
//! GET  /codemode/api/executions[/{id}] /denials /totals /status /events
//! ```
//!
//! A client that offered a wrong token has its later attempts slowed
//! ([`throttle`]).

mod api;
mod auth;
mod events;
mod throttle;

pub(crate) use throttle::Throttle;

use http::header::{self, HeaderValue};
use http::{Method, Request, Response};

use crate::body::{full, ProxyBody};
use crate::error::ProxyError;
use crate::layer::forward::read_client_body;
use crate::layer::State;
use auth::Offered;

/// The page's path.
const PAGE: &str = "/codemode/inspector";
/// The API's prefix.
const API: &str = "/codemode/api";
/// Where a browser's session ends.
const LOGOUT: &str = "/codemode/inspector/logout";

/// The page's policy: its own script and style only, no inline code, no
/// frames, requests to this origin only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Largest login form read.
const MAX_FORM_BYTES: usize = 4096;

/// Whether `path` is the inspector's (the page, its files, the API).
pub(crate) fn serves(path: &str) -> bool {
    let under = |prefix: &str| {
        path.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    under(PAGE) || under(API)
}

/// A request on one of the inspector's paths.
pub(crate) async fn serve(
    state: &State,
    req: Request<ProxyBody>,
    path: &str,
) -> Result<Response<ProxyBody>, ProxyError> {
    let (Some(config), Some(inspector)) = (&state.config.inspector, &state.inspector) else {
        return Err(ProxyError::InspectorOff(path.to_owned()));
    };
    let token = &config.token;
    let client = throttle::client_of(req.extensions());
    let throttle = &state.admin_throttle;
    // Each attempt waits its turn before any token or session is checked
    // (none for a client that has not failed lately).
    let judge = |offered: Offered| {
        match offered {
            Offered::Valid => throttle.succeeded(client),
            Offered::Wrong => throttle.failed(client),
            Offered::Nothing => {}
        }
        offered
    };
    if let Some(rest) = path.strip_prefix(API) {
        if auth::offers_any(req.headers()) {
            throttle.turn(client).await;
        }
        match judge(auth::check(token, req.headers())) {
            Offered::Valid => {}
            Offered::Wrong => return Err(ProxyError::AdminUnauthorized(true)),
            Offered::Nothing => return Err(ProxyError::AdminUnauthorized(false)),
        }
        if req.method() != Method::GET {
            return Err(ProxyError::MethodNotAllowed(
                "the inspector's API is read-only: use GET",
            ));
        }
        return api::route(state, inspector, rest, req.uri().query()).map(secured);
    }
    let res = match (req.method(), path) {
        (&Method::GET, PAGE) => {
            let query = req.uri().query().and_then(|q| crate::layer::query::param(q, "token"));
            if query.is_some() || auth::offers_any(req.headers()) {
                throttle.turn(client).await;
            }
            let offered = match query {
                Some(t) if token.verify(t.as_bytes()) => {
                    judge(Offered::Valid);
                    return Ok(secured(auth::redirect_with_cookie(token, req.headers(), false)));
                }
                Some(_) => judge(Offered::Wrong),
                None => judge(auth::check(token, req.headers())),
            };
            match offered {
                Offered::Valid => html(include_str!("assets/index.html").to_owned()),
                Offered::Wrong | Offered::Nothing => auth::login_page(offered),
            }
        }
        (&Method::POST, PAGE) => {
            let (parts, body) = req.into_parts();
            let form = read_client_body(&parts.headers, body, MAX_FORM_BYTES).await?;
            let offered = std::str::from_utf8(&form)
                .ok()
                .and_then(|f| crate::layer::query::param(f, "token"));
            if offered.is_some() {
                throttle.turn(client).await;
            }
            match offered {
                Some(t) if token.verify(t.as_bytes()) => {
                    judge(Offered::Valid);
                    auth::redirect_with_cookie(token, &parts.headers, false)
                }
                Some(_) => auth::login_page(judge(Offered::Wrong)),
                None => auth::login_page(Offered::Nothing),
            }
        }
        // A POST: a link or an image on another page cannot end the session
        // (and a cross-site form is refused before it gets here).
        (&Method::POST, LOGOUT) => auth::redirect_with_cookie(token, req.headers(), true),
        (_, LOGOUT) => {
            return Err(ProxyError::MethodNotAllowed(
                "sign out with POST /codemode/inspector/logout",
            ))
        }
        (&Method::GET, "/codemode/inspector/app.js") => asset(
            include_str!("assets/app.js"),
            "text/javascript; charset=utf-8",
        ),
        (&Method::GET, "/codemode/inspector/app.css") => {
            asset(include_str!("assets/app.css"), "text/css; charset=utf-8")
        }
        (&Method::GET, _) => return Err(ProxyError::NotFound(format!("GET {path}"))),
        _ => {
            return Err(ProxyError::MethodNotAllowed(
                "use GET for the inspector's page and files, POST /codemode/inspector for its login form",
            ))
        }
    };
    Ok(secured(res))
}

/// An HTML page under the inspector's content policy.
fn html(text: String) -> Response<ProxyBody> {
    let mut res = asset(text, "text/html; charset=utf-8");
    res.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    res
}

fn asset(text: impl Into<bytes::Bytes>, content_type: &'static str) -> Response<ProxyBody> {
    let mut res = Response::new(full(text));
    res.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    res
}

/// What every inspector response carries: not cached, not sniffed, not
/// framed, no referrer (a `?token=` URL must not leak).
fn secured(mut res: Response<ProxyBody>) -> Response<ProxyBody> {
    let h = res.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    res
}

#[cfg(test)]
mod tests {
    use super::serves;

    #[test]
    fn the_inspector_serves_its_own_paths_only() {
        for p in [
            "/codemode/inspector",
            "/codemode/inspector/app.js",
            "/codemode/api",
            "/codemode/api/executions/3",
        ] {
            assert!(serves(p), "{p}");
        }
        for p in [
            "/codemode/inspectorx",
            "/codemode/apis",
            "/codemode/presets",
        ] {
            assert!(!serves(p), "{p}");
        }
    }
}
