//! Runs in worker processes: model-written programs are evaluated outside
//! the proxy's address space, in processes started from the proxy's own
//! binary (`codemode-proxy sandbox-worker`) with an empty environment and
//! only two pipes, each confined by the kernel before it reads a run
//! (docs/security.md, "Where programs run").
//!
//! [`Workers`] is the proxy's side (a warm pool, one run per worker at a
//! time, a broken worker killed and replaced); [`serve`] is the worker's.

mod admit;
#[cfg(target_os = "linux")]
mod confine;
mod pool;
#[cfg(target_os = "linux")]
mod probe;
mod protocol;
#[cfg(target_os = "linux")]
mod serve;

use std::path::PathBuf;

pub use pool::Workers;

/// Where programs run (`CODEMODE_SANDBOX`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sandbox {
    /// In confined worker processes started from `worker`
    /// (`CODEMODE_SANDBOX=process`, the default where seccomp is available).
    Process {
        /// The executable that serves `sandbox-worker`: this binary unless
        /// `CODEMODE_SANDBOX_WORKER` names another.
        worker: PathBuf,
    },
    /// On the proxy's own threads (`CODEMODE_SANDBOX=in-process`).
    InProcess {
        /// Why, for the start-up log line.
        why: String,
    },
}

impl Sandbox {
    /// The setting's name, as `CODEMODE_SANDBOX` spells it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Sandbox::Process { .. } => "process",
            Sandbox::InProcess { .. } => "in-process",
        }
    }
}

/// Whether this system can confine a worker (Linux with seccomp).
pub(crate) fn confinement_available() -> bool {
    #[cfg(target_os = "linux")]
    {
        confine::seccomp_available()
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// The worker's main (`codemode-proxy sandbox-worker ARGS`).
pub fn serve(args: &[std::ffi::OsString]) -> std::process::ExitCode {
    #[cfg(target_os = "linux")]
    {
        serve::serve(args)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = args;
        eprintln!("codemode-proxy: sandbox workers need Linux; set CODEMODE_SANDBOX=in-process");
        std::process::ExitCode::from(2)
    }
}
