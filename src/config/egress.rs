//! The egress proxy for upstream connections, read from curl's variables
//! (docs/configuration.md, "Egress proxy"): `https_proxy`, `http_proxy`, `all_proxy`,
//! `no_proxy`, each in lower or upper case, lower case first as curl reads
//! them.

use std::fmt;

use http::uri::Scheme;
use http::Uri;

/// Proxy for `https` upstreams (a `CONNECT` tunnel); lower case wins.
pub(crate) const HTTPS_PROXY: [&str; 2] = ["https_proxy", "HTTPS_PROXY"];
/// Proxy for plain `http` upstreams (absolute-form requests); lower case wins.
pub(crate) const HTTP_PROXY: [&str; 2] = ["http_proxy", "HTTP_PROXY"];
/// Proxy for either scheme when its own variable is unset; lower case wins.
pub(crate) const ALL_PROXY: [&str; 2] = ["all_proxy", "ALL_PROXY"];
/// Hosts, domain suffixes, IPs and CIDRs reached directly; `*` = all; lower case wins.
pub(crate) const NO_PROXY: [&str; 2] = ["no_proxy", "NO_PROXY"];

/// Where upstream connections go: direct, or through an HTTP proxy per scheme.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Egress {
    /// Proxy for `http://` upstreams.
    pub http: Option<ProxyUrl>,
    /// Proxy for `https://` upstreams.
    pub https: Option<ProxyUrl>,
    /// `NO_PROXY` as given (curl's rules; matched by the connector).
    pub no_proxy: String,
}

/// An `http://[user:pass@]host:port` proxy; `Debug` and `Display` never show the credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyUrl {
    /// The URL with its credentials, as the matcher reads it.
    full: String,
    /// `http://host:port`, safe to log.
    shown: String,
}

impl Egress {
    /// Reads the proxy variables through `get`, recording each bad one with `fail`.
    pub(super) fn from_lookup(
        get: &impl Fn(&str) -> Option<String>,
        fail: &mut impl FnMut(&'static str, String),
    ) -> Option<Egress> {
        let mut ok = true;
        let mut read = |names: [&'static str; 2]| match first(get, names) {
            None => None,
            Some((var, value)) => match ProxyUrl::parse(&value) {
                Ok(url) => Some(url),
                Err(e) => {
                    fail(var, e);
                    ok = false;
                    None
                }
            },
        };
        let all = read(ALL_PROXY);
        let mut http = read(HTTP_PROXY).or_else(|| all.clone());
        let mut https = read(HTTPS_PROXY).or(all);
        let no_proxy = first(get, NO_PROXY).map(|(_, v)| v).unwrap_or_default();
        // curl: a `*` entry turns the proxy off for every host (IPs included).
        if no_proxy.split(',').any(|entry| entry.trim() == "*") {
            http = None;
            https = None;
        }
        ok.then_some(Egress {
            http,
            https,
            no_proxy: no_proxy.trim().to_owned(),
        })
    }

    /// Whether every upstream connection goes direct.
    pub fn is_direct(&self) -> bool {
        self.http.is_none() && self.https.is_none()
    }
}

/// The first of `names` that is set, with its name.
fn first(
    get: &impl Fn(&str) -> Option<String>,
    names: [&'static str; 2],
) -> Option<(&'static str, String)> {
    names
        .into_iter()
        .find_map(|name| get(name).map(|value| (name, value)))
}

impl ProxyUrl {
    /// Parses `http://[user:pass@]host[:port]` (no scheme means `http`, as in
    /// curl). Errors never repeat the value: it may hold a password.
    pub fn parse(text: &str) -> Result<ProxyUrl, String> {
        let text = text.trim();
        let full = if text.contains("://") {
            text.to_owned()
        } else {
            format!("http://{text}")
        };
        let usage = "use http://[user:pass@]host:port";
        let uri: Uri = full.parse().map_err(|_| {
            format!("is not a URL (value not shown: it may hold a password); {usage}")
        })?;
        let Some(authority) = uri.authority() else {
            return Err(format!("names no host; {usage}"));
        };
        let host_port = authority
            .as_str()
            .rsplit_once('@')
            .map_or(authority.as_str(), |(_, hp)| hp);
        if uri.scheme() != Some(&Scheme::HTTP) {
            let scheme = uri.scheme_str().unwrap_or("");
            return Err(format!(
                "`{scheme}://{host_port}`: only http:// proxies are supported (https upstreams \
                 still get TLS end to end, inside a CONNECT tunnel); {usage}"
            ));
        }
        if authority.host().is_empty() {
            return Err(format!("names no host; {usage}"));
        }
        Ok(ProxyUrl {
            shown: format!("http://{host_port}"),
            full,
        })
    }

    /// The URL with its credentials, for the proxy matcher.
    pub fn as_secret_str(&self) -> &str {
        &self.full
    }
}

impl fmt::Display for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProxyUrl({})", self.shown)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn egress(vars: &[(&str, &str)]) -> Result<Egress, Vec<(&'static str, String)>> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut errors = Vec::new();
        let got = Egress::from_lookup(&|k: &str| map.get(k).cloned(), &mut |var, message| {
            errors.push((var, message))
        });
        got.ok_or(errors)
    }

    fn shown(url: &Option<ProxyUrl>) -> Option<String> {
        url.as_ref().map(ToString::to_string)
    }

    #[test]
    fn no_variables_mean_direct() {
        let e = egress(&[]).unwrap();
        assert!(e.is_direct());
        assert_eq!(e, Egress::default());
    }

    #[test]
    fn each_scheme_reads_its_own_variable() {
        let e = egress(&[
            ("HTTPS_PROXY", "http://tls-proxy:3128"),
            ("HTTP_PROXY", "http://plain-proxy:8080"),
        ])
        .unwrap();
        assert_eq!(shown(&e.https).as_deref(), Some("http://tls-proxy:3128"));
        assert_eq!(shown(&e.http).as_deref(), Some("http://plain-proxy:8080"));
    }

    #[test]
    fn lower_case_wins_over_upper_case_as_in_curl() {
        let e = egress(&[
            ("HTTPS_PROXY", "http://upper:1"),
            ("https_proxy", "http://lower:2"),
            ("NO_PROXY", "upper.example"),
            ("no_proxy", "lower.example"),
        ])
        .unwrap();
        assert_eq!(shown(&e.https).as_deref(), Some("http://lower:2"));
        assert_eq!(e.no_proxy, "lower.example");
    }

    #[test]
    fn all_proxy_covers_a_scheme_without_its_own_variable() {
        let e = egress(&[
            ("ALL_PROXY", "http://all:3128"),
            ("HTTPS_PROXY", "http://tls:3128"),
        ])
        .unwrap();
        assert_eq!(shown(&e.https).as_deref(), Some("http://tls:3128"));
        assert_eq!(shown(&e.http).as_deref(), Some("http://all:3128"));
    }

    #[test]
    fn a_proxy_without_a_scheme_is_http() {
        let e = egress(&[("HTTPS_PROXY", "proxy.internal:3128")]).unwrap();
        assert_eq!(
            shown(&e.https).as_deref(),
            Some("http://proxy.internal:3128")
        );
    }

    #[test]
    fn credentials_are_kept_for_the_proxy_but_never_shown() {
        let e = egress(&[("HTTPS_PROXY", "http://alice:s3cret@proxy:3128")]).unwrap();
        let url = e.https.unwrap();
        assert_eq!(url.as_secret_str(), "http://alice:s3cret@proxy:3128");
        assert_eq!(url.to_string(), "http://proxy:3128");
        assert!(!format!("{url:?}").contains("s3cret"));
    }

    #[test]
    fn a_star_in_no_proxy_turns_the_proxy_off() {
        let e = egress(&[
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("HTTP_PROXY", "http://proxy:3128"),
            ("NO_PROXY", "internal.example, *"),
        ])
        .unwrap();
        assert!(e.is_direct());
    }

    #[test]
    fn unsupported_proxies_are_refused_naming_the_variable_without_the_password() {
        let errors = egress(&[
            ("https_proxy", "socks5://bob:hunter2@proxy:1080"),
            ("HTTP_PROXY", "https://proxy:443"),
            ("ALL_PROXY", "http://"),
        ])
        .unwrap_err();
        let vars: Vec<&str> = errors.iter().map(|(v, _)| *v).collect();
        assert_eq!(vars, vec!["ALL_PROXY", "HTTP_PROXY", "https_proxy"]);
        assert!(errors[2].1.contains("socks5://proxy:1080"), "{errors:?}");
        assert!(errors.iter().all(|(_, m)| !m.contains("hunter2")));
    }
}
