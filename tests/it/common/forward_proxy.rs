//! A small forward proxy, the egress proxy of the egress tests: it answers
//! `CONNECT host:port` (records it, replies 200, pipes bytes) and
//! absolute-form requests (records them, forwards in origin-form, pipes
//! back), or refuses every `CONNECT` with a fixed status.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request head the proxy received, as it came (request line first).
#[derive(Clone, Debug)]
pub struct Seen {
    pub head: String,
}

impl Seen {
    /// `POST http://127.0.0.1:1234/v1/chat/completions HTTP/1.1`, `CONNECT localhost:443 HTTP/1.1`.
    pub fn request_line(&self) -> &str {
        self.head.lines().next().unwrap_or("")
    }

    /// The values of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Vec<String> {
        self.head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .filter(|(k, _)| k.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_owned())
            .collect()
    }
}

/// The proxy, serving until the test ends.
pub struct ForwardProxy {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl ForwardProxy {
    /// A proxy that tunnels and forwards.
    pub async fn start() -> ForwardProxy {
        ForwardProxy::serve(None).await
    }

    /// A proxy that answers every `CONNECT` with `status` (403, 407, ...).
    pub async fn refusing(status: u16) -> ForwardProxy {
        ForwardProxy::serve(Some(status)).await
    }

    async fn serve(refuse: Option<u16>) -> ForwardProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(handle(client, log.clone(), refuse));
            }
        });
        ForwardProxy { addr, seen }
    }

    /// `http://127.0.0.1:<port>`, for `HTTPS_PROXY` / `HTTP_PROXY`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Everything received so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn handle(mut client: TcpStream, seen: Arc<Mutex<Vec<Seen>>>, refuse: Option<u16>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match client.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let rest = buf[end..].to_vec();
    seen.lock().unwrap().push(Seen { head: head.clone() });
    let line = head.lines().next().unwrap_or("").to_owned();
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));

    if method == "CONNECT" {
        if let Some(status) = refuse {
            let answer = format!("HTTP/1.1 {status} Refused\r\ncontent-length: 0\r\n\r\n");
            let _ = client.write_all(answer.as_bytes()).await;
            return;
        }
        let Ok(mut upstream) = TcpStream::connect(target).await else {
            let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
            return;
        };
        if client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
        let _ = upstream.write_all(&rest).await;
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        return;
    }

    // Absolute-form: `POST http://host:port/path HTTP/1.1`.
    let Some(after_scheme) = target.strip_prefix("http://") else {
        let _ = client.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        return;
    };
    let (authority, path) = match after_scheme.find('/') {
        Some(i) => after_scheme.split_at(i),
        None => (after_scheme, "/"),
    };
    let Ok(mut upstream) = TcpStream::connect(authority).await else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
        return;
    };
    let mut forwarded = format!("{method} {path} HTTP/1.1\r\n");
    for l in head.split("\r\n").skip(1) {
        if !l.is_empty() && !l.to_ascii_lowercase().starts_with("proxy-authorization:") {
            forwarded.push_str(l);
            forwarded.push_str("\r\n");
        }
    }
    forwarded.push_str("\r\n");
    if upstream.write_all(forwarded.as_bytes()).await.is_err() {
        return;
    }
    let _ = upstream.write_all(&rest).await;
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}
