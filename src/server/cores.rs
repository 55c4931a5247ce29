//! A runtime per core (`CODEMODE_SCHEDULER=per-core`, the binary's
//! default): each serving thread runs a current-thread runtime with its
//! own pool of connections to providers, and serves each client
//! connection it is given whole. No task moves between threads, so no
//! request pays for work stealing's wake-ups across cores (BENCHMARKS.md,
//! "Runtime per core"). The layer's state (stores, caches, sandbox
//! workers) is one, shared by every thread.
//!
//! One listener hands each connection to the thread serving the fewest,
//! rather than a `SO_REUSEPORT` listener per thread as Pingora has: a port
//! shared that way can be joined by any other process of the same user,
//! which then silently takes a share of the connections, and the kernel's
//! hash of the addresses balances them only on average.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::{mpsc, watch};
use tower::Layer;

use crate::config::Config;
use crate::layer::{CodeModeLayer, CodeModeService};

/// Where a serve loop's connections come from.
pub(super) enum Incoming {
    /// Accepted by the loop itself.
    Listener(TcpListener),
    /// Given by the acceptor of every thread; ends when it stops.
    Handed(mpsc::UnboundedReceiver<Handed>),
}

/// A connection accepted on one thread for another.
pub(super) struct Handed {
    stream: std::net::TcpStream,
    peer: SocketAddr,
    share: Share,
}

/// A connection's place in its thread's count; it leaves when dropped.
pub(super) struct Share {
    counts: Arc<[AtomicUsize]>,
    core: usize,
}

impl Drop for Share {
    fn drop(&mut self) {
        self.counts[self.core].fetch_sub(1, Ordering::Relaxed);
    }
}

impl Incoming {
    /// The next connection; `None` once the acceptor has stopped.
    pub(super) async fn next(&mut self) -> Option<(TcpStream, SocketAddr, Option<Share>)> {
        match self {
            Incoming::Listener(listener) => {
                let (stream, peer) = accept(listener).await;
                Some((stream, peer, None))
            }
            Incoming::Handed(given) => loop {
                let handed = given.recv().await?;
                // From here on the socket is this thread's runtime's.
                match TcpStream::from_std(handed.stream) {
                    Ok(stream) => return Some((stream, handed.peer, Some(handed.share))),
                    Err(e) => tracing::warn!(error = %e, "cannot take a connection handed over"),
                }
            },
        }
    }
}

/// The next connection `listener` accepts. Running out of file
/// descriptors must not end the server: it waits a moment and goes on.
async fn accept(listener: &TcpListener) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Serves `layer` on `threads` threads until `shutdown` resolves, then
/// drains every thread's connections. `first` (a current-thread runtime,
/// the one `listener` and `layer` were made in) runs on the calling
/// thread, which also accepts for all; each thread gets an upstream
/// client of its own, all made before the first connection is taken.
pub fn serve_per_core(
    first: Runtime,
    threads: usize,
    listener: TcpListener,
    layer: CodeModeLayer,
    config: &Config,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let threads = threads.max(1);
    let counts: Arc<[AtomicUsize]> = (0..threads).map(|_| AtomicUsize::new(0)).collect();
    let mut cores = Vec::with_capacity(threads);
    let mut given = Vec::with_capacity(threads);
    for client in super::http_clients(config, threads)? {
        let (give, take) = mpsc::unbounded_channel();
        given.push(give);
        cores.push((take, layer.layer(client)));
    }
    let mut cores = cores.into_iter();
    let (own, own_service) = cores.next().expect("at least one thread");
    let draining = Arc::new(watch::channel(threads).0);
    let mut others = Vec::with_capacity(threads - 1);
    for (n, (take, service)) in cores.enumerate() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let draining = draining.clone();
        others.push(
            std::thread::Builder::new()
                .name(format!("codemode-core-{}", n + 1))
                .spawn(move || runtime.block_on(serve_core(take, service, draining)))?,
        );
    }
    let (_, served) = first.block_on(async {
        tokio::join!(
            hand_out(listener, given, counts, shutdown),
            serve_core(own, own_service, draining),
        )
    });
    for thread in others {
        thread
            .join()
            .map_err(|_| io::Error::other("a serving thread panicked"))??;
    }
    served
}

/// Serves one thread's connections until the acceptor stops and they are
/// drained; then keeps its runtime running until every thread has
/// drained, since what was made in it (a sandbox worker's pipes, a
/// store's connection) may be serving another thread's last requests.
async fn serve_core(
    given: mpsc::UnboundedReceiver<Handed>,
    service: CodeModeService,
    draining: Arc<watch::Sender<usize>>,
) -> io::Result<()> {
    let served = {
        // Counted out even when serving panics, so the others do not wait forever.
        let _drained = Drained(&draining);
        super::serve_incoming(Incoming::Handed(given), service, std::future::pending()).await
    };
    let _ = draining.subscribe().wait_for(|left| *left == 0).await;
    served
}

/// A thread's place among those still draining.
struct Drained<'a>(&'a watch::Sender<usize>);

impl Drop for Drained<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|left| *left -= 1);
    }
}

/// Accepts until `shutdown`, giving each connection to the thread serving
/// the fewest; the threads drain when `given` is dropped.
async fn hand_out(
    listener: TcpListener,
    given: Vec<mpsc::UnboundedSender<Handed>>,
    counts: Arc<[AtomicUsize]>,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut last = given.len() - 1;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = accept(&listener) => accepted,
            () = &mut shutdown => break,
        };
        let core = fewest(&counts, last);
        last = core;
        counts[core].fetch_add(1, Ordering::Relaxed);
        let share = Share {
            counts: counts.clone(),
            core,
        };
        let handed = stream.into_std().map(|stream| Handed {
            stream,
            peer,
            share,
        });
        match handed.map(|h| given[core].send(h)) {
            Ok(Ok(())) => {}
            // Only a thread that panicked stops taking connections.
            Ok(Err(_)) => {
                tracing::error!(%peer, core, "a serving thread has stopped; connection closed")
            }
            Err(e) => tracing::warn!(%peer, error = %e, "cannot hand a connection over"),
        }
    }
}

/// The thread serving the fewest connections; among equals, the first
/// after `last`, so a burst of new connections goes round.
fn fewest(counts: &[AtomicUsize], last: usize) -> usize {
    let n = counts.len();
    (1..=n)
        .map(|i| (last + i) % n)
        .min_by_key(|&core| counts[core].load(Ordering::Relaxed))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(of: &[usize]) -> Vec<AtomicUsize> {
        of.iter().map(|&n| AtomicUsize::new(n)).collect()
    }

    #[test]
    fn a_connection_goes_to_the_thread_serving_the_fewest() {
        assert_eq!(fewest(&counts(&[3, 1, 2]), 0), 1);
        assert_eq!(fewest(&counts(&[0, 4, 4]), 0), 0);
        assert_eq!(fewest(&counts(&[5]), 0), 0);
    }

    #[test]
    fn among_equals_connections_go_round() {
        let counts = counts(&[0, 0, 0]);
        let mut last = 2;
        let mut order = Vec::new();
        for _ in 0..6 {
            last = fewest(&counts, last);
            order.push(last);
        }
        // Nothing counted in between (each connection already closed).
        assert_eq!(order, [0, 1, 2, 0, 1, 2]);
        counts[0].store(1, Ordering::Relaxed);
        assert_eq!(fewest(&counts, 2), 1);
    }

    #[tokio::test]
    async fn a_thread_keeps_its_runtime_until_every_thread_has_drained() {
        let config =
            Config::from_lookup(|k| (k == "CODEMODE_SANDBOX").then(|| "in-process".to_owned()))
                .unwrap();
        let service = super::super::stack(config).unwrap();
        let draining = Arc::new(watch::channel(2).0);
        let (give, take) = mpsc::unbounded_channel();
        // The acceptor has stopped and this thread has nothing left to serve.
        drop(give);
        let other = Drained(&draining);
        let core = tokio::spawn(serve_core(take, service, draining.clone()));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!core.is_finished(), "returned while another thread drains");
        drop(other);
        tokio::time::timeout(Duration::from_secs(5), core)
            .await
            .expect("returns once the last thread has drained")
            .unwrap()
            .unwrap();
    }

    #[test]
    fn a_closed_connection_leaves_its_threads_count() {
        let counts: Arc<[AtomicUsize]> = (0..2).map(|_| AtomicUsize::new(0)).collect();
        counts[1].fetch_add(1, Ordering::Relaxed);
        let share = Share {
            counts: counts.clone(),
            core: 1,
        };
        assert_eq!(fewest(&counts, 0), 0);
        drop(share);
        assert_eq!(counts[1].load(Ordering::Relaxed), 0);
    }
}
