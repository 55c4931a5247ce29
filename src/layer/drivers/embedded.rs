//! The embedded runtime in a request, for every dialect: running the
//! model's `run_code`, and resuming the program when the results of the
//! calls it handed to the client come back.

use std::sync::Arc;

use serde_json::Value;
use tracing::Instrument;

use super::stores::RequestStores;
use crate::error::ProxyError;
use crate::layer::State;
use crate::observe::inspector::Phase;
use crate::observe::ledger;
use crate::plan::ToolPlan;
use crate::runtime::{self, history, minted_for, Execution, Step};
use crate::telemetry;
use crate::tenant::Tenant;
use crate::turn::{Dialect, HeldProgram};

/// What results for a program came to.
pub(crate) enum Resumed {
    /// The program waits on these calls: the client's next turn.
    Hand(Arc<Execution>, std::ops::Range<usize>),
    /// It ended, or its record did: the model is asked next, with the
    /// history rewritten.
    AskModel,
}

/// Times a resume reads the record again after another request changed it
/// first, before the client is asked to retry.
const RESUME_ATTEMPTS: usize = 3;

/// Resumes the program the client's trailing results belong to, in any
/// dialect: checks them against the record, records them, and runs the
/// program until it ends or waits again.
///
/// The record is saved only over the revision this request read
/// ([`crate::runtime::ExecutionStore::replace`]): of two requests resuming
/// it at once (two replicas, a client's retry), one saves and the other
/// reads the record again, where it finds its results already recorded
/// (the same next step) or different ones (a 400).
pub(crate) async fn resume_with(
    state: &State,
    stores: &RequestStores,
    plan: &ToolPlan,
    trailing: history::Trailing,
) -> Result<Resumed, ProxyError> {
    // The first attempt works from the record the request read ahead (a
    // shared store's round trip saved); a lost compare-and-set reads again.
    let mut held = stores.executions.fetched(&stores.tenant, &trailing.exec);
    for _ in 0..RESUME_ATTEMPTS {
        let record = match held.take() {
            Some(record) => record,
            None => state.executions.get(&stores.tenant, &trailing.exec).await?,
        };
        if let Some(resumed) = resume_once(state, stores, plan, &trailing, record).await? {
            return Ok(resumed);
        }
    }
    Err(ProxyError::ResumeConflict)
}

/// Saves `exec` over the revision it was read at; whether it was saved.
async fn save_over(
    state: &State,
    stores: &RequestStores,
    mut exec: Execution,
) -> Result<Option<Arc<Execution>>, ProxyError> {
    let read_at = exec.revision;
    exec.revision += 1;
    let exec = Arc::new(exec);
    if !state.executions.replace(exec.clone(), read_at).await? {
        return Ok(None);
    }
    stores.saved(&exec);
    Ok(Some(exec))
}

/// One attempt of [`resume_with`] on the record as read (`held`); `None`
/// when another request saved the record first.
async fn resume_once(
    state: &State,
    stores: &RequestStores,
    plan: &ToolPlan,
    trailing: &history::Trailing,
    held: Option<Arc<Execution>>,
) -> Result<Option<Resumed>, ProxyError> {
    let (tenant, exec_id) = (&stores.tenant, &trailing.exec);
    let limits = &state.config.limits;
    let Some(held) = held else {
        if minted_for(exec_id, tenant).is_some() {
            ledger::program_abandoned(exec_id, ledger::Abandoned::Lost);
            ledger::program_lost(exec_id);
            return Ok(Some(Resumed::AskModel));
        }
        let ids: Vec<String> = trailing
            .results
            .iter()
            .map(|(n, _)| runtime::call_id(exec_id, *n))
            .collect();
        return Err(not_handed_out(&ids));
    };
    stores.saved(&held);
    // The turn the client sends back must name each call as it was handed
    // out: an agent that rewrote an id onto another call is not guessed at.
    for (n, name) in &trailing.calls {
        match held.calls.get(*n) {
            Some(call) if call.name == *name || name.is_empty() => {}
            Some(call) => {
                return Err(ProxyError::InvalidRequest(format!(
                    "the assistant turn names call `{}` `{name}`, but the proxy handed that call \
                     out as `{}`; send the conversation's tool calls back as they came",
                    held.call_id(*n),
                    call.name
                )))
            }
            None => return Err(never_made(&held, *n)),
        }
    }
    if held.outcome.is_some() {
        // A resend of a finished conversation: what it says must be what was recorded.
        for (n, content) in &trailing.results {
            match held.calls.get(*n).map(|c| &c.result) {
                None => return Err(never_made(&held, *n)),
                Some(Some(previous)) if previous != content => return Err(differs(&held, *n)),
                Some(_) => {}
            }
        }
        return Ok(Some(Resumed::AskModel));
    }
    let mut exec = Arc::unwrap_or_clone(held);
    if exec.is_expired(limits.lifetime) {
        exec.outcome = Some(format!(
            "Error: TimeoutError: the program outlived its {} s lifetime (CODEMODE_RUN_LIFETIME_SECS) \
             while waiting for tool results; run it again if it is still needed",
            limits.lifetime.as_secs()
        ));
        return Ok(save_over(state, stores, exec).await?.map(|e| {
            ledger::program_abandoned(&e.id, ledger::Abandoned::Expired);
            ledger::program_ended(&e);
            ledger::program_seen(&*e, Phase::Expired, false);
            Resumed::AskModel
        }));
    }
    let mut fresh = false;
    for (n, content) in &trailing.results {
        let Some(call) = exec.calls.get_mut(*n) else {
            return Err(never_made(&exec, *n));
        };
        match &call.result {
            None => {
                call.result = Some(content.clone());
                fresh = true;
            }
            // A retried request resends answers the proxy already has.
            Some(previous) if previous == content => {}
            Some(_) => return Err(differs(&exec, *n)),
        }
    }
    let waiting: Vec<usize> = (0..exec.calls.len())
        .filter(|&n| exec.calls[n].result.is_none())
        .collect();
    if !fresh && !waiting.is_empty() {
        // A retry: hand out the same waiting calls again.
        let range = waiting[0]..exec.calls.len();
        return Ok(Some(Resumed::Hand(Arc::new(exec), range)));
    }
    if !waiting.is_empty() {
        let missing: Vec<String> = waiting.iter().map(|&n| exec.call_id(n)).collect();
        return Err(ProxyError::InvalidRequest(format!(
            "results are missing for calls {}; send one result for each call of the turn",
            missing.join(", ")
        )));
    }
    ledger::program_seen(&exec, Phase::Running, false);
    let span = telemetry::program_span(&exec.run_call_id);
    let docs = plan.docs.clone();
    let (exec, step) = match runtime::step(exec, docs, limits.clone(), &state.runs)
        .instrument(span.clone())
        .await
    {
        Ok(stepped) => stepped,
        // Busy: the results are not recorded, so the client's retry resumes.
        Err((exec, busy)) => {
            ledger::program_seen(&exec, Phase::Waiting, false);
            return Err(ProxyError::RuntimeBusy(busy.to_string()));
        }
    };
    trace_step(&span, &exec, &step);
    let Some(exec) = save_over(state, stores, exec).await? else {
        return Ok(None);
    };
    if fresh {
        // The client answered a batch and the program ran on: no model round trip.
        ledger::round_trip_saved();
    }
    log_step(&exec, &step);
    ledger::program_seen(&*exec, phase(&step), fresh);
    Ok(Some(match step {
        Step::Waiting(range) => Resumed::Hand(exec, range),
        Step::Ended => Resumed::AskModel,
    }))
}

/// What a run of a program came to, at `info`: counts only, never the
/// code, arguments or results (they may hold secrets).
pub(crate) fn log_step(exec: &Execution, step: &Step) {
    let run_call = exec.run_call_id.as_str();
    match step {
        Step::Waiting(range) => {
            tracing::info!(target: "codemode::program", run_call, waiting = range.len(), calls = exec.calls.len(), "program waits on tool calls the client runs");
        }
        Step::Ended => {
            let outcome = match exec.outcome.as_deref() {
                Some(o) if o.starts_with("Error:") => "failed",
                _ => "finished",
            };
            tracing::info!(target: "codemode::program", run_call, calls = exec.calls.len(), outcome, "program ended");
            ledger::program_ended(exec);
        }
    }
}

/// A step as the inspector names it.
fn phase(step: &Step) -> Phase {
    match step {
        Step::Waiting(_) => Phase::Waiting,
        Step::Ended => Phase::Ended,
    }
}

/// What a run came to, on its `execute_tool run_code` span: a child span
/// per call handed to the client (names and ids only), an error status
/// for a program that failed.
fn trace_step(span: &tracing::Span, exec: &Execution, step: &Step) {
    match step {
        Step::Waiting(range) => telemetry::handed_out(
            span,
            range
                .clone()
                .map(|n| (exec.calls[n].name.as_str(), exec.call_id(n))),
        ),
        Step::Ended => {
            let failed = exec
                .outcome
                .as_deref()
                .is_some_and(|o| o.starts_with("Error:"));
            telemetry::program_ended(span, failed);
        }
    }
}

/// Results naming calls this tenant was never handed (another tenant's,
/// made up, or changed): all read alike, so nothing tells them apart.
pub(crate) fn not_handed_out(ids: &[String]) -> ProxyError {
    ProxyError::InvalidRequest(format!(
        "tool results name calls `{}` that this proxy did not hand out to this client: send \
         results only for the calls the proxy handed out, with their ids as they came, in the \
         conversation they came in",
        ids.join("`, `")
    ))
}

fn never_made(exec: &Execution, n: usize) -> ProxyError {
    ProxyError::InvalidRequest(format!(
        "tool result `{}` names a call the program never made",
        exec.call_id(n)
    ))
}

fn differs(exec: &Execution, n: usize) -> ProxyError {
    ProxyError::InvalidRequest(format!(
        "tool result `{}` differs from the one already given for that call; send the \
         conversation's tool results unchanged",
        exec.call_id(n)
    ))
}

/// The model's `run_code` call in a judged completion.
pub(crate) struct ProgramCall {
    pub(crate) id: String,
    pub(crate) arguments: String,
    pub(crate) content: Option<String>,
    /// The provider's id of the response holding the call (Responses).
    pub(crate) response_id: Option<String>,
    /// The prefix of the ids its calls get (the dialect's).
    pub(crate) call_prefix: &'static str,
}

/// What the model's program came to when it first ran.
pub(crate) struct ProgramRun {
    pub(crate) exec: Arc<Execution>,
    pub(crate) step: Step,
}

/// Runs the turn's one program, handed over by the turn core, with the
/// model's turn as dialect `D`'s history replays it.
pub(crate) async fn run_program<D: Dialect>(
    state: &State,
    tenant: &Tenant,
    plan: &ToolPlan,
    program: HeldProgram,
) -> Result<ProgramRun, ProxyError> {
    let model_turn = program.model_turn::<D>();
    let call = ProgramCall {
        id: program.id,
        arguments: program.arguments,
        content: program.content,
        response_id: program.response_id,
        call_prefix: D::CALL_ID_PREFIX,
    };
    let (exec, step) = run_new(
        state,
        tenant,
        plan,
        call,
        model_turn,
        program.denied_calls,
        program.denials,
    )
    .await?;
    Ok(ProgramRun { exec, step })
}

/// Starts the model's program, owned by `tenant`, in any dialect: records
/// it (with the model's turn as its dialect replays it, `model_turn`) and
/// runs it until it ends or waits on calls.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_new(
    state: &State,
    tenant: &Tenant,
    plan: &ToolPlan,
    program: ProgramCall,
    model_turn: Option<String>,
    denied_calls: Vec<Value>,
    denials: Vec<Value>,
) -> Result<(Arc<Execution>, Step), ProxyError> {
    let code = serde_json::from_str::<Value>(&program.arguments)
        .ok()
        .and_then(|a| a.get("code").and_then(Value::as_str).map(str::to_owned));
    let mut exec = Execution::new(
        *tenant,
        program.id,
        code.clone().unwrap_or_default(),
        program.content,
        plan.visible_names.clone(),
    );
    exec.model_turn = model_turn;
    exec.call_prefix = program.call_prefix.to_owned();
    exec.upstream_response = program.response_id;
    exec.freeform = plan.freeform.iter().cloned().collect();
    exec.freeform.sort();
    exec.denied_calls = denied_calls;
    exec.denials = denials;
    ledger::program_seen(&exec, Phase::Running, false);
    let span = telemetry::program_span(&exec.run_call_id);
    let (exec, step) = match code {
        Some(_) => match runtime::step(
            exec,
            plan.docs.clone(),
            state.config.limits.clone(),
            &state.runs,
        )
        .instrument(span.clone())
        .await
        {
            Ok(stepped) => stepped,
            // A program that never started: the model may run it again.
            Err((mut exec, busy)) => {
                exec.outcome = Some(format!("Error: {busy}"));
                (exec, Step::Ended)
            }
        },
        None => {
            exec.outcome = Some(
                "Error: INVALID_ARGS: run_code takes a JSON object {\"code\": \"...\"} whose code is \
                 the body of an async function"
                    .to_owned(),
            );
            (exec, Step::Ended)
        }
    };
    trace_step(&span, &exec, &step);
    drop(span);
    let exec = Arc::new(exec);
    state.executions.put(exec.clone()).await?;
    tracing::info!(target: "codemode::program", run_call = %exec.run_call_id, tools = exec.tools.len(), "program started");
    log_step(&exec, &step);
    ledger::program_seen(&*exec, phase(&step), false);
    Ok((exec, step))
}
