//! What the kernel enforces on a sandbox worker before it reads its first
//! run: resource limits, Landlock (no file system, no TCP, no signals or
//! abstract sockets outside), and a seccomp filter that leaves evaluation
//! only its pipes, memory and clocks.
//!
//! The order matters: each layer uses system calls the next one forbids
//! (`setrlimit`, the Landlock calls), so seccomp comes last. Every step
//! goes through a crate's safe API (the crate forbids `unsafe`).

use std::collections::BTreeMap;

use landlock::{Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetStatus, Scope, ABI};
use nix::sys::resource::{setrlimit, Resource};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// Limits the worker is started with (its command line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rlimits {
    /// Address space, bytes: a backstop behind QuickJS's own heap limit for
    /// memory the engine does not count.
    pub(crate) address_space: u64,
    /// CPU seconds over the worker's whole life: a backstop behind the
    /// per-run interrupt, for a loop inside the engine that never checks it.
    pub(crate) cpu_secs: u64,
}

/// Confines the calling process, single-threaded, for good: what is in
/// force, for the log; `Err` when seccomp could not be applied (the worker
/// must not run anything then).
pub(crate) fn confine(limits: Rlimits) -> Result<String, String> {
    let mut applied = Vec::new();
    set(
        Resource::RLIMIT_AS,
        limits.address_space,
        limits.address_space,
    )?;
    // SIGXCPU at the soft limit says why the worker died; the hard one,
    // a little later, is SIGKILL for a worker that ignored it.
    set(
        Resource::RLIMIT_CPU,
        limits.cpu_secs,
        limits.cpu_secs.saturating_add(5),
    )?;
    // A crash must not write the run's memory to a core file.
    set(Resource::RLIMIT_CORE, 0, 0)?;
    applied.push(format!(
        "rlimits (address space {} MiB, CPU {} s)",
        limits.address_space >> 20,
        limits.cpu_secs
    ));
    applied.push(landlock());
    let filter = filter()?;
    // Every thread (there is one now; TSYNC makes that a guarantee, not a hope).
    seccompiler::apply_filter_all_threads(&filter).map_err(|e| format!("seccomp: {e}"))?;
    applied.push("no_new_privs, seccomp (pipes, memory, clocks only)".to_owned());
    Ok(applied.join("; "))
}

fn set(resource: Resource, soft: u64, hard: u64) -> Result<(), String> {
    setrlimit(resource, soft, hard).map_err(|e| format!("setrlimit {resource:?}: {e}"))
}

/// Landlock where the kernel has it: every file-system access, TCP and
/// signals outside the worker handled and none granted. Best effort: an
/// older kernel enforces what it knows, and seccomp stands behind it.
fn landlock() -> String {
    let abi = ABI::V6;
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.handle_access(AccessNet::from_all(abi)))
        .and_then(|r| r.scope(Scope::from_all(abi)))
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self());
    match status {
        Ok(s) => match s.ruleset {
            RulesetStatus::FullyEnforced => "landlock (no file system, no network)".to_owned(),
            RulesetStatus::PartiallyEnforced => {
                "landlock (partly: this kernel's ABI is older)".to_owned()
            }
            RulesetStatus::NotEnforced => "no landlock (not in this kernel)".to_owned(),
        },
        Err(e) => format!("no landlock ({e})"),
    }
}

/// The allow-list: everything else fails with `EPERM`, so a refused call
/// is visible to a test and a library that probes something optional
/// goes on without it.
fn filter() -> Result<BpfProgram, String> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("seccomp: {e}"))?;
    let cond = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value)
            .map_err(|e| format!("seccomp: {e}"))
    };
    let rule = |c: Vec<SeccompCondition>| SeccompRule::new(c).map_err(|e| format!("seccomp: {e}"));
    let exec = libc::PROT_EXEC as u64;
    let no_exec = |arg: u8| -> Result<SeccompCondition, String> {
        cond(arg, SeccompCmpOp::MaskedEq(exec), 0)
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    // The run's frames: stdin in, stdout out; stderr is where a panic goes.
    rules.insert(
        libc::SYS_read,
        vec![rule(vec![cond(0, SeccompCmpOp::Eq, 0)?])?],
    );
    rules.insert(
        libc::SYS_write,
        vec![
            rule(vec![cond(0, SeccompCmpOp::Eq, 1)?])?,
            rule(vec![cond(0, SeccompCmpOp::Eq, 2)?])?,
        ],
    );
    // Memory, never executable (nothing in a run needs new code pages), and
    // anonymous only (fd -1): a descriptor the worker was left somehow
    // cannot be mapped and read.
    let anonymous = SeccompCondition::new(
        4,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        u32::MAX as u64,
    )
    .map_err(|e| format!("seccomp: {e}"))?;
    rules.insert(libc::SYS_mmap, vec![rule(vec![no_exec(2)?, anonymous])?]);
    rules.insert(libc::SYS_mprotect, vec![rule(vec![no_exec(2)?])?]);
    // A crash must end the worker: abort raises SIGABRT on itself, and the
    // stack-overflow handler resets SIGSEGV to its default before it
    // re-faults (refused, either would spin for ever instead of dying).
    rules.insert(
        libc::SYS_tgkill,
        vec![rule(vec![cond(
            0,
            SeccompCmpOp::Eq,
            std::process::id() as u64,
        )?])?],
    );
    rules.insert(libc::SYS_rt_sigaction, Vec::new());
    for call in [
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_brk,
        libc::SYS_madvise,
        libc::SYS_futex,
        libc::SYS_clock_gettime,
        libc::SYS_clock_getres,
        libc::SYS_clock_nanosleep,
        libc::SYS_gettimeofday,
        libc::SYS_sched_yield,
        libc::SYS_getrandom,
        libc::SYS_close,
        libc::SYS_exit,
        libc::SYS_exit_group,
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigprocmask,
        libc::SYS_sigaltstack,
        libc::SYS_getpid,
        libc::SYS_gettid,
    ] {
        rules.insert(call, Vec::new());
    }
    SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        arch,
    )
    .and_then(BpfProgram::try_from)
    .map_err(|e| format!("seccomp: {e}"))
}

/// Whether this kernel filters system calls (`Seccomp:` in
/// `/proc/self/status`, present since Linux 3.8 when built in).
pub(crate) fn seccomp_available() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| s.lines().any(|l| l.starts_with("Seccomp:")))
        .unwrap_or(false)
}
