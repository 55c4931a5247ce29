//! Resident memory of the proxy binary with many open, idle streams in code
//! mode (every stream judged by the interceptor).
//!
//! `cargo bench --features bench-internals --bench idle_streams` (IDLE_STREAMS=N,M for other counts;
//! the proxy holds two file descriptors per stream: raise `ulimit -n`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A provider that answers every request with one SSE chunk and then holds.
async fn provider(listener: TcpListener, opened: Arc<AtomicUsize>) {
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            return;
        };
        let opened = opened.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 16384];
            let mut seen = Vec::new();
            loop {
                let Ok(n) = s.read(&mut buf).await else {
                    return;
                };
                if n == 0 {
                    return;
                }
                seen.extend_from_slice(&buf[..n]);
                if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if seen.len() >= end + 4 + len {
                        break;
                    }
                }
            }
            let chunk = "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n";
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n",
                chunk.len()
            );
            if s.write_all(head.as_bytes()).await.is_ok() {
                opened.fetch_add(1, Ordering::SeqCst);
                let _ = s.read(&mut buf).await; // held until the proxy closes
            }
        });
    }
}

async fn open_stream(addr: &str) -> Option<TcpStream> {
    let body = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"read","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}},{"type":"function","function":{"name":"run_code","parameters":{"type":"object","properties":{"code":{"type":"string"}}}}}]}"#;
    let mut s = TcpStream::connect(addr).await.ok()?;
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = vec![0u8; 4096];
    let mut got = Vec::new();
    // Read until the first event has arrived through the proxy.
    while !got.windows(2).any(|w| w == b"hi") {
        let n = s.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
    }
    Some(s)
}

#[tokio::main]
async fn main() {
    // The provider runs as a second process (this binary again), so each
    // process holds one socket per stream and file-descriptor limits stretch.
    if let Some(pos) = std::env::args().position(|a| a == "--provider") {
        let addr = std::env::args()
            .nth(pos + 1)
            .unwrap_or_else(|| "127.0.0.1:0".into());
        let listener = TcpListener::bind(&addr).await.unwrap();
        println!("{}", listener.local_addr().unwrap());
        provider(listener, Arc::new(AtomicUsize::new(0))).await;
        return;
    }
    let counts: Vec<usize> = std::env::var("IDLE_STREAMS")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1000]);
    let mut provider_child = Command::new(std::env::current_exe().unwrap())
        .args(["--provider", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("the provider process starts");
    let mut paddr = String::new();
    BufReader::new(provider_child.stdout.take().unwrap())
        .read_line(&mut paddr)
        .unwrap();
    let upstream = format!("http://{}/v1", paddr.trim());

    // PROXY_BIN measures another build (an older commit, another allocator).
    let proxy_bin =
        std::env::var("PROXY_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_codemode-proxy").into());
    let mut child = Command::new(proxy_bin)
        .env("CODEMODE_LISTEN", "127.0.0.1:0")
        .env("CODEMODE_UPSTREAM", &upstream)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("the proxy binary starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().trim_start_matches("listening on ").to_owned();
    let pid = child.id();

    // Warm up: one stream, then closed, so lazily built state exists.
    drop(open_stream(&addr).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle = rss_kib(pid);
    println!("proxy idle: {idle} KiB resident");
    let mut held = Vec::new();
    for n in counts {
        let started = Instant::now();
        while held.len() < n {
            match open_stream(&addr).await {
                Some(s) => held.push(s),
                None => {
                    eprintln!(
                        "could not open stream {} (raise ulimit -n?)",
                        held.len() + 1
                    );
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rss = rss_kib(pid);
        let per = (rss.saturating_sub(idle) * 1024) / held.len().max(1) as u64;
        println!(
            "{} open streams: {rss} KiB resident, {per} bytes per stream (opened in {:.1} s)",
            held.len(),
            started.elapsed().as_secs_f64()
        );
    }
    drop(held);
    let _ = child.kill();
    let _ = child.wait();
    let _ = provider_child.kill();
    let _ = provider_child.wait();
}
