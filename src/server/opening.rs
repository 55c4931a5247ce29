//! Which HTTP a client connection speaks, told from its first bytes before
//! hyper reads them.
//!
//! hyper-util's `auto` server tells HTTP/1 from HTTP/2 by reading the first
//! bytes itself and handing them back to hyper, which then reads those few
//! bytes alone into its 8 KB buffer; the request's remaining bytes, read
//! next, no longer fit beside them, and the buffer is reallocated at 16 KB
//! for the connection's whole life (6 KB more resident per open stream,
//! BENCHMARKS.md, "Memory per idle stream"). Peeking leaves the bytes in
//! the socket, so hyper's first read takes the request whole.

use std::io;

use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;

/// What every HTTP/2 connection opens with (RFC 9113, section 3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How a connection opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Opening {
    Http1,
    /// HTTP/2 with prior knowledge (h2c).
    Http2,
    /// Too few bytes yet to tell (a client sent part of the preface and
    /// waits), or the socket closed or failed: hyper-util reads it.
    Unknown,
}

impl Opening {
    /// The opening of `first`, the bytes a connection has sent so far.
    pub(crate) fn of(first: &[u8]) -> Opening {
        let n = first.len().min(PREFACE.len());
        if n == 0 {
            Opening::Unknown
        } else if first[..n] != PREFACE[..n] {
            Opening::Http1
        } else if n == PREFACE.len() {
            Opening::Http2
        } else {
            Opening::Unknown
        }
    }

    /// Waits for the connection's first bytes and reads how it opens,
    /// leaving them in the socket.
    pub(crate) async fn peek(stream: &TcpStream) -> io::Result<Opening> {
        let mut first = [0u8; PREFACE.len()];
        let n = stream.peek(&mut first).await?;
        Ok(Opening::of(&first[..n]))
    }
}

/// A server builder for each opening.
pub(crate) struct Builders {
    http1: auto::Builder<TokioExecutor>,
    http2: auto::Builder<TokioExecutor>,
    either: auto::Builder<TokioExecutor>,
}

impl Builders {
    pub(crate) fn new() -> Builders {
        let either = auto::Builder::new(TokioExecutor::new());
        Builders {
            http1: either.clone().http1_only(),
            http2: either.clone().http2_only(),
            either,
        }
    }

    pub(crate) fn of(&self, opening: Opening) -> &auto::Builder<TokioExecutor> {
        match opening {
            Opening::Http1 => &self.http1,
            Opening::Http2 => &self.http2,
            Opening::Unknown => &self.either,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_line_is_http1_from_its_first_byte_that_differs() {
        assert_eq!(
            Opening::of(b"POST /v1/messages HTTP/1.1\r\n"),
            Opening::Http1
        );
        assert_eq!(Opening::of(b"GET"), Opening::Http1);
        assert_eq!(Opening::of(b"PO"), Opening::Http1);
    }

    #[test]
    fn the_whole_preface_is_http2() {
        assert_eq!(Opening::of(PREFACE), Opening::Http2);
        let mut more = PREFACE.to_vec();
        more.extend_from_slice(b"\x00\x00\x12\x04");
        assert_eq!(Opening::of(&more), Opening::Http2);
    }

    #[test]
    fn part_of_the_preface_or_nothing_cannot_be_told() {
        assert_eq!(Opening::of(b""), Opening::Unknown);
        assert_eq!(Opening::of(b"P"), Opening::Unknown);
        assert_eq!(Opening::of(b"PRI * HTTP/2.0\r\n"), Opening::Unknown);
    }

    #[test]
    fn a_preface_that_goes_wrong_late_is_http1() {
        assert_eq!(
            Opening::of(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"),
            Opening::Http1
        );
    }
}
