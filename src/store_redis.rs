//! Executions and mixed-turn denials in Redis (`CODEMODE_STORE=redis://...`),
//! shared by every replica (design.md section 12).
//!
//! Keys, all under the configured prefix and all with a TTL:
//!
//! - `x:<tenant>:<execution id>`: an execution, for the run lifetime while it
//!   waits, for the longer of the lifetime and the splice TTL once it ended
//!   (as [`crate::runtime::MemoryExecutionStore`] keeps them);
//! - `a:<tenant>:<alias>`: the whole id of the call a shortened id names,
//!   written once (`NX`) for the longer of the two;
//! - `s:<splice key>`: a mixed turn's denials, for the splice TTL (the key
//!   is already a hash of the tenant and the turn).
//!
//! Values are JSON behind a four-byte version tag (`cmx1`, `cms1`): serde is
//! already here, a record reads with `redis-cli GET`, results and programs
//! are text anyway, and the fields are named so a record written by an older
//! replica still reads (new fields take defaults). An execution's tag is
//! followed by its revision in 16 hex digits, so the compare-and-set script
//! reads the revision with `GETRANGE` and never decodes JSON.
//!
//! The connection is made on first use and remade by the redis crate's
//! `ConnectionManager` whenever it breaks; every operation gives up after
//! [`OP_TIMEOUT`], so a Redis that is down or stalled costs a request a
//! quick 503, never a hang, and a replica starts whether Redis is up or not.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;

use crate::runtime::{alias_key, Execution, ExecutionStore, StoreError, StoreFuture};
use crate::splice::{Splice, SpliceKey, SpliceStore};
use crate::tenant::{hex, Tenant};

/// Longest wait for a connection, and for an answer on it.
const IO_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest any one operation may take, connecting included.
pub const OP_TIMEOUT: Duration = Duration::from_millis(1500);

/// Version tag of an execution record; the revision follows it.
const EXEC_TAG: &[u8; 4] = b"cmx1";
/// Version tag of a splice record.
const SPLICE_TAG: &[u8; 4] = b"cms1";
/// Hex digits of the revision after [`EXEC_TAG`].
const REVISION_DIGITS: usize = 16;

/// Writes an execution and its calls' aliases in one step; with an
/// expected revision, only if the record held is at that revision (or
/// there is none): the compare-and-set two resuming replicas rely on.
const WRITE_EXECUTION: &str = r"
-- KEYS[1]: the execution; KEYS[2..]: the aliases of its calls
-- ARGV[1]: the revision the writer read (16 hex digits), or '' to write regardless
-- ARGV[2]: the record; ARGV[3]: its TTL (ms); ARGV[4]: the aliases' TTL (ms)
-- ARGV[5..]: the call ids the aliases name, in KEYS order
if ARGV[1] ~= '' then
  local held = redis.call('GETRANGE', KEYS[1], 4, 19)
  if held ~= '' and held ~= ARGV[1] then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
for i = 2, #KEYS do
  redis.call('SET', KEYS[i], ARGV[i + 3], 'NX', 'PX', ARGV[4])
end
return 1
";

/// Executions and splices in one Redis database.
pub struct RedisStore {
    client: Result<redis::Client, String>,
    /// Made on first use, inside the runtime; it reconnects by itself.
    conn: OnceCell<ConnectionManager>,
    /// The URL without credentials, for errors.
    name: String,
    keys: Keys,
    lifetime: Duration,
    keep: Duration,
    splice_ttl: Duration,
    write_execution: redis::Script,
}

impl RedisStore {
    /// A store at `url` (never connects here). `lifetime` is how long a
    /// waiting execution is kept, `keep` an ended one, `splice_ttl` a
    /// mixed turn's denials.
    pub fn new(
        url: &str,
        name: String,
        prefix: &str,
        lifetime: Duration,
        keep: Duration,
        splice_ttl: Duration,
    ) -> RedisStore {
        RedisStore {
            client: redis::Client::open(url).map_err(|e| e.to_string()),
            conn: OnceCell::new(),
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

    /// The connection (made on first use), then `op` on it, within [`OP_TIMEOUT`].
    async fn with_conn<T, F, Fut>(&self, what: &str, op: F) -> Result<T, StoreError>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let attempt = async {
            let conn = self
                .conn
                .get_or_try_init(|| async {
                    let client = self
                        .client
                        .clone()
                        .map_err(|e| self.error("is unusable", e))?;
                    let config = ConnectionManagerConfig::new()
                        .set_connection_timeout(Some(IO_TIMEOUT))
                        .set_response_timeout(Some(IO_TIMEOUT))
                        // One attempt per request: a down Redis fails fast,
                        // and the next request tries again.
                        .set_number_of_retries(0);
                    ConnectionManager::new_lazy_with_config(client, config)
                        .map_err(|e| self.error("is unusable", e))
                })
                .await?
                .clone();
            op(conn).await.map_err(|e| self.error(what, e))
        };
        match tokio::time::timeout(OP_TIMEOUT, attempt).await {
            Ok(result) => result,
            Err(_) => Err(self.error(
                what,
                format_args!("no answer within {} ms", OP_TIMEOUT.as_millis()),
            )),
        }
    }

    async fn get_bytes(&self, key: String) -> Result<Option<Vec<u8>>, StoreError> {
        self.with_conn("did not answer a read", |mut conn| async move {
            redis::cmd("GET").arg(key).query_async(&mut conn).await
        })
        .await
    }

    async fn write(&self, exec: &Execution, expected: Option<u64>) -> Result<bool, StoreError> {
        let ttl = if exec.outcome.is_some() {
            self.keep
        } else {
            self.lifetime
        };
        let alias_ttl = self.lifetime.max(self.keep);
        let mut invocation = self
            .write_execution
            .key(self.keys.execution(&exec.tenant, &exec.id));
        let ids: Vec<String> = (0..exec.calls.len()).map(|n| exec.call_id(n)).collect();
        for id in &ids {
            invocation.key(self.keys.alias(&exec.tenant, &alias_key(id)));
        }
        invocation
            .arg(expected.map_or_else(String::new, revision_hex))
            .arg(encode_execution(exec))
            .arg(ttl_ms(ttl))
            .arg(ttl_ms(alias_ttl));
        for id in &ids {
            invocation.arg(id);
        }
        let written: i64 = self
            .with_conn("did not save an execution", |mut conn| async move {
                invocation.invoke_async(&mut conn).await
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
            let _: String = self
                .with_conn("did not answer PING", |mut conn| async move {
                    redis::cmd("PING").query_async(&mut conn).await
                })
                .await?;
            Ok(())
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

/// The store's key names.
#[derive(Clone, Debug)]
pub struct Keys {
    /// Before every key.
    pub prefix: String,
}

impl Keys {
    /// `tenant`'s execution `id`.
    pub fn execution(&self, tenant: &Tenant, id: &str) -> String {
        format!("{}x:{}:{id}", self.prefix, hex(tenant.as_bytes()))
    }

    /// `tenant`'s alias `short` (see [`alias_key`]).
    pub fn alias(&self, tenant: &Tenant, short: &str) -> String {
        format!("{}a:{}:{short}", self.prefix, hex(tenant.as_bytes()))
    }

    /// A mixed turn's denials.
    pub fn splice(&self, key: &SpliceKey) -> String {
        format!("{}s:{}", self.prefix, hex(key.as_bytes()))
    }
}

fn revision_hex(revision: u64) -> String {
    format!("{revision:0width$x}", width = REVISION_DIGITS)
}

/// A lifetime in whole milliseconds, at least one (`PX 0` is an error).
fn ttl_ms(ttl: Duration) -> u64 {
    // A hundred years at most: Redis takes any signed 64-bit PX, and no
    // record needs longer.
    u64::try_from(ttl.as_millis())
        .unwrap_or(u64::MAX)
        .clamp(1, 100 * 365 * 24 * 3600 * 1000)
}

/// An execution record: tag, revision, JSON.
pub fn encode_execution(exec: &Execution) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(EXEC_TAG);
    out.extend_from_slice(revision_hex(exec.revision).as_bytes());
    // Serializing plain data into a Vec cannot fail.
    serde_json::to_writer(&mut out, exec).unwrap_or_default();
    out
}

/// An execution from its record.
pub fn decode_execution(bytes: &[u8]) -> Result<Execution, String> {
    let body = bytes.strip_prefix(EXEC_TAG).ok_or_else(|| {
        format!(
            "not an execution record of this version ({})",
            tag_of(bytes)
        )
    })?;
    let json = body
        .get(REVISION_DIGITS..)
        .ok_or("an execution record cut short")?;
    serde_json::from_slice(json)
        .map_err(|e| format!("an execution record that does not parse: {e}"))
}

/// A splice record: tag, JSON.
pub fn encode_splice(splice: &Splice) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(SPLICE_TAG);
    serde_json::to_writer(&mut out, splice).unwrap_or_default();
    out
}

/// A splice from its record.
pub fn decode_splice(bytes: &[u8]) -> Result<Splice, String> {
    let json = bytes
        .strip_prefix(SPLICE_TAG)
        .ok_or_else(|| format!("not a splice record of this version ({})", tag_of(bytes)))?;
    serde_json::from_slice(json).map_err(|e| format!("a splice record that does not parse: {e}"))
}

fn tag_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(4)]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::CallRecord;
    use serde_json::json;

    fn execution() -> Execution {
        let mut e = Execution::new(
            Tenant::anonymous("s"),
            "call_1".into(),
            "return await tools.read({})".into(),
            Some("reading".into()),
            vec!["read".into()],
        );
        e.calls.push(CallRecord {
            name: "read".into(),
            args: r#"{"path":"a"}"#.into(),
            result: Some("text ✓".into()),
        });
        e.denied_calls = vec![json!({"id": "d1"})];
        e.revision = 0x2a;
        e
    }

    #[test]
    fn an_execution_survives_its_record() {
        let e = execution();
        let bytes = encode_execution(&e);
        assert!(bytes.starts_with(b"cmx1000000000000002a{"));
        assert_eq!(decode_execution(&bytes).unwrap(), e);
    }

    #[test]
    fn a_record_of_an_older_replica_reads_with_defaults() {
        // Written before `revision` existed: it reads as revision 0.
        let e = execution();
        let mut v = serde_json::to_value(&e).unwrap();
        v.as_object_mut().unwrap().remove("revision");
        let mut bytes = b"cmx10000000000000000".to_vec();
        bytes.extend(serde_json::to_vec(&v).unwrap());
        assert_eq!(decode_execution(&bytes).unwrap().revision, 0);
    }

    #[test]
    fn foreign_records_are_refused_not_misread() {
        for bad in [
            &b"cmx2000000000000000{}"[..],
            b"cmx1",
            b"cmx10000000000000000{",
            b"",
        ] {
            assert!(decode_execution(bad).is_err(), "{bad:?}");
        }
        assert!(decode_splice(b"cmx1{}").is_err());
    }

    #[test]
    fn a_splice_survives_its_record() {
        let s = Splice {
            denied_calls: vec![json!({"id": "c", "function": {"name": "shell"}})],
            denials: vec![json!({"role": "tool", "tool_call_id": "c", "content": "denied"})],
        };
        let bytes = encode_splice(&s);
        assert!(bytes.starts_with(b"cms1{"));
        assert_eq!(decode_splice(&bytes).unwrap(), s);
    }

    #[test]
    fn keys_carry_the_prefix_and_the_tenant() {
        let keys = Keys {
            prefix: "cm:".into(),
        };
        let (a, b) = (Tenant::anonymous("a"), Tenant::anonymous("b"));
        let ka = keys.execution(&a, "18cx00x11");
        assert!(
            ka.starts_with("cm:x:") && ka.ends_with(":18cx00x11"),
            "{ka}"
        );
        assert!(ka.contains(&hex(a.as_bytes())));
        assert_ne!(ka, keys.execution(&b, "18cx00x11"));
        assert_ne!(keys.alias(&a, "cmabcdefg"), keys.alias(&b, "cmabcdefg"));
        assert!(keys.alias(&a, "cmabcdefg").starts_with("cm:a:"));
        let s = keys.splice(&SpliceKey::of_turn(
            &a,
            &crate::conversation::Anchor::NONE,
            &["call_1"],
        ));
        assert!(
            s.starts_with("cm:s:") && s.len() == "cm:s:".len() + 64,
            "{s}"
        );
    }

    #[test]
    fn every_lifetime_is_a_valid_px() {
        assert_eq!(ttl_ms(Duration::ZERO), 1);
        assert_eq!(ttl_ms(Duration::from_secs(2)), 2000);
        assert!(ttl_ms(Duration::MAX) < i64::MAX as u64);
    }

    #[test]
    fn the_script_reads_the_revision_where_records_keep_it() {
        // GETRANGE 4..=19: the 16 digits after the tag.
        let bytes = encode_execution(&execution());
        assert_eq!(&bytes[4..20], revision_hex(0x2a).as_bytes());
        assert!(WRITE_EXECUTION.contains("GETRANGE', KEYS[1], 4, 19"));
    }
}
