//! Upstream connections through an egress proxy (docs/configuration.md, "Egress proxy").
//!
//! Per destination the connector goes direct, opens a `CONNECT` tunnel
//! (https: TLS runs inside it, end to end with the provider), or forwards
//! (http: the connection is marked proxied so hyper writes absolute-form
//! requests). hyper-util's [`Matcher`] decides, with curl's `NO_PROXY`
//! rules. The `CONNECT` handshake is our own: hyper-util's `Tunnel` drops
//! the status of a refusal, and the client's 502 should name it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::{HeaderValue, PROXY_AUTHORIZATION};
use http::{Request, Response, StatusCode, Uri};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::legacy::{Client, ResponseFuture};
use hyper_util::client::proxy::matcher::{Intercept, Matcher};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tower::Service;

use crate::body::{BoxError, ProxyBody};
use crate::config::Egress;

/// Largest `CONNECT` answer head read.
const MAX_CONNECT_HEAD: usize = 8 << 10;

// ===== Routes =====

/// Which upstream goes where: hyper-util's curl-compatible matcher.
pub struct Routes {
    /// `None` when every connection goes direct.
    matcher: Option<Matcher>,
}

/// How one destination is reached.
enum Route {
    Direct,
    /// https: `CONNECT host:port` through the proxy, then TLS inside.
    Tunnel(Intercept),
    /// http: absolute-form requests to the proxy.
    Forward(Intercept),
}

impl Routes {
    /// The routes `egress` describes, logged once (without credentials).
    pub fn new(egress: &Egress) -> Routes {
        if egress.is_direct() {
            return Routes { matcher: None };
        }
        let show = |p: &Option<crate::config::ProxyUrl>| {
            p.as_ref().map_or("direct".to_owned(), ToString::to_string)
        };
        tracing::info!(
            https = %show(&egress.https),
            http = %show(&egress.http),
            no_proxy = %egress.no_proxy,
            "upstream connections go through an egress proxy (CONNECT for https, absolute-form for http)"
        );
        let secret = |p: &Option<crate::config::ProxyUrl>| {
            p.as_ref()
                .map_or(String::new(), |p| p.as_secret_str().to_owned())
        };
        let matcher = Matcher::builder()
            .https(secret(&egress.https))
            .http(secret(&egress.http))
            .no(egress.no_proxy.clone())
            .build();
        Routes {
            matcher: Some(matcher),
        }
    }

    fn route(&self, dst: &Uri) -> Route {
        let Some(proxy) = self.matcher.as_ref().and_then(|m| m.intercept(dst)) else {
            return Route::Direct;
        };
        if dst.scheme_str() == Some("https") {
            Route::Tunnel(proxy)
        } else {
            Route::Forward(proxy)
        }
    }
}

// ===== EgressConnector =====

/// A connector that honours the egress proxy; wrap it in TLS for https.
#[derive(Clone)]
pub struct EgressConnector {
    tcp: HttpConnector,
    routes: Arc<Routes>,
    /// Limit on the proxy's answer to `CONNECT` (the TCP connect has its own).
    handshake_timeout: Duration,
}

type Connecting = Pin<Box<dyn Future<Output = Result<EgressStream, BoxError>> + Send>>;

impl EgressConnector {
    /// `tcp` opens every TCP connection (to the provider or to the proxy).
    pub fn new(tcp: HttpConnector, routes: Arc<Routes>, handshake_timeout: Duration) -> Self {
        EgressConnector {
            tcp,
            routes,
            handshake_timeout,
        }
    }
}

impl Service<Uri> for EgressConnector {
    type Response = EgressStream;
    type Error = BoxError;
    type Future = Connecting;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Connecting {
        let route = self.routes.route(&dst);
        let mut tcp = self.tcp.clone();
        let timeout = self.handshake_timeout;
        Box::pin(async move {
            match route {
                Route::Direct => Ok(EgressStream::new(tcp.call(dst).await?, false)),
                Route::Forward(proxy) => {
                    let io = reach(&mut tcp, &proxy).await?;
                    Ok(EgressStream::new(io, true))
                }
                Route::Tunnel(proxy) => {
                    let mut io = reach(&mut tcp, &proxy).await?;
                    let target = authority_of(&dst)?;
                    let shake = handshake(io.inner_mut(), &target, proxy.basic_auth());
                    let proxy = shown(&proxy);
                    let failed = match tokio::time::timeout(timeout, shake).await {
                        Ok(Ok(())) => return Ok(EgressStream::new(io, false)),
                        Err(_) => EgressError::Timeout {
                            proxy,
                            target,
                            secs: timeout.as_secs(),
                        },
                        Ok(Err(Refusal::Status(status))) => EgressError::Refused {
                            proxy,
                            target,
                            status,
                            hint: hint(status),
                        },
                        Ok(Err(Refusal::Garbled(what))) => EgressError::Garbled {
                            proxy,
                            target,
                            what,
                        },
                        Ok(Err(Refusal::Io(source))) => EgressError::Broken {
                            proxy,
                            target,
                            source,
                        },
                    };
                    Err(failed.into())
                }
            }
        })
    }
}

/// Opens the TCP connection to the proxy itself.
async fn reach(tcp: &mut HttpConnector, proxy: &Intercept) -> Result<TokioIo<TcpStream>, BoxError> {
    tcp.call(proxy.uri().clone()).await.map_err(|source| {
        EgressError::Unreachable {
            proxy: shown(proxy),
            source: source.into(),
        }
        .into()
    })
}

/// `host:port` of `dst` (port 443 unless given), as `CONNECT` names it.
fn authority_of(dst: &Uri) -> Result<String, BoxError> {
    let host = dst.host().ok_or("the upstream URL has no host")?;
    Ok(format!("{host}:{}", dst.port_u16().unwrap_or(443)))
}

/// The proxy as logs and errors show it: no credentials.
fn shown(proxy: &Intercept) -> String {
    let uri = proxy.uri();
    format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("http"),
        uri.authority().map_or("", |a| a.as_str())
    )
}

fn hint(status: StatusCode) -> &'static str {
    if status == StatusCode::PROXY_AUTHENTICATION_REQUIRED {
        "the proxy wants credentials: put them in the proxy URL (http://user:pass@host:port)"
    } else {
        "check the proxy's rules for this host, or list the host in NO_PROXY to go direct"
    }
}

/// Why a `CONNECT` did not open a tunnel.
#[derive(Debug)]
enum Refusal {
    Status(StatusCode),
    Garbled(&'static str),
    Io(io::Error),
}

/// Sends `CONNECT target` (with `Proxy-Authorization` when the proxy URL has
/// credentials, and nothing of the upstream request) and reads the answer.
async fn handshake(
    io: &mut TcpStream,
    target: &str,
    auth: Option<&HeaderValue>,
) -> Result<(), Refusal> {
    let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n").into_bytes();
    if let Some(auth) = auth {
        head.extend_from_slice(b"Proxy-Authorization: ");
        head.extend_from_slice(auth.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    io.write_all(&head).await.map_err(Refusal::Io)?;

    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let n = io.read(&mut chunk).await.map_err(Refusal::Io)?;
        if n == 0 {
            return Err(Refusal::Garbled("closed the connection before answering"));
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_head_end(&buf) {
            return match connect_status(&buf[..end]) {
                None => Err(Refusal::Garbled("answered with something other than HTTP")),
                Some(s) if !s.is_success() => Err(Refusal::Status(s)),
                // The provider speaks first only after our TLS hello.
                Some(_) if end < buf.len() => {
                    Err(Refusal::Garbled("sent data before the tunnel was used"))
                }
                Some(_) => Ok(()),
            };
        }
        if buf.len() > MAX_CONNECT_HEAD {
            return Err(Refusal::Garbled("answered with a head larger than 8 KiB"));
        }
    }
}

/// Where the head ends (after its blank line), if it has.
fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// The status of an HTTP/1 response head.
fn connect_status(head: &[u8]) -> Option<StatusCode> {
    let line = head.split(|b| *b == b'\n').next()?;
    let mut parts = line.split(|b| *b == b' ');
    let version = parts.next()?;
    if !version.starts_with(b"HTTP/1.") {
        return None;
    }
    let code = parts.next()?;
    if code.len() != 3 {
        return None;
    }
    StatusCode::from_bytes(code).ok()
}

/// Why an upstream connection through the egress proxy failed; the client
/// sees it inside the 502's message.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    /// No TCP connection to the proxy.
    #[error("the egress proxy {proxy} could not be reached; check HTTPS_PROXY / HTTP_PROXY")]
    Unreachable {
        /// The proxy, without credentials.
        proxy: String,
        /// The connect error.
        #[source]
        source: BoxError,
    },
    /// The proxy answered `CONNECT` with a non-2xx status.
    #[error("the egress proxy {proxy} refused CONNECT {target} with {status}; {hint}")]
    Refused {
        /// The proxy, without credentials.
        proxy: String,
        /// `host:port` asked for.
        target: String,
        /// The proxy's status.
        status: StatusCode,
        /// What to do.
        hint: &'static str,
    },
    /// The proxy's answer to `CONNECT` was not a usable HTTP answer.
    #[error("the egress proxy {proxy} {what} (CONNECT {target})")]
    Garbled {
        /// The proxy, without credentials.
        proxy: String,
        /// `host:port` asked for.
        target: String,
        /// What went wrong.
        what: &'static str,
    },
    /// The connection to the proxy broke during `CONNECT`.
    #[error("the connection to the egress proxy {proxy} broke during CONNECT {target}")]
    Broken {
        /// The proxy, without credentials.
        proxy: String,
        /// `host:port` asked for.
        target: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The proxy did not answer `CONNECT` in time.
    #[error("the egress proxy {proxy} did not answer CONNECT {target} within {secs} s (CODEMODE_CONNECT_TIMEOUT_SECS)")]
    Timeout {
        /// The proxy, without credentials.
        proxy: String,
        /// `host:port` asked for.
        target: String,
        /// The limit.
        secs: u64,
    },
}

// ===== EgressStream =====

/// A TCP connection to the provider, a tunnel, or a forwarding proxy.
pub struct EgressStream {
    io: TokioIo<TcpStream>,
    /// Connected to a forwarding proxy: requests go in absolute-form.
    forwarded: bool,
}

impl EgressStream {
    fn new(io: TokioIo<TcpStream>, forwarded: bool) -> Self {
        EgressStream { io, forwarded }
    }
}

impl Connection for EgressStream {
    fn connected(&self) -> Connected {
        self.io.connected().proxy(self.forwarded)
    }
}

impl hyper::rt::Read for EgressStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for EgressStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

// ===== SharedConnector =====

/// The TLS connector behind one reference count.
///
/// The pool clones its connector for every request, to have a connection
/// started should no idle one come back in time, and drops the clone when
/// one does (nearly always): a bare `HttpsConnector` is four reference
/// counts to take and give back per request, this is one. The parts are
/// cloned only for a connection that is really opened.
#[derive(Clone)]
pub struct SharedConnector(Arc<HttpsConnector<EgressConnector>>);

type Tls = <HttpsConnector<EgressConnector> as Service<Uri>>::Response;

impl SharedConnector {
    pub fn new(connector: HttpsConnector<EgressConnector>) -> Self {
        SharedConnector(Arc::new(connector))
    }
}

impl Service<Uri> for SharedConnector {
    type Response = Tls;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Tls, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Readiness is asked of the copy that connects, below.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let mut connector = HttpsConnector::clone(&self.0);
        Box::pin(async move {
            std::future::poll_fn(|cx| connector.poll_ready(cx)).await?;
            connector.call(dst).await
        })
    }
}

// ===== EgressClient =====

/// The pooled upstream client; adds `Proxy-Authorization` to requests a
/// forwarding proxy carries (a tunnel carries it on `CONNECT` only).
#[derive(Clone)]
pub struct EgressClient {
    client: Client<SharedConnector, ProxyBody>,
    routes: Arc<Routes>,
}

impl EgressClient {
    /// `client` must connect through an [`EgressConnector`] over the same `routes`.
    pub fn new(client: Client<SharedConnector, ProxyBody>, routes: Arc<Routes>) -> Self {
        EgressClient { client, routes }
    }
}

impl Service<Request<ProxyBody>> for EgressClient {
    type Response = Response<Incoming>;
    type Error = hyper_util::client::legacy::Error;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // The pool has no back-pressure; readiness is the client's too.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<ProxyBody>) -> ResponseFuture {
        if let Route::Forward(proxy) = self.routes.route(req.uri()) {
            if let Some(auth) = proxy.basic_auth() {
                req.headers_mut().insert(PROXY_AUTHORIZATION, auth.clone());
            }
        }
        self.client.request(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProxyUrl;

    fn routes(https: &str, http: &str, no: &str) -> Routes {
        let url = |s: &str| (!s.is_empty()).then(|| ProxyUrl::parse(s).unwrap());
        Routes::new(&Egress {
            https: url(https),
            http: url(http),
            no_proxy: no.into(),
        })
    }

    fn via(routes: &Routes, dst: &str) -> String {
        match routes.route(&dst.parse().unwrap()) {
            Route::Direct => "direct".into(),
            Route::Tunnel(p) => format!("tunnel {}", shown(&p)),
            Route::Forward(p) => format!("forward {}", shown(&p)),
        }
    }

    #[test]
    fn each_scheme_takes_its_own_proxy() {
        let r = routes("http://tls:3128", "http://plain:8080", "");
        assert_eq!(
            via(&r, "https://api.openai.com/v1"),
            "tunnel http://tls:3128"
        );
        assert_eq!(
            via(&r, "http://10.0.0.5:9000/v1"),
            "forward http://plain:8080"
        );
        let only_https = routes("http://tls:3128", "", "");
        assert_eq!(via(&only_https, "http://10.0.0.5/v1"), "direct");
    }

    #[test]
    fn no_proxy_matches_hosts_suffixes_ips_and_cidrs_like_curl() {
        let r = routes(
            "http://p:1",
            "http://p:1",
            "example.com, .corp.internal, 10.1.2.3, 192.168.0.0/16",
        );
        assert_eq!(via(&r, "https://example.com/"), "direct");
        assert_eq!(via(&r, "https://api.example.com/"), "direct");
        assert_eq!(via(&r, "https://notexample.com/"), "tunnel http://p:1");
        assert_eq!(via(&r, "https://a.corp.internal/"), "direct");
        assert_eq!(via(&r, "https://corp.internal/"), "direct");
        assert_eq!(via(&r, "http://10.1.2.3:8080/"), "direct");
        assert_eq!(via(&r, "http://192.168.7.7/"), "direct");
        assert_eq!(via(&r, "http://10.1.2.4/"), "forward http://p:1");
        // Loopback is not special unless listed (curl).
        assert_eq!(via(&r, "http://127.0.0.1/"), "forward http://p:1");
        assert_eq!(via(&r, "http://localhost/"), "forward http://p:1");
    }

    #[test]
    fn connect_answers_are_read_by_status() {
        assert_eq!(
            connect_status(b"HTTP/1.1 200 Connection established\r\n\r\n"),
            Some(StatusCode::OK)
        );
        assert_eq!(
            connect_status(b"HTTP/1.0 407 Proxy Authentication Required\r\n"),
            Some(StatusCode::PROXY_AUTHENTICATION_REQUIRED)
        );
        assert_eq!(connect_status(b"SSH-2.0-OpenSSH\r\n"), None);
        assert_eq!(connect_status(b"HTTP/1.1 2000 OK\r\n"), None);
        assert_eq!(find_head_end(b"HTTP/1.1 200 OK\r\n\r\nrest"), Some(19));
        assert_eq!(find_head_end(b"HTTP/1.1 200 OK\r\n"), None);
    }

    #[tokio::test]
    async fn a_refused_connect_reports_the_status_and_sends_only_the_connect_head() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let proxy = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut seen = Vec::new();
            let mut chunk = [0u8; 1024];
            while find_head_end(&seen).is_none() {
                let n = s.read(&mut chunk).await.unwrap();
                seen.extend_from_slice(&chunk[..n]);
            }
            s.write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 6\r\n\r\nnope\r\n")
                .await
                .unwrap();
            String::from_utf8(seen).unwrap()
        });
        let mut io = TcpStream::connect(addr).await.unwrap();
        let auth = HeaderValue::from_static("Basic YTpi");
        let got = handshake(&mut io, "api.example.com:443", Some(&auth)).await;
        assert!(
            matches!(got, Err(Refusal::Status(StatusCode::FORBIDDEN))),
            "{got:?}"
        );
        assert_eq!(
            proxy.await.unwrap(),
            "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\
             Proxy-Authorization: Basic YTpi\r\n\r\n"
        );
    }
}
