//! The presets file (`CODEMODE_CONFIG`) as the configuration reads it, and
//! the presets whose mode needs a runtime that `CODEMODE_RUNTIME=none`
//! takes away.

use super::{ConfigError, CONFIG, MODE, RUNTIME};
use crate::preset::{Catalog, ConfigFile};

pub(super) fn read_config_file(path: &str) -> Result<ConfigFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read `{path}`: {e}"))?;
    toml::from_str(&text).map_err(|e| format!("`{path}` is not a valid config file: {e}"))
}

/// A code-capable mode needs a runtime: refuse at start-up, naming the row.
pub(super) fn runtime_conflicts(catalog: &Catalog) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    let mut default_named = false;
    for p in catalog.presets() {
        if !p.mode.is_code_capable() {
            continue;
        }
        match &p.mode_row {
            Some(row) => errors.push(ConfigError {
                var: RUNTIME,
                message: format!(
                    "preset `{}` has mode `{}` from the `tool_mode` row of preset `{row}`, which \
                     needs a runtime, but {RUNTIME}=none; set {RUNTIME}=embedded or client, or override \
                     preset `{row}` in {CONFIG} with tool_mode = \"native\"",
                    p.name, p.mode
                ),
            }),
            None if !default_named => {
                default_named = true;
                errors.push(ConfigError {
                    var: MODE,
                    message: format!(
                        "{MODE}={} needs a runtime, but {RUNTIME}=none; set {MODE}=native or {RUNTIME}=embedded",
                        p.mode
                    ),
                });
            }
            None => {}
        }
    }
    errors
}
