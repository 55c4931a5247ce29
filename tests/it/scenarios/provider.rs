//! The scripted provider: a wiremock server that answers each request with
//! the next [`Reply`] rendered in the run's dialect, or, for replies only
//! a raw socket can send (a body cut short, a stall), a small HTTP/1.1
//! server on a raw socket that answers the same script.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::scenarios::model::{turn, Dialect, ProviderView, Reply};

/// The rounds a provider plays, in order, and the requests it got.
struct Script {
    dialect: Dialect,
    replies: Mutex<VecDeque<Reply>>,
    round: AtomicUsize,
}

/// What one reply comes to on the wire.
enum Wire {
    Whole {
        status: u16,
        content_type: &'static str,
        body: Vec<u8>,
        retry_after: Option<&'static str>,
    },
    /// A head promising `body`, then `part` of it; then the connection
    /// closes (`hold` false) or goes silent until the proxy closes it.
    Partial {
        stream: bool,
        full_len: usize,
        part: Vec<u8>,
        hold: bool,
    },
}

/// Whether a request to `target` (path and query) asks for a stream:
/// `"stream": true` in its body, or (Gemini) the streaming method in its
/// path with `alt=sse` (without it Google streams no SSE, so this provider
/// answers a whole JSON body, which a stream's client cannot read).
fn asks_stream(target: &str, req: &Value) -> bool {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    req["stream"] == true
        || (path.ends_with(":streamGenerateContent") && query.split('&').any(|p| p == "alt=sse"))
}

impl Script {
    fn next(&self, target: &str, req: &Value) -> Wire {
        let round = self.round.fetch_add(1, Ordering::SeqCst) + 1;
        let stream = asks_stream(target, req);
        let d = self.dialect;
        let Some(reply) = self.replies.lock().unwrap().pop_front() else {
            return Wire::Whole {
                status: 500,
                content_type: "text/plain",
                body: b"script exhausted".to_vec(),
                retry_after: None,
            };
        };
        match reply {
            Reply::Turn(t) if stream => Wire::Whole {
                status: 200,
                content_type: "text/event-stream",
                body: d.render_sse(&t, round, req).into_bytes(),
                retry_after: None,
            },
            Reply::Turn(t) => Wire::Whole {
                status: 200,
                content_type: "application/json",
                body: d.render_json(&t, round).to_string().into_bytes(),
                retry_after: None,
            },
            Reply::Status {
                status,
                retry_after,
            } => Wire::Whole {
                status,
                content_type: "application/json",
                body: d.error_body(status).to_string().into_bytes(),
                retry_after,
            },
            Reply::Body { content_type, body } => Wire::Whole {
                status: 200,
                content_type,
                body: body.as_bytes().to_vec(),
                retry_after: None,
            },
            Reply::CutShort | Reply::Stall => {
                let never = turn(Some("never finished"), vec![], (1, 1));
                let (full_len, part) = if stream {
                    (0, d.preamble(round).into_bytes())
                } else {
                    let whole = d.render_json(&never, round).to_string().into_bytes();
                    (whole.len(), whole[..whole.len() / 2].to_vec())
                };
                Wire::Partial {
                    stream,
                    full_len,
                    part,
                    hold: matches!(reply, Reply::Stall),
                }
            }
        }
    }
}

/// The script as wiremock's responder.
struct Responder(Arc<Script>);

impl Respond for Responder {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let target = match req.url.query() {
            Some(q) => format!("{}?{q}", req.url.path()),
            None => req.url.path().to_owned(),
        };
        match self.0.next(&target, &body) {
            Wire::Whole {
                status,
                content_type,
                body,
                retry_after,
            } => {
                let mut t = ResponseTemplate::new(status).set_body_raw(body, content_type);
                if let Some(r) = retry_after {
                    t = t.insert_header("retry-after", r);
                }
                t
            }
            Wire::Partial { .. } => panic!("a partial reply needs the raw-socket provider"),
        }
    }
}

enum Server {
    Mock(MockServer),
    Raw {
        addr: std::net::SocketAddr,
        seen: Arc<Mutex<Vec<Value>>>,
    },
}

/// A provider playing one scenario's replies in one dialect.
pub struct Provider {
    dialect: Dialect,
    server: Server,
}

impl Provider {
    pub async fn start(dialect: Dialect, replies: Vec<Reply>) -> Provider {
        let raw = replies.iter().any(Reply::needs_raw_socket);
        let script = Arc::new(Script {
            dialect,
            replies: Mutex::new(replies.into()),
            round: AtomicUsize::new(0),
        });
        let server = if raw {
            start_raw(script).await
        } else {
            let server = MockServer::start().await;
            Mock::given(method("POST"))
                .respond_with(Responder(script))
                .mount(&server)
                .await;
            Server::Mock(server)
        };
        Provider { dialect, server }
    }

    /// The base URL the proxy forwards to (its `/v1`).
    pub fn base(&self) -> String {
        format!("{}/v1", self.host())
    }

    /// The provider's host alone (Gemini's base: the whole `/v1beta/...`
    /// path goes under it).
    pub fn host(&self) -> String {
        match &self.server {
            Server::Mock(m) => m.uri(),
            Server::Raw { addr, .. } => format!("http://{addr}"),
        }
    }

    /// The requests it got on the dialect's route, reduced.
    pub async fn received(&self) -> Vec<ProviderView> {
        let bodies: Vec<Value> = match &self.server {
            Server::Mock(m) => m
                .received_requests()
                .await
                .unwrap_or_default()
                .into_iter()
                .filter(|r| self.dialect.is_route(r.url.path()))
                .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
                .collect(),
            Server::Raw { seen, .. } => seen.lock().unwrap().clone(),
        };
        bodies
            .iter()
            .map(|b| self.dialect.reduce_request(b))
            .collect()
    }
}

async fn start_raw(script: Arc<Script>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let (script, log) = (script.clone(), log.clone());
            tokio::spawn(async move { serve(conn, &script, &log).await });
        }
    });
    Server::Raw { addr, seen }
}

/// One request per connection: read it, log it, answer the next reply.
async fn serve(mut conn: TcpStream, script: &Script, log: &Mutex<Vec<Value>>) {
    let Some((target, body)) = read_request(&mut conn).await else {
        return;
    };
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    log.lock().unwrap().push(req.clone());
    let _ = match script.next(&target, &req) {
        Wire::Whole {
            status,
            content_type,
            body,
            retry_after,
        } => {
            let extra = retry_after
                .map(|r| format!("retry-after: {r}\r\n"))
                .unwrap_or_default();
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
                 {extra}connection: close\r\n\r\n",
                body.len()
            );
            write_all(&mut conn, &[head.as_bytes(), &body].concat()).await
        }
        Wire::Partial {
            stream,
            full_len,
            part,
            hold,
        } => {
            let bytes = if stream {
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                            transfer-encoding: chunked\r\n\r\n";
                let chunk = format!("{:x}\r\n", part.len());
                [head.as_bytes(), chunk.as_bytes(), &part, b"\r\n"].concat()
            } else {
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                     content-length: {full_len}\r\n\r\n"
                );
                [head.as_bytes(), &part].concat()
            };
            let sent = write_all(&mut conn, &bytes).await;
            if hold {
                hold_until_closed(&mut conn).await;
            }
            sent
        }
    };
}

async fn write_all(conn: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    conn.write_all(bytes).await?;
    conn.flush().await
}

/// Waits until the peer closes the connection (at most a minute).
async fn hold_until_closed(conn: &mut TcpStream) {
    let mut buf = [0u8; 256];
    let _ = tokio::time::timeout(Duration::from_secs(60), async {
        while matches!(conn.read(&mut buf).await, Ok(n) if n > 0) {}
    })
    .await;
}

/// Reads one request; its target (path and query) and its body (by
/// content-length, or chunked).
async fn read_request(conn: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = conn.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let target = String::from_utf8_lossy(&buf[..end])
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .to_owned();
    let chunked = head.contains("transfer-encoding: chunked");
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = buf[end..].to_vec();
    loop {
        if !chunked && body.len() >= len {
            return Some((target, body[..len].to_vec()));
        }
        if chunked {
            if let Some(decoded) = dechunk(&body) {
                return Some((target, decoded));
            }
        }
        let n = conn.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&tmp[..n]);
    }
}

/// A whole chunked body decoded; `None` while it is incomplete.
fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line = raw.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&raw[..line]).ok()?.split(';').next()?;
        let size = usize::from_str_radix(size.trim(), 16).ok()?;
        raw = &raw[line + 2..];
        if size == 0 {
            return Some(out);
        }
        if raw.len() < size + 2 {
            return None;
        }
        out.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}
