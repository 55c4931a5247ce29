//! What a store's operations return and fail with, for every store (the
//! in-memory ones, Redis, a shared one a user brings): below the stores,
//! so [`crate::error`] can map the failure to a response without
//! depending on them.

use std::future::Future;
use std::pin::Pin;

/// Why a store could not answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// Out of reach (a shared store down, stalled or failing over): the
    /// request that needed it gets a 503 its client retries.
    #[error("{0}")]
    Unavailable(String),
    /// A record above the store's size limit, to write or to read: sending
    /// the request again cannot help, so the client gets a 413 that says
    /// which limit it met.
    #[error("{0}")]
    TooLarge(String),
}

/// What a store's operations return: a boxed future, so the traits stay
/// object-safe and a shared store can do I/O.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;
