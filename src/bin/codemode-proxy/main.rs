//! The `codemode-proxy` binary: configuration, the stack, serve; and its
//! subcommands (`run`, `configure`, `demo`), which use the library as an
//! embedder would and are not part of its API.

mod cli;
mod demo;
mod vars;

use std::process::ExitCode;

use codemode_proxy::config::Scheduler;
use codemode_proxy::observe::logging;
use codemode_proxy::{server, telemetry, CodeModeLayer, Config};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

// A request allocates a hundred-odd short-lived blocks (headers, JSON
// values, bodies): glibc's malloc took 18% of the proxy's instructions in
// code mode, mimalloc takes 5% (callgrind, docs/benchmarks-history.md). Its `no_thp`
// feature keeps it from asking for transparent huge pages: with them, each
// idle stream held 68 KB resident instead of 43 KB.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Gives the calling thread's free pages back to the system at once
/// (mimalloc would otherwise keep them until the thread allocates again,
/// and an idle thread never does): called after large transients only.
fn trim_allocator() {
    // SAFETY: `mi_collect` takes no pointers and may be called from any
    // thread at any time; it only frees memory mimalloc holds unused.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

fn main() -> ExitCode {
    // `run` and `configure` write their logs elsewhere (or none): they
    // set up their own output.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    // A sandbox worker (started by a proxy, never by hand) confines itself
    // before anything else runs: no logging, no runtime, no threads.
    if args.first().is_some_and(|a| a == "sandbox-worker") {
        return codemode_proxy::sandbox_worker(&args[1..]);
    }
    if let Some(code) = cli::dispatch(&args) {
        return code;
    }
    // Before any runtime: the OTLP exporter runs on threads of its own.
    let (otel, traces) = match telemetry::otel_layer(|k| std::env::var(k).ok()) {
        Ok(otel) => otel.unzip(),
        Err(e) => {
            eprintln!("codemode-proxy: {e}");
            return ExitCode::from(2);
        }
    };
    if std::env::args().nth(1).as_deref() == Some("demo") {
        init_subscriber(logging::LogFormat::Text, otel);
        let code = demo();
        logging::flush();
        return code;
    }
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprint!("{e}");
            return ExitCode::from(2);
        }
    };
    init_subscriber(config.log_format, otel);
    codemode_proxy::set_allocator_trim(trim_allocator);
    let served = match config.scheduler {
        Scheduler::PerCore => per_core(config),
        Scheduler::Shared => shared(config),
    };
    // Graceful shutdown: the spans still queued are exported before exit,
    // the log lines still buffered written.
    if let Some(traces) = traces {
        traces.shutdown();
    }
    logging::flush();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("codemode-proxy: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Logs, and trace export when configured. Without an exporter no layer
/// is added for it: an absent layer would count as interested in every
/// span, and each request would build the trace spans for nothing.
fn init_subscriber<L>(format: logging::LogFormat, otel: Option<L>)
where
    L: tracing_subscriber::Layer<
            tracing_subscriber::layer::Layered<
                Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>,
                tracing_subscriber::Registry,
            >,
        > + Send
        + Sync
        + 'static,
{
    let logs = tracing_subscriber::registry().with(logging::layer(format));
    // Buffered lines go out before a panic's message, and before an abort.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        logging::flush();
        report(info);
    }));
    match otel {
        Some(otel) => logs.with(otel).init(),
        None => logs.init(),
    }
}

/// One work-stealing runtime over every serving thread.
fn shared(config: Config) -> std::io::Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = config.worker_threads {
        builder.worker_threads(n);
    }
    let runtime = builder.enable_all().build().map_err(cannot_start)?;
    runtime.block_on(async {
        let (shutdown, listener) = listen(&config).await?;
        let service = server::stack(config)?;
        server::serve(listener, service, shutdown).await
    })
}

/// A current-thread runtime per serving thread; this thread accepts
/// for all (`server::serve_per_core`).
fn per_core(config: Config) -> std::io::Result<()> {
    let threads = config
        .worker_threads
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(cannot_start)?;
    // The layer is made inside a runtime: it starts the sandbox's warm workers.
    let (shutdown, listener, layer) = runtime.block_on(async {
        let (shutdown, listener) = listen(&config).await?;
        Ok::<_, std::io::Error>((shutdown, listener, CodeModeLayer::new(config.clone())))
    })?;
    server::serve_per_core(runtime, threads, listener, layer, &config, shutdown)
}

fn cannot_start(e: std::io::Error) -> std::io::Error {
    std::io::Error::other(format!("cannot start the async runtime: {e}"))
}

/// The shutdown signal and the bound listener, announced.
async fn listen(
    config: &Config,
) -> std::io::Result<(
    std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    tokio::net::TcpListener,
)> {
    if std::env::var_os(vars::SPLICE_CAPACITY).is_some() {
        tracing::warn!("CODEMODE_SPLICE_CAPACITY is deprecated and ignored: the mixed-turn store is bounded by bytes, CODEMODE_SPLICE_STORE_MB");
    }
    // Before anyone can learn the port: see `shutdown_signal`.
    let shutdown = shutdown_signal();
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    tracing::info!(
        upstream = %config.upstream,
        mode = %config.default_mode(),
        runtime = config.runtime.as_str(),
        scheduler = config.scheduler.as_str(),
        store = %config.store.describe(),
        "codemode-proxy listening on http://{addr}"
    );
    // Tests and scripts read this line to find a port-0 listener.
    println!("listening on {addr}");
    Ok((shutdown, listener))
}

fn demo() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("codemode-proxy: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(demo::run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("codemode-proxy demo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Resolves at SIGTERM or Ctrl-C (SIGINT), with the handlers installed
/// when this is called, not at the future's first poll. `run` calls it
/// before the listening line, so a signal from anyone who learned the port
/// shuts the server down gracefully (queued spans exported, logs flushed).
/// Installed at the first poll, a SIGTERM sent just after the first
/// request was answered could find no handler and kill the process, spans
/// unsent: the serve loop's `select!` may take a ready accept without
/// polling this future, and the connection's task can answer on another
/// worker before the loop comes round again.
fn shutdown_signal() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            return Box::pin(async move {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            });
        }
    }
    Box::pin(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
