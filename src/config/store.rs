//! Where executions and stored denials live: `CODEMODE_STORE` and its
//! key prefix, read and checked without connecting.

use std::fmt;

use super::parse::parse_or;
use super::redis_url::{RedisTarget, REDIS_FORMS};
use super::{STORE, STORE_PREFIX};

/// Where executions and stored denials live (`CODEMODE_STORE`).
#[derive(Clone, PartialEq, Eq)]
pub enum StoreKind {
    /// In this process, bounded by [`StoreBudgets`](super::StoreBudgets): the default.
    Memory,
    /// Redis shared by replicas: one server, a cluster or a Sentinel-managed master.
    Redis {
        /// A `redis://`, `rediss://`, `redis+cluster://` or `redis+sentinel://`
        /// URL ([`RedisTarget`], docs/replicas.md); may hold a password,
        /// so it is never printed whole ([`StoreKind::describe`]).
        url: String,
        /// Prefix of every key.
        prefix: String,
    },
}

impl StoreKind {
    /// [`STORE`] and [`STORE_PREFIX`]; `None` when either is wrong, each
    /// recorded with `fail`.
    pub(super) fn from_lookup(
        get: &impl Fn(&str) -> Option<String>,
        fail: &mut impl FnMut(&'static str, String),
    ) -> Option<StoreKind> {
        let store_prefix = parse_or(get, STORE_PREFIX, Some("codemode:".to_owned()), fail, |v| {
            let v = v.trim();
            if v.len() <= 64 && v.bytes().all(|b| b.is_ascii_graphic()) {
                Ok(v.to_owned())
            } else {
                Err("a key prefix is at most 64 printable characters without spaces".into())
            }
        });
        let store_url = match get(STORE) {
            None => Some(None),
            Some(v) if v.trim() == "memory" => Some(None),
            Some(v) => match parse_store(&v) {
                Ok(url) => Some(Some(url)),
                Err(e) => {
                    fail(STORE, e);
                    None
                }
            },
        };
        match (store_url, store_prefix) {
            (Some(None), Some(_)) => Some(StoreKind::Memory),
            (Some(Some(url)), Some(prefix)) => Some(StoreKind::Redis { url, prefix }),
            _ => None,
        }
    }

    /// The store as logs and errors may name it: a Redis URL without its
    /// user and password.
    pub fn describe(&self) -> String {
        match self {
            StoreKind::Memory => "memory".into(),
            StoreKind::Redis { url, .. } => redacted_url(url),
        }
    }
}

impl fmt::Debug for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreKind::Memory => f.write_str("Memory"),
            StoreKind::Redis { prefix, .. } => f
                .debug_struct("Redis")
                .field("url", &self.describe())
                .field("prefix", prefix)
                .finish(),
        }
    }
}

/// `url` without its user and password: whatever precedes the last `@`
/// after the scheme (a password may hold `/` or `?` unescaped).
fn redacted_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(not a URL)".into();
    };
    match rest.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://***@{host}"),
        None => format!("{scheme}://{rest}"),
    }
}

/// `CODEMODE_STORE`'s value, checked without connecting.
fn parse_store(v: &str) -> Result<String, String> {
    let v = v.trim();
    RedisTarget::parse(v).map(|_| v.to_owned()).map_err(|e| {
        format!(
            "`{}` is not a store: {e}; use memory or one of {REDIS_FORMS}",
            redacted_url(v)
        )
    })
}
