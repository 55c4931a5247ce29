//! The Code Mode layer inside a hyper server of one's own: `/healthz` is
//! answered here, everything else goes through the layer to the provider.
//! Shown in docs/library.md; `cargo test` compiles it.
//!
//! `CODEMODE_UPSTREAM=http://127.0.0.1:9000 cargo run --example embed -- 127.0.0.1:8080`

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tower::{Layer, ServiceExt};

use codemode_proxy::store::MemorySpliceStore;
use codemode_proxy::{server, CodeModeLayer, Config, PeerAddr, ProxyBody};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    // Every setting by its variable's name (docs/configuration.md): the
    // process environment here, with the mode fixed whatever it says.
    let config = Config::from_lookup(|name| match name {
        "CODEMODE_MODE" => Some("code".into()),
        _ => std::env::var(name).ok(),
    })?;
    // The provider client the binary uses (pooled, rustls, the egress
    // proxy variables honoured); any tower service of the same shape does.
    let client = server::http_client(&config)?;
    // A store of one's own: here the in-memory one with a smaller budget.
    let splices = Arc::new(MemorySpliceStore::new(config.splice_ttl, 4 << 20));
    let codemode = CodeModeLayer::builder(config)
        .splice_store(splices)
        .build()
        .layer(client);

    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (stream, peer) = listener.accept().await?;
        let codemode = codemode.clone();
        let service = tower::service_fn(move |mut req: Request<Incoming>| {
            let codemode = codemode.clone();
            async move {
                if req.uri().path() == "/healthz" {
                    return Ok::<_, Infallible>(text("ok\n"));
                }
                // What the layer slows failed admin-token attempts by.
                req.extensions_mut().insert(PeerAddr(peer));
                codemode.oneshot(req).await
            }
        });
        tokio::spawn(async move {
            let served = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                .await;
            if let Err(e) = served {
                eprintln!("connection from {peer}: {e}");
            }
        });
    }
}

/// A response of this server's own, in the layer's body type.
fn text(s: &'static str) -> Response<ProxyBody> {
    Response::new(
        Full::new(Bytes::from_static(s.as_bytes()))
            .map_err(|never| match never {})
            .boxed_unsync(),
    )
}
