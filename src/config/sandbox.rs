//! `CODEMODE_SANDBOX` and `CODEMODE_SANDBOX_WORKER`: whether programs run
//! in confined worker processes or on the proxy's own threads.

use std::path::PathBuf;

use super::{SANDBOX, SANDBOX_WORKER};
use crate::runtime::worker::{confinement_available, Sandbox};

/// The sandbox asked for, or the default: worker processes wherever the
/// kernel can confine them. A wrong value is recorded with `fail`.
pub(super) fn from_lookup(
    get: &impl Fn(&str) -> Option<String>,
    fail: &mut impl FnMut(&'static str, String),
) -> Sandbox {
    let asked = get(SANDBOX);
    let explicit = match asked.as_deref().map(str::trim) {
        None | Some("") => false,
        Some("process") => true,
        Some("in-process") => {
            return Sandbox::InProcess {
                why: format!("{SANDBOX}=in-process"),
            }
        }
        Some(other) => {
            fail(
                SANDBOX,
                format!("`{other}` is not a sandbox; use `process` or `in-process`"),
            );
            return Sandbox::InProcess { why: String::new() };
        }
    };
    if !confinement_available() {
        let why = "this system cannot confine a worker process (worker processes need Linux with seccomp)";
        if explicit {
            fail(SANDBOX, format!("{why}; set {SANDBOX}=in-process"));
        }
        return Sandbox::InProcess {
            why: why.to_owned(),
        };
    }
    let worker = match get(SANDBOX_WORKER) {
        Some(path) if !path.trim().is_empty() => PathBuf::from(path),
        // A unit-test binary is no worker: the library's own tests run
        // programs in process unless they name one.
        _ if cfg!(test) && !explicit => {
            return Sandbox::InProcess {
                why: "a unit-test build".to_owned(),
            }
        }
        _ => match std::env::current_exe() {
            Ok(exe) => exe,
            Err(e) => {
                fail(
                    SANDBOX_WORKER,
                    format!(
                        "this executable's path is unknown ({e}); set {SANDBOX_WORKER} to the codemode-proxy binary, or {SANDBOX}=in-process"
                    ),
                );
                return Sandbox::InProcess { why: String::new() };
            }
        },
    };
    Sandbox::Process { worker }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(vars: &[(&str, &str)]) -> (Sandbox, Vec<String>) {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut errors = Vec::new();
        let got = from_lookup(&|k: &str| map.get(k).cloned(), &mut |var, e| {
            errors.push(format!("{var}: {e}"))
        });
        (got, errors)
    }

    #[test]
    fn the_sandbox_is_read_and_a_wrong_value_names_the_choices() {
        let (got, errors) = read(&[(SANDBOX, "in-process")]);
        assert!(matches!(got, Sandbox::InProcess { .. }) && errors.is_empty());
        let (_, errors) = read(&[(SANDBOX, "jail")]);
        assert!(
            errors[0].contains("`process` or `in-process`"),
            "{errors:?}"
        );
        // A unit-test binary is no worker: by default its programs stay here.
        let (got, _) = read(&[]);
        assert!(matches!(got, Sandbox::InProcess { .. }));
        let (got, errors) = read(&[
            (SANDBOX, "process"),
            (SANDBOX_WORKER, "/opt/codemode-proxy"),
        ]);
        if confinement_available() {
            assert_eq!(
                got,
                Sandbox::Process {
                    worker: PathBuf::from("/opt/codemode-proxy")
                }
            );
        } else {
            assert!(errors[0].contains("in-process"), "{errors:?}");
        }
    }
}
