//! What a request and a program are counted as: plain values the ledger
//! fills and the metrics and the inspector read. Below all three, so none
//! of them imports another for the other's vocabulary.

/// Every denial code, as the `code` label spells it.
/// (In the order of the ledger's counters: see
/// [`crate::observe::ledger::turn_decided`].)
pub const DENIAL_CODES: [&str; 2] = ["UNKNOWN_TOOL", "INVALID_ARGS"];

/// What a program came to, as the `outcome` label spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It returned.
    Ok,
    /// It threw, or could not start.
    Error,
    /// It ran past its CPU slice or its lifetime.
    Timeout,
    /// The client moved on before it finished.
    Interrupted,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 4] = [
        Outcome::Ok,
        Outcome::Error,
        Outcome::Timeout,
        Outcome::Interrupted,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Timeout => "timeout",
            Outcome::Interrupted => "interrupted",
        }
    }

    /// The outcome of a `run_code` result text.
    pub fn of(result: &str) -> Outcome {
        match result.strip_prefix("Error: ") {
            None => Outcome::Ok,
            Some(e) if e.starts_with("TimeoutError") => Outcome::Timeout,
            Some(e) if e.starts_with("InterruptedError") => Outcome::Interrupted,
            Some(_) => Outcome::Error,
        }
    }

    /// The outcome's place in [`Outcome::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Why a program that waited on its client's results ended without them,
/// as the `reason` label spells it: never silently (a log line names the
/// program, a counter and the inspector say why).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abandoned {
    /// The conversation went on without its results (the user moved on,
    /// an agent's step limit): closed as interrupted.
    Interrupted,
    /// Its results came after `CODEMODE_RUN_LIFETIME_SECS`.
    Expired,
    /// Its results came, and its record was gone (evicted, a restart
    /// without a shared store).
    Lost,
    /// The in-memory store dropped it while it waited: no result came
    /// within `CODEMODE_RUN_LIFETIME_SECS` (the client never sent its
    /// calls back, or sent them in a shape nothing matched).
    Unanswered,
    /// The in-memory store dropped it while it waited, to stay within its
    /// budget (`CODEMODE_EXECUTION_STORE_MB`).
    Evicted,
}

impl Abandoned {
    /// Every reason.
    pub const ALL: [Abandoned; 5] = [
        Abandoned::Interrupted,
        Abandoned::Expired,
        Abandoned::Lost,
        Abandoned::Unanswered,
        Abandoned::Evicted,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Abandoned::Interrupted => "interrupted",
            Abandoned::Expired => "expired",
            Abandoned::Lost => "lost",
            Abandoned::Unanswered => "unanswered",
            Abandoned::Evicted => "evicted",
        }
    }

    /// The reason's place in [`Abandoned::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Which endpoint served a request, as the `route` label spells it: a
/// judged route by its API's name, so a new dialect needs no label of its
/// own here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// A model request on a judged route of the API (`chat`, `responses`,
    /// `messages`, `gemini`, ...).
    Turn(crate::api::Api),
    /// A token count (`/v1/messages/count_tokens`, Gemini's
    /// `:countTokens`, Responses' `input_tokens`).
    CountTokens,
    /// Any other `/v1/*` request.
    Passthrough,
    /// The proxy's own endpoints.
    Admin,
    /// Anything refused before it was routed.
    Other,
}

impl Route {
    /// How many routes there are.
    pub const COUNT: usize = crate::api::Api::ALL.len() + 4;

    /// Every route, in the order of [`Route::index`].
    pub const ALL: [Route; Route::COUNT] = {
        let apis = crate::api::Api::ALL;
        let mut all = [Route::Other; Route::COUNT];
        let mut i = 0;
        while i < apis.len() {
            all[i] = Route::Turn(apis[i]);
            i += 1;
        }
        all[i] = Route::CountTokens;
        all[i + 1] = Route::Passthrough;
        all[i + 2] = Route::Admin;
        all
    };

    /// The route's place in [`Route::ALL`].
    pub fn index(self) -> usize {
        let apis = crate::api::Api::ALL.len();
        match self {
            Route::Turn(api) => crate::api::Api::ALL
                .iter()
                .position(|&a| a == api)
                .unwrap_or(0),
            Route::CountTokens => apis,
            Route::Passthrough => apis + 1,
            Route::Admin => apis + 2,
            Route::Other => apis + 3,
        }
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Turn(api) => api.as_str(),
            Route::CountTokens => "count_tokens",
            Route::Passthrough => "passthrough",
            Route::Admin => "admin",
            Route::Other => "other",
        }
    }
}

/// An ended program, as the ledger counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgramEnd {
    /// What it came to.
    pub outcome: Outcome,
    /// The tool calls it made.
    pub nested_calls: u64,
    /// Bytes of nested results that stayed out of the model's context.
    pub context_bytes_saved: u64,
}

/// Who a request went to. A refused credential is counted by it, so
/// `codemode-proxy run` names the provider that refused it, whatever the
/// route (a Gemini `:countTokens`, a Responses `input_tokens`, a side route).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderId {
    /// OpenAI (Chat Completions, Responses, the rest of `/v1`).
    OpenAi,
    /// Anthropic (Messages).
    Anthropic,
    /// Google's Gemini API.
    Google,
}

impl ProviderId {
    /// Every provider, in the order of their values.
    pub const ALL: [ProviderId; 3] = [
        ProviderId::OpenAi,
        ProviderId::Anthropic,
        ProviderId::Google,
    ];
}

/// One finished request, as the metrics count it.
pub(crate) struct Finished {
    pub(crate) route: Route,
    /// The provider it went to, once its route named one.
    pub(crate) provider: Option<ProviderId>,
    pub(crate) mode: &'static str,
    pub(crate) status: u16,
    pub(crate) seconds: f64,
    /// By [`DENIAL_CODES`].
    pub(crate) denials: [u64; DENIAL_CODES.len()],
    pub(crate) repairs: u64,
    /// By [`Outcome::index`].
    pub(crate) executions: [u64; Outcome::ALL.len()],
    /// By [`Abandoned::index`].
    pub(crate) abandoned: [u64; Abandoned::ALL.len()],
    pub(crate) nested_calls: u64,
    pub(crate) tokens: (u64, u64),
    pub(crate) round_trips_saved: u64,
    pub(crate) context_bytes_saved: u64,
}

/// Why a sandbox worker was killed and replaced, as
/// `codemode_sandbox_worker_failures_total{reason}` spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerFailure {
    /// It did not start, or did not confine itself.
    Spawn,
    /// It died during a run.
    Crash,
    /// It ran out of its address-space limit.
    Memory,
    /// It did not answer within the run's time (or used up its CPU limit).
    Timeout,
    /// It answered something that is not a reply.
    Protocol,
}

impl WorkerFailure {
    /// Every reason, in the order of `Workers::failures`.
    pub const ALL: [WorkerFailure; 5] = [
        WorkerFailure::Spawn,
        WorkerFailure::Crash,
        WorkerFailure::Memory,
        WorkerFailure::Timeout,
        WorkerFailure::Protocol,
    ];

    /// The metric's label.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerFailure::Spawn => "spawn",
            WorkerFailure::Crash => "crash",
            WorkerFailure::Memory => "memory",
            WorkerFailure::Timeout => "timeout",
            WorkerFailure::Protocol => "protocol",
        }
    }
}
