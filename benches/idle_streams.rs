//! Resident memory of the proxy binary with many open, idle streams in code
//! mode (every stream judged by its dialect's interceptor), for each
//! dialect: Chat Completions, Responses and Messages.
//!
//! `cargo bench --features bench-internals --bench idle_streams`
//! (`IDLE_STREAMS=N,M` for other counts, `IDLE_DIALECTS=chat,responses,messages`
//! for fewer dialects, `IDLE_REQUEST_KB=100` for requests of about that size;
//! the proxy holds two file descriptors per stream:
//! raise `ulimit -n`). Each dialect gets a fresh proxy, so memory one
//! dialect's streams freed is not reused by the next one's.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the held streams carry, and what a client waits for.
const MARKER: &str = "idle-marker";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dialect {
    Chat,
    Responses,
    Messages,
}

impl Dialect {
    fn parse(name: &str) -> Option<Dialect> {
        match name.trim() {
            "chat" => Some(Dialect::Chat),
            "responses" => Some(Dialect::Responses),
            "messages" => Some(Dialect::Messages),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Dialect::Chat => "chat",
            Dialect::Responses => "responses",
            Dialect::Messages => "messages",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Dialect::Chat => "/v1/chat/completions",
            Dialect::Responses => "/v1/responses",
            Dialect::Messages => "/v1/messages",
        }
    }

    /// A streamed request with the native tools `read` and `write`, its
    /// user message padded to about `pad` bytes.
    fn body(self, pad: usize) -> String {
        let body = match self {
            Dialect::Chat => {
                r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"read","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}},{"type":"function","function":{"name":"write","parameters":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}}}]}"#
            }
            Dialect::Responses => {
                r#"{"model":"m","stream":true,"store":false,"input":[{"role":"user","content":"hi"}],"tools":[{"type":"function","name":"read","parameters":{"type":"object","properties":{"path":{"type":"string"}}}},{"type":"function","name":"write","parameters":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}}]}"#
            }
            Dialect::Messages => {
                r#"{"model":"m","stream":true,"max_tokens":1024,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"read","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}},{"name":"write","input_schema":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}}]}"#
            }
        };
        // Agents send whole conversations: words, not one repeated byte.
        let words = "the quick brown fox jumps over the lazy dog ";
        let padding: String = words.chars().cycle().take(pad).collect();
        body.replacen(
            r#""content":"hi""#,
            &format!(r#""content":"hi {padding}""#),
            1,
        )
    }

    /// The first events of an answer, up to a text delta carrying [`MARKER`].
    fn events(self) -> String {
        match self {
            Dialect::Chat => format!(
                "data: {{\"id\":\"c\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{MARKER}\"}}}}]}}\n\n"
            ),
            Dialect::Responses => {
                let head = r#"{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"m","output":[]}"#;
                format!(
                    "event: response.created\ndata: {{\"type\":\"response.created\",\"sequence_number\":0,\"response\":{head}}}\n\n\
                     event: response.output_item.added\ndata: {{\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{{\"type\":\"message\",\"id\":\"msg_1\",\"status\":\"in_progress\",\"role\":\"assistant\",\"content\":[]}}}}\n\n\
                     event: response.content_part.added\ndata: {{\"type\":\"response.content_part.added\",\"sequence_number\":2,\"output_index\":0,\"item_id\":\"msg_1\",\"content_index\":0,\"part\":{{\"type\":\"output_text\",\"text\":\"\",\"annotations\":[]}}}}\n\n\
                     event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"sequence_number\":3,\"output_index\":0,\"item_id\":\"msg_1\",\"content_index\":0,\"delta\":\"{MARKER}\"}}\n\n"
                )
            }
            Dialect::Messages => format!(
                "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{{\"input_tokens\":10,\"output_tokens\":1}}}}}}\n\n\
                 event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\n\
                 event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{MARKER}\"}}}}\n\n"
            ),
        }
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A provider that answers every request with its dialect's first events
/// (chosen by the request's path) and then holds.
async fn provider(listener: TcpListener) {
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
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
            let path = seen
                .split(|b| *b == b' ')
                .nth(1)
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .unwrap_or_default();
            let dialect = [Dialect::Chat, Dialect::Responses, Dialect::Messages]
                .into_iter()
                .find(|d| path.starts_with(d.path()))
                .unwrap_or(Dialect::Chat);
            let events = dialect.events();
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{events}\r\n",
                events.len()
            );
            if s.write_all(head.as_bytes()).await.is_ok() {
                let _ = s.read(&mut buf).await; // held until the proxy closes
            }
        });
    }
}

async fn open_stream(addr: &str, dialect: Dialect, body: &str) -> Option<TcpStream> {
    let mut s = TcpStream::connect(addr).await.ok()?;
    let req = format!(
        "POST {} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\nanthropic-version: 2023-06-01\r\ncontent-length: {}\r\n\r\n{body}",
        dialect.path(),
        body.len()
    );
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = vec![0u8; 4096];
    let mut got = Vec::new();
    // Read until the marker's event has come through the proxy.
    while !got.windows(MARKER.len()).any(|w| w == MARKER.as_bytes()) {
        let n = s.read(&mut buf).await.ok()?;
        if n == 0 {
            eprintln!(
                "the proxy ended a {} stream: {}",
                dialect.name(),
                String::from_utf8_lossy(&got)
            );
            return None;
        }
        got.extend_from_slice(&buf[..n]);
    }
    Some(s)
}

struct Proxy {
    child: std::process::Child,
    addr: String,
}

fn start_proxy(upstream: &str) -> Proxy {
    // PROXY_BIN measures another build (an older commit, another allocator).
    let proxy_bin =
        std::env::var("PROXY_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_codemode-proxy").into());
    let mut child = Command::new(proxy_bin)
        .env("CODEMODE_LISTEN", "127.0.0.1:0")
        .env("CODEMODE_UPSTREAM", upstream)
        .env("CODEMODE_ANTHROPIC_UPSTREAM", upstream)
        .env("CODEMODE_RUNTIME", "embedded")
        .env("CODEMODE_MODE", "code")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("the proxy binary starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().trim_start_matches("listening on ").to_owned();
    Proxy { child, addr }
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
        provider(listener).await;
        return;
    }
    let counts: Vec<usize> = std::env::var("IDLE_STREAMS")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1000]);
    let dialects: Vec<Dialect> = std::env::var("IDLE_DIALECTS")
        .ok()
        .map(|v| v.split(',').filter_map(Dialect::parse).collect())
        .unwrap_or_else(|| vec![Dialect::Chat, Dialect::Responses, Dialect::Messages]);
    // IDLE_REQUEST_KB: requests the size of a real agent's (tens to hundreds of KB).
    let pad = std::env::var("IDLE_REQUEST_KB")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0)
        * 1024;
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

    let mut rows = Vec::new();
    for dialect in dialects {
        let mut proxy = start_proxy(&upstream);
        let pid = proxy.child.id();
        // Warm up: one stream, then closed, so lazily built state exists.
        let body = dialect.body(pad);
        drop(open_stream(&proxy.addr, dialect, &body).await);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let idle = rss_kib(pid);
        println!("{}: proxy idle: {idle} KiB resident", dialect.name());
        let mut held = Vec::new();
        for &n in &counts {
            let started = Instant::now();
            while held.len() < n {
                match open_stream(&proxy.addr, dialect, &body).await {
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
            // A figure over no stream would be the idle process's noise.
            assert!(
                !held.is_empty(),
                "no {} stream opened through the proxy (its answer is above)",
                dialect.name()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
            let rss = rss_kib(pid);
            let per = (rss.saturating_sub(idle) * 1024) / held.len().max(1) as u64;
            println!(
                "{}: {} open streams: {rss} KiB resident, {per} bytes per stream (opened in {:.1} s)",
                dialect.name(),
                held.len(),
                started.elapsed().as_secs_f64()
            );
            rows.push((dialect, idle, held.len(), rss, per));
        }
        drop(held);
        let _ = proxy.child.kill();
        let _ = proxy.child.wait();
    }
    let _ = provider_child.kill();
    let _ = provider_child.wait();

    println!();
    if pad > 0 {
        println!("requests of about {} KB", pad / 1024);
    }
    println!("| dialect | idle | open streams | resident | per stream |");
    println!("|---|---|---|---|---|");
    for (dialect, idle, n, rss, per) in rows {
        println!(
            "| {} | {:.1} MB | {n} | {:.1} MB | {:.1} KB |",
            dialect.name(),
            idle as f64 / 1024.0,
            rss as f64 / 1024.0,
            per as f64 / 1000.0
        );
    }
}
