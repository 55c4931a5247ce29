//! Who may call the proxy (docs/security.md, "Who may call").
//!
//! A proxy on loopback holding the operator's provider key is reachable
//! from every web page its user visits: a page can post a "simple"
//! cross-site request, and with DNS rebinding (a name of the attacker's
//! that resolves to 127.0.0.1) read the answer too. So a request is
//! served only when its `Host` is a loopback name or address, the listen
//! address, or in `CODEMODE_ALLOWED_HOSTS`; and a browser request from
//! another origin (an `Origin` that is not the request's own host, or
//! `Sec-Fetch-Site: cross-site`) only when its origin is in
//! `CODEMODE_ALLOWED_ORIGINS`. A body a browser can send without asking
//! (`text/plain`, a form) is never read as a model request.

use std::net::{IpAddr, SocketAddr};

use http::{header, HeaderMap, Request};

use crate::config::Callers;
use crate::error::ProxyError;

/// The address a request's connection came from, set by the server as a
/// request extension (a server of one's own that mounts the layer may set
/// it too): what failed admin-token attempts are counted by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// Refuses a request from a client the proxy does not serve.
pub(crate) fn check<B>(
    req: &Request<B>,
    listen: SocketAddr,
    callers: &Callers,
) -> Result<(), ProxyError> {
    let host = req
        .uri()
        .authority()
        .map(|a| a.host().to_owned())
        .or_else(|| {
            req.headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(|h| host_of(h).to_owned())
        });
    if let Some(host) = &host {
        if !host_allowed(host, listen, callers) {
            return Err(ProxyError::CallerRefused(format!(
                "the request's Host `{}` is not this proxy's: it answers its listen address, \
                 localhost and loopback addresses (a foreign name can be a DNS-rebinding page); \
                 to serve a name, add it to CODEMODE_ALLOWED_HOSTS",
                shorten(host)
            )));
        }
    }
    if let Some(origin) = cross_origin(req.headers(), host.as_deref()) {
        if !callers.origins.contains(&origin) {
            return Err(ProxyError::CallerRefused(format!(
                "a browser request from `{}` is refused: a web page must not spend this proxy's \
                 credentials; to let that site call it, add its origin to CODEMODE_ALLOWED_ORIGINS",
                shorten(&origin)
            )));
        }
    }
    Ok(())
}

/// Refuses a judged request whose body a browser could send cross-site
/// without a pre-flight (`text/plain`, a form): a model request is JSON.
pub(crate) fn check_json(headers: &HeaderMap) -> Result<(), ProxyError> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let media = value
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if media == "application/json" || media.ends_with("+json") {
        return Ok(());
    }
    Err(ProxyError::UnsupportedMediaType(shorten(&media)))
}

/// The host of a `Host` header value, without its port.
fn host_of(value: &str) -> &str {
    let value = value.trim();
    if let Some(rest) = value.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    value.rsplit_once(':').map_or(value, |(h, port)| {
        if port.bytes().all(|b| b.is_ascii_digit()) {
            h
        } else {
            value
        }
    })
}

fn host_allowed(host: &str, listen: SocketAddr, callers: &Callers) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        // An address cannot be rebound; on a wildcard listener every
        // address of the machine is its own.
        return ip.is_loopback() || ip == listen.ip() || listen.ip().is_unspecified();
    }
    callers.hosts.iter().any(|h| h == host)
}

/// The origin of a browser request from another site, if it is one.
fn cross_origin(headers: &HeaderMap, host: Option<&str>) -> Option<String> {
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase());
    let cross_site = headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site"));
    match origin {
        // `Origin: null` (a sandboxed frame, a file) is no site of the user's.
        Some(o) if o == "null" => Some(o),
        Some(o) => {
            let origin_host = o
                .split_once("://")
                .map_or("", |(_, rest)| host_of(rest))
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned();
            let same = host.is_some_and(|h| {
                h.trim_start_matches('[')
                    .trim_end_matches(']')
                    .eq_ignore_ascii_case(&origin_host)
            });
            (!same || cross_site).then_some(o)
        }
        None if cross_site => Some("an unnamed cross-site origin".to_owned()),
        None => None,
    }
}

fn shorten(s: &str) -> String {
    s.chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(headers: &[(&str, &str)]) -> Request<()> {
        let mut b = Request::builder().uri("/v1/chat/completions");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap()
    }

    fn code(headers: &[(&str, &str)], callers: &Callers) -> Result<(), &'static str> {
        let listen: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        check(&req(headers), listen, callers).map_err(|e| e.code())
    }

    #[test]
    fn loopback_hosts_are_served_and_foreign_names_refused() {
        let none = Callers::default();
        for host in [
            "127.0.0.1:8080",
            "localhost:9",
            "[::1]:8080",
            "127.0.0.2",
            "LOCALHOST",
        ] {
            assert_eq!(code(&[("host", host)], &none), Ok(()), "{host}");
        }
        for host in ["rebind.attacker.example:8080", "proxy", "10.0.0.1:8080"] {
            assert_eq!(
                code(&[("host", host)], &none),
                Err("caller_refused"),
                "{host}"
            );
        }
        let named = Callers {
            hosts: vec!["proxy.internal".into()],
            origins: vec![],
        };
        assert_eq!(code(&[("host", "proxy.internal:80")], &named), Ok(()));
    }

    #[test]
    fn browsers_from_other_origins_are_refused_unless_allowed() {
        let none = Callers::default();
        let host = ("host", "127.0.0.1:8080");
        assert_eq!(
            code(&[host, ("origin", "http://127.0.0.1:8080")], &none),
            Ok(())
        );
        for headers in [
            vec![host, ("origin", "http://evil.example")],
            vec![host, ("origin", "null")],
            vec![host, ("sec-fetch-site", "cross-site")],
            vec![
                host,
                ("origin", "http://127.0.0.1:8080"),
                ("sec-fetch-site", "cross-site"),
            ],
        ] {
            assert_eq!(code(&headers, &none), Err("caller_refused"), "{headers:?}");
        }
        let allowed = Callers {
            hosts: vec![],
            origins: vec!["https://app.example".into()],
        };
        assert_eq!(
            code(
                &[
                    host,
                    ("origin", "https://app.example"),
                    ("sec-fetch-site", "cross-site")
                ],
                &allowed
            ),
            Ok(())
        );
    }

    #[test]
    fn only_json_bodies_are_model_requests() {
        let with = |ct: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, ct.parse().unwrap());
            check_json(&h).map_err(|e| e.code())
        };
        assert_eq!(with("application/json; charset=utf-8"), Ok(()));
        assert_eq!(with("application/vnd.api+json"), Ok(()));
        for ct in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
        ] {
            assert_eq!(with(ct), Err("unsupported_media_type"), "{ct}");
        }
        assert_eq!(check_json(&HeaderMap::new()).map_err(|e| e.code()), Ok(()));
    }
}
