//! A request's view of the execution store.
//!
//! The code that reads a history ([`super::history`] and the dialects'
//! readers) runs without waiting. With the in-memory store it reads the
//! store directly. With a store that does I/O (shared by replicas), the
//! request first reads its history once on a copy: every execution and
//! alias it looks for and does not know yet is noted, fetched together
//! ([`ExecView::fetch_missing`]), and the real read finds them here. Its
//! writes (programs closed as interrupted) wait here until
//! [`ExecView::flush`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Execution, ExecutionLookup, ExecutionStore, StoreError};
use crate::tenant::Tenant;

type Key = (Tenant, String);

/// One request's view of an [`ExecutionStore`].
pub struct ExecView {
    store: Arc<dyn ExecutionStore>,
    state: Mutex<ViewState>,
}

#[derive(Default)]
struct ViewState {
    executions: HashMap<Key, Option<Arc<Execution>>>,
    aliases: HashMap<Key, Option<String>>,
    missing_executions: Vec<Key>,
    missing_aliases: Vec<Key>,
    writes: Vec<Arc<Execution>>,
}

impl ExecView {
    /// A view of `store`, empty.
    pub fn new(store: Arc<dyn ExecutionStore>) -> ExecView {
        ExecView {
            store,
            state: Mutex::default(),
        }
    }

    /// Whether the store does I/O, so lookups must be fetched ahead.
    pub fn is_remote(&self) -> bool {
        self.store.local().is_none()
    }

    fn state(&self) -> MutexGuard<'_, ViewState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fetches what lookups asked for and this view did not know; whether
    /// there was anything to fetch.
    pub async fn fetch_missing(&self) -> Result<bool, StoreError> {
        let (mut executions, mut aliases) = {
            let mut state = self.state();
            (
                std::mem::take(&mut state.missing_executions),
                std::mem::take(&mut state.missing_aliases),
            )
        };
        executions.sort_unstable();
        executions.dedup();
        aliases.sort_unstable();
        aliases.dedup();
        if executions.is_empty() && aliases.is_empty() {
            return Ok(false);
        }
        let store = &*self.store;
        let (found, resolved) = tokio::try_join!(
            futures_util::future::try_join_all(executions.iter().map(|(t, id)| store.get(t, id))),
            futures_util::future::try_join_all(aliases.iter().map(|(t, s)| store.alias(t, s))),
        )?;
        let mut state = self.state();
        state.executions.extend(executions.into_iter().zip(found));
        state.aliases.extend(aliases.into_iter().zip(resolved));
        Ok(true)
    }

    /// Notes `exec` as saved by this request (its new state, for the reads that follow).
    pub fn saved(&self, exec: Arc<Execution>) {
        if self.is_remote() {
            let key = (exec.tenant, exec.id.clone());
            self.state().executions.insert(key, Some(exec));
        }
    }

    /// Forgets the writes made so far (those of a read-ahead pass).
    pub fn discard_writes(&self) {
        self.state().writes.clear();
    }

    /// Saves the writes made through this view.
    pub async fn flush(&self) -> Result<(), StoreError> {
        let writes = std::mem::take(&mut self.state().writes);
        for exec in writes {
            self.store.put(exec).await?;
        }
        Ok(())
    }
}

impl ExecutionLookup for ExecView {
    fn get(&self, tenant: &Tenant, id: &str) -> Option<Arc<Execution>> {
        if let Some(local) = self.store.local() {
            return local.get(tenant, id);
        }
        let mut state = self.state();
        let written = state
            .writes
            .iter()
            .rev()
            .find(|e| e.tenant == *tenant && e.id == id);
        if let Some(e) = written {
            return Some(e.clone());
        }
        let key = (*tenant, id.to_owned());
        if let Some(found) = state.executions.get(&key) {
            return found.clone();
        }
        state.missing_executions.push(key);
        None
    }

    fn alias(&self, tenant: &Tenant, short: &str) -> Option<String> {
        if let Some(local) = self.store.local() {
            return local.alias(tenant, short);
        }
        let mut state = self.state();
        let key = (*tenant, short.to_owned());
        if let Some(found) = state.aliases.get(&key) {
            return found.clone();
        }
        state.missing_aliases.push(key);
        None
    }

    fn put(&self, exec: Arc<Execution>) {
        let mut exec = Arc::unwrap_or_clone(exec);
        exec.revision += 1;
        let exec = Arc::new(exec);
        match self.store.local() {
            Some(local) => local.put(exec),
            None => self.state().writes.push(exec),
        }
    }
}
