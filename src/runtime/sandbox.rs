//! One run of a program in a fresh QuickJS runtime.
//!
//! Synchronous and CPU-bound: callers run it on a blocking thread. A run
//! replays the execution's recorded calls in order (answering each with its
//! recorded result) and stops when the program finishes, fails, or waits on
//! calls nobody has answered yet.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use rquickjs::{Context, Function, Runtime};

use super::Limits;

const PRELUDE: &str = include_str!("prelude.js");

/// A call the program made, with its result once the client answered.
#[derive(Clone, Debug, PartialEq, Eq)]
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

#[derive(Default)]
struct State {
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
    /// Answers a call: 0 with a recorded result, 1 pending, 2 refused.
    fn call(&mut self, name: String, args: String) -> i32 {
        if self.next < self.replay.len() {
            let rec = &self.replay[self.next];
            self.next += 1;
            if rec.name != name || rec.args != args {
                self.take = format!(
                    "call {} was tools.{}({}) when the program first ran, but now is tools.{name}({args}): programs must make the same calls when re-run (no hidden state)",
                    self.next, rec.name, rec.args
                );
                return 2;
            }
            return match &rec.result {
                Some(r) => {
                    self.take = r.clone();
                    0
                }
                None => 1,
            };
        }
        if self.next + self.pending.len() >= self.max_calls {
            self.take = format!(
                "too many tool calls: the limit is {} per program (CODEMODE_RUN_MAX_CALLS)",
                self.max_calls
            );
            return 2;
        }
        self.pending.push(CallRecord {
            name,
            args,
            result: None,
        });
        1
    }

    fn log(&mut self, text: String) {
        if self.output.len() >= self.output_cap {
            self.output_truncated = true;
            return;
        }
        if !self.output.is_empty() {
            self.output.push('\n');
        }
        self.output.push_str(&text);
    }
}

/// Runs `code` with `replay` answering its first calls.
pub fn run(
    code: &str,
    tools: &[String],
    replay: &[CallRecord],
    seed: u64,
    now_ms: u64,
    limits: &Limits,
) -> RunOutcome {
    let state = Rc::new(RefCell::new(State {
        replay: replay.to_vec(),
        max_calls: limits.max_calls,
        output_cap: limits.max_output_bytes * 2,
        ..State::default()
    }));
    let interrupted = Arc::new(AtomicBool::new(false));
    let result = run_inner(code, tools, seed, now_ms, limits, &state, &interrupted);
    let s = state.borrow();
    let mut output = s.output.clone();
    if s.output_truncated {
        output.push_str("\n[console output truncated]");
    }
    if interrupted.load(Ordering::Relaxed) {
        return RunOutcome::Failed {
            output,
            error: format!(
                "TimeoutError: the program ran longer than its {} ms CPU slice (CODEMODE_RUN_SLICE_MS)",
                limits.slice.as_millis()
            ),
        };
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

fn run_inner(
    code: &str,
    tools: &[String],
    seed: u64,
    now_ms: u64,
    limits: &Limits,
    state: &Rc<RefCell<State>>,
    interrupted: &Arc<AtomicBool>,
) -> Result<(), String> {
    let rt = Runtime::new().map_err(|e| e.to_string())?;
    rt.set_memory_limit(limits.memory_bytes);
    rt.set_max_stack_size(limits.stack_bytes);
    let started = Instant::now();
    let slice = limits.slice;
    let flag = interrupted.clone();
    rt.set_interrupt_handler(Some(Box::new(move || {
        let over = started.elapsed() > slice;
        if over {
            flag.store(true, Ordering::Relaxed);
        }
        over
    })));
    let ctx = Context::full(&rt).map_err(|e| e.to_string())?;
    ctx.with(|ctx| -> Result<(), String> {
        let g = ctx.globals();
        let err = |e: rquickjs::Error| e.to_string();
        let st = state.clone();
        g.set(
            "__cm_call",
            Function::new(ctx.clone(), move |n: String, a: String| {
                st.borrow_mut().call(n, a)
            })
            .map_err(err)?,
        )
        .map_err(err)?;
        let st = state.clone();
        g.set(
            "__cm_take",
            Function::new(ctx.clone(), move || {
                std::mem::take(&mut st.borrow_mut().take)
            })
            .map_err(err)?,
        )
        .map_err(err)?;
        let st = state.clone();
        g.set(
            "__cm_log",
            Function::new(ctx.clone(), move |t: String| st.borrow_mut().log(t)).map_err(err)?,
        )
        .map_err(err)?;
        let st = state.clone();
        g.set(
            "__cm_finish",
            Function::new(ctx.clone(), move |failed: bool, t: String| {
                st.borrow_mut().finished = Some((failed, t));
            })
            .map_err(err)?,
        )
        .map_err(err)?;
        g.set("__cm_code", code).map_err(err)?;
        g.set("__cm_tools", tools.to_vec()).map_err(err)?;
        g.set("__cm_seed", (seed & 0xffff_ffff) as f64)
            .map_err(err)?;
        g.set("__cm_now", now_ms as f64).map_err(err)?;
        ctx.eval::<(), _>(PRELUDE).map_err(|e| match e {
            rquickjs::Error::Exception => {
                let ex = ctx.catch();
                format!("{ex:?}")
            }
            other => other.to_string(),
        })
    })?;
    loop {
        match rt.execute_pending_job() {
            Ok(true) => continue,
            Ok(false) => return Ok(()),
            Err(_) if interrupted.load(Ordering::Relaxed) => return Ok(()),
            Err(e) => return Err(format!("{e:?}")),
        }
    }
}
