//! The run pool: how many programs run at once, how long and how many may
//! wait, and in what order the waiting ones get a slot.
//!
//! Programs are CPU-bound and each may hold its whole heap limit, so the
//! proxy runs at most `concurrency` of them (on blocking threads). A burst
//! waits for a slot rather than failing: a program waits up to `wait`
//! (`CODEMODE_RUN_QUEUE_TIMEOUT_MS`) among at most `queue` waiting ones.
//!
//! Waiting programs are served round-robin between tenants: each tenant
//! has its own first-come queue, and a freed slot goes to the next tenant
//! in turn that has a program waiting. A tenant that floods the proxy
//! therefore delays another tenant's program by at most one run per tenant
//! ahead of it, however many programs it queued; and no tenant may hold
//! more than half the waiting places, so it cannot shut the others out.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;

use super::worker::Workers;
use crate::env_vars::{RUN_CONCURRENCY, RUN_QUEUE, RUN_QUEUE_TIMEOUT_MS};
use crate::tenant::Tenant;

/// Concurrency of the embedded runtime: slots, then a bounded wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunSlots {
    /// Programs running at once.
    pub concurrency: usize,
    /// Programs waiting for a slot; one more is refused at once.
    pub queue: usize,
    /// How long a program waits for a slot before it is refused.
    pub wait: Duration,
}

impl RunSlots {
    /// Waiting places one tenant may hold: half the queue (at least one
    /// when there is a queue at all).
    pub fn per_tenant(&self) -> usize {
        if self.queue == 0 {
            0
        } else {
            self.queue.div_ceil(2)
        }
    }
}

/// Why a job did not run to its end.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// Every slot is taken and no waiting place is left: the job was not started.
    #[error(
        "BusyError: the proxy is already running {concurrency} programs with {queue} more waiting \
         ({RUN_CONCURRENCY}, {RUN_QUEUE}), so this program was not started; run it again in a moment"
    )]
    Busy {
        /// Programs running at once.
        concurrency: usize,
        /// Waiting places (the whole queue, or this tenant's share of it).
        queue: usize,
    },
    /// The job waited its whole time for a slot: it was not started.
    #[error(
        "BusyError: this program waited {waited_ms} ms for one of the proxy's {concurrency} \
         program slots ({RUN_QUEUE_TIMEOUT_MS}, {RUN_CONCURRENCY}) and was not started; run it \
         again in a moment"
    )]
    WaitedOut {
        /// Programs running at once.
        concurrency: usize,
        /// How long it waited.
        waited_ms: u128,
    },
    /// The job's thread ended abnormally (a panic).
    #[error("Error: the program's thread ended abnormally ({0})")]
    Crashed(String),
}

impl PoolError {
    /// Whether the job never started, so running it again is safe.
    pub fn not_started(&self) -> bool {
        matches!(self, PoolError::Busy { .. } | PoolError::WaitedOut { .. })
    }
}

/// Slots for running programs and fair, bounded waiting in front of them.
#[derive(Clone, Debug)]
pub struct RunPool {
    slots: RunSlots,
    fair: Arc<Mutex<Fair>>,
    /// The sandbox workers programs run in; `None`: on blocking threads
    /// of this process (`CODEMODE_SANDBOX=in-process`).
    workers: Option<Arc<Workers>>,
}

/// The pool's book: free slots and each tenant's waiting programs.
#[derive(Debug, Default)]
struct Fair {
    free: usize,
    waiting: usize,
    queues: HashMap<Tenant, VecDeque<Waiter>>,
    /// Tenants with a program waiting, in the order they are served.
    turns: VecDeque<Tenant>,
    next_id: u64,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    grant: oneshot::Sender<()>,
}

impl Fair {
    /// Gives a freed slot to the next tenant in turn, or keeps it free.
    fn hand_on(&mut self) {
        while let Some(tenant) = self.turns.pop_front() {
            let Some(queue) = self.queues.get_mut(&tenant) else {
                continue;
            };
            let Some(waiter) = queue.pop_front() else {
                self.queues.remove(&tenant);
                continue;
            };
            self.waiting -= 1;
            if queue.is_empty() {
                self.queues.remove(&tenant);
            } else {
                self.turns.push_back(tenant);
            }
            // A waiter always removes itself before it goes away, so the
            // send only fails for one that is leaving right now: next.
            if waiter.grant.send(()).is_ok() {
                return;
            }
        }
        self.free += 1;
    }

    /// Takes waiter `id` of `tenant` out of the queue; whether it was there.
    fn withdraw(&mut self, tenant: &Tenant, id: u64) -> bool {
        let Some(queue) = self.queues.get_mut(tenant) else {
            return false;
        };
        let Some(at) = queue.iter().position(|w| w.id == id) else {
            return false;
        };
        queue.remove(at);
        self.waiting -= 1;
        if queue.is_empty() {
            self.queues.remove(tenant);
            self.turns.retain(|t| t != tenant);
        }
        true
    }
}

/// A slot held: given back (to the next tenant in turn) when dropped.
struct Slot(Arc<Mutex<Fair>>);

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.0).hand_on();
    }
}

/// A place in a tenant's queue. Dropped while waiting (the caller went
/// away, or its time ran out), it leaves the queue; should the slot have
/// been granted meanwhile, the slot is passed on.
struct Place {
    fair: Arc<Mutex<Fair>>,
    tenant: Tenant,
    id: u64,
    granted: Option<oneshot::Receiver<()>>,
}

impl Place {
    /// The slot, once granted.
    async fn granted(mut self) -> Slot {
        if let Some(rx) = self.granted.as_mut() {
            // The sender lives in the queue until it grants (Ok) or this
            // place withdraws (which only `drop` does).
            let _ = rx.await;
        }
        self.granted = None;
        Slot(self.fair.clone())
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let Some(mut rx) = self.granted.take() else {
            return;
        };
        let mut fair = lock(&self.fair);
        if !fair.withdraw(&self.tenant, self.id) && rx.try_recv().is_ok() {
            fair.hand_on();
        }
    }
}

fn lock(fair: &Mutex<Fair>) -> MutexGuard<'_, Fair> {
    fair.lock().unwrap_or_else(|p| p.into_inner())
}

impl RunPool {
    /// A pool of `slots.concurrency` slots and `slots.queue` waiting places.
    pub fn new(slots: RunSlots) -> RunPool {
        let fair = Fair {
            free: slots.concurrency.max(1),
            ..Fair::default()
        };
        RunPool {
            slots,
            fair: Arc::new(Mutex::new(fair)),
            workers: None,
        }
    }

    /// This pool, its programs run by `workers` (which it warms up).
    pub fn in_workers(self, workers: Arc<Workers>) -> RunPool {
        workers.warm_up();
        self.in_cold_workers(workers)
    }

    /// This pool, its programs run by `workers`, started on first use.
    pub fn in_cold_workers(mut self, workers: Arc<Workers>) -> RunPool {
        self.workers = Some(workers);
        self
    }

    /// The sandbox workers, when programs run in them.
    pub fn workers(&self) -> Option<&Arc<Workers>> {
        self.workers.as_ref()
    }

    /// [`RunPool::run`] for a job that waits rather than computes (a run
    /// in a worker process): it holds its slot on a task of its own, so a
    /// caller that goes away neither cuts the run short nor frees the slot
    /// before the job ends.
    pub async fn run_async<T, F>(&self, tenant: &Tenant, job: F) -> Result<T, PoolError>
    where
        F: std::future::Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        use tracing::Instrument;
        let slot = self.admit(tenant).await?;
        // The job's own lines (a worker that failed) carry the request's span.
        tokio::spawn(
            async move {
                let _slot = slot;
                job.await
            }
            .in_current_span(),
        )
        .await
        .map_err(|e| PoolError::Crashed(e.to_string()))
    }

    /// Runs `tenant`'s `job` on a blocking thread once a slot is free: at
    /// once, or after waiting its turn. Refused at once when no waiting
    /// place is left, or after waiting `wait` without a slot.
    ///
    /// The slot moves into the job's thread: a caller that goes away
    /// (a client that hung up) gives its slot back only when the job ends,
    /// so the bound holds for threads, not for futures.
    pub async fn run<T, F>(&self, tenant: &Tenant, job: F) -> Result<T, PoolError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let slot = self.admit(tenant).await?;
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            job()
        })
        .await
        .map_err(|e| PoolError::Crashed(e.to_string()))
    }

    async fn admit(&self, tenant: &Tenant) -> Result<Slot, PoolError> {
        let place = {
            let mut fair = lock(&self.fair);
            if fair.free > 0 {
                fair.free -= 1;
                return Ok(Slot(self.fair.clone()));
            }
            let mine = fair.queues.get(tenant).map_or(0, VecDeque::len);
            if fair.waiting >= self.slots.queue {
                return Err(self.busy(self.slots.queue));
            }
            if mine >= self.slots.per_tenant() {
                return Err(self.busy(self.slots.per_tenant()));
            }
            let (grant, granted) = oneshot::channel();
            let id = fair.next_id;
            fair.next_id += 1;
            fair.waiting += 1;
            let queue = fair.queues.entry(*tenant).or_default();
            queue.push_back(Waiter { id, grant });
            if queue.len() == 1 {
                fair.turns.push_back(*tenant);
            }
            Place {
                fair: self.fair.clone(),
                tenant: *tenant,
                id,
                granted: Some(granted),
            }
        };
        let started = tokio::time::Instant::now();
        match tokio::time::timeout(self.slots.wait, place.granted()).await {
            Ok(slot) => Ok(slot),
            // Dropping the place withdrew it, or passed on a slot granted
            // in the same instant.
            Err(_) => Err(PoolError::WaitedOut {
                concurrency: self.slots.concurrency,
                waited_ms: started.elapsed().as_millis(),
            }),
        }
    }

    fn busy(&self, queue: usize) -> PoolError {
        PoolError::Busy {
            concurrency: self.slots.concurrency,
            queue,
        }
    }

    /// Programs running now.
    pub fn running(&self) -> usize {
        self.slots.concurrency.max(1) - lock(&self.fair).free
    }

    /// Programs waiting now.
    pub fn waiting(&self) -> usize {
        lock(&self.fair).waiting
    }
}

#[cfg(test)]
mod tests;
