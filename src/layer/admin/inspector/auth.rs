//! Who may open the inspector: a script with `Authorization: Bearer
//! <token>`, a browser with the session cookie it got by opening
//! `/codemode/inspector?token=<token>` (or posting the login form) once.
//!
//! The cookie holds a value derived from the token
//! ([`AdminToken::session`]), `HttpOnly` and `SameSite=Strict`; every
//! comparison is constant-time.

use http::header::{self, HeaderValue};
use http::{HeaderMap, Response, StatusCode};

use crate::body::{full, ProxyBody};
use crate::config::AdminToken;

/// The session cookie's name.
pub(super) const COOKIE: &str = "codemode_inspector";

/// What a request offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Offered {
    /// The token or a valid session.
    Valid,
    /// A token or session that is not right.
    Wrong,
    /// Nothing.
    Nothing,
}

/// Checks the request's bearer token and session cookie: valid when either is.
pub(super) fn check(token: &AdminToken, headers: &HeaderMap) -> Offered {
    let mut offered = Offered::Nothing;
    for value in headers.get_all(header::AUTHORIZATION) {
        let Some(bearer) = bearer(value.as_bytes()) else {
            continue;
        };
        if token.verify(bearer) {
            return Offered::Valid;
        }
        offered = Offered::Wrong;
    }
    for session in cookies(headers, COOKIE) {
        if token.verify_session(session) {
            return Offered::Valid;
        }
        offered = Offered::Wrong;
    }
    offered
}

/// Whether the request offers a bearer token or a session to check.
pub(super) fn offers_any(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::AUTHORIZATION)
        .iter()
        .any(|v| bearer(v.as_bytes()).is_some())
        || cookies(headers, COOKIE).next().is_some()
}

/// The token of an `Authorization: Bearer <token>` value.
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| rest.trim_ascii())
}

/// The values of cookie `name` in the request's `Cookie` headers.
fn cookies<'a>(headers: &'a HeaderMap, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
    headers
        .get_all(header::COOKIE)
        .iter()
        .flat_map(|v| v.as_bytes().split(|b| *b == b';'))
        .filter_map(move |pair| {
            let pair = pair.trim_ascii();
            let at = pair.iter().position(|b| *b == b'=')?;
            (&pair[..at] == name.as_bytes()).then(|| &pair[at + 1..])
        })
}

/// A `303 See Other` to the page, setting the session cookie (clearing
/// it with `clear`). `Secure` when the client reached a TLS front
/// (`x-forwarded-proto: https`).
pub(super) fn redirect_with_cookie(
    token: &AdminToken,
    headers: &HeaderMap,
    clear: bool,
) -> Response<ProxyBody> {
    let secure = headers
        .get("x-forwarded-proto")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"));
    let value = if clear { "" } else { token.session() };
    let cookie = format!(
        "{COOKIE}={value}; Path=/codemode; HttpOnly; SameSite=Strict{}{}",
        if secure { "; Secure" } else { "" },
        if clear { "; Max-Age=0" } else { "" },
    );
    let mut res = Response::new(full(""));
    *res.status_mut() = StatusCode::SEE_OTHER;
    let h = res.headers_mut();
    h.insert(header::LOCATION, HeaderValue::from_static(super::PAGE));
    if let Ok(v) = HeaderValue::try_from(cookie) {
        h.insert(header::SET_COOKIE, v);
    }
    res
}

/// The page a browser gets without a valid session: a form asking for the
/// token, and no data (401).
pub(super) fn login_page(offered: Offered) -> Response<ProxyBody> {
    let message = match offered {
        Offered::Wrong => {
            "That token is not right, or the proxy restarted with another one. Enter the value of CODEMODE_ADMIN_TOKEN."
        }
        Offered::Nothing | Offered::Valid => {
            "Enter the value of CODEMODE_ADMIN_TOKEN to open the inspector."
        }
    };
    let html = include_str!("assets/login.html").replace("{{message}}", message);
    let mut res = super::html(html);
    *res.status_mut() = StatusCode::UNAUTHORIZED;
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn a_bearer_token_or_the_session_cookie_opens_it() {
        let t = AdminToken::new("0123456789abcdef-token");
        let bearer = headers(&[(header::AUTHORIZATION, "Bearer 0123456789abcdef-token")]);
        assert_eq!(check(&t, &bearer), Offered::Valid);
        let lower = headers(&[(header::AUTHORIZATION, "bearer 0123456789abcdef-token")]);
        assert_eq!(check(&t, &lower), Offered::Valid);
        let cookie = format!("a=b; {COOKIE}={}; c=d", t.session());
        assert_eq!(
            check(&t, &headers(&[(header::COOKIE, &cookie)])),
            Offered::Valid
        );
        let wrong = headers(&[(header::AUTHORIZATION, "Bearer nope")]);
        assert_eq!(check(&t, &wrong), Offered::Wrong);
        // The token itself is not a session: the cookie never holds it.
        let raw = format!("{COOKIE}=0123456789abcdef-token");
        assert_eq!(
            check(&t, &headers(&[(header::COOKIE, &raw)])),
            Offered::Wrong
        );
        let other = headers(&[(header::AUTHORIZATION, "Basic abc")]);
        assert_eq!(check(&t, &other), Offered::Nothing);
        assert_eq!(check(&t, &HeaderMap::new()), Offered::Nothing);
    }

    #[test]
    fn the_cookie_is_http_only_and_strict() {
        let t = AdminToken::new("0123456789abcdef-token");
        let res = redirect_with_cookie(&t, &HeaderMap::new(), false);
        assert_eq!(res.status(), StatusCode::SEE_OTHER);
        let cookie = res.headers()[header::SET_COOKIE].to_str().unwrap();
        assert!(cookie.contains("HttpOnly"));
        assert!(cookie.contains("SameSite=Strict"));
        assert!(!cookie.contains("0123456789abcdef-token"));
        assert_eq!(res.headers()[header::LOCATION], "/codemode/inspector");
    }
}
