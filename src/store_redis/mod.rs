//! Executions and mixed-turn denials in Redis (`CODEMODE_STORE=redis://...`,
//! `redis+cluster://...`, `redis+sentinel://...`), shared by every replica
//! (design.md section 12). Key names and records: [`records`]; how each
//! kind of Redis is reached: [`conn`]. The operations below are written once,
//! for all three.
//!
//! The connection is made on first use and remade whenever it breaks (by
//! the crate's `ConnectionManager` or `ClusterConnection`, or by asking the
//! sentinels again); every operation gives up after [`OP_TIMEOUT`], so a
//! Redis that is down, stalled or failing over costs a request a quick 503,
//! never a hang, and a replica starts whether Redis is up or not.

mod conn;
mod records;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::try_join_all;

use crate::config::RedisTarget;
use crate::runtime::{alias_key, Execution, ExecutionStore, StoreError, StoreFuture};
use crate::splice::{Splice, SpliceKey, SpliceStore};
use crate::tenant::Tenant;
use conn::{Backend, Conn};
pub use records::{decode_execution, decode_splice, encode_execution, encode_splice, Keys};
use records::{revision_hex, ttl_ms};

/// Longest wait for a connection, and for an answer on it.
const IO_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest any one operation may take, connecting included.
pub const OP_TIMEOUT: Duration = Duration::from_millis(1500);

/// Writes an execution; with an expected revision, only if the record held
/// is at that revision (or there is none): the compare-and-set two resuming
/// replicas rely on. One key, so it runs on a cluster as on one server.
const WRITE_EXECUTION: &str = r"
-- KEYS[1]: the execution
-- ARGV[1]: the revision the writer read (16 hex digits), or '' to write regardless
-- ARGV[2]: the record; ARGV[3]: its TTL (ms)
if ARGV[1] ~= '' then
  local held = redis.call('GETRANGE', KEYS[1], 4, 19)
  if held ~= '' and held ~= ARGV[1] then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
";

/// Executions and splices in one Redis database, cluster or Sentinel-managed master.
pub struct RedisStore {
    backend: Result<Backend, String>,
    /// The URL without credentials, for errors.
    name: String,
    keys: Keys,
    lifetime: Duration,
    keep: Duration,
    splice_ttl: Duration,
    write_execution: redis::Script,
}

impl RedisStore {
    /// A store at `url`, any form [`RedisTarget`] reads (never connects
    /// here). `lifetime` is how long a waiting execution is kept, `keep`
    /// an ended one, `splice_ttl` a mixed turn's denials.
    pub fn new(
        url: &str,
        name: String,
        prefix: &str,
        lifetime: Duration,
        keep: Duration,
        splice_ttl: Duration,
    ) -> RedisStore {
        let backend = RedisTarget::parse(url)
            .and_then(|target| Backend::open(&target).map_err(|e| e.to_string()));
        RedisStore {
            backend,
            name,
            keys: Keys {
                prefix: prefix.to_owned(),
            },
            lifetime,
            keep,
            splice_ttl,
            write_execution: redis::Script::new(WRITE_EXECUTION),
        }
    }

    fn error(&self, what: &str, e: impl std::fmt::Display) -> StoreError {
        StoreError(format!("Redis at {} {what}: {e}", self.name))
    }

    /// A connection (made on first use), then `op` on it, within
    /// [`OP_TIMEOUT`]. A failure tells the backend, so Sentinel asks for the
    /// master again next time.
    async fn with_conn<T, F, Fut>(&self, what: &str, op: F) -> Result<T, StoreError>
    where
        F: FnOnce(Conn) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let backend = self
            .backend
            .as_ref()
            .map_err(|e| self.error("is unusable", e))?;
        let attempt = async {
            let (conn, generation) = backend
                .connection()
                .await
                .map_err(|e| self.error(what, e))?;
            op(conn).await.map_err(|e| {
                backend.broken(Some(generation));
                self.error(what, e)
            })
        };
        match tokio::time::timeout(OP_TIMEOUT, attempt).await {
            Ok(result) => result,
            Err(_) => {
                backend.broken(None);
                Err(self.error(
                    what,
                    format_args!("no answer within {} ms", OP_TIMEOUT.as_millis()),
                ))
            }
        }
    }

    async fn get_bytes(&self, key: String) -> Result<Option<Vec<u8>>, StoreError> {
        self.with_conn("did not answer a read", |mut conn| async move {
            redis::cmd("GET").arg(key).query_async(&mut conn).await
        })
        .await
    }

    /// The aliases of `exec`'s calls, then the execution (compare-and-set
    /// when `expected`). Each alias is its own `SET NX`: an alias is looked
    /// up alone, so it cannot share the execution's hash slot. Written
    /// first, an alias never names a call its execution record lacks for
    /// long; an alias left by a write that then failed or lost the race
    /// names the same call id any winner gives that call (ids are by
    /// position), so it is never wrong.
    async fn write(&self, exec: &Execution, expected: Option<u64>) -> Result<bool, StoreError> {
        let ttl = if exec.outcome.is_some() {
            self.keep
        } else {
            self.lifetime
        };
        let alias_ttl = ttl_ms(self.lifetime.max(self.keep));
        let aliases: Vec<redis::Cmd> = (0..exec.calls.len())
            .map(|n| {
                let id = exec.call_id(n);
                let mut set = redis::cmd("SET");
                set.arg(self.keys.alias(&exec.tenant, &alias_key(&id)))
                    .arg(id)
                    .arg("NX")
                    .arg("PX")
                    .arg(alias_ttl);
                set
            })
            .collect();
        if !aliases.is_empty() {
            self.with_conn("did not save an execution's call ids", |conn| {
                try_join_all(aliases.into_iter().map(move |set| {
                    let mut conn = conn.clone();
                    async move { set.query_async::<redis::Value>(&mut conn).await }
                }))
            })
            .await?;
        }
        let key = self.keys.execution(&exec.tenant, &exec.id);
        let args = [
            expected.map_or_else(String::new, revision_hex).into_bytes(),
            encode_execution(exec),
            ttl_ms(ttl).to_string().into_bytes(),
        ];
        let script = |verb: &str, head: &str| {
            let mut cmd = redis::cmd(verb);
            cmd.arg(head).arg(1).arg(&key).arg(&args[..]);
            cmd
        };
        let hash = self.write_execution.get_hash();
        let written: i64 = self
            .with_conn("did not save an execution", |mut conn| async move {
                match script("EVALSHA", hash).query_async(&mut conn).await {
                    // A server that has not seen the script yet (a new
                    // master after a failover, say) is sent it whole; EVAL
                    // goes where the key lives, as EVALSHA does.
                    Err(e) if e.kind() == redis::ServerErrorKind::NoScript.into() => {
                        script("EVAL", WRITE_EXECUTION).query_async(&mut conn).await
                    }
                    other => other,
                }
            })
            .await?;
        Ok(written == 1)
    }
}

impl ExecutionStore for RedisStore {
    fn get<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
    ) -> StoreFuture<'a, Option<Arc<Execution>>> {
        Box::pin(async move {
            let Some(bytes) = self.get_bytes(self.keys.execution(tenant, id)).await? else {
                return Ok(None);
            };
            match decode_execution(&bytes) {
                Ok(e) if e.tenant == *tenant && e.id == id => Ok(Some(Arc::new(e))),
                Ok(_) => {
                    tracing::warn!(
                        exec = id,
                        "a Redis record is not the one its key names; ignored"
                    );
                    Ok(None)
                }
                Err(e) => {
                    // Lost to this replica (a newer format, or damage): the
                    // model is told, as for an expired record.
                    tracing::warn!(exec = id, error = %e, "unreadable execution record in Redis; ignored");
                    Ok(None)
                }
            }
        })
    }

    fn alias<'a>(&'a self, tenant: &'a Tenant, short: &'a str) -> StoreFuture<'a, Option<String>> {
        Box::pin(async move {
            let bytes = self.get_bytes(self.keys.alias(tenant, short)).await?;
            Ok(bytes.and_then(|b| String::from_utf8(b).ok()))
        })
    }

    fn put(&self, exec: Arc<Execution>) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            self.write(&exec, None).await?;
            Ok(())
        })
    }

    fn replace(&self, exec: Arc<Execution>, expected: u64) -> StoreFuture<'_, bool> {
        Box::pin(async move { self.write(&exec, Some(expected)).await })
    }

    fn ready(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            self.with_conn("did not answer PING", |mut conn| async move {
                conn.ready().await
            })
            .await
        })
    }
}

impl SpliceStore for RedisStore {
    fn put(&self, key: SpliceKey, splice: Arc<Splice>) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let key = self.keys.splice(&key);
            let value = encode_splice(&splice);
            let ttl = ttl_ms(self.splice_ttl);
            self.with_conn(
                "did not save a mixed turn's denials",
                |mut conn| async move {
                    redis::cmd("SET")
                        .arg(key)
                        .arg(value)
                        .arg("PX")
                        .arg(ttl)
                        .query_async::<()>(&mut conn)
                        .await
                },
            )
            .await
        })
    }

    fn get<'a>(&'a self, key: &'a SpliceKey) -> StoreFuture<'a, Option<Arc<Splice>>> {
        Box::pin(async move {
            let Some(bytes) = self.get_bytes(self.keys.splice(key)).await? else {
                return Ok(None);
            };
            match decode_splice(&bytes) {
                Ok(s) => Ok(Some(Arc::new(s))),
                Err(e) => {
                    tracing::warn!(error = %e, "unreadable splice record in Redis; ignored");
                    Ok(None)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_reads_the_revision_where_records_keep_it() {
        // GETRANGE 4..=19: the 16 digits after the tag.
        let bytes = encode_execution(&records::tests::execution());
        assert_eq!(&bytes[4..20], revision_hex(0x2a).as_bytes());
        assert!(WRITE_EXECUTION.contains("GETRANGE', KEYS[1], 4, 19"));
    }

    #[test]
    fn the_script_touches_one_key_so_it_runs_on_a_cluster() {
        // A cluster runs a script only if its keys share a slot: with one
        // key there is nothing to share.
        assert!(WRITE_EXECUTION.contains("KEYS[1]"));
        assert!(!WRITE_EXECUTION.contains("KEYS[2]") && !WRITE_EXECUTION.contains("#KEYS"));
    }
}
