//! The run pool: how many programs run at once, and how many may wait.
//!
//! Programs are CPU-bound and each may hold its whole heap limit, so the
//! proxy runs at most `concurrency` of them (on blocking threads) and lets
//! at most `queue` more wait for a slot, first come first served. One more
//! is refused at once: the model gets a `run_code` error it can act on, and
//! the proxy keeps its memory bounded and its I/O threads answering.

use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::env_vars::{RUN_CONCURRENCY, RUN_QUEUE};

/// Concurrency of the embedded runtime: slots, then a bounded queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunSlots {
    /// Programs running at once.
    pub concurrency: usize,
    /// Programs waiting for a slot; one more is refused with a clear error.
    pub queue: usize,
}

/// Why a job did not run to its end.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// Every slot is taken and the queue is full: the job was not started.
    #[error(
        "BusyError: the proxy is already running {concurrency} programs with {queue} more waiting \
         ({RUN_CONCURRENCY}, {RUN_QUEUE}), so this program was not started; run it again in a moment"
    )]
    Busy {
        /// Programs running at once.
        concurrency: usize,
        /// Programs waiting for a slot.
        queue: usize,
    },
    /// The job's thread ended abnormally (a panic).
    #[error("Error: the program's thread ended abnormally ({0})")]
    Crashed(String),
}

/// Slots for running programs and a bounded queue in front of them.
#[derive(Clone, Debug)]
pub struct RunPool {
    slots: RunSlots,
    /// Held from admission to the end of the run: slots plus the queue.
    admitted: Arc<Semaphore>,
    /// Held while the job runs.
    running: Arc<Semaphore>,
}

impl RunPool {
    /// A pool of `slots.concurrency` slots and `slots.queue` waiting places.
    pub fn new(slots: RunSlots) -> RunPool {
        let concurrency = slots.concurrency.clamp(1, Semaphore::MAX_PERMITS);
        let admitted = concurrency
            .saturating_add(slots.queue)
            .min(Semaphore::MAX_PERMITS);
        RunPool {
            slots,
            admitted: Arc::new(Semaphore::new(admitted)),
            running: Arc::new(Semaphore::new(concurrency)),
        }
    }

    /// Runs `job` on a blocking thread once a slot is free, or refuses it
    /// at once when the queue is full.
    ///
    /// The permits move into the job's thread: a caller that goes away
    /// (a client that hung up) gives its slot back only when the job ends,
    /// so the bound holds for threads, not for futures.
    pub async fn run<T, F>(&self, job: F) -> Result<T, PoolError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let busy = || PoolError::Busy {
            concurrency: self.slots.concurrency,
            queue: self.slots.queue,
        };
        let admitted = self
            .admitted
            .clone()
            .try_acquire_owned()
            .map_err(|_| busy())?;
        // The semaphores are never closed; a closed one would only mean "busy".
        let running = self
            .running
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| busy())?;
        tokio::task::spawn_blocking(move || {
            let _permits = (admitted, running);
            job()
        })
        .await
        .map_err(|e| PoolError::Crashed(e.to_string()))
    }

    /// Programs running now.
    #[cfg(test)]
    pub fn running(&self) -> usize {
        self.slots
            .concurrency
            .clamp(1, Semaphore::MAX_PERMITS)
            .saturating_sub(self.running.available_permits())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    fn pool(concurrency: usize, queue: usize) -> RunPool {
        RunPool::new(RunSlots { concurrency, queue })
    }

    /// Starts a job that holds its slot until `release` is sent to.
    async fn hold(
        pool: &RunPool,
    ) -> (
        mpsc::Sender<()>,
        tokio::task::JoinHandle<Result<(), PoolError>>,
    ) {
        let (release, wait) = mpsc::channel::<()>();
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let p = pool.clone();
        let handle = tokio::spawn(async move {
            p.run(move || {
                let _ = started_tx.send(());
                let _ = wait.recv_timeout(Duration::from_secs(60));
            })
            .await
        });
        started.await.expect("the job started");
        (release, handle)
    }

    #[tokio::test]
    async fn past_the_queue_a_job_is_refused_naming_the_env_vars() {
        let p = pool(1, 0);
        let (release, first) = hold(&p).await;
        let err = p.run(|| ()).await.unwrap_err();
        assert_eq!(
            err,
            PoolError::Busy {
                concurrency: 1,
                queue: 0
            }
        );
        let text = err.to_string();
        assert!(
            text.contains("CODEMODE_RUN_CONCURRENCY") && text.contains("CODEMODE_RUN_QUEUE"),
            "{text}"
        );
        release.send(()).unwrap();
        first.await.unwrap().unwrap();
        assert_eq!(p.run(|| 7).await, Ok(7), "the slot came back");
    }

    #[tokio::test]
    async fn queued_jobs_wait_for_a_slot_and_then_run() {
        let p = pool(1, 1);
        let (release, first) = hold(&p).await;
        let q = p.clone();
        let queued = tokio::spawn(async move { q.run(|| "ran").await });
        // Wait (without a timed assertion) until the queued job holds its place.
        while p.admitted.available_permits() != 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(matches!(
            p.run(|| "third").await,
            Err(PoolError::Busy { .. })
        ));
        assert_eq!(p.running(), 1);
        release.send(()).unwrap();
        first.await.unwrap().unwrap();
        assert_eq!(queued.await.unwrap(), Ok("ran"));
    }

    #[tokio::test]
    async fn a_caller_that_goes_away_keeps_the_slot_until_the_job_ends() {
        let p = pool(1, 0);
        let (release, first) = hold(&p).await;
        first.abort();
        let _ = first.await;
        assert!(
            matches!(p.run(|| ()).await, Err(PoolError::Busy { .. })),
            "the job still runs, so its slot is still taken"
        );
        release.send(()).unwrap();
        while p.running() != 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(p.run(|| 1).await, Ok(1));
    }
}
