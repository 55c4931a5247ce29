//! The inspector's memory: recent programs and denials, and the totals
//! since start, for `/codemode/inspector` and `/codemode/api/*`.
//!
//! It exists only when `CODEMODE_ADMIN_TOKEN` is set; without it the
//! request's ledger holds none and nothing is recorded. With it, the code
//! that runs and judges reports through the ledger ([`super::ledger`]'s
//! `program_seen`, `turn_decided`, ...), as plain values and through the
//! [`Watched`] view of a program, so this module names no type above it.
//!
//! What it keeps is bounded by bytes (`CODEMODE_INSPECTOR_MB`): a ring of
//! programs (seven eighths) and one of denials (an eighth), the oldest
//! dropped first. Updates take one short lock and build their live event
//! only when someone listens.
//!
//! ```text
//! ledger ──program_seen / turn_decided / finish──▶ Inspector ──▶ rings, totals
//!                                                    └──▶ events (when listened to)
//! ```

mod record;
mod ring;
mod totals;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};
use tokio::sync::broadcast;

use super::counted::{Finished, Outcome, ProgramEnd};
use record::capped;
pub use record::{CallSeen, DenialRecord, ProgramRecord, Repair, State, PAYLOAD_CAP};
use ring::{Kept, Ring};
use totals::Totals;

/// A program as the inspector reads it, implemented by the runtime's
/// execution record (so this module needs none of its types).
pub trait Watched {
    /// The execution's id.
    fn exec_id(&self) -> &str;
    /// The model's `run_code` call id.
    fn run_call_id(&self) -> &str;
    /// When it was created (ms since the epoch).
    fn created_ms(&self) -> u64;
    /// The program.
    fn code(&self) -> &str;
    /// How many calls it made.
    fn call_count(&self) -> usize;
    /// Call `n`: its tool, its arguments (JSON text) and its result, if any.
    fn call(&self, n: usize) -> (&str, &str, Option<&str>);
    /// The `run_code` result the model gets, once it ended.
    fn outcome(&self) -> Option<&str>;
    /// Its console output, once it ended.
    fn console(&self) -> Option<&str>;
    /// What the ledger counts of it once it ended.
    fn end(&self) -> ProgramEnd;
}

/// Where a program is, as reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// It is about to run (new, or resumed with results).
    Running,
    /// It handed calls to the agent.
    Waiting,
    /// It ended; its outcome says how.
    Ended,
    /// It outlived its lifetime.
    Expired,
}

/// The request a report comes from.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// Its scope.
    pub scope: &'a str,
    /// Its preset.
    pub preset: &'a str,
    /// Its wire API.
    pub dialect: &'static str,
    /// Its `model`.
    pub model: &'a str,
    /// How its SDK rendered (`full`, `compact`; empty without one).
    pub sdk: &'static str,
}

/// A denial as the ledger reports it.
#[derive(Clone, Debug)]
pub struct DenialSeen {
    /// When it was judged.
    pub at_ms: u64,
    /// The name the model called.
    pub tool: String,
    /// Its code.
    pub code: &'static str,
}

/// A live update: its SSE event name and its JSON.
pub type Event = (&'static str, Arc<str>);

/// Live updates a slow listener may fall behind by before it is told to
/// read the lists again.
const EVENT_BACKLOG: usize = 256;

/// The inspector's memory.
#[derive(Debug)]
pub struct Inspector {
    payloads: bool,
    lifetime_ms: u64,
    budget: usize,
    started_ms: u64,
    kept: Mutex<KeptState>,
    totals: Totals,
    events: broadcast::Sender<Event>,
}

#[derive(Debug)]
struct KeptState {
    programs: Ring<ProgramRecord>,
    /// Execution id → the program's number.
    index: HashMap<String, u64>,
    denials: Ring<DenialRecord>,
    /// The next program's number, and the next denial's.
    next_program: u64,
    next_denial: u64,
}

impl Kept for ProgramRecord {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn weight(&self) -> usize {
        self.weight
    }
}

impl Kept for DenialRecord {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn weight(&self) -> usize {
        self.weigh()
    }
}

impl Inspector {
    /// An empty inspector keeping `budget` bytes; `payloads` keeps
    /// arguments, results and console text; a program waiting longer than
    /// `lifetime_ms` shows as expired.
    pub fn new(budget: usize, payloads: bool, lifetime_ms: u64) -> Inspector {
        let now = now_ms();
        Inspector {
            payloads,
            lifetime_ms,
            budget,
            started_ms: now,
            kept: Mutex::new(KeptState {
                programs: Ring::new(budget - budget / 8),
                index: HashMap::new(),
                denials: Ring::new(budget / 8),
                next_program: 1,
                next_denial: 1,
            }),
            totals: Totals::new(now),
            events: broadcast::channel(EVENT_BACKLOG).0,
        }
    }

    fn kept(&self) -> MutexGuard<'_, KeptState> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Live updates from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    fn publish(&self, kind: &'static str, build: impl FnOnce() -> Value) {
        if self.events.receiver_count() > 0 {
            let _ = self.events.send((kind, build().to_string().into()));
        }
    }

    // ---- Recording ----

    /// A program of the request `ctx` reached `phase`; `resumed` when a
    /// batch of its calls came back and it ran on without the model.
    pub fn program(&self, ctx: &Context<'_>, w: &dyn Watched, phase: Phase, resumed: bool) {
        let now = now_ms();
        let mut kept = self.kept();
        let kept = &mut *kept;
        let (seq, fresh) = match kept.index.get(w.exec_id()) {
            Some(&seq) => (seq, false),
            None => {
                let seq = kept.next_program;
                kept.next_program += 1;
                let mut rec = ProgramRecord {
                    seq,
                    exec_id: w.exec_id().to_owned(),
                    run_call_id: w.run_call_id().to_owned(),
                    scope: ctx.scope.to_owned(),
                    preset: ctx.preset.to_owned(),
                    dialect: ctx.dialect,
                    model: ctx.model.to_owned(),
                    sdk: ctx.sdk,
                    started_ms: w.created_ms(),
                    code: w.code().to_owned(),
                    ..ProgramRecord::default()
                };
                rec.weight = rec.weigh();
                kept.index.insert(rec.exec_id.clone(), seq);
                forget(&mut kept.index, kept.programs.push(rec));
                (seq, true)
            }
        };
        let Some(rec) = kept.programs.get_mut(seq) else {
            // Heavier than the whole budget: not kept.
            return;
        };
        let before = rec.weight;
        update(rec, w, phase, resumed, fresh, now, self.payloads);
        rec.weight = rec.weigh();
        let after = rec.weight;
        let summary =
            (self.events.receiver_count() > 0).then(|| rec.summary(now, self.lifetime_ms));
        forget(&mut kept.index, kept.programs.reweighed(before, after));
        if let Some(summary) = summary {
            let _ = self.events.send(("execution", summary.to_string().into()));
        }
    }

    /// A program's record was gone when its results came back (evicted,
    /// a restart, or past its lifetime): it expired.
    pub fn lost(&self, exec_id: &str) {
        let now = now_ms();
        let mut kept = self.kept();
        let Some(&seq) = kept.index.get(exec_id) else {
            return;
        };
        let Some(rec) = kept.programs.get_mut(seq) else {
            return;
        };
        if !rec.state.ended() {
            rec.state = State::Expired;
            rec.ended_ms = Some(now);
        }
        let summary = rec.summary(now, self.lifetime_ms);
        drop(kept);
        self.publish("execution", || summary);
    }

    /// Denials of the request `ctx`, and what became of them.
    pub fn denials(&self, ctx: &Context<'_>, seen: Vec<DenialSeen>, repair: Repair) {
        for d in seen {
            self.totals.denied(d.code);
            let mut kept = self.kept();
            let seq = kept.next_denial;
            kept.next_denial += 1;
            let rec = DenialRecord {
                seq,
                at_ms: d.at_ms,
                scope: ctx.scope.to_owned(),
                preset: ctx.preset.to_owned(),
                dialect: ctx.dialect,
                model: ctx.model.to_owned(),
                sdk: ctx.sdk,
                tool: d.tool,
                code: d.code,
                repair,
            };
            let shown = (self.events.receiver_count() > 0).then(|| rec.to_json());
            kept.denials.push(rec);
            drop(kept);
            if let Some(shown) = shown {
                let _ = self.events.send(("denial", shown.to_string().into()));
            }
        }
    }

    /// A request ended: its counts join the totals.
    pub fn finished(&self, f: &Finished) {
        self.totals.finished(f, now_ms());
    }

    // ---- Reading ----

    /// Programs, newest first, at most `limit`.
    pub fn executions(&self, limit: usize) -> Value {
        let now = now_ms();
        let kept = self.kept();
        let list: Vec<Value> = kept
            .programs
            .newest_first()
            .take(limit)
            .map(|r| r.summary(now, self.lifetime_ms))
            .collect();
        json!({"executions": list, "kept": kept.programs.len()})
    }

    /// The program numbered `id`, whole.
    pub fn execution(&self, id: &str) -> Option<Value> {
        let seq: u64 = id.parse().ok()?;
        let now = now_ms();
        let kept = self.kept();
        kept.programs
            .get(seq)
            .map(|r| r.whole(now, self.lifetime_ms, self.payloads))
    }

    /// Denials, newest first, at most `limit`.
    pub fn recent_denials(&self, limit: usize) -> Value {
        let kept = self.kept();
        let list: Vec<Value> = kept
            .denials
            .newest_first()
            .take(limit)
            .map(DenialRecord::to_json)
            .collect();
        json!({"denials": list, "kept": kept.denials.len()})
    }

    /// The totals and their history.
    pub fn totals(&self) -> Value {
        let mut v = self.totals.to_json(now_ms());
        v["since_ms"] = json!(self.started_ms);
        v
    }

    /// The totals now, for a live update.
    pub fn totals_now(&self) -> Value {
        json!({"at_ms": now_ms(), "now": self.totals.current()})
    }

    /// What the inspector keeps, against its budget.
    pub fn memory(&self) -> Value {
        let kept = self.kept();
        json!({
            "budget_bytes": self.budget,
            "used_bytes": kept.programs.bytes() + kept.denials.bytes(),
            "executions_kept": kept.programs.len(),
            "denials_kept": kept.denials.len(),
            "payloads": self.payloads,
            "payload_cap_bytes": PAYLOAD_CAP,
            "started_at_ms": self.started_ms,
            "lifetime_ms": self.lifetime_ms,
        })
    }
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Drops the index entries of records the ring let go.
fn forget(index: &mut HashMap<String, u64>, gone: Vec<ProgramRecord>) {
    for rec in gone {
        index.remove(&rec.exec_id);
    }
}

/// Brings `rec` up to date with `w` at `phase`. `fresh`: the record was
/// made just now (a program this replica had not seen: started on another
/// one), so the times of what happened before are unknown.
fn update(
    rec: &mut ProgramRecord,
    w: &dyn Watched,
    phase: Phase,
    resumed: bool,
    fresh: bool,
    now: u64,
    payloads: bool,
) {
    for n in 0..w.call_count() {
        let (name, args, result) = w.call(n);
        if n >= rec.calls.len() {
            rec.calls.push(CallSeen {
                name: name.to_owned(),
                args_bytes: args.len(),
                args: payloads.then(|| capped(args)),
                ..CallSeen::default()
            });
        }
        let call = &mut rec.calls[n];
        match result {
            Some(result) if call.result_bytes.is_none() => {
                call.result_bytes = Some(result.len());
                call.result_ms = (!fresh).then_some(now);
                call.result = payloads.then(|| capped(result));
            }
            None if phase == Phase::Waiting && call.handed_ms.is_none() && !fresh => {
                call.handed_ms = Some(now);
            }
            _ => {}
        }
    }
    if resumed {
        rec.round_trips_saved += 1;
    }
    rec.state = match phase {
        Phase::Running => State::Running,
        Phase::Waiting => State::Waiting,
        Phase::Expired => State::Expired,
        Phase::Ended => match Outcome::of(w.outcome().unwrap_or("")) {
            Outcome::Ok => State::Finished,
            Outcome::Interrupted => State::Interrupted,
            Outcome::Error | Outcome::Timeout => State::Failed,
        },
    };
    if rec.state.ended() {
        rec.ended_ms.get_or_insert(now);
        let outcome = w.outcome().unwrap_or("");
        rec.result_bytes = Some(outcome.len());
        rec.console_bytes = Some(w.console().map_or(0, str::len));
        rec.context_bytes_saved = Some(w.end().context_bytes_saved);
        if payloads {
            rec.result = Some(capped(outcome));
            rec.console = w.console().map(capped);
        }
    }
}

#[cfg(test)]
mod tests;
