//! Time limits on client connections (`CODEMODE_HEADER_READ_TIMEOUT_SECS`,
//! `CODEMODE_KEEPALIVE_TIMEOUT_SECS`).

use std::time::Duration;

use super::parse::{bounded, parse_or};
use super::{HEADER_READ_TIMEOUT_SECS, KEEPALIVE_TIMEOUT_SECS};

/// Time limits on client connections, so none is held open for nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Time to send a request's headers.
    pub header_read_timeout: Duration,
    /// Time an idle keep-alive connection stays open.
    pub keepalive_timeout: Duration,
}

/// Both limits; `None` when a variable is wrong, each recorded with `fail`.
pub(super) fn limits(
    get: &impl Fn(&str) -> Option<String>,
    fail: &mut impl FnMut(&'static str, String),
) -> Option<ConnectionLimits> {
    let header_read = parse_or(get, HEADER_READ_TIMEOUT_SECS, Some(10), fail, |v| {
        bounded::<u64>(v, "a number of seconds", 3600)
    });
    let keepalive = parse_or(get, KEEPALIVE_TIMEOUT_SECS, Some(60), fail, |v| {
        bounded::<u64>(v, "a number of seconds", 3600)
    });
    Some(ConnectionLimits {
        header_read_timeout: Duration::from_secs(header_read?),
        keepalive_timeout: Duration::from_secs(keepalive?),
    })
}
