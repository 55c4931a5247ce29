//! Configuration, read once at start-up (docs/configuration.md).
//!
//! Parsed from a lookup function so tests never touch the process
//! environment. Every variable is parsed before any error is returned, so a
//! user sees every mistake at once, each naming its variable.

mod callers;
mod connections;
mod egress;
mod errors;
mod inspector;
mod parse;
mod presets;
mod redis_url;
mod run;
mod sandbox;
mod store;
mod threads;
mod upstream;

use std::net::SocketAddr;
use std::time::Duration;

use http::HeaderValue;

use crate::mode::{Mode, Runtime};
use crate::preset::{Catalog, ConfigFile};
use crate::sdk::SdkStyle;
use parse::{bounded, parse_or, positive};
use presets::{read_config_file, runtime_conflicts};
use upstream::operator_key;

pub(crate) use crate::env_vars::*;

/// `CODEMODE_MAX_STREAM_STATE_BYTES` by default: 64 MiB, as the largest
/// whole answer the proxy reads (`CODEMODE_MAX_UPSTREAM_BODY_BYTES`).
pub(crate) const DEFAULT_MAX_STREAM_STATE_BYTES: usize = 64 << 20;

/// `CODEMODE_STREAM_KEEPALIVE_MS` by default: well inside the 60 s idle
/// timeouts of common load balancers and reverse proxies.
pub(crate) const DEFAULT_STREAM_KEEPALIVE_MS: u64 = 10_000;
pub use crate::runtime::pool::RunSlots;
pub use crate::runtime::worker::Sandbox;
pub use crate::runtime::Limits;
pub use crate::select::ClientSelect;
pub use callers::Callers;
pub use connections::ConnectionLimits;
pub use egress::{Egress, ProxyUrl};
pub use errors::{ConfigError, ConfigErrors};
pub use inspector::{AdminToken, InspectorConfig};
pub use redis_url::RedisTarget;
pub use store::StoreKind;
pub use threads::Scheduler;
pub use upstream::UpstreamBase;

/// The validated configuration; nothing reads the environment after this.
#[derive(Clone, Debug)]
// New settings arrive as new fields: a user makes a `Config` with
// `from_env` or `from_lookup` and changes fields, never writes one out
// whole, so adding one breaks nobody.
#[non_exhaustive]
pub struct Config {
    /// Address to bind.
    pub listen: SocketAddr,
    /// Provider base URL.
    pub upstream: UpstreamBase,
    /// Default tool mode: the presets that inherit their mode were
    /// resolved with it, so it is set by `CODEMODE_MODE` and read with
    /// [`Config::default_mode`], never changed alone.
    pub(crate) default_mode: Mode,
    /// Where `run_code` runs.
    pub runtime: Runtime,
    /// Presets, sections, scope bindings (`CODEMODE_CONFIG`).
    pub(crate) catalog: Catalog,
    /// Re-asks per request after a denial.
    pub max_repairs: u32,
    /// Replaces the client's `Authorization` upstream when set (marked sensitive).
    pub upstream_api_key: Option<HeaderValue>,
    /// The Anthropic Messages API base (`/v1/messages` and what carries
    /// `anthropic-version` go there).
    pub anthropic_upstream: UpstreamBase,
    /// Sent to the Anthropic upstream as `x-api-key` in place of the
    /// client's key and authorization (marked sensitive).
    pub anthropic_api_key: Option<HeaderValue>,
    /// The Gemini API's host (`CODEMODE_GEMINI_UPSTREAM`): the whole
    /// `/v1beta/...` path goes under it.
    pub gemini_upstream: UpstreamBase,
    /// Sent to the Gemini upstream as `x-goog-api-key` in place of the
    /// client's key (header or `?key=`) (marked sensitive).
    pub gemini_api_key: Option<HeaderValue>,
    /// Per-request selection policy.
    pub client_select: ClientSelect,
    /// Largest body read on a judged route (every API) and by a dry-run.
    pub max_body_bytes: usize,
    /// Upstream response timeout.
    pub upstream_timeout: Duration,
    /// Upstream connect timeout.
    pub connect_timeout: Duration,
    /// Lifetime of stored mixed-turn denials.
    pub splice_ttl: Duration,
    /// Capacity of the mixed-turn store.
    pub splice_capacity: usize,
    /// Serving threads; `None`: the CPUs the process may use.
    pub worker_threads: Option<usize>,
    /// How the serving threads share the work.
    pub scheduler: Scheduler,
    /// Limits of the embedded runtime.
    pub limits: Limits,
    /// How many programs run and wait at once.
    pub run_slots: RunSlots,
    /// Where programs run: confined worker processes or this process
    /// (`CODEMODE_SANDBOX`, `CODEMODE_SANDBOX_WORKER`).
    pub sandbox: Sandbox,
    /// Time limits on client connections.
    pub connections: ConnectionLimits,
    /// Silence allowed between frames of an upstream stream.
    pub upstream_idle_timeout: Duration,
    /// Largest upstream body read whole (a completion, an error).
    pub max_upstream_body_bytes: usize,
    /// Most upstream bytes one judged client stream takes in across its
    /// rounds: a bound on what its judge holds.
    pub max_stream_state_bytes: usize,
    /// How often a judged stream that waits on the proxy (a program's
    /// slot, its run, the model's next round) sends the client an SSE
    /// comment, so no idle timeout between them cuts it; `None`: never.
    pub stream_keepalive: Option<Duration>,
    /// Byte budgets of the in-memory stores and caches.
    pub budgets: StoreBudgets,
    /// How the binary writes its log lines (`CODEMODE_LOG_FORMAT`).
    pub log_format: crate::observe::LogFormat,
    /// The egress proxy for upstream connections (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`).
    pub egress: Egress,
    /// Where executions and stored denials live.
    pub store: StoreKind,
    /// The inspector (`/codemode/inspector`, `/codemode/api/*`): `None`
    /// when `CODEMODE_ADMIN_TOKEN` is unset, and then nothing is recorded.
    pub inspector: Option<InspectorConfig>,
    /// Who may call: the `Host` names and web origins beside loopback.
    pub callers: Callers,
}

/// Byte budgets: every cache and store is bounded by bytes, not entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreBudgets {
    /// Executions waiting for results, and ended ones kept for history.
    pub executions_bytes: u64,
    /// Mixed turns' denials.
    pub splices_bytes: u64,
    /// Rendered tool plans (SDK and sections).
    pub plans_bytes: u64,
}

impl Config {
    /// The mode of requests whose preset does not set one (`CODEMODE_MODE`).
    pub fn default_mode(&self) -> Mode {
        self.default_mode
    }

    /// The mode of a request that names no mode, preset or scope: the
    /// preset of the `default` scope's binding (else `standard`), or
    /// preset `path_preset` for one sent under `/preset/NAME` (as `run`
    /// points its command when given `--preset`).
    pub fn unselected_mode(&self, path_preset: Option<&str>) -> Mode {
        let preset = match path_preset {
            Some(name) => self.catalog.get(name),
            None => self
                .catalog
                .for_scope(crate::preset::DEFAULT_SCOPE)
                .or_else(|| self.catalog.get(crate::preset::DEFAULT_PRESET)),
        };
        preset.map_or(self.default_mode, |p| p.mode)
    }

    /// The names of the presets a request can select, in the order the
    /// picker tries them.
    pub fn preset_names(&self) -> Vec<&str> {
        self.catalog.names()
    }

    /// Reads the process environment.
    pub fn from_env() -> Result<Config, ConfigErrors> {
        Config::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads variables through `get`; unset and empty are the same.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigErrors> {
        let get = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let mut errors = Vec::new();
        let mut fail = |var: &'static str, message: String| {
            errors.push(ConfigError { var, message });
        };

        let listen = parse_or(
            &get,
            LISTEN,
            "127.0.0.1:8080".parse().ok(),
            &mut fail,
            |v| {
                v.parse::<SocketAddr>().map_err(|_| {
                    format!("`{v}` is not an address; use HOST:PORT such as 127.0.0.1:8080")
                })
            },
        );
        let callers = Callers::parse(&get, &mut fail);
        let sandbox = sandbox::from_lookup(&get, &mut fail);
        let default_upstream = UpstreamBase::parse("https://api.openai.com/v1").ok();
        let upstream = parse_or(
            &get,
            UPSTREAM,
            default_upstream,
            &mut fail,
            UpstreamBase::parse,
        );
        let default_mode = parse_or(&get, MODE, Some(Mode::Code), &mut fail, |v| {
            v.parse::<Mode>().map_err(|e| e.to_string())
        });
        let runtime = parse_or(
            &get,
            RUNTIME,
            Some(Runtime::Embedded),
            &mut fail,
            |v| match v.trim() {
                "embedded" => Ok(Runtime::Embedded),
                "client" => Ok(Runtime::Client),
                "none" => Ok(Runtime::None),
                other => Err(format!(
                    "`{other}` is not a runtime; use embedded, client or none"
                )),
            },
        );
        let default_sdk = parse_or(&get, SDK, Some(SdkStyle::Auto), &mut fail, |v| {
            v.parse::<SdkStyle>()
        });
        let max_repairs = parse_or(&get, MAX_REPAIRS, Some(2), &mut fail, |v| {
            v.trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n <= 10)
                .ok_or_else(|| format!("`{v}` is not a whole number from 0 to 10"))
        });
        let upstream_api_key =
            operator_key(&get, UPSTREAM_API_KEY, |k| format!("Bearer {k}"), &mut fail);
        let default_anthropic = UpstreamBase::parse("https://api.anthropic.com/v1").ok();
        let anthropic_upstream = parse_or(
            &get,
            ANTHROPIC_UPSTREAM,
            default_anthropic,
            &mut fail,
            UpstreamBase::parse,
        );
        let anthropic_api_key = operator_key(&get, ANTHROPIC_API_KEY, str::to_owned, &mut fail);
        let default_gemini = UpstreamBase::parse("https://generativelanguage.googleapis.com").ok();
        let gemini_upstream = parse_or(
            &get,
            GEMINI_UPSTREAM,
            default_gemini,
            &mut fail,
            UpstreamBase::parse,
        );
        let gemini_api_key = operator_key(&get, GEMINI_API_KEY, str::to_owned, &mut fail);
        let client_select = parse_or(
            &get,
            CLIENT_SELECT,
            Some(ClientSelect::Allow),
            &mut fail,
            |v| match v.trim() {
                "allow" => Ok(ClientSelect::Allow),
                "deny" => Ok(ClientSelect::Deny),
                other => Err(format!("`{other}` is neither allow nor deny")),
            },
        );
        let max_body_bytes = parse_or(&get, MAX_BODY_BYTES, Some(8 << 20), &mut fail, |v| {
            positive::<usize>(v, "a size in bytes")
        });
        let upstream_timeout = parse_or(&get, UPSTREAM_TIMEOUT_SECS, Some(600), &mut fail, |v| {
            positive::<u64>(v, "a number of seconds")
        });
        let connect_timeout = parse_or(&get, CONNECT_TIMEOUT_SECS, Some(10), &mut fail, |v| {
            positive::<u64>(v, "a number of seconds")
        });
        let splice_ttl = parse_or(&get, SPLICE_TTL_SECS, Some(3600), &mut fail, |v| {
            positive::<u64>(v, "a number of seconds")
        });
        let splice_capacity = parse_or(&get, SPLICE_CAPACITY, Some(10_000), &mut fail, |v| {
            positive::<usize>(v, "a number of entries")
        });
        let limits = run::limits(&get, &mut fail);
        let threads = threads::threads(&get, &mut fail);
        let run_slots = run::slots(&get, &mut fail);
        let connections = connections::limits(&get, &mut fail);
        let upstream_idle = parse_or(&get, UPSTREAM_IDLE_SECS, Some(300), &mut fail, |v| {
            bounded::<u64>(v, "a number of seconds", 24 * 3600)
        });
        let max_upstream_body = parse_or(
            &get,
            MAX_UPSTREAM_BODY_BYTES,
            Some(64 << 20),
            &mut fail,
            |v| bounded::<usize>(v, "a size in bytes", 4 << 30),
        );
        let max_stream_state = parse_or(
            &get,
            MAX_STREAM_STATE_BYTES,
            Some(DEFAULT_MAX_STREAM_STATE_BYTES),
            &mut fail,
            |v| bounded::<usize>(v, "a size in bytes", 16 << 30),
        );
        let stream_keepalive = parse_or(
            &get,
            STREAM_KEEPALIVE_MS,
            Some(DEFAULT_STREAM_KEEPALIVE_MS),
            &mut fail,
            |v| {
                v.trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n <= 600_000)
                    .ok_or_else(|| {
                        format!("`{v}` is not a number of milliseconds from 0 (never) to 600000")
                    })
            },
        );
        let mib = |var: &'static str, default: u64, fail: &mut dyn FnMut(&'static str, String)| {
            match get(var) {
                None => Some(default << 20),
                Some(v) => match bounded::<u64>(&v, "a number of MiB", 1 << 20) {
                    Ok(n) => Some(n << 20),
                    Err(e) => {
                        fail(var, e);
                        None
                    }
                },
            }
        };
        let budgets = match (
            mib(EXECUTION_STORE_MB, 256, &mut fail),
            mib(SPLICE_STORE_MB, 64, &mut fail),
            mib(PLAN_CACHE_MB, 64, &mut fail),
        ) {
            (Some(executions_bytes), Some(splices_bytes), Some(plans_bytes)) => {
                Some(StoreBudgets {
                    executions_bytes,
                    splices_bytes,
                    plans_bytes,
                })
            }
            _ => None,
        };
        let egress = Egress::from_lookup(&get, &mut fail);
        let store = StoreKind::from_lookup(&get, &mut fail);
        let inspector = inspector::from_lookup(&get, &mut fail);
        let log_format = parse_or(
            &get,
            LOG_FORMAT,
            Some(crate::observe::LogFormat::Text),
            &mut fail,
            crate::observe::LogFormat::parse,
        );
        let file = match get(CONFIG) {
            None => Some(ConfigFile::default()),
            Some(path) => match read_config_file(&path) {
                Ok(f) => Some(f),
                Err(e) => {
                    fail(CONFIG, e);
                    None
                }
            },
        };
        let catalog = match (file, default_mode, default_sdk) {
            (Some(file), Some(mode), Some(sdk)) => match Catalog::build_with(mode, sdk, file) {
                Ok(c) => Some(c),
                Err(problems) => {
                    for p in problems {
                        fail(CONFIG, p);
                    }
                    None
                }
            },
            _ => None,
        };
        if let (Some(catalog), Some(Runtime::None)) = (&catalog, runtime) {
            for e in runtime_conflicts(catalog) {
                errors.push(e);
            }
        }

        match (
            listen,
            upstream,
            default_mode,
            runtime,
            catalog,
            max_repairs,
            client_select,
            max_body_bytes,
            upstream_timeout,
            connect_timeout,
            splice_ttl,
            splice_capacity,
            threads,
            limits,
            (
                run_slots,
                connections,
                upstream_idle,
                max_upstream_body,
                max_stream_state,
                stream_keepalive,
                budgets,
                anthropic_upstream,
                egress,
                store,
                log_format,
                inspector,
                gemini_upstream,
            ),
        ) {
            (
                Some(listen),
                Some(upstream),
                Some(default_mode),
                Some(runtime),
                Some(catalog),
                Some(max_repairs),
                Some(client_select),
                Some(max_body_bytes),
                Some(upstream_timeout),
                Some(connect_timeout),
                Some(splice_ttl),
                Some(splice_capacity),
                Some((worker_threads, scheduler)),
                Some(limits),
                (
                    Some(run_slots),
                    Some(connections),
                    Some(upstream_idle),
                    Some(max_upstream_body_bytes),
                    Some(max_stream_state_bytes),
                    Some(stream_keepalive),
                    Some(budgets),
                    Some(anthropic_upstream),
                    Some(egress),
                    Some(store),
                    Some(log_format),
                    Some(inspector),
                    Some(gemini_upstream),
                ),
            ) if errors.is_empty() => Ok(Config {
                listen,
                upstream,
                default_mode,
                runtime,
                catalog,
                max_repairs,
                upstream_api_key,
                anthropic_upstream,
                anthropic_api_key,
                gemini_upstream,
                gemini_api_key,
                client_select,
                max_body_bytes,
                upstream_timeout: Duration::from_secs(upstream_timeout),
                connect_timeout: Duration::from_secs(connect_timeout),
                splice_ttl: Duration::from_secs(splice_ttl),
                splice_capacity,
                worker_threads,
                scheduler,
                limits,
                run_slots,
                sandbox,
                connections,
                upstream_idle_timeout: Duration::from_secs(upstream_idle),
                max_upstream_body_bytes,
                max_stream_state_bytes,
                stream_keepalive: (stream_keepalive > 0)
                    .then(|| Duration::from_millis(stream_keepalive)),
                budgets,
                egress,
                store,
                log_format,
                inspector,
                callers,
            }),
            _ => Err(ConfigErrors(errors)),
        }
    }
}

#[cfg(test)]
mod tests;
