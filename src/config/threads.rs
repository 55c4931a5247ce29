//! The serving threads: how many (`CODEMODE_WORKER_THREADS`) and how they
//! share the work (`CODEMODE_SCHEDULER`).

use super::parse::{parse_or, positive};
use super::{SCHEDULER, WORKER_THREADS};

/// How the binary's serving threads share the work (`CODEMODE_SCHEDULER`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduler {
    /// Each thread runs a runtime of its own with its own connections to
    /// providers; each client connection is served, whole, by the thread
    /// with the fewest (docs/operations.md#threads).
    PerCore,
    /// One work-stealing runtime: any thread runs any task, so the streams
    /// of one HTTP/2 client connection spread over every thread.
    Shared,
}

impl Scheduler {
    /// The value as it is written in `CODEMODE_SCHEDULER`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheduler::PerCore => "per-core",
            Scheduler::Shared => "shared",
        }
    }

    fn parse(v: &str) -> Result<Scheduler, String> {
        match v.trim() {
            "per-core" => Ok(Scheduler::PerCore),
            "shared" => Ok(Scheduler::Shared),
            other => Err(format!("`{other}` is not `per-core` or `shared`")),
        }
    }
}

/// The number of threads (`None`: the CPUs the process may use) and the
/// scheduler; `None` when a variable is wrong, each recorded with `fail`.
pub(super) fn threads(
    get: &impl Fn(&str) -> Option<String>,
    fail: &mut impl FnMut(&'static str, String),
) -> Option<(Option<usize>, Scheduler)> {
    let count = parse_or(get, WORKER_THREADS, Some(None), fail, |v| {
        positive::<usize>(v, "a number of threads").map(Some)
    });
    let scheduler = parse_or(
        get,
        SCHEDULER,
        Some(Scheduler::PerCore),
        fail,
        Scheduler::parse,
    );
    Some((count?, scheduler?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> (Option<(Option<usize>, Scheduler)>, Vec<&'static str>) {
        let get = |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        let mut failed = Vec::new();
        let threads = threads(&get, &mut |var, _| failed.push(var));
        (threads, failed)
    }

    #[test]
    fn a_runtime_per_core_on_every_cpu_by_default() {
        assert_eq!(read(&[]).0, Some((None, Scheduler::PerCore)));
        assert_eq!(
            read(&[(WORKER_THREADS, "3"), (SCHEDULER, "shared")]).0,
            Some((Some(3), Scheduler::Shared))
        );
    }

    #[test]
    fn both_variables_are_checked_and_each_mistake_named() {
        let (threads, failed) = read(&[(WORKER_THREADS, "0"), (SCHEDULER, "work-stealing")]);
        assert_eq!(threads, None);
        assert_eq!(failed, vec![WORKER_THREADS, SCHEDULER]);
    }
}
