//! `sandbox-worker --probe`: the system calls a program that broke out of
//! QuickJS would make first, made after the worker's confinement, each
//! printed with what the kernel answered (`name: allowed` or
//! `name: refused (ERRNO)`), one per line. Run with `--no-confine`, the same
//! calls show what the confinement takes away (there `ptrace` is refused
//! with ESRCH, the kernel's own answer, and `exec` replaces the process).

use std::ffi::CString;
use std::io::{IoSliceMut, Write};

use nix::errno::Errno;
use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::{getpid, Pid};

/// One forbidden call: `Err` carries the kernel's answer.
type Probe = fn() -> Result<(), String>;

/// Makes each forbidden call and prints its answer.
pub(super) fn report(out: &mut impl Write) {
    let probes: [(&str, Probe); 6] = [
        ("open", open),
        ("socket", socket),
        ("spawn", spawn),
        ("ptrace", ptrace),
        ("process_vm_readv", vm_read),
        // Last: allowed, it replaces this process and nothing follows.
        ("exec", exec),
    ];
    for (name, probe) in probes {
        let answer = match probe() {
            Ok(()) => "allowed".to_owned(),
            Err(e) => format!("refused ({e})"),
        };
        let _ = writeln!(out, "{name}: {answer}");
    }
    let _ = out.flush();
}

fn io(e: std::io::Error) -> String {
    e.raw_os_error()
        .map_or_else(|| e.to_string(), |n| Errno::from_raw(n).to_string())
}

fn open() -> Result<(), String> {
    std::fs::File::open("/proc/self/status")
        .map(drop)
        .map_err(io)
}

fn socket() -> Result<(), String> {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .map(drop)
        .map_err(io)
}

fn spawn() -> Result<(), String> {
    std::process::Command::new("/bin/sh")
        .args(["-c", "exit 0"])
        .status()
        .map(drop)
        .map_err(io)
}

/// Replaces the worker with `/bin/true`: were it allowed, this process
/// would end here with no line printed.
fn exec() -> Result<(), String> {
    let path = CString::new("/bin/true").map_err(|e| e.to_string())?;
    match nix::unistd::execv(&path, &[&path]) {
        Ok(never) => match never {},
        Err(e) => Err(e.to_string()),
    }
}

/// Attaches to a process that cannot exist: the kernel answers ESRCH
/// where the call is let through, and a filter EPERM. (Attaching to a real
/// process would stop it, were the probe run unconfined.)
fn ptrace() -> Result<(), String> {
    nix::sys::ptrace::attach(Pid::from_raw(i32::MAX)).map_err(|e| e.to_string())
}

/// Reads this process's own memory through the call that would read the
/// proxy's: only a filter refuses that.
fn vm_read() -> Result<(), String> {
    let source = [7u8; 16];
    let mut dest = [0u8; 16];
    let remote = [RemoteIoVec {
        base: source.as_ptr() as usize,
        len: source.len(),
    }];
    process_vm_readv(getpid(), &mut [IoSliceMut::new(&mut dest)], &remote)
        .map(drop)
        .map_err(|e| e.to_string())
}
