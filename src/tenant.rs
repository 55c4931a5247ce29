//! Who owns what (docs/security.md): the tenant of a request, and the
//! unguessable ids the proxy hands out.
//!
//! Executions and stored denials belong to the tenant that made them: the
//! client's credential together with its scope. Every lookup is by
//! `(tenant, id)`, so an id named by another client finds nothing, exactly
//! as an id the proxy never minted.
//!
//! ```
//! use codemode_proxy::store::Tenant;
//! use http::HeaderMap;
//!
//! let mut alice = HeaderMap::new();
//! alice.insert("authorization", "Bearer sk-alice".parse().unwrap());
//! let a = Tenant::of(&alice, "default");
//! assert_eq!(a, Tenant::of(&alice, "default"));
//! assert_ne!(a, Tenant::of(&alice, "ci"), "the scope is part of the tenant");
//! assert_ne!(a, Tenant::of(&HeaderMap::new(), "default"));
//! ```

use std::fmt;

use http::HeaderMap;
use ring::digest::{Context, SHA256};

/// Every header a provider reads a client's credential from (each
/// provider's card lists its own: docs/security.md, "Whose key goes
/// where"). Google's clients send `x-goog-api-key`, Azure's `api-key`:
/// without them every such client of a scope would be one tenant.
const CREDENTIAL_HEADERS: [&str; 4] = ["authorization", "x-api-key", "x-goog-api-key", "api-key"];

/// The owner of executions and stored denials.
///
/// A SHA-256 (unkeyed, domain-separated) of the client's credentials
/// (the values of every header a provider reads one from, and a key in the
/// query) and the scope; a client that sends none is the scope's anonymous
/// tenant. The credential itself is never
/// kept. No key is involved, so the same client is the same tenant across
/// restarts and replicas.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tenant([u8; 32]);

impl Tenant {
    /// The tenant of a request with these headers, in `scope`.
    pub fn of(headers: &HeaderMap, scope: &str) -> Tenant {
        Tenant::with_query_key(headers, None, scope)
    }

    /// The tenant of a request with these headers and, when its provider
    /// reads one there, the key in its query (Google's `?key=`), in `scope`.
    pub fn with_query_key(headers: &HeaderMap, query_key: Option<&str>, scope: &str) -> Tenant {
        let mut h = Context::new(&SHA256);
        h.update(b"codemode-proxy tenant v1\0");
        // A header absent adds nothing, so a client's tenant stays what it
        // was before a name joined this list.
        for name in CREDENTIAL_HEADERS {
            // Every value, length-prefixed, so no two header sets hash alike.
            for value in headers.get_all(name) {
                field(&mut h, name.as_bytes());
                field(&mut h, value.as_bytes());
            }
        }
        if let Some(key) = query_key {
            field(&mut h, b"?key");
            field(&mut h, key.as_bytes());
        }
        field(&mut h, b"scope");
        field(&mut h, scope.as_bytes());
        Tenant(digest(h))
    }

    /// The anonymous tenant of `scope` (a client without a credential).
    pub fn anonymous(scope: &str) -> Tenant {
        Tenant::of(&HeaderMap::new(), scope)
    }

    /// The tenant's 32 bytes, for store keys.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// A 64-bit tag (16 hex digits) binding `parts` to this tenant: minted
    /// ids carry one, so an id can be recognised as this tenant's even
    /// when its record is gone. Not a secret: only the tenant can compute
    /// the tag for itself, and a tag made for another tenant never verifies.
    pub fn tag(&self, parts: &[&str]) -> String {
        let mut h = Context::new(&SHA256);
        h.update(b"codemode-proxy id tag v1\0");
        h.update(&self.0);
        for p in parts {
            field(&mut h, p.as_bytes());
        }
        hex(&digest(h)[..8])
    }
}

impl fmt::Debug for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tenant({}…)", hex(&self.0[..4]))
    }
}

/// As 64 hex digits, for a shared store's records.
impl serde::Serialize for Tenant {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex(&self.0))
    }
}

impl<'de> serde::Deserialize<'de> for Tenant {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Tenant, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let bytes = text.as_bytes();
        let nibble = |b: u8| (b as char).to_digit(16).map(|v| v as u8);
        let mut out = [0u8; 32];
        if bytes.len() != 64 {
            return Err(serde::de::Error::custom("a tenant is 64 hex digits"));
        }
        for (i, pair) in bytes.chunks(2).enumerate() {
            match (nibble(pair[0]), nibble(pair[1])) {
                (Some(h), Some(l)) => out[i] = h << 4 | l,
                _ => return Err(serde::de::Error::custom("a tenant is 64 hex digits")),
            }
        }
        Ok(Tenant(out))
    }
}

fn field(h: &mut Context, bytes: &[u8]) {
    h.update(&(bytes.len() as u64).to_be_bytes());
    h.update(bytes);
}

fn digest(h: Context) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(h.finish().as_ref());
    out
}

/// A SHA-256 of length-prefixed parts (store keys).
pub fn hash_parts(domain: &str, parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Context::new(&SHA256);
    field(&mut h, domain.as_bytes());
    for p in parts {
        field(&mut h, p);
    }
    digest(h)
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// Fills `buf` from the operating system's random source.
///
/// Minted ids are capabilities: whoever knows one can act on what it names,
/// so they must not be predictable. There is no weaker fallback: a machine
/// whose OS cannot give random bytes cannot mint ids safely.
pub fn os_random(buf: &mut [u8]) {
    if let Err(e) = getrandom::getrandom(buf) {
        panic!("codemode-proxy: the operating system's random source failed: {e}");
    }
}

/// 128 bits from the OS random source as 32 hex digits: the one source of
/// every id the proxy mints (tool-call ids, execution ids).
pub fn unguessable() -> String {
    let mut buf = [0u8; 16];
    os_random(&mut buf);
    hex(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn with(name: &str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            http::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
        h
    }

    #[test]
    fn credentials_and_scopes_make_distinct_tenants() {
        let a = Tenant::of(&with("authorization", "Bearer a"), "s");
        assert_eq!(a, Tenant::of(&with("Authorization", "Bearer a"), "s"));
        assert_ne!(a, Tenant::of(&with("authorization", "Bearer b"), "s"));
        assert_ne!(a, Tenant::of(&with("x-api-key", "Bearer a"), "s"));
        assert_ne!(a, Tenant::of(&with("authorization", "Bearer a"), "t"));
        let g = Tenant::of(&with("x-goog-api-key", "g1"), "s");
        assert_ne!(g, Tenant::of(&with("x-goog-api-key", "g2"), "s"));
        assert_ne!(g, Tenant::anonymous("s"));
        assert_ne!(
            Tenant::of(&with("api-key", "z1"), "s"),
            Tenant::of(&with("api-key", "z2"), "s")
        );
        let q = |k| Tenant::with_query_key(&HeaderMap::new(), Some(k), "s");
        assert_ne!(q("g1"), q("g2"));
        assert_ne!(q("g1"), Tenant::anonymous("s"));
        assert_ne!(q("g1"), g, "a key in the query is not the same header");
        assert_ne!(a, Tenant::anonymous("s"));
        assert_eq!(Tenant::anonymous("s"), Tenant::of(&HeaderMap::new(), "s"));
    }

    #[test]
    fn tags_verify_only_for_their_tenant() {
        let a = Tenant::anonymous("a");
        let b = Tenant::anonymous("b");
        assert_eq!(a.tag(&["x", "y"]), a.tag(&["x", "y"]));
        assert_ne!(a.tag(&["x", "y"]), b.tag(&["x", "y"]));
        assert_ne!(a.tag(&["xy"]), a.tag(&["x", "y"]), "parts are delimited");
        assert_eq!(a.tag(&["x"]).len(), 16);
    }

    #[test]
    fn unguessable_tokens_are_128_bit_hex_and_unique() {
        let mut seen = HashSet::new();
        for _ in 0..100_000 {
            let t = unguessable();
            assert_eq!(t.len(), 32);
            assert!(t
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
            assert!(seen.insert(t), "a token repeated");
        }
    }
}
