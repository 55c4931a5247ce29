//! `CODEMODE_SANDBOX` and `CODEMODE_SANDBOX_WORKER`: whether programs run
//! in confined worker processes or on the proxy's own threads.

use std::path::PathBuf;

use super::{SANDBOX, SANDBOX_WORKER};
use crate::runtime::worker::{confinement_available, Sandbox};

/// The sandbox asked for, or the default: worker processes wherever the
/// kernel can confine them. A wrong value is recorded with `fail`.
pub(super) fn from_lookup(
    get: &impl Fn(&str) -> Option<String>,
    fail: &mut impl FnMut(&'static str, String),
) -> Sandbox {
    let asked = get(SANDBOX);
    let explicit = match asked.as_deref().map(str::trim) {
        None | Some("") => false,
        Some("process") => true,
        Some("in-process") => {
            return Sandbox::InProcess {
                why: format!("{SANDBOX}=in-process"),
            }
        }
        Some(other) => {
            fail(
                SANDBOX,
                format!("`{other}` is not a sandbox; use `process` or `in-process`"),
            );
            return Sandbox::InProcess { why: String::new() };
        }
    };
    if !confinement_available() {
        let why = "this system cannot confine a worker process (worker processes need Linux with seccomp)";
        if explicit {
            fail(SANDBOX, format!("{why}; set {SANDBOX}=in-process"));
        }
        return Sandbox::InProcess {
            why: why.to_owned(),
        };
    }
    let worker = match get(SANDBOX_WORKER) {
        Some(path) if !path.trim().is_empty() => PathBuf::from(path),
        // A unit-test binary is no worker: the library's own tests run
        // programs in process unless they name one.
        _ if cfg!(test) && !explicit => {
            return Sandbox::InProcess {
                why: "a unit-test build".to_owned(),
            }
        }
        _ => match std::env::current_exe() {
            Ok(exe) => exe,
            Err(e) => {
                fail(
                    SANDBOX_WORKER,
                    format!(
                        "this executable's path is unknown ({e}); set {SANDBOX_WORKER} to the codemode-proxy binary, or {SANDBOX}=in-process"
                    ),
                );
                return Sandbox::InProcess { why: String::new() };
            }
        },
    };
    Sandbox::Process { worker }
}
