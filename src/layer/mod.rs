//! The Code Mode tower layer: the product.
//!
//! [`CodeModeLayer`] wraps an upstream HTTP service (anything that takes a
//! `Request<ProxyBody>` with an absolute URI and returns a response) and
//! serves the proxy's endpoints in front of it.
//!
//! ```no_run
//! use codemode_proxy::{server, CodeModeLayer, Config};
//! use tower::Layer;
//!
//! let config = Config::from_env().expect("valid configuration");
//! let client = server::http_client(&config).expect("TLS roots");
//! let service = CodeModeLayer::new(config).layer(client);
//! # let _ = service;
//! ```

mod admin;
mod chat;
mod embedded;
mod forward;
mod service;

use std::sync::Arc;

use http::{Request, Response};
use tower::util::BoxCloneSyncService;
use tower::{Layer, ServiceExt};

use crate::body::{boxed, BoxError, BoxedError, ProxyBody};
use crate::config::Config;
use crate::plan::PlanCache;
use crate::runtime::{ExecutionStore, MemoryExecutionStore, RunPool};
use crate::splice::{MemorySpliceStore, SpliceStore};

pub use service::CodeModeService;

/// The upstream as the layer holds it: one concrete type for any inner service.
pub type Upstream = BoxCloneSyncService<Request<ProxyBody>, Response<ProxyBody>, BoxedError>;

/// Distinct tool sets whose plans are kept rendered.
const PLAN_CACHE_CAPACITY: usize = 1024;

/// What every request shares: the validated config and the caches.
pub(crate) struct State {
    pub(crate) config: Config,
    pub(crate) plans: PlanCache,
    pub(crate) splices: Arc<dyn SpliceStore>,
    pub(crate) executions: Arc<dyn ExecutionStore>,
    /// Slots and a bounded queue for the embedded runtime's programs.
    pub(crate) runs: RunPool,
}

/// Executions held at once by the default in-memory store.
const EXECUTION_CAPACITY: usize = 10_000;

/// Mounts Code Mode in front of an upstream service.
#[derive(Clone)]
pub struct CodeModeLayer {
    state: Arc<State>,
}

impl CodeModeLayer {
    /// A layer with the in-memory mixed-turn store the config sizes.
    pub fn new(config: Config) -> CodeModeLayer {
        let splices = Arc::new(MemorySpliceStore::new(
            config.splice_ttl,
            config.splice_capacity,
        ));
        CodeModeLayer::with_splice_store(config, splices)
    }

    /// A layer whose mixed-turn denials live in `splices` (e.g. a shared store).
    pub fn with_splice_store(config: Config, splices: Arc<dyn SpliceStore>) -> CodeModeLayer {
        // Ended executions stay as long as the history that mentions them is likely to come back.
        let keep = config.limits.lifetime.max(config.splice_ttl);
        let executions = Arc::new(MemoryExecutionStore::new(keep, EXECUTION_CAPACITY));
        CodeModeLayer::with_stores(config, splices, executions)
    }

    /// A layer with both stores supplied (e.g. shared ones for several replicas).
    pub fn with_stores(
        config: Config,
        splices: Arc<dyn SpliceStore>,
        executions: Arc<dyn ExecutionStore>,
    ) -> CodeModeLayer {
        CodeModeLayer {
            state: Arc::new(State {
                runs: RunPool::new(config.run_slots),
                config,
                plans: PlanCache::new(PLAN_CACHE_CAPACITY),
                splices,
                executions,
            }),
        }
    }
}

impl<S, RB> Layer<S> for CodeModeLayer
where
    S: tower::Service<Request<ProxyBody>, Response = Response<RB>> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    RB: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    type Service = CodeModeService;

    fn layer(&self, inner: S) -> CodeModeService {
        let upstream = inner
            .map_response(|r| r.map(boxed))
            .map_err(BoxedError::new);
        CodeModeService::new(BoxCloneSyncService::new(upstream), self.state.clone())
    }
}
