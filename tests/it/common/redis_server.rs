//! A real `redis-server` for the tests: started on a free loopback port with
//! persistence off, killed on drop; it can be stopped and started again on
//! the same port. Without `redis-server` on the PATH [`RedisServer::start`]
//! is `None`: the test is skipped saying how to install it, or under CI
//! fails ([`super::needs`]).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One `redis-server` process, its port and its working directory.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// A new server on a free port, answering before this returns; `None`
    /// (the test returns) where there is no `redis-server`, outside CI.
    /// The port is free when chosen; another process can take it before the
    /// server binds it (the server then exits), so a few are tried.
    pub fn start() -> Option<RedisServer> {
        if !super::needs::programs(&["redis-server"], super::needs::REDIS) {
            return None;
        }
        let mut exits = Vec::new();
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let dir =
                std::env::temp_dir().join(format!("codemode-redis-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("a directory for redis-server");
            let mut server = RedisServer {
                child: None,
                port,
                dir,
            };
            match server.launch() {
                Ok(()) => return Some(server),
                Err(exit) => exits.push(exit),
            }
        }
        panic!("redis-server exited five times: {exits:#?}");
    }

    /// `redis://127.0.0.1:<port>/<db>`.
    pub fn url(&self, db: u8) -> String {
        format!("redis://127.0.0.1:{}/{db}", self.port)
    }

    /// Starts the server and waits until it answers as itself; `Err` (what
    /// it logged) when it exited first, as when its port was taken.
    fn launch(&mut self) -> Result<(), String> {
        let log = self.dir.join("redis.log");
        let spawned = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--dir", self.dir.to_str().expect("a UTF-8 temp dir")])
            .args(["--dbfilename", "dump.rdb"])
            .args(["--logfile", log.to_str().expect("a UTF-8 temp dir")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => panic!("redis-server did not start: {e}"),
        };
        let me = format!("process_id:{}\r\n", child.id());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().expect("waitpid") {
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!("port {}: {status}: {said}", self.port));
            }
            if self.info_server().is_ok_and(|info| info.contains(&me)) {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                panic!(
                    "redis-server on port {} did not answer within 20 s; its log:\n{said}",
                    self.port
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn info_server(&self) -> redis::RedisResult<String> {
        let mut conn = self.connection()?;
        redis::cmd("INFO").arg("server").query(&mut conn)
    }

    /// A plain connection to database 0.
    pub fn connection(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url(0))?.get_connection_with_timeout(Duration::from_secs(2))
    }

    /// Runs one command on database 0.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut conn = self.connection().expect("redis-server answers");
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut conn).expect("the command succeeds")
    }

    /// Every key of database 0.
    pub fn keys(&self) -> Vec<String> {
        let mut conn = self.connection().expect("redis-server answers");
        redis::cmd("KEYS")
            .arg("*")
            .query(&mut conn)
            .expect("KEYS succeeds")
    }

    /// Stops the server like a crash (SIGKILL), after writing its data to
    /// disk when `keep_data`, so [`RedisServer::restart`] reloads it.
    pub fn stop(&mut self, keep_data: bool) {
        if keep_data {
            let _: () = self.cmd(&["SAVE"]);
        } else {
            let _ = std::fs::remove_file(self.dir.join("dump.rdb"));
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a paused server (SIGCONT).
    pub fn unpause(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, which: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let status = Command::new("kill")
            .args([which, &pid])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {which} {pid}");
    }

    /// Starts it again on the same port.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop it first");
        if let Err(exit) = self.launch() {
            panic!("redis-server did not start again: {exit}");
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A paused server must be able to die.
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
