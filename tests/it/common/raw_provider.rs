//! A fake provider on a raw socket, for what wiremock cannot do: stream
//! slowly, break a connection mid-body, and notice a client that left.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use serde_json::json;

use super::sse_chunk;

#[derive(Clone, Debug)]
pub enum Step {
    /// Writes one chunk of the SSE body.
    Send(Vec<u8>),
    /// Pauses.
    Sleep(Duration),
    /// Waits until the proxy closes the connection.
    HoldUntilClosed,
    /// Writes `total` bytes of SSE comments as fast as the peer takes them.
    Flood { total: usize },
    /// Closes the connection without finishing the chunked body.
    Break,
}

pub struct RawProvider {
    pub addr: std::net::SocketAddr,
    pub requests: Arc<AtomicUsize>,
    pub bytes_written: Arc<AtomicUsize>,
    pub closed: watch::Receiver<bool>,
}

impl RawProvider {
    /// Serves `script(n)` to the n-th request (0-based).
    pub async fn start(script: impl Fn(usize) -> Vec<Step> + Send + Sync + 'static) -> RawProvider {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let bytes_written = Arc::new(AtomicUsize::new(0));
        let (closed_tx, closed) = watch::channel(false);
        let script = Arc::new(script);
        let (r, w) = (requests.clone(), bytes_written.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let n = r.fetch_add(1, Ordering::SeqCst);
                let steps = script(n);
                let (w, closed_tx) = (w.clone(), closed_tx.clone());
                tokio::spawn(async move {
                    if serve(stream, steps, &w).await {
                        let _ = closed_tx.send(true);
                    }
                });
            }
        });
        RawProvider {
            addr,
            requests,
            bytes_written,
            closed,
        }
    }

    pub fn base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Waits until a connection was closed by the proxy, or `limit` passes.
    pub async fn wait_closed(&mut self, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.closed.wait_for(|c| *c))
            .await
            .is_ok()
    }
}

/// Returns true when the peer closed the connection before the script ended.
async fn serve(mut stream: TcpStream, steps: Vec<Step>, written: &AtomicUsize) -> bool {
    if read_request(&mut stream).await.is_none() {
        return true;
    }
    let head =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    if stream.write_all(head.as_bytes()).await.is_err() {
        return true;
    }
    for step in steps {
        match step {
            Step::Send(data) => {
                if write_chunk(&mut stream, &data).await.is_err() {
                    return true;
                }
                written.fetch_add(data.len(), Ordering::SeqCst);
            }
            Step::Sleep(d) => tokio::time::sleep(d).await,
            Step::HoldUntilClosed => {
                let mut buf = [0u8; 64];
                loop {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return true,
                        Ok(_) => {}
                    }
                }
            }
            Step::Flood { total } => {
                let comment =
                    b": padding padding padding padding padding padding padding padding\n\n"
                        .repeat(256);
                let mut sent = 0;
                while sent < total {
                    if write_chunk(&mut stream, &comment).await.is_err() {
                        return true;
                    }
                    sent += comment.len();
                    written.fetch_add(comment.len(), Ordering::SeqCst);
                }
            }
            Step::Break => return false,
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    false
}

async fn write_chunk(stream: &mut TcpStream, data: &[u8]) -> std::io::Result<()> {
    stream
        .write_all(format!("{:x}\r\n", data.len()).as_bytes())
        .await?;
    stream.write_all(data).await?;
    stream.write_all(b"\r\n").await?;
    stream.flush().await
}

async fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let header_end = loop {
        let n = stream.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < header_end + len {
        let n = stream.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    Some(buf[header_end..].to_vec())
}

/// A provider that sends its headers and one chunk ("first words"), then
/// nothing until the connection is closed.
pub async fn quiet_provider() -> RawProvider {
    RawProvider::start(|_| {
        vec![
            Step::Send(
                sse_chunk(
                    "c",
                    json!({"role": "assistant", "content": "first words"}),
                    None,
                )
                .into_bytes(),
            ),
            Step::HoldUntilClosed,
        ]
    })
    .await
}
