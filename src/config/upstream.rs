//! The provider base URL and how proxy paths map onto it.

use http::uri::{Authority, PathAndQuery, Scheme};
use http::Uri;

/// `CODEMODE_UPSTREAM`, validated: `/v1/<rest>` on the proxy goes to `<base>/<rest>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamBase {
    scheme: Scheme,
    authority: Authority,
    /// The base path without its trailing slash (`/v1`, or empty).
    prefix: String,
}

impl UpstreamBase {
    /// Parses an `http` or `https` base URL.
    pub fn parse(text: &str) -> Result<UpstreamBase, String> {
        let uri: Uri = text
            .trim()
            .parse()
            .map_err(|_| format!("`{text}` is not a URL; use e.g. https://api.openai.com/v1"))?;
        let scheme = uri
            .scheme()
            .cloned()
            .filter(|s| *s == Scheme::HTTP || *s == Scheme::HTTPS);
        let (Some(scheme), Some(authority)) = (scheme, uri.authority().cloned()) else {
            return Err(format!(
                "`{text}` needs an http:// or https:// scheme and a host, e.g. https://api.openai.com/v1"
            ));
        };
        if uri.query().is_some() {
            return Err(format!("`{text}` must not carry a query string"));
        }
        // A user and password in the URL are never sent (the key goes in
        // CODEMODE_UPSTREAM_API_KEY), so they are not kept, nor ever logged.
        let authority = match authority.as_str().rsplit_once('@') {
            Some((_, host)) => host
                .parse::<Authority>()
                .map_err(|_| "the URL's host is not valid after its user part".to_owned())?,
            None => authority,
        };
        Ok(UpstreamBase {
            scheme,
            authority,
            prefix: uri.path().trim_end_matches('/').to_owned(),
        })
    }

    /// The upstream URI for proxy path `/v1/<rest>` (with its query): the
    /// base path holds the version.
    pub fn uri_for(&self, proxy_path: &str, query: Option<&str>) -> Result<Uri, http::Error> {
        let rest = match proxy_path.strip_prefix("/v1") {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
            _ => proxy_path,
        };
        self.uri_under(rest, query)
    }

    /// The upstream URI for `path` under the base path, as it is (with its
    /// query): for a provider whose base holds no version.
    pub fn uri_under(&self, rest: &str, query: Option<&str>) -> Result<Uri, http::Error> {
        let path = match query {
            Some(q) => format!("{}{rest}?{q}", self.prefix),
            None => format!("{}{rest}", self.prefix),
        };
        Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(PathAndQuery::try_from(path)?)
            .build()
    }

    /// The authority, for the `Host` header.
    pub fn authority(&self) -> &Authority {
        &self.authority
    }
}

/// An operator's key from `var`, as the header value `header` writes it
/// (`Bearer KEY`, or the key itself), marked sensitive so no log shows it.
pub(super) fn operator_key(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    header: fn(&str) -> String,
    fail: &mut impl FnMut(&'static str, String),
) -> Option<http::HeaderValue> {
    let key = get(var)?;
    match http::HeaderValue::try_from(header(key.trim())) {
        Ok(mut h) => {
            h.set_sensitive(true);
            Some(h)
        }
        Err(_) => {
            fail(
                var,
                "the key holds characters a header cannot carry (value not shown)".into(),
            );
            None
        }
    }
}

impl std::fmt::Display for UpstreamBase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}{}", self.scheme, self.authority, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_and_password_are_dropped_and_never_shown() {
        let b = UpstreamBase::parse("https://user:s3cret@api.example.com/v1").unwrap();
        assert_eq!(b.to_string(), "https://api.example.com/v1");
        assert_eq!(b.authority().as_str(), "api.example.com");
    }

    #[test]
    fn v1_paths_map_under_the_base_path() {
        let b = UpstreamBase::parse("https://api.example.com/openai/v1/").unwrap();
        let u = b.uri_for("/v1/chat/completions", Some("a=1")).unwrap();
        assert_eq!(
            u.to_string(),
            "https://api.example.com/openai/v1/chat/completions?a=1"
        );
        let b = UpstreamBase::parse("http://127.0.0.1:9000").unwrap();
        assert_eq!(
            b.uri_for("/v1/models", None).unwrap().to_string(),
            "http://127.0.0.1:9000/models"
        );
    }

    #[test]
    fn only_a_whole_v1_segment_is_the_base_paths() {
        let b = UpstreamBase::parse("https://api.example.com/v1").unwrap();
        assert_eq!(
            b.uri_for("/v1beta/models", None).unwrap().to_string(),
            "https://api.example.com/v1/v1beta/models"
        );
        assert_eq!(
            b.uri_for("/v1", None).unwrap().to_string(),
            "https://api.example.com/v1"
        );
        let host = UpstreamBase::parse("https://generativelanguage.googleapis.com/").unwrap();
        assert_eq!(
            host.uri_under("/v1beta/models/g:generateContent", Some("alt=sse"))
                .unwrap()
                .to_string(),
            "https://generativelanguage.googleapis.com/v1beta/models/g:generateContent?alt=sse"
        );
    }

    #[test]
    fn schemes_other_than_http_are_refused() {
        assert!(UpstreamBase::parse("ftp://x/v1").is_err());
        assert!(UpstreamBase::parse("api.openai.com").is_err());
        assert!(UpstreamBase::parse("http://x/v1?key=1").is_err());
    }
}
