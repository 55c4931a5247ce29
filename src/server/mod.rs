//! The binary's shell: an HTTP client for the upstream and a hyper server.

mod cores;
pub(crate) mod egress;
mod guard;
mod opening;

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::Layer;

use crate::config::Config;
use crate::layer::{CodeModeLayer, CodeModeService};

pub use cores::serve_per_core;

/// The pooled upstream client: rustls with the system's roots for `https`,
/// plain `http` too, through the egress proxy when one is configured.
pub type HttpClient = egress::EgressClient;

/// Builds the upstream client; fails when the system has no TLS roots.
pub fn http_client(config: &Config) -> io::Result<HttpClient> {
    Ok(http_clients(config, 1)?.remove(0))
}

/// `n` upstream clients, each with a pool of connections of its own, over
/// one set of egress routes (announced once).
fn http_clients(config: &Config, n: usize) -> io::Result<Vec<HttpClient>> {
    let routes = Arc::new(egress::Routes::new(&config.egress));
    (0..n)
        .map(|_| client_over(config, routes.clone()))
        .collect()
}

fn client_over(config: &Config, routes: Arc<egress::Routes>) -> io::Result<HttpClient> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(config.connect_timeout));
    let tcp = egress::EgressConnector::new(http, routes.clone(), config.connect_timeout);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()?
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(tcp);
    let client = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(egress::SharedConnector::new(https));
    Ok(egress::EgressClient::new(client, routes))
}

/// The whole stack: the Code Mode layer over the upstream client.
pub fn stack(config: Config) -> io::Result<CodeModeService> {
    let client = http_client(&config)?;
    Ok(CodeModeLayer::new(config).layer(client))
}

/// Serves `service` on `listener` until `shutdown` resolves, then drains connections.
pub async fn serve(
    listener: TcpListener,
    service: CodeModeService,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    serve_incoming(cores::Incoming::Listener(listener), service, shutdown).await
}

/// Serves the connections `incoming` yields until it ends or `shutdown`
/// resolves, then drains them.
async fn serve_incoming(
    mut incoming: cores::Incoming,
    service: CodeModeService,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let graceful = GracefulShutdown::new();
    let builders = Arc::new(opening::Builders::new());
    // Connections that have sent nothing yet are not hyper's to drain: they
    // end when the server stops.
    let (stopping, stopped) = watch::channel(false);
    let limits = service.connection_limits();
    let every = guard::check_interval(&limits);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = incoming.next() => {
                let Some((stream, peer, share)) = accepted else {
                    break;
                };
                let _ = stream.set_nodelay(true);
                let watcher = graceful.watcher();
                let builders = builders.clone();
                let service = service.clone();
                let mut stopped = stopped.clone();
                tokio::spawn(async move {
                    // This core's count of connections drops when the task ends.
                    let _share = share;
                    // A connection that sends nothing is idle from its start.
                    let opening = tokio::select! {
                        opening = opening::Opening::peek(&stream) => opening.unwrap_or(opening::Opening::Unknown),
                        () = tokio::time::sleep(limits.keepalive_timeout) => {
                            tracing::debug!(%peer, reason = ?guard::Expired::KeepAlive, "closing a connection that held its slot for nothing");
                            return;
                        }
                        _ = stopped.wait_for(|stop| *stop) => return,
                    };
                    let activity = guard::Activity::new();
                    // No upgrade support: nothing here answers one (`Upgrade` is
                    // hop-by-hop, dropped before forwarding).
                    let conn = builders.of(opening).serve_connection(
                        TokioIo::new(guard::WatchedIo::new(stream, activity.clone())),
                        TowerToHyperService::new(guard::Watched::new(service, activity.clone(), Some(peer))),
                    );
                    let conn = watcher.watch(conn.into_owned());
                    tokio::pin!(conn);
                    loop {
                        tokio::select! {
                            ended = &mut conn => {
                                if let Err(e) = ended {
                                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                                }
                                break;
                            }
                            () = tokio::time::sleep(every) => {
                                // Dropping the connection closes it; nothing is in flight on it.
                                if let Some(why) = activity.expired(&limits) {
                                    tracing::debug!(%peer, reason = ?why, "closing a connection that held its slot for nothing");
                                    break;
                                }
                            }
                        }
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(incoming);
    let _ = stopping.send(true);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(Duration::from_secs(10)) => {
            tracing::warn!("connections still open after 10 s; exiting");
        }
    }
    Ok(())
}
