//! Waiting for `run`'s child while passing it the signals meant for it.
//!
//! Ctrl-C at a terminal goes to the whole foreground process group, the
//! child included, so a SIGINT (or SIGQUIT) that `run` receives while its
//! group holds the terminal is not sent a second time: an agent would take
//! two Ctrl-C as "quit". A signal sent to `run` alone (`kill PID`, a
//! supervisor's SIGTERM) is passed on. `run` itself never dies of one: it
//! waits for the child, then reports and exits with the child's code.

use std::io;
use std::process::ExitStatus;

use tokio::process::Child;

/// Waits for `child`, forwarding SIGINT, SIGTERM, SIGHUP and SIGQUIT.
#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "freebsd"
))]
pub async fn wait_forwarding(child: &mut Child) -> io::Result<ExitStatus> {
    use nix::sys::signal::Signal;
    use tokio::signal::unix::{signal, SignalKind};

    // Registering a handler is what keeps `run` alive through the signal.
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut quit = signal(SignalKind::quit())?;
    loop {
        let sig = tokio::select! {
            status = child.wait() => return status,
            _ = int.recv() => Signal::SIGINT,
            _ = term.recv() => Signal::SIGTERM,
            _ = hup.recv() => Signal::SIGHUP,
            _ = quit.recv() => Signal::SIGQUIT,
        };
        let from_terminal = matches!(sig, Signal::SIGINT | Signal::SIGQUIT) && holds_terminal();
        if from_terminal {
            continue;
        }
        if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
            // The child may have exited meanwhile; `wait` reports it next.
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
        }
    }
}

/// Whether `run`'s process group is the foreground group of the terminal
/// on its stdin, stdout or stderr (so the terminal's signals reach the
/// child directly).
#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "freebsd"
))]
fn holds_terminal() -> bool {
    let ours = nix::unistd::getpgrp();
    let fg = |fd: std::os::fd::BorrowedFd<'_>| nix::unistd::tcgetpgrp(fd).ok() == Some(ours);
    use std::os::fd::AsFd;
    fg(io::stdin().as_fd()) || fg(io::stdout().as_fd()) || fg(io::stderr().as_fd())
}

/// Waits for `child`; elsewhere the terminal's signals reach it directly.
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "freebsd"
)))]
pub async fn wait_forwarding(child: &mut Child) -> io::Result<ExitStatus> {
    child.wait().await
}
