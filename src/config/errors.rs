//! What a configuration mistake is reported as: every bad variable, each
//! named, all at once.

use std::fmt;

/// One bad variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The variable at fault.
    pub var: &'static str,
    /// What is wrong and what to do; never the value of a secret.
    pub message: String,
}

/// Every problem found in the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "codemode-proxy cannot start; fix the configuration:")?;
        for e in &self.0 {
            writeln!(f, "  {}: {}", e.var, e.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}
