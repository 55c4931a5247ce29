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

use super::Limits;
use crate::sdk::ToolDocs;

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
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// What `call` tells the prelude.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CallKind {
    /// Answered from the replay: `take` holds the result.
    Answered = 0,
    /// Recorded as pending: the program waits on the client.
    Pending = 1,
    /// Refused: `take` holds the message, thrown as an `Error`.
    Refused = 2,
    /// Refused as a misuse (an unknown tool, arguments that are not an
    /// object): `take` holds the message, thrown as a `TypeError`.
    Invalid = 3,
}

/// The host side of one run: everything the program's calls reach.
#[derive(Default)]
pub(super) struct State {
    /// The tools the execution may call; the program cannot change this list.
    tools: Vec<String>,
    /// Those of them that take one string, not a JSON object.
    freeform: Vec<String>,
    /// Their full declarations, for `tools.describe`.
    docs: Arc<ToolDocs>,
    replay: Vec<CallRecord>,
    next: usize,
    pending: Vec<CallRecord>,
    max_calls: usize,
    take: String,
    output: String,
    output_cap: usize,
    output_truncated: bool,
    finished: Option<(bool, String)>,
}

impl State {
    /// The host state of a run of an execution calling `tools`.
    pub(super) fn new(
        tools: &[String],
        freeform: &[String],
        replay: &[CallRecord],
        limits: &Limits,
    ) -> State {
        State {
            tools: tools.to_vec(),
            freeform: freeform.to_vec(),
            docs: Arc::default(),
            replay: replay.to_vec(),
            max_calls: limits.max_calls,
            output_cap: limits.max_output_bytes.saturating_mul(2),
            ..State::default()
        }
    }

    /// Answers a call. Only a call that names one of the execution's tools
    /// with a JSON object as arguments is ever answered or recorded.
    pub(super) fn call(&mut self, name: String, args: String) -> CallKind {
        if !self.tools.contains(&name) {
            self.take = format!(
                "there is no tool named \"{name}\"; the tools are: {}",
                self.tools.join(", ")
            );
            return CallKind::Invalid;
        }
        if self.freeform.contains(&name) {
            if serde_json::from_str::<String>(&args).is_err() {
                self.take = format!("tools.{name}: takes one string (its whole input)");
                return CallKind::Invalid;
            }
        } else if serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&args).is_err()
        {
            self.take = format!("tools.{name}: arguments must be a JSON object");
            return CallKind::Invalid;
        }
        if self.finished.is_some() {
            self.take = format!("tools.{name}: the program has already finished");
            return CallKind::Refused;
        }
        if self.next < self.replay.len() {
            let rec = &self.replay[self.next];
            self.next += 1;
            if rec.name != name || rec.args != args {
                self.take = format!(
                    "call {} was tools.{}({}) when the program first ran, but now is tools.{name}({args}): programs must make the same calls when re-run (no hidden state)",
                    self.next, rec.name, rec.args
                );
                return CallKind::Refused;
            }
            return match &rec.result {
                Some(r) => {
                    self.take = r.clone();
                    CallKind::Answered
                }
                None => CallKind::Pending,
            };
        }
        if self.next + self.pending.len() >= self.max_calls {
            self.take = format!(
                "too many tool calls: the limit is {} per program (CODEMODE_RUN_MAX_CALLS)",
                self.max_calls
            );
            return CallKind::Refused;
        }
        self.pending.push(CallRecord {
            name,
            args,
            result: None,
        });
        CallKind::Pending
    }

    /// `tools.describe(name)`: the tool's full declaration, answered here
    /// (no call is recorded, nothing goes to the client). Only the
    /// execution's own tools are described.
    pub(super) fn describe(&self, name: &str) -> Result<String, String> {
        if !self.tools.iter().any(|t| t == name) {
            return Err(format!(
                "tools.describe: there is no tool named \"{name}\"; the tools are: {}",
                self.tools.join(", ")
            ));
        }
        Ok(self.docs.get(name).unwrap_or_else(|| {
            format!("tools.{name}: no documentation is at hand for this tool (its declaration did not fit the SDK)")
        }))
    }

    /// The program's end; the first one counts.
    pub(super) fn finish(&mut self, failed: bool, text: String) {
        if self.finished.is_none() {
            self.finished = Some((failed, text));
        }
    }

    /// The calls recorded as pending.
    #[cfg(test)]
    pub(super) fn pending(&self) -> &[CallRecord] {
        &self.pending
    }

    /// How the program ended, if it did.
    #[cfg(test)]
    pub(super) fn finished(&self) -> Option<&(bool, String)> {
        self.finished.as_ref()
    }

    /// Console output, kept to its cap: the text lives outside the
    /// engine's heap limit, so one huge line must not be copied whole.
    fn log(&mut self, text: String) {
        if self.output.len() >= self.output_cap {
            self.output_truncated = true;
            return;
        }
        if !self.output.is_empty() {
            self.output.push('\n');
        }
        let mut room = self.output_cap.saturating_sub(self.output.len());
        if text.len() > room {
            while !text.is_char_boundary(room) {
                room -= 1;
            }
            self.output.push_str(&text[..room]);
            self.output_truncated = true;
        } else {
            self.output.push_str(&text);
        }
    }
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
    let mut state = State::new(tools, freeform, replay, limits);
    state.docs = docs;
    let state = Rc::new(RefCell::new(state));
    let stopped = Arc::new(AtomicU8::new(RUNNING));
    let result = run_inner(
        code, tools, freeform, seed, now_ms, limits, &state, &stopped,
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
        Some((false, value)) => RunOutcome::Finished {
            output,
            value: value.clone(),
        },
        Some((true, error)) => RunOutcome::Failed {
            output,
            error: if error.contains("out of memory") {
                engine_error(error, limits)
            } else {
                error.clone()
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
            Function::new(ctx.clone(), move |failed: bool, t: String| {
                st.borrow_mut().finish(failed, t)
            })
            .map_err(err)?,
        )
        .map_err(err)?;
        host.set("code", code).map_err(err)?;
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
