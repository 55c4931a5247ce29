//! Failed admin-token attempts, slowed per client.
//!
//! Unslowed, one connection tries thousands of tokens a second. After a
//! client's first wrong token, each attempt of its to have a token or
//! session checked waits its turn: turns are spaced by a delay that
//! doubles with every failure, from [`FIRST`] to [`MOST`], and parallel
//! attempts queue for turns one after another, so opening more connections
//! does not buy more guesses. A right token clears the client's record; a
//! client that stops failing is forgotten after [`FORGET`].
//!
//! A client is the connection's address (the server's [`PeerAddr`]); with
//! none known (a server of one's own that sets no address), every caller
//! shares one record. Behind a load balancer, every caller is the balancer.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use tokio::time::{Duration, Instant};

use crate::layer::PeerAddr;

/// The wait after a client's first failure.
pub(super) const FIRST: Duration = Duration::from_millis(100);
/// The longest wait between two of a client's attempts.
pub(super) const MOST: Duration = Duration::from_secs(5);
/// How long a client's failures are remembered after its last turn.
pub(super) const FORGET: Duration = Duration::from_secs(15 * 60);
/// The most clients remembered at once, so the record stays small.
const MOST_CLIENTS: usize = 10_000;

/// One client's failures.
struct Strikes {
    failures: u32,
    /// When its next attempt may be checked.
    next: Instant,
}

/// The failures of every client that failed lately.
#[derive(Default)]
pub(crate) struct Throttle {
    clients: Mutex<HashMap<Option<IpAddr>, Strikes>>,
}

/// The spacing of a client's turns after `failures` failures.
fn delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    (FIRST * 2u32.pow(doublings)).min(MOST)
}

/// The client a request came from.
pub(super) fn client_of(extensions: &http::Extensions) -> Option<IpAddr> {
    extensions.get::<PeerAddr>().map(|p| p.0.ip())
}

impl Throttle {
    /// Waits until `client` may have a token checked: at once for a client
    /// with no recent failure, else its next turn (reserving it).
    pub(super) async fn turn(&self, client: Option<IpAddr>) {
        let wait = {
            let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
            let Some(strikes) = clients.get_mut(&client) else {
                return;
            };
            let now = Instant::now();
            let slot = strikes.next.max(now);
            strikes.next = slot + delay(strikes.failures);
            slot - now
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// Notes that `client` offered a wrong token.
    pub(super) fn failed(&self, client: Option<IpAddr>) {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if clients.len() >= MOST_CLIENTS && !clients.contains_key(&client) {
            clients.retain(|_, s| s.next + FORGET > now);
            if clients.len() >= MOST_CLIENTS {
                // As many failing clients as this: a flood from many
                // addresses, where counting per address does not help.
                clients.clear();
            }
        }
        let strikes = clients.entry(client).or_insert(Strikes {
            failures: 0,
            next: now,
        });
        strikes.failures = strikes.failures.saturating_add(1);
        strikes.next = strikes.next.max(now + delay(strikes.failures));
    }

    /// Clears `client`'s failures: it holds the token.
    pub(super) fn succeeded(&self, client: Option<IpAddr>) {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if clients.remove(&client).is_some() {
            let now = Instant::now();
            clients.retain(|_, s| s.next + FORGET > now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll};

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::from([10, 0, 0, last]))
    }

    /// Whether `fut` is done at this instant (the clock is paused).
    fn ready(fut: &mut std::pin::Pin<&mut impl Future<Output = ()>>) -> bool {
        let waker = futures_util::task::noop_waker();
        matches!(
            fut.as_mut().poll(&mut Context::from_waker(&waker)),
            Poll::Ready(())
        )
    }

    #[test]
    fn the_delay_doubles_up_to_a_ceiling() {
        assert_eq!(delay(1), FIRST);
        assert_eq!(delay(2), FIRST * 2);
        assert_eq!(delay(4), FIRST * 8);
        assert_eq!(delay(40), MOST);
        assert_eq!(delay(u32::MAX), MOST);
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_waits_only_after_failing_and_parallel_attempts_queue() {
        let t = Throttle::default();
        let mut first = pin!(t.turn(ip(1)));
        assert!(ready(&mut first), "no failure yet: no wait");
        t.failed(ip(1));
        t.failed(ip(1));
        t.failed(ip(1));
        // Three failures: turns every 400 ms, the first one 400 ms away.
        let mut a = pin!(t.turn(ip(1)));
        let mut b = pin!(t.turn(ip(1)));
        assert!(!ready(&mut a) && !ready(&mut b));
        let mut other = pin!(t.turn(ip(2)));
        assert!(ready(&mut other), "another client is not slowed");
        tokio::time::advance(Duration::from_millis(400)).await;
        assert!(ready(&mut a));
        assert!(
            !ready(&mut b),
            "a second connection waits for the next turn"
        );
        tokio::time::advance(Duration::from_millis(400)).await;
        assert!(ready(&mut b));
    }

    #[tokio::test(start_paused = true)]
    async fn the_right_token_clears_the_record() {
        let t = Throttle::default();
        for _ in 0..10 {
            t.failed(ip(1));
        }
        t.succeeded(ip(1));
        let mut turn = pin!(t.turn(ip(1)));
        assert!(ready(&mut turn));
    }

    #[tokio::test(start_paused = true)]
    async fn the_record_stays_bounded() {
        let t = Throttle::default();
        for n in 0..=MOST_CLIENTS as u32 {
            t.failed(Some(IpAddr::from(n.to_be_bytes())));
        }
        let held = t.clients.lock().unwrap().len();
        assert!(held <= MOST_CLIENTS, "{held}");
    }
}
