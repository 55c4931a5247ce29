//! The three ways to reach Redis, behind one connection type: the store's
//! operations are written once against [`Conn`].
//!
//! - one server: the crate's `ConnectionManager`, which reconnects by itself;
//! - a cluster: the crate's `ClusterConnection`, which keeps the slot map,
//!   follows `MOVED`/`ASK` and learns a failover's new master by itself;
//! - Sentinel: a multiplexed connection to the master the sentinels name,
//!   dropped on any error so that the next operation asks the sentinels
//!   again. The crate checks that the node named answers `ROLE` as a
//!   master, so the store never writes to a replica; a node demoted under
//!   an open connection answers `READONLY`, an error like any other.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Cmd, IntoConnectionInfo, Pipeline, RedisFuture, RedisResult, Value,
};
use tokio::sync::OnceCell;

use super::IO_TIMEOUT;
use crate::config::RedisTarget;

/// A connection of any kind; cheap to clone (each is a handle).
#[derive(Clone)]
pub(super) enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(MultiplexedConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
            Conn::Sentinel(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Sentinel(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
            Conn::Sentinel(c) => c.get_db(),
        }
    }
}

impl Conn {
    /// Whether Redis can serve every key: `PING` on one server; on a
    /// cluster, `PING` to each master `CLUSTER SLOTS` names, by address.
    /// (A fan-out `PING` skips a master whose connection is down, so it
    /// answers while a dead master's slots wait for their failover.)
    pub(super) async fn ready(&mut self) -> RedisResult<()> {
        let Conn::Cluster(cluster) = self else {
            return redis::cmd("PING").query_async(self).await;
        };
        let slots: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(cluster)
            .await?;
        let masters = masters_of(&slots);
        if masters.is_empty() {
            return Err((
                redis::ServerErrorKind::ClusterDown.into(),
                "no slot is served",
            )
                .into());
        }
        for (host, port) in masters {
            let at = SingleNodeRoutingInfo::ByAddress { host, port };
            cluster
                .route_command(redis::cmd("PING"), RoutingInfo::SingleNode(at))
                .await?;
        }
        Ok(())
    }
}

/// The masters in a `CLUSTER SLOTS` answer: each range is `[start, end,
/// [host, port, id, ...], replicas...]`.
fn masters_of(slots: &Value) -> Vec<(String, u16)> {
    let Value::Array(ranges) = slots else {
        return Vec::new();
    };
    let mut masters: Vec<(String, u16)> = ranges
        .iter()
        .filter_map(|range| match range {
            Value::Array(r) => match r.get(2) {
                Some(Value::Array(node)) => match (node.first(), node.get(1)) {
                    (Some(Value::BulkString(h)), Some(Value::Int(p))) => Some((
                        String::from_utf8_lossy(h).into_owned(),
                        u16::try_from(*p).ok()?,
                    )),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        })
        .collect();
    masters.sort();
    masters.dedup();
    masters
}

/// How connections are made, and kept between operations.
pub(super) enum Backend {
    Single {
        client: redis::Client,
        conn: OnceCell<ConnectionManager>,
    },
    Cluster {
        client: ClusterClient,
        conn: OnceCell<ClusterConnection>,
    },
    Sentinel(Sentinel),
}

/// The sentinels, and the master connection they last named.
pub(super) struct Sentinel {
    /// Held while the sentinels are asked: one lookup at a time.
    client: tokio::sync::Mutex<SentinelClient>,
    /// The master's connection and its generation, until an error drops it.
    master: Mutex<Option<(u64, MultiplexedConnection)>>,
    /// Generations handed out so far.
    generations: AtomicU64,
}

impl Backend {
    /// The backend for `target`; connects to nothing yet.
    pub(super) fn open(target: &RedisTarget) -> RedisResult<Backend> {
        Ok(match target {
            RedisTarget::Single(url) => Backend::Single {
                client: redis::Client::open(url.as_str())?,
                conn: OnceCell::new(),
            },
            RedisTarget::Cluster { nodes } => Backend::Cluster {
                client: ClusterClient::builder(nodes.iter().map(String::as_str))
                    .connection_timeout(IO_TIMEOUT)
                    .response_timeout(IO_TIMEOUT)
                    // A few quick retries let a request ride over a
                    // redirection or a reconnection; the store's own time
                    // limit ends the rest.
                    .retries(3)
                    .min_retry_wait(50)
                    .max_retry_wait(200)
                    .build()?,
                conn: OnceCell::new(),
            },
            RedisTarget::Sentinel {
                sentinels,
                master,
                db,
                tls,
                auth,
            } => {
                // The master's credentials and database, read as Redis reads
                // a URL (percent-decoding the password).
                let at = auth.as_ref().map_or_else(String::new, |a| format!("{a}@"));
                let settings = format!("redis://{at}localhost/{db}")
                    .into_connection_info()?
                    .redis_settings()
                    .clone();
                let mut node =
                    SentinelNodeConnectionInfo::default().set_redis_connection_info(settings);
                if *tls {
                    node = node.set_tls_mode(redis::TlsMode::Secure);
                }
                let client = SentinelClient::build(
                    sentinels.iter().map(String::as_str).collect(),
                    master.as_str(),
                    Some(node),
                    SentinelServerType::Master,
                )?;
                Backend::Sentinel(Sentinel {
                    client: tokio::sync::Mutex::new(client),
                    master: Mutex::new(None),
                    generations: AtomicU64::new(0),
                })
            }
        })
    }

    /// A connection, made on first use (after a failure, made again), and
    /// its generation for [`Backend::broken`].
    pub(super) async fn connection(&self) -> RedisResult<(Conn, u64)> {
        match self {
            Backend::Single { client, conn } => {
                let conn = conn
                    .get_or_try_init(|| async {
                        let config = ConnectionManagerConfig::new()
                            .set_connection_timeout(Some(IO_TIMEOUT))
                            .set_response_timeout(Some(IO_TIMEOUT))
                            // One attempt per request: a down Redis fails
                            // fast, and the next request tries again.
                            .set_number_of_retries(0);
                        ConnectionManager::new_lazy_with_config(client.clone(), config)
                    })
                    .await?;
                Ok((Conn::Single(conn.clone()), 0))
            }
            Backend::Cluster { client, conn } => {
                let conn = conn
                    .get_or_try_init(|| client.get_async_connection())
                    .await?;
                Ok((Conn::Cluster(conn.clone()), 0))
            }
            Backend::Sentinel(s) => s.connection().await,
        }
    }

    /// The connection of `generation` failed (or `None`: the operation
    /// timed out, whatever it used): with Sentinel, the next operation
    /// asks the sentinels for the master again. The other kinds mend
    /// their connections themselves.
    pub(super) fn broken(&self, generation: Option<u64>) {
        if let Backend::Sentinel(s) = self {
            let mut master = s.master.lock().unwrap_or_else(|e| e.into_inner());
            if generation.is_none() || master.as_ref().map(|m| m.0) == generation {
                *master = None;
            }
        }
    }
}

impl Sentinel {
    fn current(&self) -> Option<(u64, MultiplexedConnection)> {
        self.master
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    async fn connection(&self) -> RedisResult<(Conn, u64)> {
        if let Some((generation, conn)) = self.current() {
            return Ok((Conn::Sentinel(conn), generation));
        }
        let mut client = self.client.lock().await;
        // Another operation may have found the master while this one waited.
        if let Some((generation, conn)) = self.current() {
            return Ok((Conn::Sentinel(conn), generation));
        }
        let master = client.async_get_client().await?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(IO_TIMEOUT))
            .set_response_timeout(Some(IO_TIMEOUT));
        let conn = master
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        *self.master.lock().unwrap_or_else(|e| e.into_inner()) = Some((generation, conn.clone()));
        Ok((Conn::Sentinel(conn), generation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_slots_name_each_master_once() {
        let node = |h: &str, p: i64| {
            Value::Array(vec![
                Value::BulkString(h.into()),
                Value::Int(p),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let range = |a: i64, b: i64, master: Value, replica: Value| {
            Value::Array(vec![Value::Int(a), Value::Int(b), master, replica])
        };
        let slots = Value::Array(vec![
            range(0, 5460, node("10.0.0.1", 7000), node("10.0.0.4", 7003)),
            range(5461, 10922, node("10.0.0.2", 7001), node("10.0.0.5", 7004)),
            range(10923, 16383, node("10.0.0.1", 7000), node("10.0.0.6", 7005)),
        ]);
        assert_eq!(
            masters_of(&slots),
            [("10.0.0.1".to_owned(), 7000), ("10.0.0.2".to_owned(), 7001)]
        );
        assert!(masters_of(&Value::Nil).is_empty());
    }
}
