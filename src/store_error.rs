//! What a store's operations return and fail with, for every store (the
//! in-memory ones, Redis, a shared one a user brings): below the stores,
//! so [`crate::error`] can map the failure to a response without
//! depending on them.

use std::future::Future;
use std::pin::Pin;

/// Why a store could not answer (a shared store out of reach): the
/// request that needed it gets a 503 its client retries.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// What a store's operations return: a boxed future, so the traits stay
/// object-safe and a shared store can do I/O.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;
