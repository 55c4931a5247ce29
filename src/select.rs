//! Per-request selection of scope, preset and mode (docs/presets.md).

use std::sync::Arc;

use http::HeaderMap;

use crate::error::ProxyError;
use crate::mode::Mode;
use crate::preset::{Catalog, Preset, DEFAULT_PRESET, DEFAULT_SCOPE};

/// Header naming the mode for one request.
pub const HEADER_MODE: &str = "x-codemode-mode";
/// Header naming the preset for one request.
pub const HEADER_PRESET: &str = "x-codemode-preset";
/// Header naming the agent scope.
pub const HEADER_SCOPE: &str = "x-codemode-scope";
/// Every header with this prefix is consumed by the proxy.
pub const HEADER_PREFIX: &str = "x-codemode-";

/// Whether a client may choose preset or mode per request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientSelect {
    /// Headers and path prefixes select.
    Allow,
    /// A request that tries to select is a 403.
    Deny,
}

/// What governs one request: the wire, the prompt and interception.
#[derive(Clone, Debug)]
pub struct Selection {
    /// The agent scope.
    pub scope: String,
    /// The resolved preset.
    pub preset: Arc<Preset>,
    /// The effective mode.
    pub mode: Mode,
}

/// Splits `/preset/NAME/rest` into `(NAME, /rest)`.
pub fn split_preset_path(path: &str) -> Option<(&str, &str)> {
    let after = path.strip_prefix("/preset/")?;
    let (name, rest) = match after.find('/') {
        Some(i) => after.split_at(i),
        None => (after, ""),
    };
    (!name.is_empty()).then_some((name, rest))
}

/// Resolves the selection; first match wins: mode header, named preset,
/// scope binding, `CODEMODE_MODE` (through the preset's inherited mode).
pub fn select(
    headers: &HeaderMap,
    path_preset: Option<&str>,
    catalog: &Catalog,
    policy: ClientSelect,
) -> Result<Selection, ProxyError> {
    let text = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().map(str::trim).unwrap_or("\u{fffd}"))
    };
    let mode_header = text(HEADER_MODE);
    let preset_header = text(HEADER_PRESET);
    let scope = text(HEADER_SCOPE)
        .filter(|s| !s.is_empty())
        .unwrap_or(DEFAULT_SCOPE)
        .to_owned();

    if policy == ClientSelect::Deny {
        if mode_header.is_some() {
            return Err(ProxyError::SelectionDenied("the mode (x-codemode-mode)"));
        }
        if preset_header.is_some() || path_preset.is_some() {
            return Err(ProxyError::SelectionDenied(
                "the preset (x-codemode-preset or /preset/NAME)",
            ));
        }
    }
    let named = preset_header.or(path_preset);
    let preset = match named {
        Some(name) => catalog
            .get(name)
            .ok_or_else(|| ProxyError::UnknownPreset {
                name: name.to_owned(),
                known: catalog.names().into_iter().map(str::to_owned).collect(),
            })?
            .clone(),
        None => match catalog
            .for_scope(&scope)
            .or_else(|| catalog.get(DEFAULT_PRESET))
        {
            Some(p) => p.clone(),
            None => {
                return Err(ProxyError::UnknownPreset {
                    name: DEFAULT_PRESET.to_owned(),
                    known: catalog.names().into_iter().map(str::to_owned).collect(),
                })
            }
        },
    };
    let mode = match mode_header {
        Some(m) => m
            .parse::<Mode>()
            .map_err(|_| ProxyError::InvalidModeHeader(m.to_owned()))?,
        None => preset.mode,
    };
    Ok(Selection {
        scope,
        preset,
        mode,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset::ConfigFile;

    fn catalog() -> Catalog {
        let file: ConfigFile = toml::from_str(
            "[[preset]]\nname = \"ro\"\ntool_mode = \"both\"\n[scopes]\nci = \"ro\"\n",
        )
        .unwrap();
        Catalog::build(Mode::Native, file).unwrap()
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn resolution_order_is_mode_header_preset_scope_default() {
        let c = catalog();
        let s = select(&headers(&[]), None, &c, ClientSelect::Allow).unwrap();
        assert_eq!(
            (s.preset.name.as_str(), s.mode, s.scope.as_str()),
            ("standard", Mode::Native, "default")
        );
        let s = select(
            &headers(&[(HEADER_SCOPE, "ci")]),
            None,
            &c,
            ClientSelect::Allow,
        )
        .unwrap();
        assert_eq!((s.preset.name.as_str(), s.mode), ("ro", Mode::Both));
        let s = select(
            &headers(&[(HEADER_SCOPE, "ci")]),
            Some("code"),
            &c,
            ClientSelect::Allow,
        )
        .unwrap();
        assert_eq!((s.preset.name.as_str(), s.mode), ("code", Mode::Code));
        let h = headers(&[
            (HEADER_SCOPE, "ci"),
            (HEADER_PRESET, "code"),
            (HEADER_MODE, "native"),
        ]);
        let s = select(&h, None, &c, ClientSelect::Allow).unwrap();
        assert_eq!((s.preset.name.as_str(), s.mode), ("code", Mode::Native));
    }

    #[test]
    fn deny_policy_refuses_selection_but_keeps_scopes() {
        let c = catalog();
        let err = select(
            &headers(&[(HEADER_MODE, "code")]),
            None,
            &c,
            ClientSelect::Deny,
        )
        .unwrap_err();
        assert_eq!(err.status(), http::StatusCode::FORBIDDEN);
        assert!(select(&headers(&[]), Some("code"), &c, ClientSelect::Deny).is_err());
        let s = select(
            &headers(&[(HEADER_SCOPE, "ci")]),
            None,
            &c,
            ClientSelect::Deny,
        )
        .unwrap();
        assert_eq!(s.preset.name, "ro");
    }

    #[test]
    fn an_unbound_scope_cannot_leave_the_default_binding() {
        let file: ConfigFile = toml::from_str(
            "[[preset]]\nname = \"safe\"\ndeny = [\"bash\"]\n[scopes]\ndefault = \"safe\"\n",
        )
        .unwrap();
        let c = Catalog::build(Mode::Native, file).unwrap();
        for policy in [ClientSelect::Deny, ClientSelect::Allow] {
            let s = select(
                &headers(&[(HEADER_SCOPE, "anything-else")]),
                None,
                &c,
                policy,
            )
            .unwrap();
            assert_eq!(s.preset.name, "safe", "{policy:?}");
            assert_eq!(s.scope, "anything-else");
        }
    }

    #[test]
    fn unknown_presets_and_modes_are_clear_errors() {
        let c = catalog();
        let err = select(
            &headers(&[(HEADER_PRESET, "nope")]),
            None,
            &c,
            ClientSelect::Allow,
        )
        .unwrap_err();
        assert!(err.to_string().contains("standard, code, ro"), "{err}");
        let err = select(
            &headers(&[(HEADER_MODE, "fast")]),
            None,
            &c,
            ClientSelect::Allow,
        )
        .unwrap_err();
        assert_eq!(err.code(), "invalid_mode");
    }

    #[test]
    fn preset_paths_split() {
        assert_eq!(
            split_preset_path("/preset/code/v1/chat/completions"),
            Some(("code", "/v1/chat/completions"))
        );
        assert_eq!(split_preset_path("/preset//v1"), None);
        assert_eq!(split_preset_path("/v1/models"), None);
        assert_eq!(split_preset_path("/preset/code"), Some(("code", "")));
    }
}
