//! Where executions wait for the client's results.

use std::time::Duration;

use super::Execution;
use crate::ttl_map::TtlMap;

/// Executions by id. Behind a trait so a shared store can serve replicas:
/// an execution is plain data, replayed from the start on every run.
pub trait ExecutionStore: Send + Sync + 'static {
    /// Saves (or replaces) an execution.
    fn put(&self, exec: Execution);
    /// The execution with this id, if held.
    fn get(&self, id: &str) -> Option<Execution>;
}

/// In memory: bounded, oldest evicted first, entries expire.
pub struct MemoryExecutionStore(TtlMap<Execution>);

impl MemoryExecutionStore {
    /// A store holding at most `capacity` executions, each for `ttl`.
    pub fn new(ttl: Duration, capacity: usize) -> MemoryExecutionStore {
        MemoryExecutionStore(TtlMap::new(ttl, capacity))
    }
}

impl ExecutionStore for MemoryExecutionStore {
    fn put(&self, exec: Execution) {
        self.0.insert(exec.id.clone(), exec);
    }

    fn get(&self, id: &str) -> Option<Execution> {
        self.0.get(id)
    }
}
