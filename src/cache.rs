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

/// From this size a cache entry, or the text a transient is made from, is
/// large: a cache evicts at once after inserting such an entry (moka would
/// otherwise wait for a batch of writes, holding a burst of them over the
/// budget), and the allocator is trimmed after such a transient (planning
/// a tool set allocates several times its text, all dropped once built).
pub(crate) const LARGE_BYTES: usize = 256 << 10;

static ALLOCATOR_TRIM: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets what the proxy calls, on the thread that did the work, right after
/// it dropped a large transient (the working copies of a plan built from
/// a large tool set, `LARGE_BYTES` or more).
///
/// An allocator that keeps freed pages for reuse (mimalloc, jemalloc) keeps
/// them on the thread that freed them until that thread allocates again:
/// after a few distinct multi-megabyte tool sets a process held 150 MB
/// beyond the plan cache's budget. Giving them back here keeps resident
/// memory within the budgets plus a constant (docs/operations.md,
/// "Memory"), at no cost to ordinary requests. The binary sets it to
/// mimalloc's collect; an embedder with its own allocator may set its own.
/// Only the first call takes effect; it returns whether this one did.
pub fn set_allocator_trim(trim: fn()) -> bool {
    ALLOCATOR_TRIM.set(trim).is_ok()
}

/// Called after a transient of `bytes` was dropped.
pub(crate) fn dropped_transient(bytes: usize) {
    if bytes >= LARGE_BYTES {
        if let Some(trim) = ALLOCATOR_TRIM.get() {
            trim();
        }
    }
}
