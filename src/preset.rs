//! Presets, prompt sections and scope bindings (docs/presets.md).
//!
//! A [`Catalog`] is built once at start-up from the built-ins and the
//! optional `CODEMODE_CONFIG` file; every `extends` chain is resolved then,
//! so a request only looks presets up.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::mode::Mode;
use crate::sdk::SdkStyle;

/// A piece of system prompt.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// Stable identifier; `tool:<name>` sections render only when `<name>` is visible.
    pub id: String,
    /// Sections render in ascending order.
    pub order: i32,
    /// The text appended to the system prompt.
    pub text: String,
}

impl Section {
    /// The tool a `tool:<name>` section is about.
    pub fn tool(&self) -> Option<&str> {
        self.id.strip_prefix("tool:")
    }
}

/// One preset as written in the config file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresetSpec {
    /// The preset's name, used in headers and path prefixes.
    pub name: String,
    /// The preset this one starts from.
    pub extends: Option<String>,
    /// The mode row; absent means inherit.
    pub tool_mode: Option<String>,
    /// Only these client tools are visible (absent: all).
    pub allow: Option<Vec<String>>,
    /// These client tools are never visible.
    pub deny: Option<Vec<String>>,
    /// How the SDK renders each tool: `full` or `compact`; absent means inherit.
    pub sdk: Option<String>,
    /// Sections of this preset.
    #[serde(default, rename = "section")]
    pub sections: Vec<Section>,
}

/// The config file (`CODEMODE_CONFIG`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Presets in picker order; a built-in name overrides the built-in in place.
    #[serde(default, rename = "preset")]
    pub presets: Vec<PresetSpec>,
    /// Sections every preset carries.
    #[serde(default, rename = "section")]
    pub sections: Vec<Section>,
    /// Scope name to preset name.
    #[serde(default)]
    pub scopes: HashMap<String, String>,
}

/// A preset with its `extends` chain resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preset {
    /// The preset's name.
    pub name: String,
    /// The preset it extends, as written.
    pub extends: Option<String>,
    /// The effective mode (an inherited mode resolved to the default).
    pub mode: Mode,
    /// The preset whose `tool_mode` row sets the mode; `None` when inherited from `CODEMODE_MODE`.
    pub mode_row: Option<String>,
    /// Sections, global ones first, a later one replacing an earlier one of the same id.
    pub sections: Vec<Section>,
    /// When set, only these client tools are visible.
    pub allow: Option<BTreeSet<String>>,
    /// Client tools that are never visible.
    pub deny: BTreeSet<String>,
    /// How the SDK renders each tool (inherited, else `CODEMODE_SDK`).
    pub sdk: SdkStyle,
}

impl Preset {
    /// Whether the preset's allow/deny lists hide any of the client's tools.
    pub fn restricts_tools(&self) -> bool {
        self.allow.is_some() || !self.deny.is_empty()
    }

    /// Whether client tool `name` is visible under this preset.
    pub fn shows(&self, name: &str) -> bool {
        !self.deny.contains(name) && self.allow.as_ref().is_none_or(|a| a.contains(name))
    }
}

/// All presets in picker order, and the scope bindings.
#[derive(Clone, Debug)]
pub struct Catalog {
    presets: Vec<Arc<Preset>>,
    scopes: HashMap<String, String>,
}

/// The name of the preset a request gets when nothing selects one.
pub const DEFAULT_PRESET: &str = "standard";
/// The scope of a request that names none; its binding is every unbound
/// scope's ([`Catalog::for_scope`]).
pub const DEFAULT_SCOPE: &str = "default";

impl Catalog {
    /// The built-ins alone, with `default_mode` as the inherited mode
    /// (tests and benchmarks; a `Config` builds its catalog itself).
    #[cfg(any(test, feature = "bench-internals"))]
    pub fn builtin(default_mode: Mode) -> Catalog {
        match Catalog::build(default_mode, ConfigFile::default()) {
            Ok(c) => c,
            // The built-ins are valid by construction; an empty catalog is the total fallback.
            Err(_) => Catalog {
                presets: Vec::new(),
                scopes: HashMap::new(),
            },
        }
    }

    /// Resolves the built-ins plus `file`; every problem is returned at once.
    #[cfg(any(test, feature = "bench-internals"))]
    pub fn build(default_mode: Mode, file: ConfigFile) -> Result<Catalog, Vec<String>> {
        Catalog::build_with(default_mode, SdkStyle::default(), file)
    }

    /// [`Catalog::build`], with `default_sdk` for presets whose chain sets no `sdk`.
    pub fn build_with(
        default_mode: Mode,
        default_sdk: SdkStyle,
        file: ConfigFile,
    ) -> Result<Catalog, Vec<String>> {
        let mut errors = Vec::new();
        let mut specs = builtin_specs();
        for spec in file.presets {
            match specs.iter_mut().find(|s| s.name == spec.name) {
                Some(slot) if is_builtin(&spec.name) => *slot = spec,
                Some(_) => errors.push(format!("preset `{}` is defined twice", spec.name)),
                None => specs.push(spec),
            }
        }
        for s in file
            .sections
            .iter()
            .chain(specs.iter().flat_map(|p| &p.sections))
        {
            if s.tool().is_some() && !(100..=199).contains(&s.order) {
                errors.push(format!(
                    "section `{}` has order {}; tool sections take an order from 100 to 199",
                    s.id, s.order
                ));
            }
        }
        let mut presets = Vec::with_capacity(specs.len());
        for spec in &specs {
            match resolve(spec, &specs, (default_mode, default_sdk), &file.sections) {
                Ok(p) => presets.push(Arc::new(p)),
                Err(e) => errors.push(e),
            }
        }
        let mut scopes: Vec<_> = file.scopes.iter().collect();
        scopes.sort();
        for (scope, preset) in scopes {
            if !specs.iter().any(|s| &s.name == preset) {
                errors.push(format!(
                    "scope `{scope}` is bound to preset `{preset}`, which does not exist"
                ));
            }
        }
        if errors.is_empty() {
            Ok(Catalog {
                presets,
                scopes: file.scopes,
            })
        } else {
            Err(errors)
        }
    }

    /// The preset called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Preset>> {
        self.presets.iter().find(|p| p.name == name)
    }

    /// The preset bound to `scope`; an unbound scope gets the binding of
    /// the `default` scope, so naming another scope never leaves the
    /// operator's binding (docs/security.md). `None` when neither is bound.
    pub fn for_scope(&self, scope: &str) -> Option<&Arc<Preset>> {
        self.scopes
            .get(scope)
            .or_else(|| self.scopes.get(DEFAULT_SCOPE))
            .and_then(|name| self.get(name))
    }

    /// Presets in picker order.
    pub fn presets(&self) -> &[Arc<Preset>] {
        &self.presets
    }

    /// The scopes the config binds to a preset, sorted.
    pub fn scopes(&self) -> Vec<&str> {
        let mut scopes: Vec<&str> = self.scopes.keys().map(String::as_str).collect();
        scopes.sort_unstable();
        scopes
    }

    /// Preset names in picker order, for error messages.
    pub fn names(&self) -> Vec<&str> {
        self.presets.iter().map(|p| p.name.as_str()).collect()
    }
}

fn is_builtin(name: &str) -> bool {
    matches!(name, "standard" | "code")
}

fn builtin_specs() -> Vec<PresetSpec> {
    vec![
        PresetSpec {
            name: "standard".into(),
            ..PresetSpec::default()
        },
        PresetSpec {
            name: "code".into(),
            extends: Some("standard".into()),
            tool_mode: Some("code".into()),
            ..PresetSpec::default()
        },
    ]
}

fn resolve(
    spec: &PresetSpec,
    specs: &[PresetSpec],
    (default_mode, default_sdk): (Mode, SdkStyle),
    global: &[Section],
) -> Result<Preset, String> {
    // The chain from the root ancestor down to `spec`.
    let mut chain = vec![spec];
    while let Some(parent) = chain.last().and_then(|s| s.extends.as_deref()) {
        let Some(p) = specs.iter().find(|s| s.name == parent) else {
            return Err(format!(
                "preset `{}` extends `{parent}`, which does not exist",
                spec.name
            ));
        };
        if chain.iter().any(|s| s.name == p.name) {
            return Err(format!("preset `{}` has an `extends` cycle", spec.name));
        }
        chain.push(p);
    }
    chain.reverse();
    let mut preset = Preset {
        name: spec.name.clone(),
        extends: spec.extends.clone(),
        mode: default_mode,
        mode_row: None,
        sections: global.to_vec(),
        allow: None,
        deny: BTreeSet::new(),
        sdk: default_sdk,
    };
    for s in chain {
        if let Some(m) = &s.tool_mode {
            preset.mode = m
                .parse()
                .map_err(|e| format!("preset `{}` row `tool_mode`: {e}", s.name))?;
            preset.mode_row = Some(s.name.clone());
        }
        if let Some(a) = &s.allow {
            preset.allow = Some(a.iter().cloned().collect());
        }
        if let Some(d) = &s.deny {
            preset.deny = d.iter().cloned().collect();
        }
        if let Some(sdk) = &s.sdk {
            preset.sdk = sdk
                .parse()
                .map_err(|e| format!("preset `{}` row `sdk`: {e}", s.name))?;
        }
        for section in &s.sections {
            preset.sections.retain(|x| x.id != section.id);
            preset.sections.push(section.clone());
        }
    }
    Ok(preset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> ConfigFile {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn builtins_come_in_order_and_standard_inherits() {
        let c = Catalog::builtin(Mode::Both);
        assert_eq!(c.names(), vec!["standard", "code"]);
        assert_eq!(c.get("standard").unwrap().mode, Mode::Both);
        assert_eq!(c.get("standard").unwrap().mode_row, None);
        assert_eq!(c.get("code").unwrap().mode, Mode::Code);
    }

    #[test]
    fn file_presets_extend_override_and_bind() {
        let file = parse(
            r#"
            [[preset]]
            name = "reviewer"
            extends = "code"
            deny = ["bash"]
            [[preset.section]]
            id = "tone"
            order = 5
            text = "Be terse."

            [[preset]]
            name = "standard"
            tool_mode = "both"

            [[section]]
            id = "tool:read"
            order = 110
            text = "Prefer read."

            [scopes]
            ci = "reviewer"
            "#,
        );
        let c = Catalog::build(Mode::Native, file).unwrap();
        assert_eq!(c.names(), vec!["standard", "code", "reviewer"]);
        let r = c.get("reviewer").unwrap();
        assert_eq!(r.mode, Mode::Code);
        assert_eq!(r.mode_row.as_deref(), Some("code"));
        assert!(!r.shows("bash") && r.shows("read"));
        let ids: Vec<_> = r.sections.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, vec!["tool:read", "tone"]);
        assert_eq!(c.get("standard").unwrap().mode, Mode::Both);
        assert_eq!(c.for_scope("ci").unwrap().name, "reviewer");
        assert!(c.for_scope("anything-else").is_none());
    }

    #[test]
    fn unbound_scopes_get_the_default_scopes_binding() {
        let file = parse(
            r#"
            [[preset]]
            name = "safe"
            deny = ["bash"]
            [scopes]
            default = "safe"
            ci = "code"
            "#,
        );
        let c = Catalog::build(Mode::Native, file).unwrap();
        assert_eq!(c.for_scope("ci").unwrap().name, "code");
        assert_eq!(c.for_scope("default").unwrap().name, "safe");
        assert_eq!(c.for_scope("anything-else").unwrap().name, "safe");
    }

    #[test]
    fn every_problem_is_reported() {
        let file = parse(
            r#"
            [[preset]]
            name = "a"
            extends = "missing"
            [[preset]]
            name = "b"
            tool_mode = "fast"
            [[section]]
            id = "tool:x"
            order = 5
            text = "t"
            [scopes]
            s = "nowhere"
            "#,
        );
        let errors = Catalog::build(Mode::Code, file).unwrap_err();
        assert_eq!(errors.len(), 4, "{errors:?}");
    }

    #[test]
    fn the_sdk_row_inherits_through_extends_and_defaults_to_the_env() {
        let file = parse(
            r#"
            [[preset]]
            name = "lean"
            extends = "code"
            sdk = "compact"
            [[preset]]
            name = "lean-reviewer"
            extends = "lean"
            deny = ["bash"]
            [[preset]]
            name = "verbose"
            extends = "lean"
            sdk = "full"
            "#,
        );
        let c = Catalog::build(Mode::Code, file.clone()).unwrap();
        assert_eq!(c.get("standard").unwrap().sdk, SdkStyle::Auto);
        assert_eq!(c.get("lean").unwrap().sdk, SdkStyle::Compact);
        assert_eq!(c.get("lean-reviewer").unwrap().sdk, SdkStyle::Compact);
        assert_eq!(c.get("verbose").unwrap().sdk, SdkStyle::Full);
        // CODEMODE_SDK=compact is the default of every chain that sets none.
        let c = Catalog::build_with(Mode::Code, SdkStyle::Compact, file).unwrap();
        assert_eq!(c.get("standard").unwrap().sdk, SdkStyle::Compact);
        assert_eq!(c.get("code").unwrap().sdk, SdkStyle::Compact);
        assert_eq!(c.get("verbose").unwrap().sdk, SdkStyle::Full);
    }

    #[test]
    fn an_unknown_sdk_row_is_refused_naming_the_preset_and_the_values() {
        let file = parse(
            r#"
            [[preset]]
            name = "lean"
            sdk = "tiny"
            "#,
        );
        let errors = Catalog::build(Mode::Code, file).unwrap_err();
        assert_eq!(
            errors,
            vec!["preset `lean` row `sdk`: `tiny` is not an SDK rendering; use auto, full or compact"]
        );
    }

    #[test]
    fn extends_cycles_are_refused() {
        let file = parse(
            r#"
            [[preset]]
            name = "a"
            extends = "b"
            [[preset]]
            name = "b"
            extends = "a"
            "#,
        );
        let errors = Catalog::build(Mode::Code, file).unwrap_err();
        assert!(errors.iter().any(|e| e.contains("cycle")), "{errors:?}");
    }
}
