//! What the request's ledger reports to the inspector: nothing without
//! `CODEMODE_ADMIN_TOKEN` (the ledger holds no inspector, and each report
//! checks that first and returns).

use std::sync::Mutex;

use super::{with, RequestLedger, LEDGER};
use crate::classify::ONE_PROGRAM_CODE;
use crate::observe::inspector::{Context, DenialSeen, Inspector, Phase, Repair, Watched};
use crate::verdict::{Decision, Fate, JudgedCall};

impl RequestLedger {
    /// The request as the inspector names it.
    pub(super) fn context(&self) -> Context<'_> {
        let (scope, preset) = match self.selected.get() {
            Some(s) => (s.scope.as_str(), s.preset.name.as_str()),
            None => ("", ""),
        };
        Context {
            scope,
            preset,
            dialect: self.route().as_str(),
            model: self.model.get().map_or("", String::as_str),
            sdk: self.sdk.get().copied().unwrap_or(""),
        }
    }

    /// Reports denials whose repair was judged to the inspector.
    pub(super) fn settle(&self, inspector: &Inspector, denials: Vec<DenialSeen>, repair: Repair) {
        if !denials.is_empty() {
            inspector.denials(&self.context(), denials, repair);
        }
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the current request reports to an inspector.
pub fn inspecting() -> bool {
    LEDGER.try_with(|l| l.inspector.is_some()).unwrap_or(false)
}

/// Notes the request's `model` for the inspector.
pub fn set_model(model: &str) {
    with(|l| {
        if l.inspector.is_some() {
            let _ = l.model.set(model.to_owned());
        }
    });
}

/// A program of the current request reached `phase`; `resumed` when a
/// batch of its calls came back and it ran on without the model.
pub fn program_seen(program: &dyn Watched, phase: Phase, resumed: bool) {
    with(|l| {
        if let Some(i) = &l.inspector {
            i.program(&l.context(), program, phase, resumed);
        }
    });
}

/// Results came back for a program whose record is gone.
pub fn program_lost(exec_id: &str) {
    with(|l| {
        if let Some(i) = &l.inspector {
            i.lost(exec_id);
        }
    });
}

/// The turn core decided a model turn: counted (its denials by code, a
/// repair), logged (one line per denied call) and traced (a
/// `codemode.denial` event of the round's span per denied call), and told
/// to the inspector when one listens. Every path (JSON and stream, every
/// dialect) decides a round once, through `turn::Rounds::decide`, so each
/// denial is logged and counted once; what is counted and listed is
/// derived here, and the core decides nothing for observers.
pub fn turn_decided(calls: &[JudgedCall], decision: Decision) {
    let mut denials = Vec::new();
    for c in calls {
        if let Fate::Denied(d) = &c.fate {
            tracing::info!(target: "codemode::denial", tool = %c.name, code = %d.code, "tool call denied");
            crate::telemetry::denied(&c.name, d.code);
            denials.push(d.code);
        }
    }
    super::judged(denials.into_iter(), decision == Decision::Repair);
    turn_judged(|| withheld(calls, decision), after(decision));
}

/// A model turn was judged, for the inspector: `withheld` lists the calls
/// it denied (built only when an inspector listens); `next` is what
/// becomes of them, `None` when a repair round asks the model again (then
/// the next turn judged, or the request's end, tells how it went).
fn turn_judged(withheld: impl FnOnce() -> Vec<DenialSeen>, next: Option<Repair>) {
    with(|l| {
        let Some(inspector) = &l.inspector else {
            return;
        };
        let seen = withheld();
        let earlier = std::mem::take(&mut *lock(&l.pending));
        let repaired = if seen.is_empty() {
            Repair::Succeeded
        } else {
            Repair::DeniedAgain
        };
        l.settle(inspector, earlier, repaired);
        match next {
            None => *lock(&l.pending) = seen,
            Some(fate) => l.settle(inspector, seen, fate),
        }
    });
}

/// The calls a decided turn withheld, as the inspector lists them: each
/// denial, and each program refused because it was not alone in its turn
/// (`ONE_PROGRAM`). A program alone past the per-request bound is not a
/// denial.
fn withheld(calls: &[JudgedCall], decision: Decision) -> Vec<DenialSeen> {
    let programs = calls.iter().filter(|c| c.fate == Fate::Program).count();
    let refused_programs =
        decision != Decision::Program && (programs > 1 || calls.len() > programs);
    let at_ms = crate::observe::inspector::now_ms();
    calls
        .iter()
        .filter_map(|c| {
            let code = match &c.fate {
                Fate::Denied(d) => d.code.as_str(),
                Fate::Program if refused_programs => ONE_PROGRAM_CODE,
                Fate::Program | Fate::Passed => return None,
            };
            Some(DenialSeen {
                at_ms,
                tool: c.name.clone(),
                code,
            })
        })
        .collect()
}

/// What becomes of a turn's withheld calls; `None` when a repair round
/// asks the model again.
fn after(decision: Decision) -> Option<Repair> {
    match decision {
        Decision::Repair => None,
        Decision::Splice => Some(Repair::Spliced),
        Decision::Program => Some(Repair::WithProgram),
        Decision::GiveUp => Some(Repair::Limit),
        Decision::Final => Some(Repair::Unfinished),
    }
}
