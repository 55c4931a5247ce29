//! What a test needs from the machine beyond Rust: a program on the `PATH`
//! (`redis-server`, `python3`), a package, the agents and SDKs
//! `tests/agents/install.sh` installs. One rule for all of them, here:
//!
//! - present: the test runs;
//! - missing under CI (`CI` set, and not `false` or `0`; `.ci/run` sets it
//!   after installing everything): the test fails, saying how to get it;
//! - missing elsewhere: the test is skipped (it returns early and passes),
//!   saying how to get it, so a newcomer's first `cargo test` passes.
//!
//! The note goes to the test's own output (seen with `--nocapture`) and,
//! once per missing thing, straight to the terminal, past libtest's capture,
//! so a plain `cargo test` shows what was skipped and the command that
//! installs it.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// How to get Debian's Redis: `redis-server` (with `--sentinel`) and
/// `redis-cli`.
pub const REDIS: &str = "apt-get install redis-server redis-tools";

/// How to get the real agents and SDKs.
pub const AGENTS: &str = "tests/agents/install.sh";

/// Whether this run is CI's, where nothing may be skipped.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "false" | "0"))
}

/// The decision for one test: `true` when `present`; otherwise, under CI,
/// a panic naming `what` and `how` to get it, and elsewhere a note and
/// `false` (the caller returns, the test passes as skipped).
pub fn needs(present: bool, what: &str, how: &str) -> bool {
    if present {
        return true;
    }
    assert!(
        !under_ci(),
        "CI must have {what}: `{how}` (.ci/run installs it)"
    );
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    eprintln!("SKIPPED {test}: needs {what}; install it with `{how}`");
    static TOLD: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let first = TOLD
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashSet::new)
        .insert(what.to_owned());
    if first {
        // Past the capture: a plain `cargo test` shows it once.
        let _ = writeln!(
            std::io::stderr(),
            "note: skipping the tests that need {what}, missing here; install it with `{how}`"
        );
    }
    false
}

/// Where `program` is on the `PATH`, if it is.
pub fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// [`needs`] for programs that must all be on the `PATH`.
pub fn programs(names: &[&str], how: &str) -> bool {
    let missing: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| on_path(n).is_none())
        .collect();
    let what = format!("{} on the PATH", missing.join(" and "));
    needs(missing.is_empty(), &what, how)
}

/// [`needs`] for what `tests/agents/install.sh` installs: `what` is there
/// when `marker` (a file it leaves) exists.
pub fn agent(what: &str, marker: &Path) -> bool {
    needs(
        marker.exists(),
        &format!("{what} ({} missing)", marker.display()),
        AGENTS,
    )
}
