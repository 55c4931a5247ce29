//! The record of one request: what it was, what it cost, what it saved.
//!
//! The service creates one per request and makes it the task-local
//! [`current`] ledger of everything the request runs: the handler's future
//! and every poll of the response body (a stream's later rounds run there).
//! The code that does something worth counting (an upstream round, a
//! denial, a program's end) adds it with a one-line call; none of it takes
//! a ledger parameter. When the response body ends (or is dropped), the
//! ledger writes the one access-log line and updates the metrics.

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use http::{HeaderMap, HeaderName, HeaderValue};

use super::counted::Finished;
use super::inspector::{DenialSeen, Inspector, Repair};
use super::metrics::Metrics;
use crate::classify::DenialCode;
use crate::select::Selection;

/// The request-id header, read from the client and sent upstream and back.
pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// Longest client request id the proxy keeps.
pub const MAX_REQUEST_ID: usize = 128;

mod watch;

pub use super::counted::{Abandoned, Outcome, ProgramEnd, ProviderId, Route};

pub use watch::{inspecting, program_lost, program_seen, set_model, turn_decided};

tokio::task_local! {
    static LEDGER: Arc<RequestLedger>;
}

struct Selected {
    scope: String,
    preset: Arc<crate::preset::Preset>,
    mode: &'static str,
}

/// One request's record; counters are atomics, since a stream's later
/// rounds add to it from the body's polls.
pub struct RequestLedger {
    id: HeaderValue,
    started: Instant,
    route: AtomicU8,
    /// The provider the request went to: [`ProviderId`] plus one, 0 for none yet.
    provider: AtomicU8,
    selected: OnceLock<Selected>,
    /// The client's own code mode the request ran (`codex`), if any.
    client_code: OnceLock<&'static str>,
    /// How the request's SDK rendered (`full`, `compact`), when it had one.
    sdk: OnceLock<&'static str>,
    status: AtomicU16,
    rounds: AtomicU64,
    upstream_micros: AtomicU64,
    tokens_in: AtomicU64,
    tokens_out: AtomicU64,
    repairs: AtomicU64,
    denials: [AtomicU64; 2],
    executions: [AtomicU64; 4],
    abandoned: [AtomicU64; 5],
    nested_calls: AtomicU64,
    round_trips_saved: AtomicU64,
    context_bytes_saved: AtomicU64,
    finished: AtomicBool,
    metrics: Arc<Metrics>,
    /// The inspector, when `CODEMODE_ADMIN_TOKEN` is set; `None` records nothing.
    inspector: Option<Arc<Inspector>>,
    /// The request's `model`, noted only for the inspector.
    model: OnceLock<String>,
    /// How the request's provider names its token counts, once known.
    usage_shape: OnceLock<&'static super::usage::Shape>,
    /// Denials whose repair round has not been judged yet (inspector only).
    pending: Mutex<Vec<DenialSeen>>,
}

impl RequestLedger {
    /// A ledger for a request with `headers`: its id is the client's
    /// `x-request-id` when that is a sane token, else a new one.
    pub fn new(headers: &HeaderMap, metrics: Arc<Metrics>) -> RequestLedger {
        let id = headers
            .get(&REQUEST_ID)
            .filter(|v| sane_id(v.as_bytes()))
            .cloned()
            .unwrap_or_else(new_id);
        RequestLedger {
            id,
            started: Instant::now(),
            route: AtomicU8::new(Route::Other.index() as u8),
            provider: AtomicU8::new(0),
            selected: OnceLock::new(),
            client_code: OnceLock::new(),
            sdk: OnceLock::new(),
            status: AtomicU16::new(0),
            rounds: AtomicU64::new(0),
            upstream_micros: AtomicU64::new(0),
            tokens_in: AtomicU64::new(0),
            tokens_out: AtomicU64::new(0),
            repairs: AtomicU64::new(0),
            denials: Default::default(),
            executions: Default::default(),
            abandoned: Default::default(),
            nested_calls: AtomicU64::new(0),
            round_trips_saved: AtomicU64::new(0),
            context_bytes_saved: AtomicU64::new(0),
            finished: AtomicBool::new(false),
            metrics,
            inspector: None,
            model: OnceLock::new(),
            usage_shape: OnceLock::new(),
            pending: Mutex::new(Vec::new()),
        }
    }

    /// The same ledger, reporting to `inspector` when there is one.
    pub fn watched_by(mut self, inspector: Option<&Arc<Inspector>>) -> RequestLedger {
        self.inspector = inspector.cloned();
        self
    }

    /// The request id, as the header carries it.
    pub fn id(&self) -> &HeaderValue {
        &self.id
    }

    /// The request id as text (always ASCII: see [`sane_id`]).
    pub fn id_str(&self) -> &str {
        self.id.to_str().unwrap_or("")
    }

    /// Reads the provider's answers' token counts in `shape` (the first
    /// one set holds; [`super::usage::USAGE`] until one is).
    pub fn set_usage_shape(&self, shape: &'static super::usage::Shape) {
        let _ = self.usage_shape.set(shape);
    }

    /// How the provider's answers name their token counts.
    pub fn usage_shape(&self) -> &'static super::usage::Shape {
        self.usage_shape
            .get()
            .copied()
            .unwrap_or(&super::usage::USAGE)
    }

    /// Records the endpoint that serves the request.
    pub fn set_route(&self, route: Route) {
        self.route.store(route.index() as u8, Relaxed);
    }

    /// Records the provider the request goes to.
    pub fn set_provider(&self, provider: ProviderId) {
        self.provider.store(provider as u8 + 1, Relaxed);
    }

    fn provider(&self) -> Option<ProviderId> {
        let n = self.provider.load(Relaxed) as usize;
        n.checked_sub(1)
            .and_then(|i| ProviderId::ALL.get(i).copied())
    }

    fn route(&self) -> Route {
        let n = self.route.load(Relaxed) as usize;
        Route::ALL.get(n).copied().unwrap_or(Route::Other)
    }

    /// Records the scope, preset and mode that govern the request.
    pub fn select(&self, selection: &Selection) {
        let _ = self.selected.set(Selected {
            scope: selection.scope.clone(),
            preset: selection.preset.clone(),
            mode: selection.mode.as_str(),
        });
    }

    /// Records that the request ran the client's own code mode.
    pub fn set_client_code(&self, client: &'static str) {
        let _ = self.client_code.set(client);
    }

    /// Records how the request's SDK rendered (`full` or `compact`).
    pub fn set_sdk(&self, rendering: &'static str) {
        let _ = self.sdk.set(rendering);
    }

    /// Records the response status.
    pub fn set_status(&self, status: u16) {
        self.status.store(status, Relaxed);
    }

    /// Programs that ended during this request: their nested calls and the
    /// context bytes they saved, for the response headers.
    pub fn savings(&self) -> Option<(u64, u64)> {
        let ended: u64 = self.executions.iter().map(|n| n.load(Relaxed)).sum();
        (ended > 0).then(|| {
            (
                self.nested_calls.load(Relaxed),
                self.context_bytes_saved.load(Relaxed),
            )
        })
    }

    /// Adds tokens an upstream body reported.
    pub fn add_tokens(&self, input: u64, output: u64) {
        self.tokens_in.fetch_add(input, Relaxed);
        self.tokens_out.fetch_add(output, Relaxed);
    }

    /// The response is done (`completed`) or was dropped before its end:
    /// writes the access-log line and counts the request, once.
    pub fn finish(&self, completed: bool) {
        if self.finished.swap(true, Relaxed) {
            return;
        }
        let elapsed = self.started.elapsed();
        let seconds = elapsed.as_secs_f64();
        let route = self.route();
        let (scope, preset, mode) = match self.selected.get() {
            // A client's own code mode is its own mode in logs and metrics.
            Some(s) if self.client_code.get().is_some() => {
                (s.scope.as_str(), s.preset.name.as_str(), "client")
            }
            Some(s) => (s.scope.as_str(), s.preset.name.as_str(), s.mode),
            None => ("", "", "none"),
        };
        let code_mode = self.client_code.get().copied().unwrap_or("");
        let status = self.status.load(Relaxed);
        let finished = Finished {
            route,
            provider: self.provider(),
            mode,
            status,
            seconds,
            denials: self.denials.each_ref().map(|n| n.load(Relaxed)),
            repairs: self.repairs.load(Relaxed),
            executions: self.executions.each_ref().map(|n| n.load(Relaxed)),
            abandoned: self.abandoned.each_ref().map(|n| n.load(Relaxed)),
            nested_calls: self.nested_calls.load(Relaxed),
            tokens: (self.tokens_in.load(Relaxed), self.tokens_out.load(Relaxed)),
            round_trips_saved: self.round_trips_saved.load(Relaxed),
            context_bytes_saved: self.context_bytes_saved.load(Relaxed),
        };
        self.metrics.finished(&finished);
        if let Some(inspector) = &self.inspector {
            let pending = std::mem::take(&mut *watch::lock(&self.pending));
            self.settle(inspector, pending, Repair::Unfinished);
            inspector.finished(&finished);
        }
        tracing::info!(
            target: "codemode::access",
            request_id = self.id_str(),
            route = route.as_str(),
            scope,
            preset,
            mode,
            code_mode,
            sdk = self.sdk.get().copied().unwrap_or(""),
            status,
            // To the microsecond: a float's tail digits say nothing.
            duration_ms = elapsed.as_micros() as f64 / 1000.0,
            upstream_rounds = self.rounds.load(Relaxed),
            upstream_ms = self.upstream_micros.load(Relaxed) as f64 / 1000.0,
            repairs = finished.repairs,
            denials = finished.denials.iter().sum::<u64>(),
            executions = finished.executions.iter().sum::<u64>(),
            abandoned = finished.abandoned.iter().sum::<u64>(),
            input_tokens = finished.tokens.0,
            output_tokens = finished.tokens.1,
            nested_calls = finished.nested_calls,
            round_trips_saved = finished.round_trips_saved,
            context_bytes_saved = finished.context_bytes_saved,
            completed,
            "request"
        );
    }
}

/// Whether a client's request id is kept: printable ASCII, at most
/// [`MAX_REQUEST_ID`] bytes, not empty.
pub fn sane_id(id: &[u8]) -> bool {
    !id.is_empty() && id.len() <= MAX_REQUEST_ID && id.iter().all(|b| (0x21..0x7f).contains(b))
}

/// A new request id spelled like a UUID (8-4-4-4-12 hex digits): 64 bits
/// drawn once per process from the OS random source, then a counter. Ids
/// only need to be unique (they name log lines, they grant nothing), and a
/// system call per request costs more than the rest of the id.
pub fn new_id() -> HeaderValue {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    // `pppppppp-pppp-pppp-`: the process's 64 bits, spelled once.
    static PREFIX: OnceLock<[u8; 19]> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| {
        let hex = crate::tenant::unguessable();
        let mut prefix = [b'-'; 19];
        for (at, digit) in [(0..8), (9..13), (14..18)]
            .into_iter()
            .flatten()
            .zip(hex.bytes())
        {
            prefix[at] = digit;
        }
        prefix
    });
    let mut id = [b'-'; 36];
    id[..19].copy_from_slice(prefix);
    // `cccc-cccccccccccc`: the counter.
    let count = NEXT.fetch_add(1, Relaxed);
    for (i, at) in (19..23).chain(24..36).enumerate() {
        id[at] = HEX[((count >> (60 - 4 * i)) & 0xf) as usize];
    }
    HeaderValue::from_bytes(&id).unwrap_or_else(|_| HeaderValue::from_static("unknown"))
}

// ---- The current request's ledger ----

/// The ledger of the request this code runs for, if any.
pub fn current() -> Option<Arc<RequestLedger>> {
    LEDGER.try_with(Arc::clone).ok()
}

/// Runs `f` with `ledger` as the current one (a body's poll).
pub fn sync_scope<R>(ledger: &Arc<RequestLedger>, f: impl FnOnce() -> R) -> R {
    LEDGER.sync_scope(ledger.clone(), f)
}

/// `fut` with `ledger` as the current one.
pub fn scope<F: std::future::Future>(
    ledger: Arc<RequestLedger>,
    fut: F,
) -> impl std::future::Future<Output = F::Output> {
    LEDGER.scope(ledger, fut)
}

fn with(f: impl FnOnce(&RequestLedger)) {
    let _ = LEDGER.try_with(|l| f(l));
}

/// `f` of the current request's id, if code runs for a request.
pub fn with_current_id<R>(f: impl FnOnce(&str) -> R) -> Option<R> {
    LEDGER.try_with(|l| f(l.id_str())).ok()
}

/// The current request's id, for a request sent upstream.
pub fn request_id() -> Option<HeaderValue> {
    LEDGER.try_with(|l| l.id.clone()).ok()
}

/// An upstream round that started at `started` got its response head.
pub fn upstream_round(started: Instant) {
    let elapsed = started.elapsed();
    with(|l| {
        l.rounds.fetch_add(1, Relaxed);
        l.upstream_micros
            .fetch_add(elapsed.as_micros() as u64, Relaxed);
        l.metrics.upstream_round(elapsed.as_secs_f64());
    });
}

// ---- What the ledger counts, as plain values ----
//
// The code that judges turns and runs programs sits above the ledger and
// reports into it, so the ledger names none of its types: it counts plain
// values (denial codes, a repair, the plain struct below).

/// A model turn was judged: its denials by code, and whether the decision
/// re-asks the model (a repair).
fn judged(denials: impl Iterator<Item = DenialCode>, repair: bool) {
    with(|l| {
        for code in denials {
            let n = match code {
                DenialCode::UnknownTool => 0,
                DenialCode::InvalidArgs => 1,
            };
            l.denials[n].fetch_add(1, Relaxed);
        }
        if repair {
            l.repairs.fetch_add(1, Relaxed);
        }
    });
}

/// A program ended in this request: counts its outcome, its nested calls
/// and the bytes of results that stayed out of the model's context.
pub fn program_ended(program: impl Into<ProgramEnd>) {
    let end = program.into();
    with(|l| {
        l.executions[end.outcome.index()].fetch_add(1, Relaxed);
        l.nested_calls.fetch_add(end.nested_calls, Relaxed);
        l.context_bytes_saved
            .fetch_add(end.context_bytes_saved, Relaxed);
    });
}

/// A program that waited on its client's results ended without them, or
/// its results found its record gone: logged with the program's id and
/// the reason, and counted (`codemode_programs_abandoned_total`, the
/// access log's `abandoned`). The inspector hears of it where it ends.
pub fn program_abandoned(program: &str, reason: Abandoned) {
    tracing::info!(target: "codemode::program", program, reason = reason.as_str(), "program abandoned: it waited on tool results and ended without them");
    with(|l| {
        l.abandoned[reason.index()].fetch_add(1, Relaxed);
    });
}

/// A batch of nested calls came back and the program ran on without
/// asking the model.
pub fn round_trip_saved() {
    with(|l| {
        l.round_trips_saved.fetch_add(1, Relaxed);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sane_client_id_is_kept_and_others_replaced() {
        let metrics = Arc::new(Metrics::new());
        let mut h = HeaderMap::new();
        h.insert(&REQUEST_ID, HeaderValue::from_static("abc-123_X"));
        assert_eq!(
            RequestLedger::new(&h, metrics.clone()).id_str(),
            "abc-123_X"
        );
        for bad in ["has space", &"x".repeat(129)] {
            h.insert(&REQUEST_ID, HeaderValue::try_from(bad).unwrap());
            let id = RequestLedger::new(&h, metrics.clone()).id_str().to_owned();
            assert_ne!(id, bad);
            assert_eq!(id.len(), 36);
        }
    }

    #[test]
    fn new_ids_are_spelled_like_uuids_and_differ() {
        let (a, b) = (new_id(), new_id());
        for id in [&a, &b] {
            let id = id.to_str().unwrap();
            let groups: Vec<usize> = id.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
            assert!(id.bytes().all(|c| c == b'-' || c.is_ascii_hexdigit()));
        }
        assert_ne!(a, b);
        // One process prefix: the ids differ in their counter only.
        assert_eq!(a.to_str().unwrap()[..19], b.to_str().unwrap()[..19]);
        let counter = |id: &HeaderValue| {
            u64::from_str_radix(&id.to_str().unwrap()[19..].replace('-', ""), 16).unwrap()
        };
        assert!(counter(&b) > counter(&a), "{a:?} {b:?}");
    }

    #[test]
    fn outcomes_are_read_off_the_result_text() {
        assert_eq!(Outcome::of("Result: 3"), Outcome::Ok);
        assert_eq!(Outcome::of("Error: TimeoutError: slice"), Outcome::Timeout);
        assert_eq!(
            Outcome::of("Error: InterruptedError: x"),
            Outcome::Interrupted
        );
        assert_eq!(Outcome::of("Error: TypeError: x"), Outcome::Error);
    }

    #[test]
    fn denial_codes_are_spelled_as_the_model_reads_them() {
        assert_eq!(
            crate::observe::counted::DENIAL_CODES[0],
            DenialCode::UnknownTool.as_str()
        );
        assert_eq!(
            crate::observe::counted::DENIAL_CODES[1],
            DenialCode::InvalidArgs.as_str()
        );
    }
}
