//! Redis with failover for the tests: a six-node Redis Cluster (three
//! masters, three replicas) or a master, a replica and three sentinels, all
//! real `redis-server` processes on loopback ports, in a temporary
//! directory, persistence off, killed on drop. A master can be killed
//! (SIGKILL) once its writes reached its replica, and the failover awaited.
//! Where the programs are missing, [`cluster_runs_here`] and
//! [`sentinel_runs_here`] say so (the test is skipped, or fails under CI:
//! [`super::needs`]).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

/// The name the sentinels monitor the master under.
pub const MASTER_NAME: &str = "codemode";

/// A cluster node gives up on a peer after this long, then its replica takes over.
const NODE_TIMEOUT_MS: u64 = 1000;

struct Node {
    child: Option<Child>,
    port: u16,
}

/// The processes of one setup and their directory.
pub struct RedisHa {
    /// Data nodes: the cluster's six, or Sentinel's master and replica.
    nodes: Vec<Node>,
    sentinels: Vec<Node>,
    dir: PathBuf,
}

/// Whether [`RedisHa::cluster`] can run: `redis-server` and `redis-cli`.
pub fn cluster_runs_here() -> bool {
    super::needs::programs(&["redis-server", "redis-cli"], super::needs::REDIS)
}

/// Whether [`RedisHa::sentinel`] can run: `redis-server` (`--sentinel`).
pub fn sentinel_runs_here() -> bool {
    super::needs::programs(&["redis-server"], super::needs::REDIS)
}

/// A port free now whose cluster bus port (+10000) is free too.
fn free_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let seed = (std::process::id() as u16).wrapping_mul(7919);
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20000 + (seed.wrapping_add(n.wrapping_mul(13))) % 25000;
        let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
        if free(port) && free(port + 10000) {
            return port;
        }
    }
}

fn spawn(args: &[String]) -> Child {
    match Command::new("redis-server")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("redis-server did not start: {e}"),
    }
}

/// Starts `redis-server` with `args(port)` on a free port and waits until
/// that process answers there. Under load the port can be taken between
/// [`free_port`] and the server's bind (by this suite's other servers, a
/// test's port-0 listener or outgoing connection, another checkout's suite
/// on the same machine): the server exits, and it is tried again on another
/// port; before, the test waited 20 s for a PING and failed. A server that
/// never answers fails the test with its log.
fn launch(dir: &std::path::Path, mut args: impl FnMut(u16) -> Vec<String>) -> (Child, u16) {
    let mut exits = Vec::new();
    for _ in 0..5 {
        let port = free_port();
        let log = dir.join(format!("redis-{port}.log"));
        let mut argv = args(port);
        argv.extend(["--logfile".to_owned(), log.display().to_string()]);
        let mut child = spawn(&argv);
        let me = format!("process_id:{}\r\n", child.id());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().expect("waitpid") {
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                exits.push(format!("port {port}: {status}: {said}"));
                break;
            }
            if info(port, "server").contains(&me) {
                return (child, port);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                panic!("redis-server on port {port} did not answer within 20 s; its log:\n{said}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    panic!("redis-server exited five times: {exits:#?}");
}

/// One command to the server on `port`.
pub fn cmd<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> redis::RedisResult<T> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let mut conn = client.get_connection_with_timeout(Duration::from_secs(2))?;
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(&mut conn)
}

/// Waits up to `secs` for `ok`, saying `what` if it never comes.
pub fn wait_for(secs: u64, what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < deadline, "{what}: not within {secs} s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn info(port: u16, section: &str) -> String {
    cmd(port, &["INFO", section]).unwrap_or_default()
}

impl RedisHa {
    fn empty(kind: &str) -> RedisHa {
        let dir = std::env::temp_dir().join(format!(
            "codemode-redis-{kind}-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).expect("a directory for redis-server");
        RedisHa {
            nodes: Vec::new(),
            sentinels: Vec::new(),
            dir,
        }
    }

    fn data_node(&mut self, extra: &[String]) -> u16 {
        let (child, port) = launch(&self.dir, |port| {
            let dir = self.dir.join(port.to_string());
            std::fs::create_dir_all(&dir).expect("a node directory");
            let mut args: Vec<String> = [
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                dir.to_str().expect("a UTF-8 temp dir"),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            args.extend_from_slice(extra);
            args
        });
        self.nodes.push(Node {
            child: Some(child),
            port,
        });
        port
    }

    /// Six nodes, three masters with a replica each, every slot served.
    pub fn cluster() -> RedisHa {
        let mut ha = RedisHa::empty("cluster");
        let extra: Vec<String> = [
            "--cluster-enabled",
            "yes",
            "--cluster-node-timeout",
            &NODE_TIMEOUT_MS.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let ports: Vec<u16> = (0..6).map(|_| ha.data_node(&extra)).collect();
        let status = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(ports.iter().map(|p| format!("127.0.0.1:{p}")))
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-cli runs");
        assert!(status.success(), "redis-cli --cluster create failed");
        for &p in &ports {
            wait_for(30, "every node sees the cluster ok", || {
                info_cluster(p).contains("cluster_state:ok")
            });
        }
        for &p in &ports {
            wait_for(30, "every replica is in sync", || {
                let r = info(p, "replication");
                r.contains("role:master") || r.contains("master_link_status:up")
            });
        }
        ha
    }

    /// A master, its replica and three sentinels that know of both and of
    /// each other.
    pub fn sentinel() -> RedisHa {
        let mut ha = RedisHa::empty("sentinel");
        let master = ha.data_node(&[]);
        let replica = ha.data_node(&["--replicaof".into(), "127.0.0.1".into(), master.to_string()]);
        wait_for(20, "the replica is in sync", || {
            info(replica, "replication").contains("master_link_status:up")
        });
        for _ in 0..3 {
            let (child, port) = launch(&ha.dir, |port| {
                let conf = ha.dir.join(format!("sentinel-{port}.conf"));
                std::fs::write(
                    &conf,
                    format!(
                        "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                         sentinel monitor {MASTER_NAME} 127.0.0.1 {master} 2\n\
                         sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                         sentinel failover-timeout {MASTER_NAME} 2000\n\
                         sentinel parallel-syncs {MASTER_NAME} 1\n",
                        dir = ha.dir.display()
                    ),
                )
                .expect("a sentinel config");
                vec![conf.display().to_string(), "--sentinel".into()]
            });
            ha.sentinels.push(Node {
                child: Some(child),
                port,
            });
        }
        for s in ha.sentinels.iter().map(|s| s.port) {
            wait_for(30, "each sentinel knows the replica and the others", || {
                let replicas: Vec<redis::Value> =
                    cmd(s, &["SENTINEL", "REPLICAS", MASTER_NAME]).unwrap_or_default();
                let others: Vec<redis::Value> =
                    cmd(s, &["SENTINEL", "SENTINELS", MASTER_NAME]).unwrap_or_default();
                replicas.len() == 1 && others.len() == 2
            });
        }
        ha
    }

    /// `redis+cluster://h:p,h:p` (two seeds) or
    /// `redis+sentinel://s,s,s/<master>`.
    pub fn store_url(&self) -> String {
        if self.sentinels.is_empty() {
            format!(
                "redis+cluster://127.0.0.1:{},127.0.0.1:{}",
                self.nodes[0].port, self.nodes[1].port
            )
        } else {
            let s: Vec<String> = self
                .sentinels
                .iter()
                .map(|s| format!("127.0.0.1:{}", s.port))
                .collect();
            format!("redis+sentinel://{}/{MASTER_NAME}", s.join(","))
        }
    }

    fn alive(&self) -> impl Iterator<Item = u16> + '_ {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| n.port)
    }

    /// The live master holding a key that matches `pattern`.
    pub fn master_holding(&self, pattern: &str) -> u16 {
        self.alive()
            .find(|&p| {
                info(p, "replication").contains("role:master")
                    && !cmd::<Vec<String>>(p, &["KEYS", pattern])
                        .unwrap_or_default()
                        .is_empty()
            })
            .unwrap_or_else(|| panic!("no master holds {pattern}"))
    }

    /// Every key matching `pattern` on the live masters.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        self.alive()
            .filter(|&p| info(p, "replication").contains("role:master"))
            .flat_map(|p| cmd::<Vec<String>>(p, &["KEYS", pattern]).unwrap_or_default())
            .collect()
    }

    /// Kills the master on `port` like a crash (SIGKILL), once its replica
    /// has every write so far (its replication offset); returns its
    /// replica's port.
    pub fn kill_master(&mut self, port: u16) -> u16 {
        let replica = self
            .alive()
            .find(|&p| {
                let r = info(p, "replication");
                r.contains("role:slave") && r.contains(&format!("master_port:{port}\r"))
            })
            .expect("the master has a replica");
        // Not `WAIT`: it waits for this client's own writes, and this
        // client wrote nothing, so it answers at once whatever the replica
        // has. The replica's offset reaching the master's is the proof.
        let written = repl_offset(port, "master_repl_offset");
        wait_for(10, "the replica has every write before the kill", || {
            repl_offset(replica, "slave_repl_offset") >= written
        });
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == port)
            .expect("a node of this setup");
        if let Some(mut child) = node.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        replica
    }

    /// Waits until `replica` is a master the cluster or the sentinels name.
    pub fn wait_promoted(&self, replica: u16) {
        wait_for(30, "the replica took over as master", || {
            info(replica, "replication").contains("role:master")
        });
        if self.sentinels.is_empty() {
            wait_for(30, "the cluster is ok again", || {
                info_cluster(replica).contains("cluster_state:ok")
            });
        } else {
            for s in self.sentinels.iter().map(|s| s.port) {
                wait_for(30, "the sentinels name the new master", || {
                    cmd::<Vec<String>>(s, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME])
                        .is_ok_and(|a| a.get(1) == Some(&replica.to_string()))
                });
            }
        }
    }
}

/// A replication offset (`master_repl_offset`, `slave_repl_offset`) from
/// `INFO replication`; 0 while the node does not say.
fn repl_offset(port: u16, field: &str) -> i64 {
    info(port, "replication")
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn info_cluster(port: u16) -> String {
    cmd(port, &["CLUSTER", "INFO"]).unwrap_or_default()
}

impl Drop for RedisHa {
    fn drop(&mut self) {
        for node in self.nodes.iter_mut().chain(self.sentinels.iter_mut()) {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
