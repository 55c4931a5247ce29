//! The wire APIs the proxy speaks. The rule (classification, the turn
//! decision, programs) is one; each API is a dialect around it that reads
//! and writes its own shapes: tools, calls, denials, nested calls, events.
//!
//! Here is what a provider and an API's error shapes are (the APIs' names
//! are `crate::api_name`'s); each dialect's values sit in its folder
//! (`chat/provider.rs`, ...) and reach the core through the `Dialect` trait.

pub use crate::api_name::Api;

/// What an intercepted route does: the API it speaks, and whether it
/// counts a request's tokens instead of sending it to a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The API, whose dialect handles the route.
    pub api: Api,
    /// `count_tokens`, `input_tokens`: counted as the matching model
    /// request would be sent, not judged.
    pub counting: bool,
}

impl Endpoint {
    /// A model request in `api`.
    pub const fn turn(api: Api) -> Endpoint {
        Endpoint {
            api,
            counting: false,
        }
    }

    /// A token count of a request in `api`.
    pub const fn count(api: Api) -> Endpoint {
        Endpoint {
            api,
            counting: true,
        }
    }
}

/// Requests by method and path: the path's segments as
/// `crate::route::normalise` reads them (lower case), a segment `*` for
/// any one, `{name}` for one without a `:`, `*:name` for one ending in
/// `:name` (a Gemini method), `a|b` for either, and a final `**` for any
/// number, none included.
#[derive(Debug)]
pub struct Paths {
    /// The methods; empty for every method.
    pub methods: &'static [&'static str],
    /// The segments.
    pub pattern: &'static [&'static str],
}

/// A route an API's dialect judges (its folder lists them; `crate::route`
/// matches a request path to one).
#[derive(Debug)]
pub struct Route {
    /// The canonical path, as the proxy serves it and forwards it. One
    /// segment may hold `{model}`, standing for a model's name (letters,
    /// digits, `.`, `_`, `-`): `/v1beta/models/{model}:generateContent`.
    pub path: &'static str,
    /// The handler of `POST` on the canonical path; `None` while the dialect
    /// is not intercepted (the canonical path then passes through).
    pub endpoint: Option<Endpoint>,
    /// Other methods the provider serves on this path that cannot create a
    /// model turn, passed through unchanged; any other method is a 405.
    pub passes: &'static [&'static str],
    /// Whether a path ending in this route (without its version segment) is
    /// another spelling of it: gateways serve the same handler under
    /// prefixes (`/openai/deployments/NAME/chat/completions`,
    /// `/chat/completions`).
    pub any_prefix: bool,
}

/// Who serves an API's requests, and how the proxy reaches it: the base URL
/// and the operator's key the configuration holds for it, and the header
/// that key goes in (docs/configuration.md, "Variables").
pub struct Provider {
    /// Which provider it is, for the counts `codemode-proxy run` explains.
    pub(crate) id: crate::observe::ledger::ProviderId,
    /// Who it is and the variable of its base URL, for messages.
    pub(crate) name: &'static str,
    /// Its `gen_ai.provider.name` in traces (OpenTelemetry's GenAI
    /// conventions: `openai`, `anthropic`, `gcp.gemini`).
    pub(crate) trace_name: &'static str,
    /// Whether a request names its model in the path
    /// (`models/{model}:generateContent`) rather than the body's `model`.
    pub(crate) model_in_path: bool,
    /// The base URL requests go to (`CODEMODE_UPSTREAM`, ...).
    pub(crate) base: fn(&crate::config::Config) -> &crate::config::UpstreamBase,
    /// Whether the base URL holds the API's version (`.../v1`: the proxy's
    /// `/v1` is dropped from the path), or is the host the whole path goes
    /// under.
    pub(crate) base_holds_version: bool,
    /// The operator's key, when the configuration holds one.
    pub(crate) key: fn(&crate::config::Config) -> Option<&http::HeaderValue>,
    /// The variable that holds the key, for messages.
    pub(crate) key_var: &'static str,
    /// The header the key goes in.
    pub(crate) key_header: http::HeaderName,
    /// How a client sends its own credential, for messages.
    pub(crate) key_hint: &'static str,
    /// Client headers the operator's key stands in for (dropped when it
    /// is sent), beside [`Provider::key_header`] itself.
    pub(crate) replaces: &'static [http::HeaderName],
    /// The query parameter a client may send its key in instead (Gemini's
    /// `?key=`): dropped when the operator's key is sent.
    pub(crate) key_param: Option<&'static str>,
    /// Whether a request no judged route serves is for this provider, by
    /// its head or query (Anthropic: `anthropic-version`; Google: its key);
    /// a request no provider claims goes to the first API's.
    pub(crate) claims: fn(&http::HeaderMap, Option<&str>) -> bool,
    /// The first path segments only this provider serves (Google's
    /// `v1beta`): a request under one goes to it, whatever its head says.
    pub(crate) roots: &'static [&'static str],
    /// The headers it reads a client's credential from; a credential in
    /// any other provider's header never reaches it (docs/security.md,
    /// "Whose key goes where").
    pub(crate) credentials: &'static [&'static str],
    /// The routes it serves that declare no tools and return no model's
    /// calls: under the lock, the only ones passed through unjudged
    /// (docs/security.md, "Routes").
    pub(crate) open: &'static [Paths],
    /// How its answers name their token counts, which the proxy reads on
    /// the side of every body (docs/operations.md, "Metrics").
    pub(crate) usage: &'static crate::observe::usage::Shape,
}

impl Provider {
    /// The provider's URI for proxy path `path` with the request's query,
    /// less a key the client put in it when the operator's key is sent
    /// (`sends_key`): two keys would reach the provider, and the client's
    /// might be the one it reads.
    pub(crate) fn uri(
        &self,
        config: &crate::config::Config,
        path: &str,
        query: Option<&str>,
        sends_key: bool,
    ) -> Result<http::Uri, crate::error::ProxyError> {
        let base = (self.base)(config);
        let kept;
        let query = match (self.key_param, query) {
            (Some(param), Some(q)) if sends_key && (self.key)(config).is_some() => {
                kept = without_param(q, param);
                (!kept.is_empty()).then_some(kept.as_str())
            }
            _ => query,
        };
        let uri = if self.base_holds_version {
            base.uri_for(path, query)
        } else {
            base.uri_under(path, query)
        };
        uri.map_err(|e| {
            crate::error::ProxyError::InvalidRequest(format!(
                "the request path cannot be forwarded: {e}"
            ))
        })
    }
}

/// `query` without its `param=...` pairs.
fn without_param(query: &str, param: &str) -> String {
    query
        .split('&')
        .filter(|pair| pair.split('=').next() != Some(param))
        .collect::<Vec<_>>()
        .join("&")
}

/// The first non-empty value of `param` in `query`, as it came.
pub(crate) fn param_value<'q>(query: Option<&'q str>, param: &str) -> Option<&'q str> {
    query?.split('&').find_map(|pair| {
        pair.split_once('=')
            .filter(|(k, v)| *k == param && !v.is_empty())
            .map(|(_, v)| v)
    })
}

/// Whether `query` holds a non-empty `param`.
pub(crate) fn has_param(query: Option<&str>, param: &str) -> bool {
    query.is_some_and(|q| {
        q.split('&').any(|pair| {
            pair.split_once('=')
                .is_some_and(|(k, v)| k == param && !v.is_empty())
        })
    })
}

/// The shapes an API's clients read a failure in: a whole error response,
/// and the final event of a stream that already started.
pub struct Errors {
    /// The body of an error response.
    pub(crate) body: fn(&crate::error::ProxyError) -> bytes::Bytes,
    /// The event that ends a stream with `message` and the proxy's `code`
    /// (docs/errors.md).
    pub(crate) stream: fn(message: &str, code: &str) -> bytes::Bytes,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_in_the_query_is_found_and_dropped_alone() {
        assert_eq!(without_param("alt=sse&key=abc", "key"), "alt=sse");
        assert_eq!(without_param("key=abc", "key"), "");
        assert_eq!(without_param("keys=1&alt=sse", "key"), "keys=1&alt=sse");
        assert!(has_param(Some("alt=sse&key=k"), "key"));
        assert!(!has_param(Some("key="), "key"));
        assert!(!has_param(None, "key"));
    }
}
