//! The environment variables the proxy reads, by name: below everything,
//! so a message can name the variable that changes what it reports (the
//! run pool's refusal names its two) without depending on [`crate::config`],
//! which reads them all and re-exports these names.

/// Address to bind.
pub const LISTEN: &str = "CODEMODE_LISTEN";
/// Provider base URL.
pub const UPSTREAM: &str = "CODEMODE_UPSTREAM";
/// Default tool mode.
pub const MODE: &str = "CODEMODE_MODE";
/// Where `run_code` runs.
pub const RUNTIME: &str = "CODEMODE_RUNTIME";
/// How the SDK renders each tool by default: `auto`, `full` or `compact`.
pub const SDK: &str = "CODEMODE_SDK";
/// Path of the TOML config file.
pub const CONFIG: &str = "CODEMODE_CONFIG";
/// Re-asks of the model per request after a denial.
pub const MAX_REPAIRS: &str = "CODEMODE_MAX_REPAIRS";
/// Bearer token sent upstream in place of the client's.
pub const UPSTREAM_API_KEY: &str = "CODEMODE_UPSTREAM_API_KEY";
/// Anthropic Messages API base URL.
pub const ANTHROPIC_UPSTREAM: &str = "CODEMODE_ANTHROPIC_UPSTREAM";
/// Key sent to the Anthropic upstream as `x-api-key` in place of the client's.
pub const ANTHROPIC_API_KEY: &str = "CODEMODE_ANTHROPIC_API_KEY";
/// The Gemini API's host (the path goes under it whole).
pub const GEMINI_UPSTREAM: &str = "CODEMODE_GEMINI_UPSTREAM";
/// Key sent to the Gemini upstream as `x-goog-api-key` in place of the client's.
pub const GEMINI_API_KEY: &str = "CODEMODE_GEMINI_API_KEY";
/// Whether clients may pick preset or mode per request.
pub const CLIENT_SELECT: &str = "CODEMODE_CLIENT_SELECT";
/// Largest request body the proxy reads on a judged route (every API) and a dry-run.
pub const MAX_BODY_BYTES: &str = "CODEMODE_MAX_BODY_BYTES";
/// Seconds to wait for upstream response headers (and a whole non-streamed body).
pub const UPSTREAM_TIMEOUT_SECS: &str = "CODEMODE_UPSTREAM_TIMEOUT_SECS";
/// Seconds to wait for a TCP/TLS connection to the upstream.
pub const CONNECT_TIMEOUT_SECS: &str = "CODEMODE_CONNECT_TIMEOUT_SECS";
/// Seconds a mixed turn's denials wait for the request that returns its results.
pub const SPLICE_TTL_SECS: &str = "CODEMODE_SPLICE_TTL_SECS";
/// How many mixed turns' denials are kept at once.
pub const SPLICE_CAPACITY: &str = "CODEMODE_SPLICE_CAPACITY";
/// CPU milliseconds of one run of a program.
pub const RUN_SLICE_MS: &str = "CODEMODE_RUN_SLICE_MS";
/// Seconds an execution may live across client round trips.
pub const RUN_LIFETIME_SECS: &str = "CODEMODE_RUN_LIFETIME_SECS";
/// Heap of one run, in MiB.
pub const RUN_MEMORY_MB: &str = "CODEMODE_RUN_MEMORY_MB";
/// Tool calls one program may make.
pub const RUN_MAX_CALLS: &str = "CODEMODE_RUN_MAX_CALLS";
/// Bytes of a program's result the model gets.
pub const RUN_MAX_OUTPUT: &str = "CODEMODE_RUN_MAX_OUTPUT";
/// Threads serving requests (default: the CPUs the process may use).
pub const WORKER_THREADS: &str = "CODEMODE_WORKER_THREADS";
/// How the serving threads share the work: `per-core` (the default) or `shared`.
pub const SCHEDULER: &str = "CODEMODE_SCHEDULER";
/// Programs that run at once (default: the CPUs the process may use).
pub const RUN_CONCURRENCY: &str = "CODEMODE_RUN_CONCURRENCY";
/// Programs that may wait for a free slot before new ones are refused.
pub const RUN_QUEUE: &str = "CODEMODE_RUN_QUEUE";
/// Milliseconds a program waits for a free slot before it is refused.
pub const RUN_QUEUE_TIMEOUT_MS: &str = "CODEMODE_RUN_QUEUE_TIMEOUT_MS";
/// Where programs run: `process` (confined worker processes, the default
/// where the kernel can confine them) or `in-process`.
pub const SANDBOX: &str = "CODEMODE_SANDBOX";
/// The executable a sandbox worker is started from (default: this one).
pub const SANDBOX_WORKER: &str = "CODEMODE_SANDBOX_WORKER";
/// Seconds a client may take to send a request's headers.
pub const HEADER_READ_TIMEOUT_SECS: &str = "CODEMODE_HEADER_READ_TIMEOUT_SECS";
/// Seconds an idle keep-alive connection stays open.
pub const KEEPALIVE_TIMEOUT_SECS: &str = "CODEMODE_KEEPALIVE_TIMEOUT_SECS";
/// Seconds an upstream stream may stay silent between frames.
pub const UPSTREAM_IDLE_SECS: &str = "CODEMODE_UPSTREAM_IDLE_SECS";
/// Largest upstream response body the proxy reads whole.
pub const MAX_UPSTREAM_BODY_BYTES: &str = "CODEMODE_MAX_UPSTREAM_BODY_BYTES";
/// Most upstream bytes one judged client stream takes in across its rounds.
pub const MAX_STREAM_STATE_BYTES: &str = "CODEMODE_MAX_STREAM_STATE_BYTES";
/// Milliseconds between SSE comments on a judged stream that waits on the proxy.
pub const STREAM_KEEPALIVE_MS: &str = "CODEMODE_STREAM_KEEPALIVE_MS";
/// MiB the in-memory execution store may hold.
pub const EXECUTION_STORE_MB: &str = "CODEMODE_EXECUTION_STORE_MB";
/// MiB the in-memory mixed-turn store may hold.
pub const SPLICE_STORE_MB: &str = "CODEMODE_SPLICE_STORE_MB";
/// MiB of rendered tool plans kept.
pub const PLAN_CACHE_MB: &str = "CODEMODE_PLAN_CACHE_MB";
/// Where executions and stored denials live: `memory` or a Redis URL.
pub const STORE: &str = "CODEMODE_STORE";
/// Prefix of every key the proxy writes in a shared store.
pub const STORE_PREFIX: &str = "CODEMODE_STORE_PREFIX";
/// `text` (default) or `json`: how the binary writes its log lines.
pub const LOG_FORMAT: &str = "CODEMODE_LOG_FORMAT";
/// Turns on the inspector (`/codemode/inspector`, `/codemode/api/*`) and is
/// the token that opens it.
pub const ADMIN_TOKEN: &str = "CODEMODE_ADMIN_TOKEN";
/// `on` shows tool arguments, results and console text in the inspector.
pub const INSPECTOR_PAYLOADS: &str = "CODEMODE_INSPECTOR_PAYLOADS";
/// MiB the inspector keeps of recent executions and denials.
pub const INSPECTOR_MB: &str = "CODEMODE_INSPECTOR_MB";
/// More names a request's `Host` may carry (a load balancer's, a DNS name),
/// beside the listen address and loopback; comma-separated.
pub const ALLOWED_HOSTS: &str = "CODEMODE_ALLOWED_HOSTS";
/// Web origins (`https://app.example`) whose pages may call the proxy;
/// comma-separated. Every other cross-site browser request is refused.
pub const ALLOWED_ORIGINS: &str = "CODEMODE_ALLOWED_ORIGINS";
