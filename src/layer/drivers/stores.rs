//! A request's view of the stores, read ahead when they are shared.

use std::sync::Arc;

use crate::error::ProxyError;
use crate::layer::State;
use crate::runtime::{ExecView, Execution};
use crate::splice::TenantSplices;
use crate::tenant::Tenant;

/// Rounds of reading ahead: a history names executions, a shortened id an
/// alias that names one; a third round finds nothing new.
const READ_AHEAD_ROUNDS: usize = 3;

/// The executions and stored denials one request reads and writes, as its tenant.
pub(crate) struct RequestStores {
    pub(crate) tenant: Tenant,
    pub(crate) executions: ExecView,
    pub(crate) splices: TenantSplices,
}

impl RequestStores {
    pub(crate) fn new(state: &State, tenant: Tenant) -> RequestStores {
        RequestStores {
            tenant,
            executions: ExecView::new(state.executions.clone()),
            splices: TenantSplices::new(state.splices.clone(), tenant),
        }
    }

    /// Reads ahead what the request will look up, when the stores are
    /// shared: `read` (the request's own reading of its history, on a
    /// copy) runs until everything it looked for has been fetched, so the
    /// real reading that follows never waits. Nothing to do in memory.
    pub(crate) async fn read_ahead(&self, mut read: impl FnMut(&Self)) -> Result<(), ProxyError> {
        if !self.executions.is_remote() && !self.splices.is_remote() {
            return Ok(());
        }
        for _ in 0..READ_AHEAD_ROUNDS {
            read(self);
            self.executions.discard_writes();
            let (executions, splices) = tokio::join!(
                self.executions.fetch_missing(),
                self.splices.fetch_missing()
            );
            if !(executions? | splices?) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Saves what the request's reading wrote (programs closed as interrupted).
    pub(crate) async fn flush(&self) -> Result<(), ProxyError> {
        self.executions.flush().await?;
        Ok(())
    }

    /// Tells the view about an execution this request saved, so its
    /// reading sees the new state.
    pub(crate) fn saved(&self, exec: &Arc<Execution>) {
        self.executions.saved(exec.clone());
    }
}
