//! The proxy binary as a process: started on port 0, stopped when dropped.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A running proxy binary; killed when dropped.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the binary with only `PATH`, `RUST_LOG=warn` and `vars` (which
/// may override `RUST_LOG`) in its environment, stderr to `stderr`; returns
/// it and the address its first stdout line names.
pub fn spawn_proxy(vars: &[(&str, &str)], stderr: Stdio) -> (Running, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_codemode-proxy"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(stderr);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("the binary starts");
    let addr = listening_on(&mut child);
    (Running(child), addr)
}

/// The address a started binary's first stdout line (`listening on ADDR`)
/// names.
pub fn listening_on(child: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("no listening line, got {line:?}"))
        .to_owned()
}
