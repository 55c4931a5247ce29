//! `CODEMODE_ALLOWED_HOSTS` and `CODEMODE_ALLOWED_ORIGINS`: the clients the
//! proxy serves beside loopback ones (docs/security.md, "Who may call").

use super::{ALLOWED_HOSTS, ALLOWED_ORIGINS};

/// The clients the proxy serves beside loopback ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Callers {
    /// `CODEMODE_ALLOWED_HOSTS`, lower case, without ports.
    pub hosts: Vec<String>,
    /// `CODEMODE_ALLOWED_ORIGINS`, lower case, as `scheme://host[:port]`.
    pub origins: Vec<String>,
}

impl Callers {
    /// Reads both lists; an origin without an http(s) scheme is a mistake.
    pub(super) fn parse(
        get: &impl Fn(&str) -> Option<String>,
        fail: &mut impl FnMut(&'static str, String),
    ) -> Callers {
        let list = |var: &str| -> Vec<String> {
            get(var)
                .map(|v| {
                    v.split(',')
                        .map(|s| s.trim().trim_end_matches('/').to_ascii_lowercase())
                        .filter(|s| !s.is_empty())
                        .collect()
                })
                .unwrap_or_default()
        };
        let callers = Callers {
            hosts: list(ALLOWED_HOSTS),
            origins: list(ALLOWED_ORIGINS),
        };
        if let Some(bad) = callers
            .origins
            .iter()
            .find(|o| !(o.starts_with("http://") || o.starts_with("https://")))
        {
            fail(
                ALLOWED_ORIGINS,
                format!(
                    "`{bad}` is not a web origin; write each as scheme://host[:port], such as https://app.example"
                ),
            );
        }
        callers
    }
}
