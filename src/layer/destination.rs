//! Which provider a request goes to, and whether it may go there: a key
//! reaches only its own provider, and under the lock only the routes a
//! provider lists as open pass unjudged (docs/security.md, "Whose key goes
//! where" and "Routes").

use http::{HeaderMap, Method};

use super::dialects::{claiming, provider};
use crate::api::{Api, Provider};
use crate::error::ProxyError;
use crate::route::{shorten, side_route};

/// The headers a method override is asked for in; a gateway or provider
/// that honours one serves another method than the one judged.
const METHOD_OVERRIDES: [&str; 3] = [
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// The API whose provider a request no judged route serves goes to: the
/// one whose roots its path lies under (Gemini's `/v1beta`), else the one
/// its head or query claims, else the first. A request two providers
/// claim is refused: whichever got it, the other's credential or header
/// would reach it.
pub(crate) fn passthrough(
    segments: &[String],
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<Api, ProxyError> {
    let claimed = claiming(headers, query);
    let Some(owner) = owning(segments) else {
        return Ok(claimed.unwrap_or(Api::ALL[0]));
    };
    match claimed {
        Some(other) if provider(other).name != provider(owner).name => {
            Err(ProxyError::CredentialElsewhere {
                what: format!("a request for {}", provider(other).name),
                goes_to: provider(owner).name,
            })
        }
        _ => Ok(owner),
    }
}

/// The API whose provider alone serves paths under the first of
/// `segments` (read as [`crate::route::normalise`] reads a path).
fn owning(segments: &[String]) -> Option<Api> {
    let root = segments.first()?;
    Api::ALL
        .into_iter()
        .find(|&api| provider(api).roots.contains(&root.as_str()))
}

/// The API whose provider alone serves the raw `path`'s first segment, for
/// an error's shape: found without reading the path leniently, as this
/// runs on every request.
pub(crate) fn owning_raw(path: &str) -> Option<Api> {
    let root = path.strip_prefix('/')?.split('/').next()?;
    Api::ALL
        .into_iter()
        .find(|&api| provider(api).roots.contains(&root))
}

/// Refuses a request to `to` that carries a credential another provider
/// reads and `to` does not (a Google key in `x-goog-api-key` or `?key=`
/// bound for OpenAI, an `x-api-key` bound for Google): it would hand one
/// provider's key to another.
pub(crate) fn check_credential(
    to: &Provider,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<(), ProxyError> {
    let foreign_header = Api::ALL
        .into_iter()
        .flat_map(|api| provider(api).credentials)
        .filter(|name| !to.credentials.contains(name))
        .find(|name| headers.get(**name).is_some_and(|v| !v.is_empty()));
    if let Some(name) = foreign_header {
        return Err(ProxyError::CredentialElsewhere {
            what: format!("a credential in `{name}`"),
            goes_to: to.name,
        });
    }
    let foreign_param = Api::ALL
        .into_iter()
        .filter_map(|api| provider(api).key_param)
        .filter(|param| to.key_param != Some(param))
        .find(|param| crate::api::has_param(query, param));
    match foreign_param {
        Some(param) => Err(ProxyError::CredentialElsewhere {
            what: format!("a key in the query (`{param}=`)"),
            goes_to: to.name,
        }),
        None => Ok(()),
    }
}

/// Refuses, in a mode that can deny, a pass-through request on a route its
/// provider does not list as open (one that declares no tools and returns
/// no model's calls), or one that asks for another method than its own.
/// A pre-flight or `HEAD` without a body creates nothing and passes.
pub(crate) fn check_open(
    api: Api,
    method: &Method,
    segments: &[String],
    headers: &HeaderMap,
    mode: crate::mode::Mode,
) -> Result<(), ProxyError> {
    check_no_override(method, headers)?;
    let bodiless = !has_body(headers);
    if bodiless && (method == Method::OPTIONS || method == Method::HEAD) {
        return Ok(());
    }
    if let Some(side) = side_route(method, segments) {
        return Err(ProxyError::LockedRoute {
            what: side.what.into(),
            mode,
        });
    }
    if provider(api).open.iter().any(|r| r.fits(method, segments)) {
        return Ok(());
    }
    Err(ProxyError::LockedRoute {
        what: format!(
            "`{method} /{}` on {}, a route the proxy does not know to carry no tools",
            shorten(&segments.join("/")),
            provider(api).name
        )
        .into(),
        mode,
    })
}

/// Refuses a request whose head asks for another method than its own
/// (`X-HTTP-Method-Override` and its kin): the proxy judged the method it
/// saw.
pub(crate) fn check_no_override(method: &Method, headers: &HeaderMap) -> Result<(), ProxyError> {
    let asked = METHOD_OVERRIDES
        .iter()
        .find_map(|name| headers.get(*name).map(|v| (name, v)));
    match asked {
        Some((name, value))
            if !value
                .as_bytes()
                .eq_ignore_ascii_case(method.as_str().as_bytes()) =>
        {
            Err(ProxyError::InvalidRequest(format!(
                "`{name}` asks the provider for another method than {method}, which is the one \
                 the proxy judges; send the request with the method it is for, without `{name}`"
            )))
        }
        _ => Ok(()),
    }
}

/// Whether a request's head announces a body.
pub(crate) fn has_body(headers: &http::HeaderMap) -> bool {
    headers.contains_key(http::header::TRANSFER_ENCODING)
        || headers
            .get(http::header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::normalise;

    fn head(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn a_gemini_path_goes_to_google_whatever_carries_its_key() {
        let to = |path: &str, h: &[(&'static str, &'static str)], q: Option<&str>| {
            passthrough(&normalise(path), &head(h), q).map_err(|e| e.code())
        };
        assert_eq!(to("/v1beta/models", &[], Some("key=k")), Ok(Api::Gemini));
        assert_eq!(to("/v1beta/batches", &[], None), Ok(Api::Gemini));
        assert_eq!(to("/upload/v1beta/files", &[], None), Ok(Api::Gemini));
        assert_eq!(to("/V1ALPHA/models", &[], None), Ok(Api::Gemini));
        assert_eq!(to("/v1/models", &[], Some("key=k")), Ok(Api::Gemini));
        assert_eq!(
            to("/v1/models", &[("x-goog-api-key", "k")], None),
            Ok(Api::Gemini)
        );
        assert_eq!(to("/v1/models", &[], None), Ok(Api::Chat));
        assert_eq!(
            to("/v1/models", &[("anthropic-version", "2023-06-01")], None),
            Ok(Api::Messages)
        );
        assert_eq!(
            to(
                "/v1beta/models",
                &[("anthropic-version", "2023-06-01")],
                None
            ),
            Err("credential_elsewhere")
        );
    }

    #[test]
    fn a_credential_goes_only_to_a_provider_that_reads_it() {
        let check = |api: Api, h: &[(&'static str, &'static str)], q: Option<&str>| {
            check_credential(provider(api), &head(h), q).map_err(|e| e.code())
        };
        let refused = Err("credential_elsewhere");
        assert_eq!(check(Api::Chat, &[("x-goog-api-key", "k")], None), refused);
        assert_eq!(check(Api::Chat, &[], Some("alt=sse&key=k")), refused);
        assert_eq!(
            check(Api::Messages, &[("x-goog-api-key", "k")], None),
            refused
        );
        assert_eq!(check(Api::Gemini, &[("x-api-key", "k")], None), refused);
        assert_eq!(check(Api::Gemini, &[("api-key", "k")], None), refused);
        assert_eq!(check(Api::Messages, &[("api-key", "k")], None), refused);
        for (api, h) in [
            (Api::Chat, ("authorization", "Bearer k")),
            (Api::Chat, ("api-key", "k")),
            (Api::Responses, ("x-api-key", "k")),
            (Api::Messages, ("x-api-key", "k")),
            (Api::Messages, ("authorization", "Bearer k")),
            (Api::Gemini, ("x-goog-api-key", "k")),
            (Api::Gemini, ("authorization", "Bearer oauth")),
        ] {
            assert_eq!(check(api, &[h], None), Ok(()), "{api:?} {h:?}");
        }
        assert_eq!(check(Api::Gemini, &[], Some("key=k")), Ok(()));
        assert_eq!(
            check(Api::Chat, &[("x-goog-api-key", "")], Some("key=")),
            Ok(())
        );
    }

    #[test]
    fn under_the_lock_only_open_routes_pass() {
        let open = |api: Api, method: &str, path: &str, h: &[(&'static str, &'static str)]| {
            check_open(
                api,
                &method.parse().unwrap(),
                &normalise(path),
                &head(h),
                crate::mode::Mode::Code,
            )
            .map_err(|e| e.code())
        };
        for (api, method, path) in [
            (Api::Chat, "GET", "/v1/models"),
            (Api::Chat, "GET", "/v1/models/gpt-5"),
            (Api::Chat, "POST", "/v1/embeddings"),
            (Api::Chat, "POST", "/v1/files"),
            (Api::Chat, "POST", "/v1/audio/transcriptions"),
            (Api::Chat, "GET", "/v1/batches/batch_1"),
            (Api::Messages, "GET", "/v1/models"),
            (Api::Messages, "POST", "/v1/files"),
            (Api::Gemini, "GET", "/v1beta/models"),
            (Api::Gemini, "GET", "/v1/models/gemini-2.5-pro"),
            (Api::Gemini, "POST", "/v1beta/models/e:embedContent"),
            (Api::Gemini, "POST", "/upload/v1beta/files"),
            (Api::Gemini, "OPTIONS", "/v1beta/interactions"),
            (Api::Chat, "HEAD", "/v1/foo"),
        ] {
            assert_eq!(open(api, method, path, &[]), Ok(()), "{method} {path}");
        }
        for (api, method, path) in [
            (Api::Chat, "POST", "/v1/foo/bar"),
            (Api::Chat, "POST", "/v1/chat/completions2"),
            (Api::Chat, "POST", "/v1/models"),
            (Api::Chat, "POST", "/v1/batches"),
            (Api::Chat, "GET", "/v1/responses/r/input_items"),
            (Api::Messages, "POST", "/v1/complete"),
            (Api::Messages, "POST", "/v1/embeddings"),
            (Api::Gemini, "POST", "/v1/interactions"),
            (Api::Gemini, "POST", "/v1beta/interactions"),
            (Api::Gemini, "PUT", "/v1beta/tunedModels/t:generateContent"),
            (Api::Gemini, "GET", "/v1beta/cachedContents/c"),
            (Api::Gemini, "POST", "/v1beta/models/m:batchGenerateContent"),
            (
                Api::Gemini,
                "POST",
                "/v1beta/files/../models/m:generateAnswer",
            ),
        ] {
            assert_eq!(
                open(api, method, path, &[]),
                Err("route_locked"),
                "{method} {path}"
            );
        }
        assert_eq!(
            open(
                Api::Gemini,
                "GET",
                "/v1beta/models/m",
                &[("x-http-method-override", "POST")]
            ),
            Err("invalid_request")
        );
        assert_eq!(
            open(Api::Chat, "HEAD", "/v1/foo", &[("content-length", "2")]),
            Err("route_locked")
        );
        assert_eq!(
            open(Api::Chat, "GET", "/v1/models", &[("x-http-method", "get")]),
            Ok(())
        );
    }
}
