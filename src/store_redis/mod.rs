//! Executions and mixed-turn denials in Redis (`CODEMODE_STORE=redis://...`,
//! `redis+cluster://...`, `redis+sentinel://...`), shared by every replica
//! (docs/replicas.md). Key names and records: [`records`]; how each
//! kind of Redis is reached: [`conn`]. The operations below are written once,
//! for all three.
//!
//! The connection is made on first use and remade whenever it breaks (by
//! the crate's `ConnectionManager` or `ClusterConnection`, or by asking the
//! sentinels again); an operation whose connection broke is tried once more
//! on the new one, so a replica idle across a failover does not show its
//! user the dead master's error (which operations, and why each may be
//! repeated: docs/replicas.md, "What is tried again"). Every attempt gives
//! up after [`OP_TIMEOUT`], so a Redis that is down, stalled or failing over
//! costs a request a quick 503, never a hang, and a replica starts whether
//! Redis is up or not. No record above [`RecordLimits`] is written or read.

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

/// Reads a record unless it is longer than a limit: then only its length
/// comes back, so a record too large to hold is never sent whole.
const READ_RECORD: &str = r"
-- KEYS[1]: the record; ARGV[1]: the longest record read (bytes)
local length = redis.call('STRLEN', KEYS[1])
if length > tonumber(ARGV[1]) then
  return length
end
return redis.call('GET', KEYS[1])
";

/// The longest record the store writes or reads, per kind. Derived from
/// the in-memory budgets (an eighth of `CODEMODE_EXECUTION_STORE_MB` and of
/// `CODEMODE_SPLICE_STORE_MB`; docs/replicas.md, "Record size"): reading a record costs
/// a replica about three times its length while it is decoded, so the
/// largest record read stays within half of what the replica would spend
/// on the same records in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordLimits {
    /// An execution (its program, its calls' arguments and results).
    pub execution: u64,
    /// A mixed turn's denials.
    pub splice: u64,
}

impl RecordLimits {
    /// The limits for the in-memory budgets `budgets`.
    pub fn of(budgets: &crate::config::StoreBudgets) -> RecordLimits {
        RecordLimits {
            execution: (budgets.executions_bytes / 8).max(1 << 20),
            splice: (budgets.splices_bytes / 8).max(1 << 20),
        }
    }
}

/// How one attempt at an operation failed.
enum Failure {
    Redis(redis::RedisError),
    /// No answer within [`OP_TIMEOUT`]: the time is spent, nothing is retried.
    TimedOut,
    /// Not Redis's doing (a record over its limit, an unusable URL).
    Store(StoreError),
}

impl Failure {
    /// A connection that broke (a master that died or was demoted, a
    /// cluster node that moved) is remade by the next attempt, which
    /// meets the new master: worth one more try. A timeout has spent the
    /// operation's time, and any other error would come back the same.
    fn worth_a_retry(&self) -> bool {
        let Failure::Redis(e) = self else {
            return false;
        };
        !e.is_timeout()
            && (e.is_unrecoverable_error()
                || e.kind() == redis::ServerErrorKind::ReadOnly.into()
                || e.kind() == redis::ServerErrorKind::ClusterDown.into())
    }
}

/// Executions and splices in one Redis database, cluster or Sentinel-managed master.
pub struct RedisStore {
    backend: Result<Backend, String>,
    /// The URL without credentials, for errors.
    name: String,
    keys: Keys,
    lifetime: Duration,
    keep: Duration,
    splice_ttl: Duration,
    limits: RecordLimits,
    write_execution: redis::Script,
    read_record: redis::Script,
}

impl RedisStore {
    /// A store at `url`, any form [`RedisTarget`] reads (never connects
    /// here). `lifetime` is how long a waiting execution is kept, `keep`
    /// an ended one, `splice_ttl` a mixed turn's denials; no record longer
    /// than `limits` is written or read.
    pub fn new(
        url: &str,
        name: String,
        prefix: &str,
        lifetime: Duration,
        keep: Duration,
        splice_ttl: Duration,
        limits: RecordLimits,
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
            limits,
            write_execution: redis::Script::new(WRITE_EXECUTION),
            read_record: redis::Script::new(READ_RECORD),
        }
    }

    fn error(&self, what: &str, e: impl std::fmt::Display) -> StoreError {
        StoreError::Unavailable(format!("Redis at {} {what}: {e}", self.name))
    }

    fn failed(&self, what: &str, failure: Failure) -> StoreError {
        match failure {
            Failure::Redis(e) => self.error(what, e),
            Failure::TimedOut => self.error(
                what,
                format_args!("no answer within {} ms", OP_TIMEOUT.as_millis()),
            ),
            Failure::Store(e) => e,
        }
    }

    /// `op` on a connection, retried once on a new connection when the
    /// first one broke (see [`Failure::worth_a_retry`]). For operations
    /// whose repetition is harmless: reads, and writes of a value that
    /// does not depend on what is held.
    async fn with_conn<T, F, Fut>(&self, what: &str, op: F) -> Result<T, StoreError>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        match self.attempt(&op).await {
            Err(failure) if failure.worth_a_retry() => {
                tracing::debug!(store = %self.name, error = %self.failed(what, failure), "a Redis connection broke; trying once more on a new one");
                self.attempt(&op).await.map_err(|f| self.failed(what, f))
            }
            result => result.map_err(|f| self.failed(what, f)),
        }
    }

    /// One try at `op`: a connection (made on first use), then `op` on it,
    /// within [`OP_TIMEOUT`]. A failure tells the backend, so the next
    /// connection is a new one (Sentinel asks for the master again).
    async fn attempt<T, F, Fut>(&self, op: &F) -> Result<T, Failure>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let backend = self
            .backend
            .as_ref()
            .map_err(|e| Failure::Store(self.error("is unusable", e)))?;
        let attempt = async {
            let (conn, generation) = backend.connection().await.map_err(Failure::Redis)?;
            op(conn).await.map_err(|e| {
                backend.broken(Some(generation));
                Failure::Redis(e)
            })
        };
        match tokio::time::timeout(OP_TIMEOUT, attempt).await {
            Ok(result) => result,
            Err(_) => {
                backend.broken(None);
                Err(Failure::TimedOut)
            }
        }
    }

    /// The record at `key`, unless it is longer than `limit`: then a
    /// [`StoreError::TooLarge`], and Redis sent only its length.
    async fn get_bytes(&self, key: String, limit: u64) -> Result<Option<Vec<u8>>, StoreError> {
        let script = &self.read_record;
        let value: redis::Value = self
            .with_conn("did not answer a read", |mut conn| {
                let key = key.as_str();
                async move {
                    run_script(
                        &mut conn,
                        script,
                        READ_RECORD,
                        key,
                        &[limit.to_string().into_bytes()],
                    )
                    .await
                }
            })
            .await?;
        match value {
            redis::Value::Nil => Ok(None),
            redis::Value::Int(length) => Err(StoreError::TooLarge(format!(
                "a record of this conversation in the shared store is {length} bytes, above this proxy's limit of {limit} (an eighth of CODEMODE_EXECUTION_STORE_MB or CODEMODE_SPLICE_STORE_MB); give every replica the same budgets, or start the conversation again"
            ))),
            other => redis::FromRedisValue::from_redis_value(other)
                .map(Some)
                .map_err(|e| self.error("answered a read with something else", e)),
        }
    }

    /// A [`StoreError::TooLarge`] when `record` is longer than `limit`.
    fn fits(&self, record: &[u8], limit: u64, budget: &str) -> Result<(), StoreError> {
        if record.len() as u64 <= limit {
            return Ok(());
        }
        Err(StoreError::TooLarge(format!(
            "this conversation's program state is {} bytes, above the shared store's record limit of {limit} (an eighth of {budget}); raise {budget} on every replica, or ask for less in one program (smaller results, fewer calls)",
            record.len()
        )))
    }

    /// The aliases of `exec`'s calls, then the execution (compare-and-set
    /// when `expected`). Each alias is its own `SET NX`: an alias is looked
    /// up alone, so it cannot share the execution's hash slot. Written
    /// first, an alias never names a call its execution record lacks for
    /// long; an alias left by a write that then failed or lost the race
    /// names the same call id any winner gives that call (ids are by
    /// position), so it is never wrong, and writing it again is harmless.
    async fn write(&self, exec: &Execution, expected: Option<u64>) -> Result<bool, StoreError> {
        let record = encode_execution(exec);
        self.fits(
            &record,
            self.limits.execution,
            "CODEMODE_EXECUTION_STORE_MB",
        )?;
        let ttl = if exec.outcome.is_some() {
            self.keep
        } else {
            self.lifetime
        };
        let alias_ttl = ttl_ms(self.lifetime.max(self.keep));
        let mut aliases: Vec<redis::Cmd> = (0..exec.calls.len())
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
        // A batch's key is the last saved program's (`batch_key`): no NX.
        aliases.extend(exec.batch_keys().map(|(key, id)| {
            let mut set = redis::cmd("SET");
            set.arg(self.keys.alias(&exec.tenant, &key))
                .arg(id)
                .arg("PX")
                .arg(alias_ttl);
            set
        }));
        if !aliases.is_empty() {
            self.with_conn("did not save an execution's call ids", |conn| {
                try_join_all(aliases.iter().map(move |set| {
                    let mut conn = conn.clone();
                    async move { set.query_async::<redis::Value>(&mut conn).await }
                }))
            })
            .await?;
        }
        let key = self.keys.execution(&exec.tenant, &exec.id);
        let args = [
            expected.map_or_else(String::new, revision_hex).into_bytes(),
            record,
            ttl_ms(ttl).to_string().into_bytes(),
        ];
        let what = "did not save an execution";
        let script = &self.write_execution;
        let write = |mut conn: Conn| {
            let (key, args) = (key.as_str(), &args);
            async move { run_script(&mut conn, script, WRITE_EXECUTION, key, args).await }
        };
        let Some(expected) = expected else {
            // Written regardless: the same bytes again are harmless.
            let _: i64 = self.with_conn(what, write).await?;
            return Ok(true);
        };
        match self.attempt(&write).await {
            Ok(written) => Ok(written == 1_i64),
            Err(failure) if failure.worth_a_retry() => {
                // The connection broke: the set may or may not have
                // happened. What is held now says which, and only a write
                // that certainly did not happen is tried again.
                let held = self.get_bytes(key.clone(), self.limits.execution).await?;
                match held {
                    Some(bytes) if bytes == args[1] => Ok(true),
                    Some(bytes) if !held_at(&bytes, expected) => Ok(false),
                    _ => {
                        let written: i64 = self
                            .attempt(&write)
                            .await
                            .map_err(|f| self.failed(what, f))?;
                        Ok(written == 1)
                    }
                }
            }
            Err(failure) => Err(self.failed(what, failure)),
        }
    }
}

/// Whether an execution record is at `revision`.
fn held_at(record: &[u8], revision: u64) -> bool {
    record.get(4..20) == Some(revision_hex(revision).as_bytes())
}

/// `script` on `key` with `args`, by its hash; a server that has not seen
/// the script yet (a new master after a failover, say) is sent it whole,
/// and `EVAL` goes where the key lives, as `EVALSHA` does.
async fn run_script<T: redis::FromRedisValue>(
    conn: &mut Conn,
    script: &redis::Script,
    source: &str,
    key: &str,
    args: &[Vec<u8>],
) -> redis::RedisResult<T> {
    let call = |verb: &str, head: &str| {
        let mut cmd = redis::cmd(verb);
        cmd.arg(head).arg(1).arg(key).arg(args);
        cmd
    };
    match call("EVALSHA", script.get_hash()).query_async(conn).await {
        Err(e) if e.kind() == redis::ServerErrorKind::NoScript.into() => {
            call("EVAL", source).query_async(conn).await
        }
        other => other,
    }
}

impl ExecutionStore for RedisStore {
    fn get<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
    ) -> StoreFuture<'a, Option<Arc<Execution>>> {
        Box::pin(async move {
            let Some(bytes) = self
                .get_bytes(self.keys.execution(tenant, id), self.limits.execution)
                .await?
            else {
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
            let bytes = self
                .get_bytes(self.keys.alias(tenant, short), self.limits.execution)
                .await?;
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
            self.fits(&value, self.limits.splice, "CODEMODE_SPLICE_STORE_MB")?;
            let mut set = redis::cmd("SET");
            set.arg(key)
                .arg(value)
                .arg("PX")
                .arg(ttl_ms(self.splice_ttl));
            let set = &set;
            self.with_conn(
                "did not save a mixed turn's denials",
                |mut conn| async move { set.query_async::<()>(&mut conn).await },
            )
            .await
        })
    }

    fn get<'a>(&'a self, key: &'a SpliceKey) -> StoreFuture<'a, Option<Arc<Splice>>> {
        Box::pin(async move {
            let Some(bytes) = self
                .get_bytes(self.keys.splice(key), self.limits.splice)
                .await?
            else {
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

    #[test]
    fn a_broken_connection_is_retried_a_timeout_or_a_refusal_of_redis_is_not() {
        use std::io::{Error, ErrorKind};
        let io = |kind| Failure::Redis(Error::new(kind, "x").into());
        assert!(io(ErrorKind::BrokenPipe).worth_a_retry());
        assert!(io(ErrorKind::ConnectionReset).worth_a_retry());
        assert!(io(ErrorKind::ConnectionRefused).worth_a_retry());
        assert!(!io(ErrorKind::TimedOut).worth_a_retry());
        assert!(!Failure::TimedOut.worth_a_retry());
        let server = |kind: redis::ServerErrorKind| {
            Failure::Redis(redis::RedisError::from((redis::ErrorKind::from(kind), "x")))
        };
        assert!(server(redis::ServerErrorKind::ReadOnly).worth_a_retry());
        assert!(!server(redis::ServerErrorKind::NoScript).worth_a_retry());
        assert!(!Failure::Store(StoreError::TooLarge("x".into())).worth_a_retry());
    }

    #[test]
    fn a_record_is_at_the_revision_its_head_names() {
        let bytes = encode_execution(&records::tests::execution());
        assert!(held_at(&bytes, 0x2a));
        assert!(!held_at(&bytes, 0x2b));
        assert!(!held_at(b"cmx1", 0x2a));
    }

    #[test]
    fn the_read_script_sends_a_long_record_s_length_not_the_record() {
        assert!(READ_RECORD.contains("STRLEN', KEYS[1]"));
        assert!(READ_RECORD.find("return length") < READ_RECORD.find("'GET'"));
    }
}
