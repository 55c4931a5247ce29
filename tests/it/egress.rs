//! The egress proxy (docs/configuration.md, "Egress proxy"): upstream connections go
//! through `HTTPS_PROXY` (a CONNECT tunnel, TLS inside it end to end) and
//! `HTTP_PROXY` (absolute-form), except for hosts `NO_PROXY` lists.

use crate::common::binary::listening_on;
use crate::common::forward_proxy;

use std::io::Read;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use crate::common::*;
use forward_proxy::ForwardProxy;
use serde_json::Value;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use wiremock::MockServer;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/egress");
/// `alice:s3cret`, as `Proxy-Authorization: Basic` carries it.
const ALICE: &str = "Basic YWxpY2U6czNjcmV0";

fn answer_text(completion: &Value) -> &str {
    completion["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or("")
}

/// `http://alice:s3cret@127.0.0.1:<port>`.
fn with_credentials(proxy: &ForwardProxy) -> String {
    format!("http://alice:s3cret@{}", proxy.addr)
}

#[tokio::test]
async fn an_http_upstream_is_reached_through_http_proxy_in_absolute_form() {
    let p = provider([text_completion("via the proxy", usage(1, 1))]).await;
    let fp = ForwardProxy::start().await;
    let proxy = start(&p, &[("HTTP_PROXY", &fp.url())]).await;

    let res = proxy.chat(&user_chat("hi"), &[]).await;
    assert_eq!(res.status(), 200);
    assert_eq!(answer_text(&res.json().await.unwrap()), "via the proxy");

    let seen = fp.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].request_line(),
        format!("POST http://{}/v1/chat/completions HTTP/1.1", p.address())
    );
    assert_eq!(received(&p).await.len(), 1);
}

#[tokio::test]
async fn a_host_no_proxy_lists_is_reached_directly() {
    let p = provider([text_completion("direct", usage(1, 1))]).await;
    let fp = ForwardProxy::start().await;
    let proxy = start(
        &p,
        &[
            ("http_proxy", &fp.url()),
            ("no_proxy", "internal.example, 127.0.0.1"),
        ],
    )
    .await;

    let res = proxy.chat(&user_chat("hi"), &[]).await;
    assert_eq!(res.status(), 200);
    assert_eq!(answer_text(&res.json().await.unwrap()), "direct");
    assert!(fp.seen().is_empty(), "{:?}", fp.seen());
    assert_eq!(received(&p).await.len(), 1);
}

#[tokio::test]
async fn credentials_in_the_proxy_url_reach_a_forwarding_proxy() {
    let p = provider([text_completion("ok", usage(1, 1))]).await;
    let fp = ForwardProxy::start().await;
    let proxy = start(&p, &[("HTTP_PROXY", &with_credentials(&fp))]).await;

    let res = proxy
        .chat(&user_chat("hi"), &[("authorization", "Bearer sk-client")])
        .await;
    assert_eq!(res.status(), 200);
    let seen = fp.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].header("proxy-authorization"), vec![ALICE]);
}

#[tokio::test]
async fn a_proxy_refusing_connect_gives_a_502_naming_the_proxy_and_its_status() {
    let fp = ForwardProxy::refusing(403).await;
    let proxy = start_with(config(
        "https://api.provider.example/v1",
        &[("HTTPS_PROXY", &fp.url())],
    ))
    .await;

    let res = proxy.chat(&user_chat("hi"), &[]).await;
    assert_eq!(res.status(), 502);
    let body: Value = res.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains(&format!("egress proxy {}", fp.url()))
            && message.contains("CONNECT api.provider.example:443")
            && message.contains("403 Forbidden"),
        "{body}"
    );
    assert_eq!(body["error"]["code"], "upstream_unreachable", "{body}");
    let seen = fp.seen();
    assert_eq!(
        seen[0].request_line(),
        "CONNECT api.provider.example:443 HTTP/1.1"
    );
}

#[tokio::test]
async fn connect_carries_the_proxy_credentials_and_never_the_provider_key() {
    let fp = ForwardProxy::refusing(407).await;
    let proxy = start_with(config(
        "https://api.provider.example/v1",
        &[
            ("HTTPS_PROXY", &with_credentials(&fp)),
            ("CODEMODE_UPSTREAM_API_KEY", "sk-upstream-secret"),
        ],
    ))
    .await;

    let res = proxy
        .chat(&user_chat("hi"), &[("authorization", "Bearer sk-client")])
        .await;
    assert_eq!(res.status(), 502);
    let body = res.text().await.unwrap();
    assert!(
        body.contains("407") && body.contains("credentials"),
        "{body}"
    );
    assert!(!body.contains("s3cret"), "{body}");

    let seen = fp.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].header("proxy-authorization"), vec![ALICE]);
    assert!(seen[0].header("authorization").is_empty(), "{seen:?}");
    assert!(seen[0].header("x-api-key").is_empty(), "{seen:?}");
    assert!(!seen[0].head.contains("sk-"), "{seen:?}");
}

// ===== https end to end, through the binary =====

/// A TLS front for `provider` with the fixture certificate for `localhost`
/// (signed by `ca.pem`); each connection is piped in plain text to it.
async fn tls_provider(provider: &MockServer) -> SocketAddr {
    let certs = CertificateDer::pem_file_iter(format!("{FIXTURES}/localhost.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(format!("{FIXTURES}/localhost.key")).unwrap();
    let tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let plain = *provider.address();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut upstream) = tokio::net::TcpStream::connect(plain).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
            });
        }
    });
    addr
}

/// The binary with only `vars` in its environment; its address.
fn spawn(vars: &[(&str, &str)]) -> (Child, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_codemode-proxy"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("the binary starts");
    let addr = listening_on(&mut child);
    (child, addr)
}

#[tokio::test]
async fn an_https_upstream_is_tunnelled_with_tls_end_to_end() {
    let p = provider([text_completion("through the tunnel", usage(1, 1))]).await;
    let tls = tls_provider(&p).await;
    let fp = ForwardProxy::start().await;
    let upstream = format!("https://localhost:{}/v1", tls.port());
    let (mut child, addr) = spawn(&[
        ("CODEMODE_LISTEN", "127.0.0.1:0"),
        ("CODEMODE_UPSTREAM", &upstream),
        ("CODEMODE_RUNTIME", "client"),
        ("HTTPS_PROXY", &with_credentials(&fp)),
        ("SSL_CERT_FILE", &format!("{FIXTURES}/ca.pem")),
    ]);

    let res = crate::common::http_client()
        .post(format!("http://{addr}/v1/chat/completions"))
        .header("authorization", "Bearer sk-client")
        .json(&user_chat("hi"))
        .send()
        .await
        .unwrap();
    let status = res.status();
    let got: Value = res.json().await.unwrap();
    terminate(&mut child);
    let mut log = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut log);

    assert_eq!(status, 200, "{got}\n{log}");
    assert_eq!(answer_text(&got), "through the tunnel");
    let provider_saw = p.received_requests().await.unwrap();
    assert_eq!(provider_saw.len(), 1);
    assert_eq!(
        provider_saw[0].headers.get("authorization").unwrap(),
        "Bearer sk-client"
    );

    let seen = fp.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let target = format!("localhost:{}", tls.port());
    assert_eq!(seen[0].request_line(), format!("CONNECT {target} HTTP/1.1"));
    assert_eq!(seen[0].header("host"), vec![target]);
    assert_eq!(seen[0].header("proxy-authorization"), vec![ALICE]);
    assert!(seen[0].header("authorization").is_empty(), "{seen:?}");

    // Logged once at start, without the credentials.
    let egress_lines: Vec<&str> = log.lines().filter(|l| l.contains("egress proxy")).collect();
    assert_eq!(egress_lines.len(), 1, "{log}");
    assert!(egress_lines[0].contains(&fp.url()), "{log}");
    assert!(!log.contains("s3cret"), "{log}");
}
