//! The proxy's Prometheus metrics (docs/operations.md), in one explicit
//! registry the layer's state holds.
//!
//! Every label has a small fixed set of values (a route, a mode, a status
//! code, a denial code, an outcome): never a scope, a model or an id, so a
//! client cannot grow the series without bound.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

use super::counted::{
    Abandoned, Finished, Outcome, ProviderId, Route, WorkerFailure, DENIAL_CODES,
};

/// The content type of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    mode: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabel {
    route: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabel {
    code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabel {
    store: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TypeLabel {
    r#type: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn request_histogram() -> Histogram {
    // 5 ms to about 82 s: a proxy answer to a long model turn.
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// The series, and the registry that encodes them.
///
/// A labelled series is looked up (hashed, under a lock) once and its
/// handle kept, since every request counts into several of them; only
/// `codemode_requests`, whose status label is open, is looked up per
/// request.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_duration: HistogramFamily<RouteLabel>,
    /// `request_duration`'s series by route, made on first use so an
    /// unused route shows no series.
    route_durations: [OnceLock<Histogram>; Route::COUNT],
    upstream_duration: Histogram,
    /// By [`DENIAL_CODES`].
    denials: [Counter; DENIAL_CODES.len()],
    repairs: Counter,
    /// By [`Outcome::index`].
    executions: [Counter; Outcome::ALL.len()],
    /// By [`Abandoned::index`].
    abandoned: [Counter; Abandoned::ALL.len()],
    nested_calls: Counter,
    input_tokens: Counter,
    output_tokens: Counter,
    round_trips_saved: Counter,
    context_bytes_saved: Counter,
    programs_running: Gauge,
    programs_waiting: Gauge,
    /// By [`Occupancy::stores`]' order.
    store_bytes: [Gauge; 3],
    /// `Occupancy::dropped_waiting` as last counted.
    dropped_seen: [AtomicU64; 2],
    /// Sandbox workers killed, by [`WorkerFailure::ALL`].
    worker_failures: [Counter; WorkerFailure::ALL.len()],
    /// `Occupancy::worker_failures` as last counted.
    worker_failures_seen: [AtomicU64; WorkerFailure::ALL.len()],
    /// Answers of 401 or 403 from a provider, by [`ProviderId`]: not a
    /// series (the requests family has them by status),
    /// kept so `codemode-proxy run` can say which credential to fix.
    refused: [AtomicU64; ProviderId::ALL.len()],
    /// Requests that ran the client's own code mode (mode `client`).
    client_code: AtomicU64,
}

/// The counters `codemode-proxy run` sums up when its command exits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Programs run to their end, whatever their outcome.
    pub programs: u64,
    /// Tool calls those programs made.
    pub nested_calls: u64,
    /// Batches of nested calls answered without asking the model.
    pub round_trips_saved: u64,
    /// Bytes of nested results kept out of the model's context.
    pub context_bytes_saved: u64,
    /// Tool calls the rule denied.
    pub denials: u64,
    /// 401 and 403 answers to requests that went to Anthropic.
    pub refused_anthropic: u64,
    /// 401 and 403 answers to requests that went to OpenAI (or the
    /// `CODEMODE_UPSTREAM` in its place).
    pub refused_openai: u64,
    /// 401 and 403 answers to requests that went to Google's Gemini API.
    pub refused_gemini: u64,
    /// Requests that ran the client's own code mode (Codex's `exec`).
    pub client_code_requests: u64,
}

/// What the proxy holds now, read when the metrics are scraped.
pub(crate) struct Occupancy {
    pub(crate) programs_running: usize,
    pub(crate) programs_waiting: usize,
    /// Weighed bytes of the in-memory plan cache, execution store and
    /// splice store (`None` for a store that lives elsewhere).
    pub(crate) stores: [Option<u64>; 3],
    /// Programs the in-memory execution store dropped while they waited,
    /// so far: `[unanswered, evicted]`.
    pub(crate) dropped_waiting: [u64; 2],
    /// Sandbox workers killed so far, by [`WorkerFailure::ALL`].
    pub(crate) worker_failures: [u64; WorkerFailure::ALL.len()],
}

const STORES: [&str; 3] = ["plans", "executions", "splices"];

impl Metrics {
    /// The series, registered and at zero.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "codemode_requests",
            "Requests served, by route, mode and response status",
            requests.clone(),
        );
        let request_duration: HistogramFamily<RouteLabel> =
            Family::new_with_constructor(request_histogram);
        registry.register(
            "codemode_request_duration_seconds",
            "Time from a request's arrival to the end of its response body",
            request_duration.clone(),
        );
        let upstream_duration = request_histogram();
        registry.register(
            "codemode_upstream_duration_seconds",
            "Time each upstream round took until its response head arrived",
            upstream_duration.clone(),
        );
        let denials = Family::<CodeLabel, Counter>::default();
        registry.register(
            "codemode_denials",
            "Tool calls the rule denied, by denial code",
            denials.clone(),
        );
        let repairs = Counter::default();
        registry.register(
            "codemode_repairs",
            "Repair rounds: the model re-asked after every call of its turn was denied",
            repairs.clone(),
        );
        let executions = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "codemode_executions",
            "Programs the embedded runtime ran to their end, by outcome",
            executions.clone(),
        );
        let abandoned = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "codemode_programs_abandoned",
            "Programs that waited on tool results and ended without them, by reason",
            abandoned.clone(),
        );
        let nested_calls = Counter::default();
        registry.register(
            "codemode_nested_calls",
            "Tool calls programs made (counted when their program ends)",
            nested_calls.clone(),
        );
        let tokens = Family::<TypeLabel, Counter>::default();
        registry.register(
            "codemode_upstream_tokens",
            "Tokens the upstream reported in its usage, every mode",
            tokens.clone(),
        );
        let round_trips_saved = Counter::default();
        registry.register(
            "codemode_model_round_trips_saved",
            "Batches of nested calls answered by the client without asking the model",
            round_trips_saved.clone(),
        );
        let context_bytes_saved = Counter::default();
        registry.register(
            "codemode_context_bytes_saved",
            "Bytes of nested results kept out of the model's context",
            context_bytes_saved.clone(),
        );
        let programs_running = Gauge::default();
        registry.register(
            "codemode_programs_running",
            "Programs running in the embedded runtime's slots now",
            programs_running.clone(),
        );
        let programs_waiting = Gauge::default();
        registry.register(
            "codemode_programs_waiting",
            "Programs waiting for a slot now (CODEMODE_RUN_QUEUE bounds them)",
            programs_waiting.clone(),
        );
        let store_bytes = Family::<StoreLabel, Gauge>::default();
        registry.register(
            "codemode_memory_store_bytes",
            "Bytes the in-memory caches and stores hold, as weighed against their budgets",
            store_bytes.clone(),
        );
        let store_bytes =
            STORES.map(|store| store_bytes.get_or_create(&StoreLabel { store }).clone());
        // Series a dashboard expects from the start, before any traffic.
        let denials = DENIAL_CODES.map(|code| denials.get_or_create(&CodeLabel { code }).clone());
        let executions = Outcome::ALL.map(|outcome| {
            executions
                .get_or_create(&OutcomeLabel {
                    outcome: outcome.as_str(),
                })
                .clone()
        });
        let abandoned = Abandoned::ALL.map(|reason| {
            abandoned
                .get_or_create(&ReasonLabel {
                    reason: reason.as_str(),
                })
                .clone()
        });
        let worker_failures = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "codemode_sandbox_worker_failures",
            "Sandbox worker processes killed and replaced, by reason (spawn, crash, memory, timeout, protocol)",
            worker_failures.clone(),
        );
        let worker_failures = WorkerFailure::ALL.map(|reason| {
            worker_failures
                .get_or_create(&ReasonLabel {
                    reason: reason.as_str(),
                })
                .clone()
        });
        let [input_tokens, output_tokens] =
            ["input", "output"].map(|r#type| tokens.get_or_create(&TypeLabel { r#type }).clone());
        Metrics {
            registry,
            requests,
            request_duration,
            route_durations: Default::default(),
            upstream_duration,
            denials,
            repairs,
            executions,
            abandoned,
            worker_failures,
            worker_failures_seen: Default::default(),
            nested_calls,
            input_tokens,
            output_tokens,
            round_trips_saved,
            context_bytes_saved,
            programs_running,
            programs_waiting,
            store_bytes,
            dropped_seen: Default::default(),
            refused: Default::default(),
            client_code: AtomicU64::new(0),
        }
    }

    /// What the proxy did so far, summed over every request.
    pub fn totals(&self) -> Totals {
        let refused = |p: ProviderId| self.refused[p as usize].load(Relaxed);
        Totals {
            programs: self.executions.iter().map(Counter::get).sum(),
            nested_calls: self.nested_calls.get(),
            round_trips_saved: self.round_trips_saved.get(),
            context_bytes_saved: self.context_bytes_saved.get(),
            denials: self.denials.iter().map(Counter::get).sum(),
            refused_anthropic: refused(ProviderId::Anthropic),
            refused_openai: refused(ProviderId::OpenAi),
            refused_gemini: refused(ProviderId::Google),
            client_code_requests: self.client_code.load(Relaxed),
        }
    }

    /// Sets the gauges of what the proxy holds now (before an encode).
    pub(crate) fn occupancy(&self, now: &Occupancy) {
        let set = |g: &Gauge, n: u64| g.set(i64::try_from(n).unwrap_or(i64::MAX));
        set(&self.programs_running, now.programs_running as u64);
        set(&self.programs_waiting, now.programs_waiting as u64);
        for (gauge, bytes) in self.store_bytes.iter().zip(now.stores) {
            set(gauge, bytes.unwrap_or(0));
        }
        let reasons = [Abandoned::Unanswered, Abandoned::Evicted];
        for ((reason, seen), n) in reasons
            .iter()
            .zip(&self.dropped_seen)
            .zip(now.dropped_waiting)
        {
            add(
                &self.abandoned[reason.index()],
                n.saturating_sub(seen.swap(n, Relaxed)),
            );
        }
        for ((counter, seen), &n) in self
            .worker_failures
            .iter()
            .zip(&self.worker_failures_seen)
            .zip(&now.worker_failures)
        {
            add(counter, n.saturating_sub(seen.swap(n, Relaxed)));
        }
    }

    /// The metrics in the text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// One upstream round's time to its response head.
    pub(crate) fn upstream_round(&self, seconds: f64) {
        self.upstream_duration.observe(seconds);
    }

    /// Counts a finished request.
    pub(crate) fn finished(&self, f: &Finished) {
        let route = f.route.as_str();
        self.requests
            .get_or_create(&RequestLabels {
                route,
                mode: f.mode,
                status: f.status,
            })
            .inc();
        self.route_durations[f.route.index()]
            .get_or_init(|| {
                self.request_duration
                    .get_or_create(&RouteLabel { route })
                    .clone()
            })
            .observe(f.seconds);
        for (counter, &n) in self.denials.iter().zip(&f.denials) {
            add(counter, n);
        }
        add(&self.repairs, f.repairs);
        for (counter, &n) in self.executions.iter().zip(&f.executions) {
            add(counter, n);
        }
        for (counter, &n) in self.abandoned.iter().zip(&f.abandoned) {
            add(counter, n);
        }
        add(&self.nested_calls, f.nested_calls);
        add(&self.input_tokens, f.tokens.0);
        add(&self.output_tokens, f.tokens.1);
        add(&self.round_trips_saved, f.round_trips_saved);
        add(&self.context_bytes_saved, f.context_bytes_saved);
        if f.mode == "client" {
            self.client_code.fetch_add(1, Relaxed);
        }
        if let (401 | 403, Some(provider)) = (f.status, f.provider) {
            self.refused[provider as usize].fetch_add(1, Relaxed);
        }
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

fn add(counter: &Counter, n: u64) {
    if n > 0 {
        counter.inc_by(n);
    }
}
