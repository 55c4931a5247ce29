//! What a judged turn adds to the request's ledger: its denials by code,
//! and a repair when the decision re-asks the model.
//!
//! The ledger ([`crate::observe::ledger`]) sits below the turn driver that
//! reports into it, so it reads the driver's calls and decisions through
//! its counting traits, implemented here where both are in view.

use crate::classify::DenialCode;
use crate::observe::ledger::{CountedCall, CountedDecision};
use crate::turn::{Decision, Fate, JudgedCall};

impl CountedCall for JudgedCall {
    fn denial_code(&self) -> Option<DenialCode> {
        match &self.fate {
            Fate::Denied(d) => Some(d.code),
            Fate::Passed | Fate::Program => None,
        }
    }
}

impl CountedDecision for Decision {
    fn is_repair(&self) -> bool {
        *self == Decision::Repair
    }
}
