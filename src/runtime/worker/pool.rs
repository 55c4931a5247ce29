//! The proxy's side of the sandbox workers: a warm pool of worker
//! processes, one run at a time on each, and every way a worker can fail
//! (it cannot start, it dies, it outlives the run's time, it breaks the
//! protocol) turned into the run's error, the worker killed and replaced.
//!
//! Runs are already bounded by the run pool's slots, so at most that many
//! workers are ever busy; the idle ones wait here with their process and
//! pipes, and nothing else of a run is kept between runs.
//!
//! A worker serves one tenant: each run gets a fresh QuickJS runtime, but
//! the process's freed memory may still hold a run's bytes, so a worker
//! that served one tenant is never given another's run. A new tenant gets
//! a fresh worker (one is kept ready; starting one takes a few
//! milliseconds); when the pool is full, a fresh worker beyond that one,
//! else the least recently used worker of another tenant, makes room.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use super::protocol::{encode, frame_len, Hello, Reply, Request, VERSION};
use crate::env_vars::{RUN_MEMORY_MB, RUN_SLICE_MS, SANDBOX, SANDBOX_WORKER};
use crate::observe::counted::WorkerFailure as FailureReason;
use crate::runtime::sandbox::{CallRecord, RunOutcome};
use crate::runtime::Limits;
use crate::sdk::ToolDocs;
use crate::tenant::Tenant;

/// Time a worker has, past the run's own wall-clock ceiling, to answer:
/// the ceiling is enforced inside the worker, so only a worker stuck
/// outside the engine's interrupt ever meets this.
const MARGIN: Duration = Duration::from_secs(5);

/// Time a new worker has to confine itself and say hello.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// What a worker's stderr may hold that is kept for the log: the last
/// words of a panic or an abort.
const STDERR_KEPT: usize = 4096;

/// One worker process and its pipes.
struct Worker {
    /// Whose runs it served; `None` while fresh.
    tenant: Option<Tenant>,
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    stderr: ChildStderr,
}

/// A run that went wrong in its worker.
struct Failure {
    reason: FailureReason,
    detail: String,
}

fn failure(reason: FailureReason, detail: impl Into<String>) -> Failure {
    Failure {
        reason,
        detail: detail.into(),
    }
}

/// The pool of sandbox workers.
pub struct Workers {
    exe: PathBuf,
    args: Vec<OsString>,
    /// Idle workers kept warm: the run pool's concurrency.
    warm: usize,
    idle: Mutex<Vec<Worker>>,
    failures: [AtomicU64; FailureReason::ALL.len()],
    /// Whether the first worker's confinement was logged.
    announced: AtomicBool,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("exe", &self.exe)
            .field("warm", &self.warm)
            .finish_non_exhaustive()
    }
}

impl Workers {
    /// Workers started from `exe`, limited for programs under `limits`,
    /// `warm` of them kept ready.
    pub fn new(exe: PathBuf, limits: &Limits, warm: usize) -> Arc<Workers> {
        // The address space holds the engine's heap limit, the host's copies
        // of what it returns (bounded by the same sizes) and the binary and
        // allocator reservations around them.
        let address_space = (limits.memory_bytes as u64)
            .saturating_mul(3)
            .saturating_add(2 << 30);
        // Enough for many runs; the worker asks to be replaced past half.
        let cpu_secs = limits
            .slice
            .as_secs()
            .saturating_add(1)
            .saturating_mul(20)
            .max(600);
        Arc::new(Workers {
            exe,
            args: vec![
                "sandbox-worker".into(),
                "--address-space".into(),
                address_space.to_string().into(),
                "--cpu-secs".into(),
                cpu_secs.to_string().into(),
            ],
            warm: warm.max(1),
            idle: Mutex::new(Vec::new()),
            failures: Default::default(),
            announced: AtomicBool::new(false),
        })
    }

    /// Starts the warm workers in the background, when a runtime is there
    /// to run them (a stack built outside one starts them on first use).
    pub fn warm_up(self: &Arc<Self>) {
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        for _ in 0..self.warm {
            self.replace();
        }
    }

    /// Workers killed so far, by [`FailureReason::ALL`]'s order.
    pub fn failures(&self) -> [u64; FailureReason::ALL.len()] {
        std::array::from_fn(|i| self.failures[i].load(Ordering::Relaxed))
    }

    /// Runs one program in a worker: its outcome, or the error a broken
    /// worker came to (the worker is then killed and another started).
    #[allow(clippy::too_many_arguments)]
    pub async fn run(
        self: &Arc<Self>,
        tenant: &Tenant,
        code: &str,
        tools: &[String],
        freeform: &[String],
        docs: &ToolDocs,
        replay: &[CallRecord],
        seed: u64,
        now_ms: u64,
        limits: &Limits,
    ) -> RunOutcome {
        let request = Request {
            code,
            tools,
            freeform,
            docs,
            replay,
            seed,
            now_ms,
            limits,
        };
        let frame = match encode(&request) {
            Ok(f) => f,
            Err(e) => {
                return RunOutcome::Failed {
                    output: String::new(),
                    error: format!(
                        "Error: the program's inputs could not be sent to its sandbox worker ({e})"
                    ),
                }
            }
        };
        let worker = match self.take(tenant).await {
            Ok(w) => w,
            Err(f) => return self.failed(f, limits, None).await,
        };
        let deadline = limits.wall_ceiling().saturating_add(MARGIN);
        let mut worker = worker;
        worker.tenant = Some(*tenant);
        let answer = tokio::time::timeout(deadline, exchange(&mut worker, &frame)).await;
        match answer {
            Ok(Ok(reply)) => {
                if let Err(why) =
                    super::admit::admissible(&reply.outcome, tools, freeform, replay.len(), limits)
                {
                    let f = failure(FailureReason::Protocol, why);
                    return self.failed(f, limits, Some(worker)).await;
                }
                if reply.retire {
                    drop(worker);
                    self.replace();
                } else {
                    self.give_back(worker);
                }
                reply.outcome
            }
            Ok(Err(f)) => self.failed(f, limits, Some(worker)).await,
            Err(_) => {
                let f = failure(
                    FailureReason::Timeout,
                    format!("no answer in {} s", deadline.as_secs()),
                );
                self.failed(f, limits, Some(worker)).await
            }
        }
    }

    /// An idle worker of `tenant` that is still alive, else a fresh one
    /// (another is then started, so the next new tenant finds one ready),
    /// else a new one.
    async fn take(self: &Arc<Self>, tenant: &Tenant) -> Result<Worker, Failure> {
        loop {
            let (idle, fresh) = {
                let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
                let mine = idle.iter().rposition(|w| w.tenant.as_ref() == Some(tenant));
                let fresh = idle.iter().rposition(|w| w.tenant.is_none());
                match mine.or(fresh) {
                    Some(at) => (Some(idle.remove(at)), mine.is_none()),
                    None => (None, false),
                }
            };
            let Some(mut worker) = idle else {
                return self.start().await;
            };
            if fresh {
                self.replace();
            }
            // One that died while idle (killed from outside) never got this
            // run: it is counted and passed over, and the run goes on.
            match worker.child.try_wait() {
                Ok(None) => return Ok(worker),
                Ok(Some(status)) => self.record(&failure(
                    FailureReason::Crash,
                    format!("it died while idle, {status}"),
                )),
                Err(e) => self.record(&failure(FailureReason::Crash, e.to_string())),
            }
        }
    }

    /// Keeps `worker` idle. When the pool is full a used worker makes room
    /// by letting go a fresh one while another fresh one stays ready, else
    /// the least recently used worker of another tenant, else the last
    /// fresh one; a fresh worker only takes free room. What finds no room
    /// is let go (dropping it kills it).
    ///
    /// The pool starts full of fresh workers and refills with them: were a
    /// tenant's warm worker let go before a second fresh one, two tenants
    /// taking turns would each find their worker gone whenever the fresh
    /// one started before the other's run ended.
    fn give_back(&self, worker: Worker) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() >= self.warm {
            let Some(tenant) = worker.tenant else {
                return;
            };
            let fresh = || idle.iter().position(|w| w.tenant.is_none());
            let spare = idle.iter().filter(|w| w.tenant.is_none()).count() > 1;
            let other = fresh()
                .filter(|_| spare)
                .or_else(|| {
                    idle.iter()
                        .position(|w| w.tenant.is_some_and(|t| t != tenant))
                })
                .or_else(fresh);
            match other {
                Some(at) => drop(idle.remove(at)),
                None => return,
            }
        }
        idle.push(worker);
    }

    /// Starts a worker in the background to take a lost one's place.
    fn replace(self: &Arc<Self>) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let me = self.clone();
        handle.spawn(async move {
            match me.start().await {
                Ok(w) => me.give_back(w),
                Err(f) => me.record(&f),
            }
        });
    }

    /// A new worker, confined and ready: it said hello.
    async fn start(&self) -> Result<Worker, Failure> {
        let mut child = Command::new(&self.exe)
            .args(&self.args)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                failure(
                    FailureReason::Spawn,
                    format!("{} could not be started: {e}", self.exe.display()),
                )
            })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(failure(FailureReason::Spawn, "its pipes were not set up"));
        };
        let mut worker = Worker {
            tenant: None,
            child,
            stdin,
            stdout,
            stderr,
        };
        let hello = tokio::time::timeout(START_TIMEOUT, read_frame(&mut worker.stdout)).await;
        let hello: Hello = match hello {
            Ok(Ok(body)) => serde_json::from_slice(&body).map_err(|e| {
                failure(
                    FailureReason::Spawn,
                    format!(
                        "{} answered no sandbox-worker hello ({e}); is it the codemode-proxy binary?",
                        self.exe.display()
                    ),
                )
            })?,
            Ok(Err(f)) => {
                let words = last_words(&mut worker).await;
                return Err(failure(
                    FailureReason::Spawn,
                    format!("{} did not start as a sandbox worker ({}{words})", self.exe.display(), f.detail),
                ));
            }
            Err(_) => {
                return Err(failure(
                    FailureReason::Spawn,
                    format!("{} said nothing in {} s", self.exe.display(), START_TIMEOUT.as_secs()),
                ))
            }
        };
        if let Some(e) = hello.error {
            return Err(failure(
                FailureReason::Spawn,
                format!("the worker could not confine itself: {e}"),
            ));
        }
        if hello.version != VERSION {
            return Err(failure(
                FailureReason::Spawn,
                format!(
                    "{} speaks protocol {}, this proxy {VERSION}: it is another build of codemode-proxy",
                    self.exe.display(),
                    hello.version
                ),
            ));
        }
        if !self.announced.swap(true, Ordering::Relaxed) {
            tracing::info!(
                worker = %self.exe.display(),
                "sandbox workers confined: {}",
                hello.confinement
            );
        }
        Ok(worker)
    }

    /// Counts and logs a failure, kills the worker, starts another, and
    /// gives the run the error the model reads.
    async fn failed(
        self: &Arc<Self>,
        f: Failure,
        limits: &Limits,
        worker: Option<Worker>,
    ) -> RunOutcome {
        let mut f = f;
        if let Some(mut w) = worker {
            let _ = w.child.start_kill();
            let status = tokio::time::timeout(Duration::from_secs(2), w.child.wait())
                .await
                .ok()
                .and_then(Result::ok);
            let words = last_words(&mut w).await;
            if f.reason == FailureReason::Crash {
                if words.contains("memory allocation") {
                    f.reason = FailureReason::Memory;
                } else if over_cpu(status) {
                    f.reason = FailureReason::Timeout;
                }
            }
            if let Some(s) = status {
                f.detail.push_str(&format!(", {s}"));
            }
            f.detail.push_str(&words);
        }
        self.record(&f);
        if f.reason != FailureReason::Spawn {
            self.replace();
        }
        let error = match f.reason {
            FailureReason::Spawn => format!(
                "Error: the program was not run: its sandbox worker did not start ({}); set {SANDBOX_WORKER} to the codemode-proxy binary, or {SANDBOX}=in-process",
                f.detail
            ),
            FailureReason::Crash => "Error: the program's sandbox worker crashed and was replaced; run the program again, and if it crashes again, change what it does".to_owned(),
            FailureReason::Memory => format!(
                "RangeError: the program's sandbox worker ran out of memory beyond the program's {} MiB heap ({RUN_MEMORY_MB}) and was replaced",
                limits.memory_bytes >> 20
            ),
            FailureReason::Timeout => format!(
                "TimeoutError: the program's sandbox worker did not answer within {} s (the wall-clock ceiling of a {} ms CPU slice, {RUN_SLICE_MS}) and was replaced",
                limits.wall_ceiling().saturating_add(MARGIN).as_secs(),
                limits.slice.as_millis()
            ),
            FailureReason::Protocol => "Error: the program's sandbox worker answered out of protocol and was replaced; run the program again".to_owned(),
        };
        RunOutcome::Failed {
            output: String::new(),
            error,
        }
    }

    fn record(&self, f: &Failure) {
        if let Some(i) = FailureReason::ALL.iter().position(|r| *r == f.reason) {
            self.failures[i].fetch_add(1, Ordering::Relaxed);
        }
        tracing::warn!(
            reason = f.reason.as_str(),
            worker = %self.exe.display(),
            "sandbox worker failed and was killed: {}",
            f.detail
        );
    }
}

/// Sends the run and reads the reply.
async fn exchange(worker: &mut Worker, frame: &[u8]) -> Result<Reply, Failure> {
    let crashed = |e: std::io::Error| failure(FailureReason::Crash, format!("its pipe broke: {e}"));
    worker.stdin.write_all(frame).await.map_err(crashed)?;
    worker.stdin.flush().await.map_err(crashed)?;
    let body = read_frame(&mut worker.stdout).await?;
    serde_json::from_slice(&body).map_err(|e| {
        failure(
            FailureReason::Protocol,
            format!("its reply is not one: {e}"),
        )
    })
}

/// One frame from a worker's stdout: its end is a crash, a bad length a
/// protocol error.
async fn read_frame(stdout: &mut ChildStdout) -> Result<Vec<u8>, Failure> {
    let mut header = [0u8; 4];
    stdout
        .read_exact(&mut header)
        .await
        .map_err(|e| failure(FailureReason::Crash, format!("it ended ({e})")))?;
    let len = frame_len(header).map_err(|e| failure(FailureReason::Protocol, e))?;
    let mut body = vec![0u8; len];
    stdout.read_exact(&mut body).await.map_err(|e| {
        failure(
            FailureReason::Crash,
            format!("it ended inside a frame ({e})"),
        )
    })?;
    Ok(body)
}

/// What a dead worker wrote to stderr (a panic's message, an abort's
/// reason), kept short, as `: text` for the log; empty when nothing.
async fn last_words(worker: &mut Worker) -> String {
    let mut buf = Vec::new();
    let mut take = (&mut worker.stderr).take(STDERR_KEPT as u64);
    let _ = tokio::time::timeout(Duration::from_millis(500), take.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

/// Whether the kernel stopped the worker for its CPU rlimit (SIGXCPU).
fn over_cpu(status: Option<ExitStatus>) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::ExitStatusExt;
        status.and_then(|s| s.signal()) == Some(nix::sys::signal::Signal::SIGXCPU as i32)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = status;
        false
    }
}
