//! How far one request has gone across its upstream rounds: repairs and
//! programs against their bounds, and the usage of the rounds that ended.
//! The JSON driver and every stream judge count with it, so the bounds and
//! the sums are the same on every path.

use serde_json::{json, Value};

use super::{decide, Bounds, Decision, JudgedCall, Summary};
use crate::runtime::MAX_PROGRAMS_PER_REQUEST;

/// The rounds of one client request.
#[derive(Clone, Debug, Default)]
pub struct Rounds {
    /// `CODEMODE_MAX_REPAIRS`.
    pub max_repairs: u32,
    /// Repair rounds started.
    pub repairs: u32,
    /// Programs that ran to their end inside the request.
    pub programs: u32,
    /// The usage of every round that ended, summed.
    pub usage: Option<Value>,
}

impl Rounds {
    /// The first round of a request repairing at most `max_repairs` times.
    pub fn new(max_repairs: u32) -> Rounds {
        Rounds {
            max_repairs,
            ..Rounds::default()
        }
    }

    /// Rounds that came before the current one.
    pub fn before(&self) -> u32 {
        self.repairs + self.programs
    }

    /// The one turn-level decision for the current round's `calls`, told
    /// to the request's ledger.
    pub fn decide(&self, calls: &[JudgedCall], errored: bool) -> Decision {
        let summary = Summary::of(calls, errored);
        let decision = decide(
            summary,
            Bounds {
                repairs: self.repairs,
                max_repairs: self.max_repairs,
                programs: self.programs,
                max_programs: MAX_PROGRAMS_PER_REQUEST,
            },
        );
        crate::observe::ledger::turn_decided(calls, decision);
        decision
    }

    /// The current round ended with `usage` and another follows in the
    /// same client answer: its usage joins the sum.
    pub fn close(&mut self, usage: Option<&Value>) {
        add_usage(&mut self.usage, usage);
    }

    /// A repair round starts.
    pub fn repaired(&mut self) {
        self.repairs += 1;
    }

    /// A program ended inside the request; the model is asked again.
    pub fn program_ended(&mut self) {
        self.programs += 1;
    }

    /// The usage of every round so far, the current one's (`current`) included.
    pub fn total(&self, current: Option<&Value>) -> Option<Value> {
        let mut total = self.usage.clone();
        add_usage(&mut total, current);
        total
    }
}

/// Adds `round` (a `usage` object) into `total`, field by field.
pub fn add_usage(total: &mut Option<Value>, round: Option<&Value>) {
    let Some(round) = round.filter(|r| r.is_object()) else {
        return;
    };
    match total {
        None => *total = Some(round.clone()),
        Some(t) => add_numbers(t, round),
    }
}

fn add_numbers(total: &mut Value, add: &Value) {
    match (total, add) {
        (Value::Object(t), Value::Object(a)) => {
            for (k, v) in a {
                match t.get_mut(k) {
                    Some(slot) => add_numbers(slot, v),
                    None => {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (t @ Value::Number(_), Value::Number(a)) => {
            if let (Some(x), Some(y)) = (t.as_u64(), a.as_u64()) {
                *t = Value::from(x + y);
            } else if let (Some(x), Some(y)) = (t.as_f64(), a.as_f64()) {
                *t = json!(x + y);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_sums_nested_fields() {
        let mut total = None;
        add_usage(
            &mut total,
            Some(&json!({"prompt_tokens": 10, "total_tokens": 12, "d": {"cached": 1}})),
        );
        add_usage(
            &mut total,
            Some(&json!({"prompt_tokens": 5, "total_tokens": 6, "d": {"cached": 2}})),
        );
        assert_eq!(
            total.unwrap(),
            json!({"prompt_tokens": 15, "total_tokens": 18, "d": {"cached": 3}})
        );
    }

    #[test]
    fn a_non_object_usage_is_not_summed() {
        let mut total = Some(json!({"prompt_tokens": 1}));
        add_usage(&mut total, Some(&json!([1])));
        add_usage(&mut total, Some(&json!(3)));
        assert_eq!(total.unwrap(), json!({"prompt_tokens": 1}));
    }
}
