//! The embedded runtime's variables: the limits of one program, and how
//! many programs run and wait at once.

use std::time::Duration;

use super::parse::{bounded, parse_or};
use super::{
    RUN_CONCURRENCY, RUN_LIFETIME_SECS, RUN_MAX_CALLS, RUN_MAX_OUTPUT, RUN_MEMORY_MB, RUN_QUEUE,
    RUN_QUEUE_TIMEOUT_MS, RUN_SLICE_MS,
};
use crate::runtime::pool::RunSlots;

/// The limits of one program (`CODEMODE_RUN_*`); `None` when a variable
/// is wrong, each recorded with `fail`.
pub(super) fn limits(
    get: &impl Fn(&str) -> Option<String>,
    fail: &mut impl FnMut(&'static str, String),
) -> Option<crate::runtime::Limits> {
    let defaults = crate::runtime::Limits::default();
    let slice_ms = parse_or(
        get,
        RUN_SLICE_MS,
        Some(defaults.slice.as_millis() as u64),
        fail,
        |v| bounded::<u64>(v, "a number of milliseconds", 600_000),
    );
    let lifetime = parse_or(
        get,
        RUN_LIFETIME_SECS,
        Some(defaults.lifetime.as_secs()),
        fail,
        |v| bounded::<u64>(v, "a number of seconds", 7 * 24 * 3600),
    );
    let memory_mb = parse_or(
        get,
        RUN_MEMORY_MB,
        Some(defaults.memory_bytes >> 20),
        fail,
        |v| bounded::<usize>(v, "a number of MiB", 4096),
    );
    let max_calls = parse_or(get, RUN_MAX_CALLS, Some(defaults.max_calls), fail, |v| {
        bounded::<usize>(v, "a number of calls", 10_000)
    });
    let max_output = parse_or(
        get,
        RUN_MAX_OUTPUT,
        Some(defaults.max_output_bytes),
        fail,
        |v| bounded::<usize>(v, "a number of bytes", 16 << 20),
    );
    match (slice_ms, lifetime, memory_mb, max_calls, max_output) {
        (Some(slice), Some(lifetime), Some(mb), Some(calls), Some(output)) => {
            Some(crate::runtime::Limits {
                slice: Duration::from_millis(slice),
                lifetime: Duration::from_secs(lifetime),
                memory_bytes: mb << 20,
                stack_bytes: defaults.stack_bytes,
                max_calls: calls,
                max_output_bytes: output,
            })
        }
        _ => None,
    }
}

/// Programs that may wait for a slot: a waiting program holds only its
/// request, so a burst of a thousand agents waits rather than fails.
pub(crate) const DEFAULT_RUN_QUEUE: usize = 1024;

/// How long a program waits for a slot: about fifteen default slices.
pub(crate) const DEFAULT_RUN_QUEUE_TIMEOUT_MS: u64 = 30_000;

/// The run pool's slots and queue; `None` when a variable is wrong.
pub(super) fn slots(
    get: &impl Fn(&str) -> Option<String>,
    fail: &mut impl FnMut(&'static str, String),
) -> Option<RunSlots> {
    let cpus = std::thread::available_parallelism().map_or(2, usize::from);
    let run_concurrency = parse_or(get, RUN_CONCURRENCY, Some(cpus), fail, |v| {
        bounded::<usize>(v, "a number of programs", 1024)
    });
    let run_queue = parse_or(get, RUN_QUEUE, Some(DEFAULT_RUN_QUEUE), fail, |v| {
        v.trim()
            .parse::<usize>()
            .ok()
            .filter(|n| *n <= 100_000)
            .ok_or_else(|| format!("`{v}` is not a number of programs from 0 to 100000"))
    });
    let wait_ms = parse_or(
        get,
        RUN_QUEUE_TIMEOUT_MS,
        Some(DEFAULT_RUN_QUEUE_TIMEOUT_MS),
        fail,
        |v| bounded::<u64>(v, "a number of milliseconds", 600_000),
    );
    match (run_concurrency, run_queue, wait_ms) {
        (Some(concurrency), Some(queue), Some(wait_ms)) => Some(RunSlots {
            concurrency,
            queue,
            wait: Duration::from_millis(wait_ms),
        }),
        _ => None,
    }
}
