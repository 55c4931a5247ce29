//! `codemode-proxy run [flags] -- COMMAND [ARGS...]`: the proxy in this
//! process on a free loopback port, the command as a child pointed at it.
//!
//! The child keeps the terminal (stdin, stdout, stderr are its own); the
//! proxy's log lines go to a file. When the child ends, one summary line
//! on stderr, and the process exits with the child's code (128 + the
//! signal when a signal ended it).

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::process::{ExitCode, ExitStatus};
use std::time::Duration;

use tokio::process::Command;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use super::agents::{self, Agent, BaseUrls, Refused};
use crate::vars::GEMINI_API_KEY as OPERATOR_GEMINI_KEY;
use crate::vars::{ANTHROPIC_UPSTREAM, CONFIG, GEMINI_UPSTREAM, LISTEN, MODE, RUNTIME, UPSTREAM};
use codemode_proxy::observe::{logging, Totals};
use codemode_proxy::{Config, Mode};

/// What `run` was asked to do.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RunArgs {
    /// `--mode`: the default tool mode (`CODEMODE_MODE`).
    pub mode: Option<Mode>,
    /// `--preset`: the preset the child's base URLs select (`/preset/NAME`).
    pub preset: Option<String>,
    /// `--runtime`: where programs run (`CODEMODE_RUNTIME`).
    pub runtime: Option<String>,
    /// `--config`: the presets file (`CODEMODE_CONFIG`).
    pub config: Option<String>,
    /// `--log`: where the proxy's log lines go.
    pub log: Option<PathBuf>,
    /// `--agent-code-mode`: keep an agent's own code mode (Codex's `exec`)
    /// instead of giving its models direct tools for the proxy's.
    pub agent_code_mode: bool,
    /// The command and its arguments.
    pub command: Vec<OsString>,
}

/// Runs the command behind the proxy; the child's exit code.
pub fn run(args: RunArgs) -> ExitCode {
    let config = match config(&args, |k| std::env::var(k).ok()) {
        Ok(c) => c,
        Err(message) => {
            eprint!("{message}");
            return ExitCode::from(2);
        }
    };
    // A new private file: a name someone could guess is never followed
    // into a file (or a link) they planted.
    let log_path = args.log.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!(
            "codemode-proxy-run-{}-{}.log",
            std::process::id(),
            &super::private_file::unguessable()[..12]
        ))
    });
    let log = match super::private_file::create_new(&log_path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!(
                "codemode-proxy: cannot write the log file {}: {e}",
                log_path.display()
            );
            return ExitCode::from(2);
        }
    };
    eprintln!("codemode-proxy: proxy logs in {}", log_path.display());
    tracing_subscriber::registry()
        .with(logging::file_layer(config.log_format, log))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.worker_threads.unwrap_or(2))
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("codemode-proxy: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let agent = args.command.first().and_then(|p| Agent::of_program(p));
    let outcome = runtime.block_on(serve_and_run(config, &args));
    runtime.shutdown_timeout(Duration::from_secs(1));
    match outcome {
        Ok((status, totals)) => {
            eprintln!("{}", summary(&totals));
            for line in refusal_hints(&totals, agent) {
                eprintln!("{line}");
            }
            exit_code(status)
        }
        Err(Failure::Start(e)) => {
            eprintln!("codemode-proxy: cannot start the proxy: {e}");
            ExitCode::FAILURE
        }
        Err(Failure::Prepare(e)) => {
            eprintln!("codemode-proxy: {e}");
            ExitCode::FAILURE
        }
        Err(Failure::Spawn(e)) => {
            let program = args.command[0].to_string_lossy();
            eprintln!("codemode-proxy: cannot run `{program}`: {e}");
            // As a shell says it: 127 not found, 126 found but not runnable.
            ExitCode::from(if e.kind() == io::ErrorKind::NotFound {
                127
            } else {
                126
            })
        }
    }
}

/// The configuration: the environment as the binary reads it, with the
/// flags over it and a free loopback port. A base URL the user had set
/// for the agent becomes the proxy's upstream, unless the proxy's own
/// variable names one.
pub fn config(args: &RunArgs, env: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
    let over = overrides(args, &env);
    let config = Config::from_lookup(|k| {
        over.iter()
            .find(|(name, _)| *name == k)
            .map(|(_, v)| v.clone())
            .or_else(|| env(k))
    })
    .map_err(|e| e.to_string())?;
    if let Some(preset) = &args.preset {
        if !config.preset_names().contains(&preset.as_str()) {
            return Err(format!(
                "codemode-proxy: --preset `{preset}` is not a preset; known: {}\n",
                config.preset_names().join(", ")
            ));
        }
    }
    Ok(config)
}

/// The variables `run` sets over the environment for the proxy: the flags,
/// a free loopback port, and the agents' own base URLs as upstreams.
fn overrides(args: &RunArgs, env: &impl Fn(&str) -> Option<String>) -> Vec<(&'static str, String)> {
    let set = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    let mut over: Vec<(&str, String)> = vec![(LISTEN, "127.0.0.1:0".into())];
    if let Some(mode) = args.mode {
        over.push((MODE, mode.as_str().into()));
    }
    if let Some(runtime) = &args.runtime {
        over.push((RUNTIME, runtime.clone()));
    }
    if let Some(file) = &args.config {
        over.push((CONFIG, file.clone()));
    }
    if set(UPSTREAM).is_none() {
        if let Some(url) = set("OPENAI_BASE_URL") {
            over.push((UPSTREAM, url));
        }
    }
    if set(ANTHROPIC_UPSTREAM).is_none() {
        if let Some(url) = set("ANTHROPIC_BASE_URL") {
            over.push((
                ANTHROPIC_UPSTREAM,
                format!("{}/v1", url.trim_end_matches('/')),
            ));
        }
    }
    // Google's JavaScript SDK and gemini-cli append the whole `/v1beta/...`
    // path to this root, as the proxy does to its Gemini upstream.
    if set(GEMINI_UPSTREAM).is_none() {
        if let Some(url) = set(agents::GOOGLE_GEMINI_BASE_URL) {
            over.push((GEMINI_UPSTREAM, url.trim_end_matches('/').to_owned()));
        }
    }
    over
}

enum Failure {
    Start(io::Error),
    /// What the agent needs could not be laid out (gemini-cli's home).
    Prepare(String),
    Spawn(io::Error),
}

async fn serve_and_run(config: Config, args: &RunArgs) -> Result<(ExitStatus, Totals), Failure> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(Failure::Start)?;
    let addr = listener.local_addr().map_err(Failure::Start)?;
    tracing::info!(
        upstream = %config.upstream,
        anthropic_upstream = %config.anthropic_upstream,
        gemini_upstream = %config.gemini_upstream,
        mode = %config.default_mode(),
        "codemode-proxy run listening on http://{addr}"
    );
    // What Claude Code's tool search should be under this proxy, read
    // before the configuration goes into the stack.
    let tool_search = agents::claude_tool_search(
        config.unselected_mode(args.preset.as_deref()),
        config.anthropic_upstream.authority().host() == ANTHROPIC_API_HOST,
    );
    let service = codemode_proxy::server::stack(config).map_err(Failure::Start)?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(codemode_proxy::server::serve(
        listener,
        service.clone(),
        async {
            let _ = stopped.await;
        },
    ));
    let urls = BaseUrls::new(&format!("http://{addr}"), args.preset.as_deref());
    let mut scratch = None;
    let mut overrides = Vec::new();
    match Agent::of_program(&args.command[0]) {
        Some(Agent::Codex) if !args.agent_code_mode => match direct_tools(&args.command[0]) {
            Ok((dir, catalog)) => {
                scratch = Some(dir);
                overrides = catalog;
            }
            // An older Codex: its own code mode, if it has one, is respected.
            Err(e) => tracing::warn!("Codex keeps its own tool mode: {e}"),
        },
        Some(Agent::Gemini) => match gemini_home() {
            Ok(dir) => scratch = Some(dir),
            Err(e) => {
                let _ = stop.send(());
                return Err(Failure::Prepare(format!(
                    "cannot lay out gemini-cli's settings for the run: {e}"
                )));
            }
        },
        _ => {}
    }
    let mut cmd = command(&args.command, &urls, overrides, scratch.as_deref());
    if Agent::of_program(&args.command[0]) == Some(Agent::Claude) {
        claude_tool_search(&mut cmd, tool_search);
    }
    let spawned = cmd.spawn().map_err(Failure::Spawn);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            remove_scratch(scratch);
            return Err(e);
        }
    };
    let status = super::signals::wait_forwarding(&mut child).await;
    let _ = stop.send(());
    // The child is gone, so are its connections; a stray one is not waited for.
    let _ = tokio::time::timeout(Duration::from_secs(2), server).await;
    remove_scratch(scratch);
    let status = status.map_err(Failure::Spawn)?;
    Ok((status, service.totals()))
}

/// The host of Anthropic's own API (the default Anthropic upstream).
const ANTHROPIC_API_HOST: &str = "api.anthropic.com";

/// Sets Claude Code's `ENABLE_TOOL_SEARCH` to `value`
/// ([`agents::claude_tool_search`]), unless the user set it: theirs wins.
fn claude_tool_search(cmd: &mut Command, value: Option<&'static str>) {
    let own = std::env::var_os(agents::ENABLE_TOOL_SEARCH).filter(|v| !v.is_empty());
    match (own, value) {
        (Some(own), _) => tracing::info!(
            "Claude Code keeps its own {}={}",
            agents::ENABLE_TOOL_SEARCH,
            own.to_string_lossy()
        ),
        (None, Some(value)) => {
            tracing::info!("Claude Code gets {}={value}", agents::ENABLE_TOOL_SEARCH);
            cmd.env(agents::ENABLE_TOOL_SEARCH, value);
        }
        (None, None) => {}
    }
}

/// A private folder holding Codex's catalog with direct tools for every
/// model, and the overrides that name it.
fn direct_tools(program: &std::ffi::OsStr) -> Result<(PathBuf, Vec<OsString>), String> {
    let dir = super::private_file::new_dir("run").map_err(|e| e.to_string())?;
    let path = dir.join("codex-models.json");
    match agents::codex_direct_catalog(program, &path) {
        Ok(()) => Ok((dir, agents::codex_catalog_override(&path))),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(e)
        }
    }
}

/// A private folder gemini-cli takes for its home during the run
/// ([`agents::gemini_home`]): the user's own `.gemini` through links, and
/// their settings with the Gemini API key auth selected.
fn gemini_home() -> Result<PathBuf, String> {
    let dir = super::private_file::new_dir("gemini").map_err(|e| e.to_string())?;
    let own = [agents::GEMINI_CLI_HOME, "HOME"]
        .into_iter()
        .find_map(|k| std::env::var_os(k).filter(|v| !v.is_empty()))
        .map(PathBuf::from);
    match agents::gemini_home(&dir, own.as_deref()) {
        Ok(()) => Ok(dir),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(format!("{}: {e}", dir.display()))
        }
    }
}

fn remove_scratch(dir: Option<PathBuf>) {
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The child: the command with the base URLs, and what its agent reads
/// (`codex_extra`: more of Codex's global `-c` overrides; `scratch`: the
/// private folder made for it, gemini-cli's home).
fn command(
    command: &[OsString],
    urls: &BaseUrls,
    codex_extra: Vec<OsString>,
    scratch: Option<&std::path::Path>,
) -> Command {
    let (program, rest) = command
        .split_first()
        .expect("the parser requires a command");
    let mut cmd = Command::new(program);
    let agent = Agent::of_program(program);
    if agent == Some(Agent::Codex) {
        // Codex's `-c` is global: it may come before the subcommand.
        let key = std::env::var_os("OPENAI_API_KEY")
            .filter(|v| !v.is_empty())
            .map(|_| "OPENAI_API_KEY");
        cmd.args(agents::codex_overrides(urls, key));
        cmd.args(codex_extra);
    }
    cmd.args(rest)
        .env("OPENAI_BASE_URL", &urls.openai)
        .env("ANTHROPIC_BASE_URL", &urls.anthropic)
        .env(agents::GOOGLE_GEMINI_BASE_URL, &urls.gemini);
    // The proxy has read its secrets; the agent (and a model driving its
    // shell) never sees them.
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(is_secret) {
            cmd.env_remove(name);
        }
    }
    if let (Some(Agent::Gemini), Some(home)) = (agent, scratch) {
        let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
        for (name, value) in
            agents::gemini_env(home, set(agents::GEMINI_API_KEY), set(OPERATOR_GEMINI_KEY))
        {
            cmd.env(name, value);
        }
    }
    if agent == Some(Agent::Opencode) {
        let own = std::env::var(agents::OPENCODE_CONFIG_CONTENT).ok();
        cmd.env(
            agents::OPENCODE_CONFIG_CONTENT,
            agents::opencode_config(urls, own.as_deref()),
        );
    }
    cmd
}

/// Whether a variable holds one of the proxy's secrets: a key, a token, a
/// password, or the store's URL (which may carry one).
fn is_secret(name: &str) -> bool {
    name.strip_prefix("CODEMODE_").is_some_and(|rest| {
        rest == "STORE"
            || ["KEY", "TOKEN", "PASSWORD", "SECRET"]
                .iter()
                .any(|w| rest.split('_').any(|part| part == *w))
    })
}

/// The one line printed when the child ends.
pub fn summary(t: &Totals) -> String {
    fn n(count: u64, one: &str, many: &str) -> String {
        format!("{count} {}", if count == 1 { one } else { many })
    }
    // Which code mode ran: the proxy's programs, or the agent's own.
    let agents_own = if t.client_code_requests > 0 {
        format!(
            " ({} in the agent's own code mode)",
            n(t.client_code_requests, "request", "requests")
        )
    } else {
        String::new()
    };
    format!(
        "codemode-proxy: {}{agents_own}, {}, {}, {}, {}",
        n(t.programs, "program run", "programs run"),
        n(t.nested_calls, "nested call", "nested calls"),
        n(
            t.round_trips_saved,
            "model round trip saved",
            "model round trips saved"
        ),
        n(
            t.context_bytes_saved,
            "context byte saved",
            "context bytes saved"
        ),
        n(t.denials, "denial", "denials"),
    )
}

/// A line for each API whose provider refused the credential, naming
/// what the agent needs.
pub fn refusal_hints(t: &Totals, agent: Option<Agent>) -> Vec<String> {
    [
        (t.refused_anthropic, Refused::Anthropic, "Anthropic"),
        (t.refused_openai, Refused::OpenAi, "OpenAI"),
        (t.refused_gemini, Refused::Gemini, "Gemini"),
    ]
    .into_iter()
    .filter(|(n, _, _)| *n > 0)
    .map(|(n, refused, api)| {
        let hint = match agent {
            Some(a) => a.credential_hint(refused),
            None => agents::generic_hint(refused),
        };
        format!("codemode-proxy: the {api} provider refused the credential ({n}x 401/403): {hint}")
    })
    .collect()
}

fn exit_code(status: ExitStatus) -> ExitCode {
    if let Some(code) = status.code() {
        return ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1));
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return ExitCode::from(u8::try_from(128 + signal).unwrap_or(255));
        }
    }
    ExitCode::FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_told_by_their_names() {
        for name in [
            "CODEMODE_UPSTREAM_API_KEY",
            "CODEMODE_ANTHROPIC_API_KEY",
            "CODEMODE_GEMINI_API_KEY",
            "CODEMODE_ADMIN_TOKEN",
            "CODEMODE_STORE",
        ] {
            assert!(is_secret(name), "{name}");
        }
        for name in [
            "CODEMODE_MODE",
            "CODEMODE_UPSTREAM",
            "CODEMODE_STORE_TTL_SECS",
            "OPENAI_API_KEY",
        ] {
            assert!(!is_secret(name), "{name}");
        }
    }

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn run_listens_on_a_free_loopback_port_with_the_flags_over_the_environment() {
        let args = RunArgs {
            mode: Some(Mode::Both),
            ..Default::default()
        };
        let c = config(
            &args,
            env(&[
                ("CODEMODE_MODE", "native"),
                ("CODEMODE_LISTEN", "0.0.0.0:80"),
            ]),
        )
        .unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:0");
        assert_eq!(c.default_mode(), Mode::Both);
    }

    #[test]
    fn the_agents_own_base_url_becomes_the_upstream() {
        let c = config(
            &RunArgs::default(),
            env(&[("ANTHROPIC_BASE_URL", "http://gw.example/")]),
        )
        .unwrap();
        assert_eq!(c.anthropic_upstream.to_string(), "http://gw.example/v1");
    }

    #[test]
    fn the_users_gemini_base_url_becomes_the_gemini_upstream_whole() {
        let over = overrides(
            &RunArgs::default(),
            &env(&[("GOOGLE_GEMINI_BASE_URL", "https://gw.example/google/")]),
        );
        assert!(
            over.contains(&(GEMINI_UPSTREAM, "https://gw.example/google".to_owned())),
            "{over:?}"
        );
        let c = config(
            &RunArgs::default(),
            env(&[("GOOGLE_GEMINI_BASE_URL", "https://gw.example/google/")]),
        )
        .unwrap();
        assert_eq!(c.gemini_upstream.to_string(), "https://gw.example/google");
        let over = overrides(
            &RunArgs::default(),
            &env(&[
                ("GOOGLE_GEMINI_BASE_URL", "https://gw.example"),
                ("CODEMODE_GEMINI_UPSTREAM", "https://mine.example"),
            ]),
        );
        assert!(
            over.iter().all(|(k, _)| *k != GEMINI_UPSTREAM),
            "the proxy's own variable wins: {over:?}"
        );
    }

    #[test]
    fn an_unknown_preset_names_the_known_ones() {
        let args = RunArgs {
            preset: Some("nope".into()),
            ..Default::default()
        };
        let e = config(&args, env(&[])).unwrap_err();
        assert!(e.contains("standard, code"), "{e}");
    }

    #[test]
    fn the_summary_counts_in_words() {
        let t = Totals {
            programs: 1,
            nested_calls: 2,
            round_trips_saved: 1,
            context_bytes_saved: 10,
            ..Default::default()
        };
        assert_eq!(
            summary(&t),
            "codemode-proxy: 1 program run, 2 nested calls, 1 model round trip saved, 10 context bytes saved, 0 denials"
        );
    }

    #[test]
    fn a_refused_credential_names_what_the_agent_needs() {
        let t = Totals {
            refused_anthropic: 1,
            ..Default::default()
        };
        let hints = refusal_hints(&t, Some(Agent::Claude));
        assert_eq!(hints.len(), 1);
        assert!(hints[0].contains("ANTHROPIC_API_KEY") && hints[0].contains("/login"));
        let gemini = Agent::Gemini.credential_hint(Refused::Gemini);
        assert!(gemini.contains("GEMINI_API_KEY") && gemini.contains("CODEMODE_GEMINI_API_KEY"));
    }
}
