//! What the in-memory caches (moka) are built with: every one is bounded
//! by bytes, and moka takes a weight and a lifetime of its own kinds.

use std::time::Duration;

/// A lifetime moka accepts (it refuses more than 1,000 years).
pub(crate) fn cache_ttl(ttl: Duration) -> Duration {
    ttl.min(Duration::from_secs(100 * 365 * 24 * 3600))
}

/// A size as a cache weight.
pub(crate) fn weight(bytes: usize) -> u32 {
    u32::try_from(bytes).unwrap_or(u32::MAX)
}
