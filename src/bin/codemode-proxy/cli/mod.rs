//! The binary's subcommands beside serving: `run` (the proxy around one
//! command) and `configure` (an agent's settings pointed at a proxy).
//!
//! ```text
//! codemode-proxy run [--mode M] [--preset P] [--runtime R] [--config FILE] [--log FILE] -- claude
//! codemode-proxy configure codex --url http://127.0.0.1:8080
//! codemode-proxy configure codex --undo
//! codemode-proxy configure gemini --url http://127.0.0.1:8080
//! ```
//!
//! With no argument the binary serves, and `demo` is its own; `--help`
//! prints the usage, and any other word is refused (exit 2).

pub mod agents;
pub mod configure;
mod json_text;
mod private_file;
pub mod run;
mod signals;

use std::ffi::OsString;
use std::process::ExitCode;

use agents::Agent;
use configure::ConfigureArgs;
use run::RunArgs;

/// Usage, printed for `--help` and after a mistake.
pub const USAGE: &str = "\
usage:
  codemode-proxy                      serve (configured by CODEMODE_* variables)
  codemode-proxy run [--mode native|code|both] [--preset NAME] [--runtime embedded|client]
                     [--config FILE] [--log FILE] [--agent-code-mode] -- COMMAND [ARGS...]
  codemode-proxy configure claude|codex|opencode|gemini [--url URL] [--undo]
  codemode-proxy demo
";

/// A subcommand of this module, parsed.
#[derive(Debug, PartialEq, Eq)]
pub enum Subcommand {
    /// `run`.
    Run(RunArgs),
    /// `configure`.
    Configure(ConfigureArgs),
    /// `--help`, `-h` or `help`.
    Help,
}

/// Runs `run` or `configure` when `args` (without the program name) name
/// one; `None` leaves the command line to the binary.
pub fn dispatch(args: &[OsString]) -> Option<ExitCode> {
    match parse(args)? {
        Ok(Subcommand::Run(a)) => Some(run::run(a)),
        Ok(Subcommand::Configure(a)) => Some(configure::configure(a)),
        Ok(Subcommand::Help) => {
            print!("{USAGE}");
            Some(ExitCode::SUCCESS)
        }
        Err(message) => {
            eprintln!("codemode-proxy: {message}\n\n{USAGE}");
            Some(ExitCode::from(2))
        }
    }
}

/// Parses `args`; `None` when they leave it to the binary (nothing: serve;
/// `demo`). Any other word is a mistake: a typo must not start a proxy.
pub fn parse(args: &[OsString]) -> Option<Result<Subcommand, String>> {
    let first = args.first()?;
    Some(match first.to_str() {
        Some("demo") => return None,
        Some("run") => parse_run(&args[1..]).map(Subcommand::Run),
        Some("configure") => parse_configure(&args[1..]).map(Subcommand::Configure),
        Some("--help" | "-h" | "help") => Ok(Subcommand::Help),
        _ => Err(format!(
            "`{}` is not a command; the proxy itself takes no arguments (it reads CODEMODE_* variables)",
            first.to_string_lossy()
        )),
    })
}

/// The value after a flag, which must be text.
fn value(flag: &str, rest: &mut std::slice::Iter<'_, OsString>) -> Result<String, String> {
    rest.next()
        .and_then(|v| v.to_str())
        .map(str::to_owned)
        .ok_or_else(|| format!("{flag} needs a value"))
}

fn parse_run(args: &[OsString]) -> Result<RunArgs, String> {
    let mut out = RunArgs::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.to_str() {
            Some("--") => break,
            Some("--mode") => {
                let v = value("--mode", &mut rest)?;
                out.mode = Some(v.parse().map_err(|e| format!("--mode: {e}"))?);
            }
            Some("--preset") => out.preset = Some(value("--preset", &mut rest)?),
            Some("--runtime") => out.runtime = Some(value("--runtime", &mut rest)?),
            Some("--config") => out.config = Some(value("--config", &mut rest)?),
            Some("--log") => out.log = Some(value("--log", &mut rest)?.into()),
            Some("--agent-code-mode") => out.agent_code_mode = true,
            Some(flag) if flag.starts_with('-') => {
                return Err(format!("run: unknown flag `{flag}`"))
            }
            // The first word that is no flag starts the command.
            _ => {
                out.command.push(arg.clone());
                break;
            }
        }
    }
    out.command.extend(rest.cloned());
    if out.command.is_empty() {
        return Err("run needs a command, e.g. `codemode-proxy run -- claude`".into());
    }
    Ok(out)
}

fn parse_configure(args: &[OsString]) -> Result<ConfigureArgs, String> {
    let mut agent = None;
    let mut url = configure::DEFAULT_URL.to_owned();
    let mut undo = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.to_str() {
            Some("--url") => url = configure::normalize_url(&value("--url", &mut rest)?)?,
            Some("--undo") => undo = true,
            Some(name) if agent.is_none() && !name.starts_with('-') => {
                agent = Some(Agent::named(name).ok_or_else(|| {
                    format!(
                        "configure: `{name}` is not an agent; use claude, codex, opencode or gemini"
                    )
                })?);
            }
            _ => return Err(format!("configure: unexpected `{}`", arg.to_string_lossy())),
        }
    }
    let agent = agent.ok_or("configure needs an agent: claude, codex, opencode or gemini")?;
    Ok(ConfigureArgs { agent, url, undo })
}

#[cfg(test)]
mod tests {
    use super::*;
    use codemode_proxy::Mode;

    fn args(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn run_flags_stop_at_the_double_dash() {
        let parsed = parse(&args(&[
            "run", "--mode", "both", "--", "claude", "--mode", "x",
        ]));
        let Some(Ok(Subcommand::Run(a))) = parsed else {
            panic!("{parsed:?}")
        };
        assert_eq!(a.mode, Some(Mode::Both));
        assert_eq!(a.command, args(&["claude", "--mode", "x"]));
    }

    #[test]
    fn run_without_a_command_is_a_usage_error() {
        assert!(matches!(parse(&args(&["run", "--"])), Some(Err(_))));
    }

    #[test]
    fn serving_and_the_demo_are_left_to_the_binary() {
        assert!(parse(&args(&["demo"])).is_none());
        assert!(parse(&args(&[])).is_none());
    }

    #[test]
    fn help_is_usage_and_an_unknown_word_is_a_mistake() {
        for h in ["--help", "-h", "help"] {
            assert_eq!(parse(&args(&[h])), Some(Ok(Subcommand::Help)));
        }
        let Some(Err(e)) = parse(&args(&["--port", "9000"])) else {
            panic!("a typo must not start a proxy")
        };
        assert!(e.contains("`--port` is not a command"), "{e}");
    }

    #[test]
    fn configure_takes_an_agent_a_url_and_undo() {
        let parsed = parse(&args(&[
            "configure",
            "codex",
            "--url",
            "http://h:9/v1",
            "--undo",
        ]));
        let Some(Ok(Subcommand::Configure(c))) = parsed else {
            panic!("{parsed:?}")
        };
        assert_eq!(c.agent, Agent::Codex);
        assert_eq!(c.url, "http://h:9");
        assert!(c.undo);
    }
}
