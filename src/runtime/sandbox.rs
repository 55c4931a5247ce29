//! One run of a program in a fresh QuickJS runtime.
//!
//! Synchronous and CPU-bound: callers run it on a blocking thread. A run
//! replays the execution's recorded calls in order (answering each with its
//! recorded result) and stops when the program finishes, fails, or waits on
//! calls nobody has answered yet.
//!
//! The host is the authority on what a program may do: every nested call is
//! checked here, in Rust (a tool of the execution's list, a JSON object as
//! arguments), whatever the program did to the JavaScript around it. The
//! host functions reach the prelude as arguments and are never globals.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rquickjs::{Context, Function, Object, Runtime};

use super::{program, Limits};
use crate::sdk::ToolDocs;

mod host;
pub(in crate::runtime) use host::admitted;
#[cfg(test)]
pub(super) use host::CallKind;
pub(super) use host::State;

const PRELUDE: &str = include_str!("prelude.js");

/// A call the program made, with its result once the client answered.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CallRecord {
    /// The tool's name.
    pub name: String,
    /// The arguments, as JSON text.
    pub args: String,
    /// The client's result text, once it came.
    pub result: Option<String>,
}

/// What one run came to.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RunOutcome {
    /// The program returned; `value` is its return value (JSON, or text).
    Finished {
        /// Console output.
        output: String,
        /// The return value.
        value: String,
    },
    /// The program threw, or hit a limit.
    Failed {
        /// Console output.
        output: String,
        /// `Name: message`.
        error: String,
    },
    /// The program waits on these new calls.
    Blocked {
        /// Console output so far.
        output: String,
        /// The calls made since the recorded ones, in order.
        calls: Vec<CallRecord>,
    },
}

/// Runs `code` with `replay` answering its first calls.
#[cfg(any(test, feature = "bench-internals"))]
pub fn run(
    code: &str,
    tools: &[String],
    replay: &[CallRecord],
    seed: u64,
    now_ms: u64,
    limits: &Limits,
) -> RunOutcome {
    run_with(code, tools, &[], replay, seed, now_ms, limits)
}

/// [`run`], where the tools in `freeform` take one string, not an object
/// (the program calls `tools.apply_patch("*** Begin Patch ...")`; the
/// call's arguments are recorded as that JSON string).
#[cfg(any(test, feature = "bench-internals"))]
pub fn run_with(
    code: &str,
    tools: &[String],
    freeform: &[String],
    replay: &[CallRecord],
    seed: u64,
    now_ms: u64,
    limits: &Limits,
) -> RunOutcome {
    run_described(
        code,
        tools,
        freeform,
        Arc::default(),
        replay,
        seed,
        now_ms,
        limits,
    )
}

/// [`run_with`], where `tools.describe(name)` returns the tool's
/// declaration from `docs`.
#[allow(clippy::too_many_arguments)]
pub fn run_described(
    code: &str,
    tools: &[String],
    freeform: &[String],
    docs: Arc<ToolDocs>,
    replay: &[CallRecord],
    seed: u64,
    now_ms: u64,
    limits: &Limits,
) -> RunOutcome {
    let program = match program::prepare(code, tools) {
        Ok(program) => program,
        Err(error) => {
            return RunOutcome::Failed {
                output: String::new(),
                error,
            }
        }
    };
    let mut state = State::new(tools, freeform, replay, limits);
    state.docs = docs;
    let state = Rc::new(RefCell::new(state));
    let stopped = Arc::new(AtomicU8::new(RUNNING));
    let result = run_inner(
        &program.text,
        tools,
        freeform,
        seed,
        now_ms,
        limits,
        &state,
        &stopped,
    );
    let s = state.borrow();
    let mut output = s.output.clone();
    if s.output_truncated {
        output.push_str("\n[console output truncated]");
    }
    match stopped.load(Ordering::Relaxed) {
        OVER_CPU => {
            return RunOutcome::Failed {
                output,
                error: format!(
                    "TimeoutError: the program used more than its {} ms CPU slice (CODEMODE_RUN_SLICE_MS)",
                    limits.slice.as_millis()
                ),
            }
        }
        OVER_WALL => {
            return RunOutcome::Failed {
                output,
                error: format!(
                    "TimeoutError: the program ran {} s without finishing, the wall-clock ceiling of a {} ms CPU slice (CODEMODE_RUN_SLICE_MS)",
                    limits.wall_ceiling().as_secs(),
                    limits.slice.as_millis()
                ),
            }
        }
        _ => {}
    }
    if let Err(e) = result {
        return RunOutcome::Failed {
            output,
            error: engine_error(&e, limits),
        };
    }
    match &s.finished {
        // Calls started and not awaited still go to the agent: the program
        // ends when nothing is left to run, as a script does.
        Some(end) if !end.failed && !s.pending.is_empty() => RunOutcome::Blocked {
            output,
            calls: s.pending.clone(),
        },
        Some(end) if !end.failed => RunOutcome::Finished {
            output,
            value: end.text.clone(),
        },
        Some(end) => RunOutcome::Failed {
            output,
            error: if end.text.contains("out of memory") {
                engine_error(&end.text, limits)
            } else {
                program.explain(&end.text, &end.stack, tools)
            },
        },
        None if !s.pending.is_empty() => RunOutcome::Blocked {
            output,
            calls: s.pending.clone(),
        },
        None => RunOutcome::Failed {
            output,
            error: "Error: the program is waiting on something that is not a tool call and can never finish"
                .to_owned(),
        },
    }
}

fn engine_error(e: &str, limits: &Limits) -> String {
    if e.contains("out of memory") {
        format!(
            "RangeError: the program ran out of memory ({} MiB, CODEMODE_RUN_MEMORY_MB)",
            limits.memory_bytes >> 20
        )
    } else {
        format!("Error: {e}")
    }
}

/// Why the interrupt handler stopped the program.
const RUNNING: u8 = 0;
const OVER_CPU: u8 = 1;
const OVER_WALL: u8 = 2;

/// The largest heap a run may get (as `CODEMODE_RUN_MEMORY_MB` allows).
const MAX_HEAP_BYTES: u64 = 4096 << 20;

/// The heap limit QuickJS gets. QuickJS reads 0 as "no limit", so a limit
/// that wrapped on its way here must never reach it: it is clamped to
/// 1 MiB..=4 GiB (and a debug build says so loudly).
fn heap_limit(bytes: usize) -> usize {
    let max = usize::try_from(MAX_HEAP_BYTES).unwrap_or(usize::MAX);
    debug_assert!(
        (1..=max).contains(&bytes),
        "a heap limit of {bytes} bytes wrapped or was never bounded"
    );
    bytes.clamp(1 << 20, max)
}

/// The native stack limit QuickJS gets (0 would also mean "no limit"):
/// within what a blocking thread's 2 MiB stack can hold.
fn stack_limit(bytes: usize) -> usize {
    debug_assert!(bytes > 0, "a stack limit of 0 means no limit");
    bytes.clamp(64 << 10, 1 << 20)
}

/// CPU time the calling thread has used, where the OS tells it.
#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "freebsd"
))]
fn thread_cpu_time() -> Option<Duration> {
    use nix::time::{clock_gettime, ClockId};
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .ok()
        .map(Duration::from)
}

/// CPU time the calling thread has used: unknown here, so the slice is
/// measured in wall time.
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "freebsd"
)))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

/// Stops a run when it used its CPU slice, or ran past the wall-clock
/// ceiling. The slice counts the CPU time of the thread running the program
/// from its start, so time spent queued or descheduled (other programs on
/// the same cores) never counts against it.
fn interrupt_handler(
    limits: &Limits,
    stopped: Arc<AtomicU8>,
) -> impl FnMut() -> bool + Send + 'static {
    let slice = limits.slice;
    let ceiling = limits.wall_ceiling();
    let wall = Instant::now();
    let cpu = thread_cpu_time();
    move || {
        let used = match (cpu, thread_cpu_time()) {
            (Some(start), Some(now)) => now.saturating_sub(start),
            _ => wall.elapsed(),
        };
        let why = if used > slice {
            OVER_CPU
        } else if wall.elapsed() > ceiling {
            OVER_WALL
        } else {
            return false;
        };
        stopped.store(why, Ordering::Relaxed);
        true
    }
}

fn exception_text(ctx: &rquickjs::Ctx<'_>, e: rquickjs::Error) -> String {
    match e {
        rquickjs::Error::Exception => format!("{:?}", ctx.catch()),
        other => other.to_string(),
    }
}

#[allow(clippy::too_many_arguments)]
fn run_inner(
    code: &str,
    tools: &[String],
    freeform: &[String],
    seed: u64,
    now_ms: u64,
    limits: &Limits,
    state: &Rc<RefCell<State>>,
    stopped: &Arc<AtomicU8>,
) -> Result<(), String> {
    let rt = Runtime::new().map_err(|e| e.to_string())?;
    rt.set_memory_limit(heap_limit(limits.memory_bytes));
    rt.set_max_stack_size(stack_limit(limits.stack_bytes));
    rt.set_interrupt_handler(Some(Box::new(interrupt_handler(limits, stopped.clone()))));
    let ctx = Context::full(&rt).map_err(|e| e.to_string())?;
    ctx.with(|ctx| -> Result<(), String> {
        let err = |e: rquickjs::Error| e.to_string();
        // The host functions go into one object handed to the prelude,
        // which keeps them in its closure: no global ever holds them.
        let host = Object::new(ctx.clone()).map_err(err)?;
        let st = state.clone();
        host.set(
            "call",
            Function::new(ctx.clone(), move |n: String, a: String| {
                st.borrow_mut().call(n, a) as i32
            })
            .map_err(err)?,
        )
        .map_err(err)?;
        let st = state.clone();
        host.set(
            "take",
            Function::new(ctx.clone(), move || {
                std::mem::take(&mut st.borrow_mut().take)
            })
            .map_err(err)?,
        )
        .map_err(err)?;
        let st = state.clone();
        host.set(
            "describe",
            Function::new(ctx.clone(), move |n: String| {
                // A refusal reaches the prelude as `undefined`, its text through `take`.
                let mut st = st.borrow_mut();
                match st.describe(&n) {
                    Ok(text) => Some(text),
                    Err(message) => {
                        st.take = message;
                        None
                    }
                }
            })
            .map_err(err)?,
        )
        .map_err(err)?;
        let st = state.clone();
        host.set(
            "log",
            Function::new(ctx.clone(), move |t: String| st.borrow_mut().log(t)).map_err(err)?,
        )
        .map_err(err)?;
        let st = state.clone();
        host.set(
            "finish",
            Function::new(
                ctx.clone(),
                move |failed: bool, text: String, stack: String| {
                    st.borrow_mut().finish(failed, text, stack)
                },
            )
            .map_err(err)?,
        )
        .map_err(err)?;
        let (sole, forms) = (
            Object::new(ctx.clone()).map_err(err)?,
            Object::new(ctx.clone()).map_err(err)?,
        );
        for name in tools {
            if let Some(params) = state.borrow().docs.params(name) {
                if let Some(param) = &params.sole {
                    sole.set(name.as_str(), param.as_str()).map_err(err)?;
                }
                forms
                    .set(name.as_str(), params.form.as_str())
                    .map_err(err)?;
            }
        }
        host.set("sole", sole).map_err(err)?;
        host.set("forms", forms).map_err(err)?;
        host.set("code", code).map_err(err)?;
        host.set("finalName", program::FINAL).map_err(err)?;
        host.set("tools", tools.to_vec()).map_err(err)?;
        host.set("freeform", freeform.to_vec()).map_err(err)?;
        host.set("seed", (seed & 0xffff_ffff) as f64).map_err(err)?;
        host.set("now", now_ms as f64).map_err(err)?;
        let prelude: Function = ctx.eval(PRELUDE).map_err(|e| exception_text(&ctx, e))?;
        prelude
            .call::<_, ()>((host,))
            .map_err(|e| exception_text(&ctx, e))
    })?;
    loop {
        match rt.execute_pending_job() {
            Ok(true) => continue,
            Ok(false) => return Ok(()),
            Err(_) if stopped.load(Ordering::Relaxed) != RUNNING => return Ok(()),
            Err(e) => return Err(format!("{e:?}")),
        }
    }
}
