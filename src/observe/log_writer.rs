//! Log lines collected in memory and written to stderr in batches, as
//! nginx's `access_log ... buffer= flush=` does.
//!
//! Every request writes an access line; a `write` system call for each one
//! cost more than formatting it. Lines are appended to a buffer and a
//! thread of their own writes the buffer out [`FLUSH_EVERY`] after its
//! first line, or at once when it holds [`WAKE_AT`] bytes (and sleeps while
//! nothing is logged). Nothing is dropped: past
//! [`WRITE_THROUGH_AT`] (stderr is slow or stuck) the thread that logs
//! writes the batch itself and waits for it, as an unbuffered writer would.
//! [`flush`] writes what is left; the binary calls it before it exits.
//! A process killed outright (`SIGKILL`) loses at most the last
//! [`FLUSH_EVERY`] of lines.

use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// Longest a line waits in the buffer.
pub const FLUSH_EVERY: Duration = Duration::from_millis(50);
/// Buffered bytes that wake the writing thread early.
pub const WAKE_AT: usize = 64 << 10;
/// Buffered bytes past which the logging thread writes the batch itself.
pub const WRITE_THROUGH_AT: usize = 4 << 20;

struct Shared {
    pending: Mutex<Vec<u8>>,
    wake: Condvar,
    /// The buffer being written out, swapped with `pending` so both keep
    /// their capacity (a fresh buffer grows by copying, batch after batch).
    /// Held while a batch is taken and written, so batches keep their order.
    writing: Mutex<Vec<u8>>,
    /// The writing thread runs; without it each line is written at once.
    threaded: OnceLock<()>,
}

impl Shared {
    fn pending(&self) -> MutexGuard<'_, Vec<u8>> {
        // A thread that panicked while appending left whole lines or a
        // partial one; either is still worth writing.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes out everything buffered so far.
    fn write_out(&self) {
        let mut batch = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::swap(&mut *batch, &mut *self.pending());
        if !batch.is_empty() {
            // Nowhere to report a failed write to stderr.
            let _ = io::stderr().lock().write_all(&batch);
        }
        batch.clear();
        // A write-through batch (stderr was slow) does not stay allocated.
        batch.shrink_to(2 * WAKE_AT);
    }
}

static SHARED: OnceLock<Arc<Shared>> = OnceLock::new();

/// The process's batched stderr; the first call starts its thread.
pub fn batched_stderr() -> BatchedStderr {
    let shared = SHARED.get_or_init(|| {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Vec::with_capacity(WAKE_AT)),
            wake: Condvar::new(),
            writing: Mutex::new(Vec::with_capacity(WAKE_AT)),
            threaded: OnceLock::new(),
        });
        let writer = shared.clone();
        let started = std::thread::Builder::new()
            .name("codemode-log".into())
            .spawn(move || loop {
                // An idle proxy's thread sleeps until a line comes, then
                // gives the batch FLUSH_EVERY to fill.
                let pending = writer
                    .wake
                    .wait_while(writer.pending(), |p| p.is_empty())
                    .unwrap_or_else(|e| e.into_inner());
                let pending = writer
                    .wake
                    .wait_timeout_while(pending, FLUSH_EVERY, |p| p.len() < WAKE_AT)
                    .map(|(p, _)| p)
                    .unwrap_or_else(|e| e.into_inner().0);
                drop(pending);
                writer.write_out();
            });
        if started.is_ok() {
            let _ = shared.threaded.set(());
        }
        shared
    });
    BatchedStderr {
        shared: shared.clone(),
    }
}

/// Writes every buffered line now.
pub fn flush() {
    if let Some(shared) = SHARED.get() {
        shared.write_out();
    }
}

/// A [`MakeWriter`] for the fmt layer: each line goes to the buffer.
pub struct BatchedStderr {
    shared: Arc<Shared>,
}

impl<'a> MakeWriter<'a> for BatchedStderr {
    type Writer = LineSink<'a>;

    fn make_writer(&'a self) -> LineSink<'a> {
        LineSink {
            shared: &self.shared,
        }
    }
}

/// Appends one formatted line (the fmt layer writes each in one call).
pub struct LineSink<'a> {
    shared: &'a Shared,
}

impl Write for LineSink<'_> {
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        let mut pending = self.shared.pending();
        let first = pending.is_empty();
        pending.extend_from_slice(line);
        let len = pending.len();
        drop(pending);
        if len >= WRITE_THROUGH_AT || self.shared.threaded.get().is_none() {
            self.shared.write_out();
        } else if first || len >= WAKE_AT {
            self.shared.wake.notify_one();
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
