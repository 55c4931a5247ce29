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
mod callers;
pub(crate) mod destination;
mod dialects;
pub(crate) mod drivers;
mod forward;
mod query;
mod service;

use std::sync::Arc;

use http::{Request, Response};
use tower::{Layer, ServiceExt};

use crate::body::{BoxError, BoxedError, IdleBody, ProxyBody};
use crate::config::{Config, StoreKind};
use crate::plan::PlanCache;
use crate::runtime::{ExecutionStore, MemoryExecutionStore, RunPool};
use crate::splice::{MemorySpliceStore, SpliceStore};
use crate::store_redis::{RecordLimits, RedisStore};

pub use callers::PeerAddr;
pub use service::CodeModeService;

/// The upstream as the layer holds it: one concrete type for any inner
/// service, shared. A request's rounds clone the handle (a reference
/// count), not the service; the service is cloned once per call, as tower's
/// `&mut self` calls require.
#[derive(Clone)]
pub(crate) struct Upstream(Arc<dyn Fn(Request<ProxyBody>) -> UpstreamFuture + Send + Sync>);

type UpstreamFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Response<ProxyBody>, BoxedError>> + Send>,
>;

impl Upstream {
    /// Sends `req` upstream.
    pub(crate) fn call(&self, req: Request<ProxyBody>) -> UpstreamFuture {
        (self.0)(req)
    }
}

/// What every request shares: the validated config and the caches.
pub(crate) struct State {
    pub(crate) config: Config,
    pub(crate) plans: PlanCache,
    pub(crate) splices: Arc<dyn SpliceStore>,
    pub(crate) executions: Arc<dyn ExecutionStore>,
    /// Slots and a bounded queue for the embedded runtime's programs.
    pub(crate) runs: RunPool,
    /// What `GET /metrics` reports.
    pub(crate) metrics: Arc<crate::observe::metrics::Metrics>,
    /// What `/codemode/inspector` shows; `None` (nothing recorded) unless
    /// `CODEMODE_ADMIN_TOKEN` is set.
    pub(crate) inspector: Option<Arc<crate::observe::inspector::Inspector>>,
    /// Failed admin-token attempts, slowed per client.
    pub(crate) admin_throttle: admin::Throttle,
}

impl State {
    /// The mode and preset a request runs under (`crate::select`), by the
    /// configured catalog and policy.
    pub(crate) fn select(
        &self,
        headers: &http::HeaderMap,
        path_preset: Option<&str>,
    ) -> Result<crate::select::Selection, crate::error::ProxyError> {
        crate::select::select(
            headers,
            path_preset,
            &self.config.catalog,
            self.config.client_select,
        )
    }
}

/// Mounts Code Mode in front of an upstream service.
#[derive(Clone)]
pub struct CodeModeLayer {
    state: Arc<State>,
}

impl CodeModeLayer {
    /// A layer with the stores the config names (`config.store`): in
    /// memory, sized by bytes (`config.budgets`), or in Redis.
    pub fn new(config: Config) -> CodeModeLayer {
        CodeModeLayer::builder(config).build()
    }

    /// A layer to be given stores of its own (for example shared ones, so
    /// several replicas continue each other's mixed turns and programs);
    /// what it is not given comes from the config, as in [`CodeModeLayer::new`].
    pub fn builder(config: Config) -> CodeModeLayerBuilder {
        CodeModeLayerBuilder {
            config,
            splices: None,
            executions: None,
        }
    }
}

/// A [`CodeModeLayer`] being put together: [`CodeModeLayer::builder`].
#[must_use = "a builder does nothing until `build`"]
pub struct CodeModeLayerBuilder {
    config: Config,
    splices: Option<Arc<dyn SpliceStore>>,
    executions: Option<Arc<dyn ExecutionStore>>,
}

impl CodeModeLayerBuilder {
    /// Where mixed-turn denials live between a client's round trips.
    pub fn splice_store(mut self, splices: Arc<dyn SpliceStore>) -> CodeModeLayerBuilder {
        self.splices = Some(splices);
        self
    }

    /// Where the embedded runtime's programs live between round trips.
    pub fn execution_store(mut self, executions: Arc<dyn ExecutionStore>) -> CodeModeLayerBuilder {
        self.executions = Some(executions);
        self
    }

    /// The layer.
    pub fn build(self) -> CodeModeLayer {
        let CodeModeLayerBuilder {
            config,
            splices,
            executions,
        } = self;
        // Ended executions stay as long as the history that mentions them is likely to come back.
        let keep = config.limits.lifetime.max(config.splice_ttl);
        let (splices, executions) = match (splices, executions, &config.store) {
            (Some(s), Some(e), _) => (s, e),
            (s, e, StoreKind::Redis { url, prefix }) => {
                let store = Arc::new(RedisStore::new(
                    url,
                    config.store.describe(),
                    prefix,
                    config.limits.lifetime,
                    keep,
                    config.splice_ttl,
                    RecordLimits::of(&config.budgets),
                ));
                (s.unwrap_or_else(|| store.clone()), e.unwrap_or(store))
            }
            (s, e, StoreKind::Memory) => (
                s.unwrap_or_else(|| {
                    Arc::new(MemorySpliceStore::new(
                        config.splice_ttl,
                        config.budgets.splices_bytes,
                    ))
                }),
                e.unwrap_or_else(|| {
                    Arc::new(MemoryExecutionStore::new(
                        config.limits.lifetime,
                        keep,
                        config.budgets.executions_bytes,
                    ))
                }),
            ),
        };
        // Minted ids need the OS random source: a machine without one fails
        // here, at start-up, rather than on a request.
        let _ = crate::tenant::unguessable();
        let plans = PlanCache::new(config.budgets.plans_bytes);
        let inspector = config.inspector.as_ref().map(|i| {
            Arc::new(crate::observe::inspector::Inspector::new(
                i.budget_bytes,
                i.payloads,
                config.limits.lifetime.as_millis() as u64,
            ))
        });
        CodeModeLayer {
            state: Arc::new(State {
                inspector,
                runs: run_pool(&config),
                config,
                plans,
                splices,
                executions,
                metrics: Default::default(),
                admin_throttle: Default::default(),
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
        // Every upstream body gets an idle deadline between frames, so a
        // provider that goes quiet cannot hold a client forever.
        let idle = self.state.config.upstream_idle_timeout;
        let upstream = inner
            .map_response(move |r: Response<RB>| {
                // Token usage is read on the side of every upstream body;
                // the wrappers are boxed once, together.
                crate::observe::body::tap_usage(r.map(|b| IdleBody::new(b, idle)))
            })
            .map_err(BoxedError::new);
        let call = move |req| -> UpstreamFuture { Box::pin(upstream.clone().oneshot(req)) };
        CodeModeService::new(Upstream(Arc::new(call)), self.state.clone())
    }
}

/// The run pool, its programs in sandbox workers or on this process's
/// threads as configured; says which once, at start-up.
fn run_pool(config: &Config) -> RunPool {
    let pool = RunPool::new(config.run_slots);
    match &config.sandbox {
        crate::config::Sandbox::Process { worker } => {
            tracing::info!(
                worker = %worker.display(),
                "programs run in confined sandbox worker processes (CODEMODE_SANDBOX=process)"
            );
            let workers = crate::runtime::worker::Workers::new(
                worker.clone(),
                &config.limits,
                config.run_slots.concurrency,
            );
            // Programs run here by default; a proxy that leaves them to its
            // clients starts a worker only if a preset runs one after all.
            if config.runtime == crate::Runtime::Embedded {
                pool.in_workers(workers)
            } else {
                pool.in_cold_workers(workers)
            }
        }
        crate::config::Sandbox::InProcess { why } => {
            tracing::warn!(
                "programs run inside the proxy's own process (CODEMODE_SANDBOX=in-process): {why}"
            );
            pool
        }
    }
}
