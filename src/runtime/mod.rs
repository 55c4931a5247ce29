//! The embedded runtime: the proxy runs `run_code` itself
//! (docs/embedded-runtime.md).
//!
//! A program's tool calls go to the client as ordinary native calls, with
//! ids minted by the proxy in the provider's shape that name the execution
//! and the call ([`ids`]).
//! Executions are pure data: the code, a seed, a fixed clock and every call
//! with its result. A run replays the recorded calls from the start
//! ([`sandbox`]), so resuming needs no live interpreter, and a shared
//! [`ExecutionStore`] would let replicas and restarts continue each other's
//! executions.

mod batch;
pub mod history;
mod ids;
pub mod output;
pub mod pool;
pub(crate) mod program;
pub mod sandbox;
mod store;
mod view;
mod watched;
pub mod worker;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use crate::store_error::{StoreError, StoreFuture};
pub use batch::{
    echoed_batch, handed_out, may_echo, may_echo_calls, CallEntry, EchoedCall, EchoedResult,
};
pub use ids::{
    alias_key, call_id, call_id_as, hex_answer_id, is_minted, lost_program_call_id,
    may_name_minted, mint_execution_id, minted_for, parse_call_id, parse_hex_answer_id,
    random_call_id, resolve_call_id, short_form, CALL_PREFIX, TOOL_USE_PREFIX,
};
pub use pool::{PoolError, RunPool};
pub use sandbox::{CallRecord, RunOutcome};
pub use store::{ExecutionLookup, ExecutionStore, MemoryExecutionStore};
pub use view::ExecView;

use crate::observe::ledger::{Outcome, ProgramEnd};
use crate::sdk::ToolDocs;
use crate::tenant::{os_random, Tenant};

/// Limits on one program.
///
/// Serialized to a sandbox worker with each run ([`worker`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    /// CPU time of one run (one slice between client round trips), counted
    /// on the thread running it from the moment it starts (never while it
    /// waits for a slot of the `RunPool`).
    pub slice: Duration,
    /// Lifetime of an execution across client round trips.
    pub lifetime: Duration,
    /// Heap of one run.
    pub memory_bytes: usize,
    /// Native stack of one run.
    pub stack_bytes: usize,
    /// Tool calls per execution.
    pub max_calls: usize,
    /// Bytes of the result the model gets.
    pub max_output_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            slice: Duration::from_millis(2000),
            lifetime: Duration::from_secs(600),
            memory_bytes: 64 << 20,
            stack_bytes: 512 << 10,
            max_calls: 100,
            max_output_bytes: 20_000,
        }
    }
}

impl Limits {
    /// Wall time one run may take whatever its CPU use, so nothing hangs:
    /// generous (ten slices, and at least ten seconds more than one), since
    /// a program on a busy machine gets less than a whole core.
    pub fn wall_ceiling(&self) -> Duration {
        self.slice
            .saturating_mul(10)
            .max(self.slice.saturating_add(Duration::from_secs(10)))
    }
}

/// One `run_code` call the proxy executes.
///
/// Serialized as JSON for a shared store (its fields by name, so a record
/// written by an older replica still reads: new fields take defaults).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Execution {
    /// Whose execution this is: only this tenant can resume it or see it
    /// in its history.
    pub tenant: Tenant,
    /// 12 random letters and digits and a 4-character tag (see
    /// [`mint_execution_id`]): an unguessable capability that also tells,
    /// when the record is gone, that this proxy minted it for this tenant.
    pub id: String,
    /// Milliseconds since the epoch; also the program's clock.
    pub created_ms: u64,
    /// The model's `run_code` call id.
    pub run_call_id: String,
    /// The program.
    pub code: String,
    /// The text the model wrote with its `run_code` call.
    pub assistant_content: Option<String>,
    /// The model's whole turn (JSON) as it arrived, every provider field
    /// kept (reasoning, thought signatures): what the model is shown as its
    /// `run_code` turn on every later request, since providers refuse a
    /// replayed turn that lost them. `None` when the turn cannot be replayed
    /// as it came (a legacy `function_call`); then it is rebuilt.
    pub model_turn: Option<String>,
    /// The tools the program may call.
    pub tools: Vec<String>,
    /// Those of them that take one string (freeform), not a JSON object.
    pub freeform: Vec<String>,
    /// Every call made so far, in order.
    pub calls: Vec<CallRecord>,
    /// The `run_code` result the model gets, once the program ended.
    pub outcome: Option<String>,
    /// Seeds `Math.random`; kept in the record so any replica replays alike.
    pub seed: u64,
    /// Calls denied in the same model turn, shown to the model beside `run_code`.
    pub denied_calls: Vec<serde_json::Value>,
    /// The provider's id of the response that held the program's call, for
    /// an API that continues a stored conversation by id (Responses'
    /// `previous_response_id`): the conversation goes on from there.
    pub upstream_response: Option<String>,
    /// Their denials.
    pub denials: Vec<serde_json::Value>,
    /// Bumped on every save: a resume saves only over the revision it
    /// read ([`ExecutionStore::replace`]), so two requests resuming one
    /// program at once cannot both move it on.
    #[serde(default)]
    pub revision: u64,
    /// Where each batch of calls handed to the client together starts, in
    /// `calls`: a batch echoed back without its ids is found again by what
    /// it calls ([`batch::batch_key`]).
    #[serde(default)]
    pub batches: Vec<usize>,
    /// The prefix of its calls' ids in its dialect (`call_`, `toolu_` on
    /// Messages): every id the client sees, and every message naming one,
    /// reads as the client got it.
    #[serde(default = "default_call_prefix")]
    pub call_prefix: String,
}

fn default_call_prefix() -> String {
    CALL_PREFIX.to_owned()
}

/// Programs one request may run back to back before the model must answer.
pub const MAX_PROGRAMS_PER_REQUEST: u32 = 8;

/// Prefix of the call ids minted before they took the provider's shape
/// ([`ids`]): an id with it that names no call is a damaged one.
pub const MINTED_PREFIX: &str = "cm_";

impl Execution {
    /// The model's `run_code` turn as the proxy kept it
    /// ([`Execution::model_turn`]), read; `None` when none was kept.
    pub fn kept_turn(&self) -> Option<serde_json::Value> {
        serde_json::from_str(self.model_turn.as_deref()?).ok()
    }

    /// A new execution of `code`, owned by `tenant`.
    pub fn new(
        tenant: Tenant,
        run_call_id: String,
        code: String,
        assistant_content: Option<String>,
        tools: Vec<String>,
    ) -> Execution {
        let created_ms = now_ms();
        let mut seed = [0u8; 8];
        os_random(&mut seed);
        Execution {
            id: mint_execution_id(&tenant),
            tenant,
            created_ms,
            run_call_id,
            code,
            assistant_content,
            model_turn: None,
            tools,
            freeform: Vec::new(),
            calls: Vec::new(),
            outcome: None,
            seed: u64::from_le_bytes(seed),
            denied_calls: Vec::new(),
            upstream_response: None,
            denials: Vec::new(),
            revision: 0,
            batches: Vec::new(),
            call_prefix: default_call_prefix(),
        }
    }

    /// The id the client sees for call `n`: its dialect's prefix (`call_`,
    /// `toolu_` on Messages) and 24 letters and digits that name the call
    /// ([`ids`]).
    ///
    /// Some agents rewrite tool-call ids for models that take only short
    /// ones (opencode keeps the first 9 letters and digits for Mistral
    /// models); the first 9 of this id, `call<alias>`, still tell the calls
    /// of a batch apart and find the call again ([`ExecutionStore::alias`]).
    pub fn call_id(&self, n: usize) -> String {
        call_id_as(&self.call_prefix, &self.id, n)
    }

    /// Each batch's [`batch::batch_key`], with the id of its first call, and the
    /// [`batch::call_key`] of each of its calls with the same id: what a
    /// store keeps so that a batch echoed without ids is found again, and
    /// a reader asks for a batch only among calls that were handed out.
    pub fn batch_keys(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.batches
            .iter()
            .enumerate()
            .filter_map(|(b, &start)| {
                let end = self.batches.get(b + 1).copied().unwrap_or(self.calls.len());
                let batch = self.calls.get(start..end)?;
                let key =
                    batch::batch_key(batch.iter().map(|c| (c.name.as_str(), c.args.as_str())))?;
                let first = self.call_id(start);
                let calls = batch
                    .iter()
                    .map(|c| (batch::call_key(&c.name, &c.args), first.clone()));
                let keys: Vec<(String, String)> = calls.collect();
                Some((key, first, keys))
            })
            .flat_map(|(key, first, calls)| std::iter::once((key, first)).chain(calls))
    }

    /// Whether the execution outlived `lifetime`.
    pub fn is_expired(&self, lifetime: Duration) -> bool {
        now_ms().saturating_sub(self.created_ms) > lifetime.as_millis() as u64
    }
}

/// What the request's ledger counts of an ended program: its outcome, its
/// nested calls and the bytes of results that stayed out of the model's
/// context.
impl From<&Execution> for ProgramEnd {
    fn from(exec: &Execution) -> ProgramEnd {
        let result = exec.outcome.as_deref().unwrap_or("");
        let nested: u64 = exec
            .calls
            .iter()
            .map(|c| c.result.as_ref().map_or(0, |r| r.len() as u64))
            .sum();
        let saved = nested.saturating_sub(result.len() as u64);
        ProgramEnd {
            outcome: Outcome::of(result),
            nested_calls: exec.calls.len() as u64,
            context_bytes_saved: saved,
        }
    }
}

// A saved execution is an `Arc`, and `program_ended`'s generic argument
// is not deref-coerced.
impl From<&Arc<Execution>> for ProgramEnd {
    fn from(exec: &Arc<Execution>) -> ProgramEnd {
        ProgramEnd::from(&**exec)
    }
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What a step of an execution came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// The program ended; `Execution::outcome` holds the model's result.
    Ended,
    /// The program waits on the calls numbered in this range.
    Waiting(std::ops::Range<usize>),
}

/// Runs the program once more (replaying every answered call) in a slot of
/// `pool`, on a blocking thread, so a busy program never stalls the proxy's
/// I/O. It waits its tenant's turn for a slot; when none comes in time the
/// program is not run and ends with an error the model can act on (run it
/// again), so the conversation stays well formed.
///
/// `Err` when the program was not run (no slot in time): the execution
/// is returned unchanged, so the caller decides what the model or the
/// client is told (a new program gets a `BusyError` result; a resume is a
/// retryable 503, since the client's results must not be spent).
///
/// `docs` answer the program's `tools.describe(name)`: the request's plan
/// holds them, not the record (they are the tools' full declarations, as
/// large as the SDK, and the same for every program of the tool set).
pub async fn step(
    mut exec: Execution,
    docs: Arc<ToolDocs>,
    limits: Limits,
    pool: &RunPool,
) -> Result<(Execution, Step), (Execution, PoolError)> {
    let tenant = exec.tenant;
    let job = if let Some(workers) = pool.workers() {
        let workers = workers.clone();
        let exec = exec.clone();
        let limits = limits.clone();
        pool.run_async(&tenant, async move {
            workers
                .run(
                    &tenant,
                    &exec.code,
                    &exec.tools,
                    &exec.freeform,
                    &docs,
                    &exec.calls,
                    exec.seed,
                    exec.created_ms,
                    &limits,
                )
                .await
        })
        .await
    } else {
        let exec = exec.clone();
        let limits = limits.clone();
        pool.run(&tenant, move || {
            sandbox::run_described(
                &exec.code,
                &exec.tools,
                &exec.freeform,
                docs,
                &exec.calls,
                exec.seed,
                exec.created_ms,
                &limits,
            )
        })
        .await
    };
    let outcome = match job {
        Ok(o) => o,
        Err(busy) if busy.not_started() => return Err((exec, busy)),
        Err(e) => RunOutcome::Failed {
            output: String::new(),
            error: e.to_string(),
        },
    };
    Ok(match outcome {
        RunOutcome::Blocked { calls, .. } => {
            let start = exec.calls.len();
            exec.batches.push(start);
            exec.calls.extend(calls);
            let end = exec.calls.len();
            (exec, Step::Waiting(start..end))
        }
        ended => {
            exec.outcome = Some(render_outcome(&ended, &limits));
            (exec, Step::Ended)
        }
    })
}

/// The `run_code` result as the model reads it.
pub fn render_outcome(outcome: &RunOutcome, limits: &Limits) -> String {
    let text = match outcome {
        RunOutcome::Finished { output, value } => {
            let mut t = String::new();
            if !output.is_empty() {
                t.push_str("Output:\n");
                t.push_str(output);
                t.push_str("\n\n");
            }
            t.push_str("Result: ");
            t.push_str(if value.is_empty() { "undefined" } else { value });
            t
        }
        RunOutcome::Failed { output, error } => {
            let mut t = format!("Error: {error}");
            if !output.is_empty() {
                t.push_str("\n\nOutput:\n");
                t.push_str(output);
            }
            t
        }
        RunOutcome::Blocked { .. } => "Error: the program did not finish".to_owned(),
    };
    limit_output(text, limits)
}

/// `text` cut to the bytes the model may get, saying so.
pub fn limit_output(mut text: String, limits: &Limits) -> String {
    if text.len() > limits.max_output_bytes {
        let total = text.len();
        let mut cut = limits.max_output_bytes;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(&format!(
            "\n[truncated: the result was {total} bytes; the limit is {} (CODEMODE_RUN_MAX_OUTPUT)]",
            limits.max_output_bytes
        ));
    }
    text
}

#[cfg(test)]
mod corpus_tests;
#[cfg(test)]
mod tests;
