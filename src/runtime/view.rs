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

    /// What this view fetched for execution `id` of `tenant` (`Some(None)`:
    /// the store held none); `None` when it did not fetch it, or reads the
    /// store directly.
    pub fn fetched(&self, tenant: &Tenant, id: &str) -> Option<Option<Arc<Execution>>> {
        if !self.is_remote() {
            return None;
        }
        self.state()
            .executions
            .get(&(*tenant, id.to_owned()))
            .cloned()
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
            self.store.put(exec.clone()).await?;
            closed(&exec);
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
            Some(local) => {
                local.put(exec.clone());
                closed(&exec);
            }
            None => self.state().writes.push(exec),
        }
    }
}

/// A history's reading closed a program (interrupted: its conversation
/// went on without it): it counts as ended, once it is saved.
fn closed(exec: &Execution) {
    use crate::observe::ledger::{Abandoned, Outcome};
    if let Some(outcome) = &exec.outcome {
        if Outcome::of(outcome) == Outcome::Interrupted {
            crate::observe::ledger::program_abandoned(&exec.id, Abandoned::Interrupted);
        }
        crate::observe::ledger::program_ended(exec);
        crate::observe::ledger::program_seen(exec, crate::observe::inspector::Phase::Ended, false);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use super::ExecView;
    use crate::runtime::{Execution, ExecutionLookup, ExecutionStore, StoreError, StoreFuture};
    use crate::tenant::Tenant;

    /// A store that does I/O: it counts the records asked for.
    #[derive(Default)]
    struct Remote {
        records: Mutex<HashMap<String, Arc<Execution>>>,
        asked: Mutex<Vec<String>>,
        down: bool,
    }

    impl ExecutionStore for Remote {
        fn get<'a>(
            &'a self,
            _: &'a Tenant,
            id: &'a str,
        ) -> StoreFuture<'a, Option<Arc<Execution>>> {
            self.asked.lock().unwrap().push(id.to_owned());
            let found = self.records.lock().unwrap().get(id).cloned();
            let down = self.down;
            Box::pin(async move {
                if down {
                    return Err(StoreError::Unavailable("down".into()));
                }
                Ok(found)
            })
        }
        fn alias<'a>(&'a self, _: &'a Tenant, _: &'a str) -> StoreFuture<'a, Option<String>> {
            Box::pin(async { Ok(None) })
        }
        fn put(&self, exec: Arc<Execution>) -> StoreFuture<'_, ()> {
            self.records.lock().unwrap().insert(exec.id.clone(), exec);
            Box::pin(async { Ok(()) })
        }
        fn replace(&self, exec: Arc<Execution>, _: u64) -> StoreFuture<'_, bool> {
            self.records.lock().unwrap().insert(exec.id.clone(), exec);
            Box::pin(async { Ok(true) })
        }
    }

    fn exec(tenant: Tenant) -> Arc<Execution> {
        Arc::new(Execution::new(
            tenant,
            "c".into(),
            "return 1".into(),
            None,
            vec![],
        ))
    }

    #[tokio::test]
    async fn a_remote_lookup_is_noted_fetched_once_and_then_found() {
        let t = Tenant::anonymous("s");
        let e = exec(t);
        let remote = Arc::new(Remote::default());
        remote
            .records
            .lock()
            .unwrap()
            .insert(e.id.clone(), e.clone());
        let view = ExecView::new(remote.clone());
        assert!(view.get(&t, &e.id).is_none(), "not fetched yet");
        assert!(view.get(&t, "gone").is_none());
        assert!(view.fetch_missing().await.unwrap());
        assert_eq!(
            view.get(&t, &e.id).map(|x| x.id.clone()),
            Some(e.id.clone())
        );
        assert!(
            view.get(&t, "gone").is_none(),
            "a record not held stays unknown"
        );
        assert!(!view.fetch_missing().await.unwrap(), "nothing new to fetch");
        assert_eq!(
            remote.asked.lock().unwrap().len(),
            2,
            "each id asked for once"
        );
    }

    #[tokio::test]
    async fn writes_wait_in_the_view_are_seen_by_its_reads_and_reach_the_store_on_flush() {
        let t = Tenant::anonymous("s");
        let e = exec(t);
        let remote = Arc::new(Remote::default());
        let view = ExecView::new(remote.clone());
        view.put(e.clone());
        assert_eq!(
            view.get(&t, &e.id).map(|x| x.revision),
            Some(1),
            "a write is a new revision"
        );
        assert!(remote.records.lock().unwrap().is_empty());
        view.discard_writes();
        assert!(
            view.get(&t, &e.id).is_none(),
            "a read-ahead pass's writes are forgotten"
        );
        view.put(e.clone());
        view.flush().await.unwrap();
        assert!(remote.records.lock().unwrap().contains_key(&e.id));
    }

    #[tokio::test]
    async fn a_store_out_of_reach_is_an_error_not_a_missing_record() {
        let t = Tenant::anonymous("s");
        let remote = Arc::new(Remote {
            down: true,
            ..Remote::default()
        });
        let view = ExecView::new(remote);
        assert!(view.get(&t, "x").is_none());
        assert!(view.fetch_missing().await.is_err());
    }
}
