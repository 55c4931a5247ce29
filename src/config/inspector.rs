//! The inspector's variables: `CODEMODE_ADMIN_TOKEN` turns it on (and is
//! its key), `CODEMODE_INSPECTOR_PAYLOADS` and `CODEMODE_INSPECTOR_MB`
//! shape what it keeps.

use std::fmt;

use super::parse::{bounded, parse_or};
use super::{ADMIN_TOKEN, INSPECTOR_MB, INSPECTOR_PAYLOADS};

/// `CODEMODE_INSPECTOR_MB` by default: a few thousand recent programs.
pub(crate) const DEFAULT_INSPECTOR_MB: usize = 8;

/// Shortest admin token accepted: anything shorter is guessable.
pub(crate) const MIN_TOKEN_LEN: usize = 16;

/// The inspector, on: who may open it and what it keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InspectorConfig {
    /// The token that opens it.
    pub token: AdminToken,
    /// Whether tool arguments, results and console text are kept and shown.
    pub payloads: bool,
    /// Bytes it keeps of recent executions and denials.
    pub budget_bytes: usize,
}

/// The admin token. Its `Debug` never shows it; it is compared in
/// constant time ([`AdminToken::verify`]).
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken {
    digest: [u8; 32],
    session: String,
}

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminToken(..)")
    }
}

impl AdminToken {
    /// The token `text`.
    pub fn new(text: &str) -> AdminToken {
        AdminToken {
            digest: sha256(text.as_bytes()),
            // What the browser's cookie holds: derived from the token, so
            // the cookie jar never holds the token itself, and it opens
            // only the inspector.
            session: hex(&sha256(
                [b"codemode-inspector-session\0".as_slice(), text.as_bytes()]
                    .concat()
                    .as_slice(),
            )),
        }
    }

    /// Whether `offered` is the token. Both sides are hashed first, so the
    /// comparison takes the same time whatever the offer's length and
    /// wherever it differs.
    pub fn verify(&self, offered: &[u8]) -> bool {
        same(&self.digest, &sha256(offered))
    }

    /// The value of the inspector's session cookie.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// Whether `offered` is the session cookie's value (constant time).
    pub fn verify_session(&self, offered: &[u8]) -> bool {
        same(&sha256(self.session.as_bytes()), &sha256(offered))
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// Equality of two digests without an early exit.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The inspector's variables; `Some(None)` when it is off (no token),
/// `None` when a value is wrong (each recorded with `fail`).
pub(super) fn from_lookup(
    get: &impl Fn(&str) -> Option<String>,
    fail: &mut impl FnMut(&'static str, String),
) -> Option<Option<InspectorConfig>> {
    let token = match get(ADMIN_TOKEN) {
        None => Some(None),
        Some(v) => {
            let v = v.trim();
            if v.len() >= MIN_TOKEN_LEN && v.bytes().all(|b| b.is_ascii_graphic()) {
                Some(Some(AdminToken::new(v)))
            } else {
                fail(
                    ADMIN_TOKEN,
                    format!(
                        "the token must be at least {MIN_TOKEN_LEN} printable ASCII characters \
                         without spaces (value not shown); generate one with `openssl rand -hex 24`"
                    ),
                );
                None
            }
        }
    };
    let payloads = parse_or(get, INSPECTOR_PAYLOADS, Some(false), fail, |v| {
        match v.trim() {
            "on" => Ok(true),
            "off" => Ok(false),
            other => Err(format!("`{other}` is neither on nor off")),
        }
    });
    let mb = parse_or(get, INSPECTOR_MB, Some(DEFAULT_INSPECTOR_MB), fail, |v| {
        bounded::<usize>(v, "a number of MiB", 4096)
    });
    match (token, payloads, mb) {
        (Some(None), Some(_), Some(_)) => Some(None),
        (Some(Some(token)), Some(payloads), Some(mb)) => Some(Some(InspectorConfig {
            token,
            payloads,
            budget_bytes: mb << 20,
        })),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_checked_whole_and_never_printed() {
        let t = AdminToken::new("correct-horse-battery-staple");
        assert!(t.verify(b"correct-horse-battery-staple"));
        assert!(!t.verify(b"correct-horse-battery-stapl"));
        assert!(!t.verify(b""));
        assert!(!format!("{t:?}").contains("horse"));
        assert!(t.verify_session(t.session().as_bytes()));
        assert!(!t.verify_session(b"correct-horse-battery-staple"));
        assert!(!t.session().contains("horse"));
    }
}
