//! The tool plan of a request: what the model sees and how its calls are judged.
//!
//! A plan depends only on the client's `tools` text, the preset and the
//! mode, so it is built once per distinct tool set and cached: repeated
//! requests of an agent (the same tools every turn) do not re-render the SDK.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::value::RawValue;

use crate::api::Api;
use crate::classify::Visibility;
use crate::error::ProxyError;
use crate::mode::{Mode, Runtime, RUN_CODE};
use crate::preset::Preset;
use crate::sdk::{render_docs, Rendering, SdkStyle, ToolDocs, ToolSchema};
use crate::sections::{self, RenderedSection, SdkParts};
use crate::tools::client_code::{self, ClientCodeMode};
use crate::tools::{Deferral, ToolEntry, ToolGroup, ToolReader};
use crate::wire::{first_repeat, raw_array, Repeat};

/// Everything the proxy derives from one request's tool set.
#[derive(Debug)]
pub struct ToolPlan {
    /// The mode the plan was built for.
    pub mode: Mode,
    visible: HashSet<String>,
    hidden: HashSet<String>,
    /// The `tools` array for the wire, when it differs from the client's.
    pub wire_tools: Option<Box<RawValue>>,
    /// Every section that applies, in order (for dry-run).
    pub sections: Vec<RenderedSection>,
    /// The text appended to the system prompt (may be empty).
    pub prompt: String,
    /// [`Self::prompt`] as a JSON string, escaped once for every request
    /// that splices it in.
    pub prompt_json: Box<RawValue>,
    /// The visible native tools in declaration order (what programs may call).
    pub visible_names: Vec<String>,
    /// Whether the proxy runs `run_code` itself (embedded runtime).
    pub runs_code: bool,
    /// Each visible tool's full declaration, for `tools.describe` in
    /// programs (empty when no SDK applies).
    pub docs: Arc<ToolDocs>,
    /// How the SDK section renders; `None` when no SDK applies.
    pub sdk: Option<Rendering>,
    /// Visible tools that take one string (freeform), not a JSON object.
    pub freeform: HashSet<String>,
    /// Visible tools whose calls are not the dialect's plain function call,
    /// with the item type their calls are.
    pub call_items: std::collections::HashMap<String, &'static str>,
    /// The API the plan was built for.
    pub api: Api,
    /// The preset's allow/deny lists, for tools declared outside `tools`
    /// (legacy `functions`).
    preset: Preset,
    /// The client's own code mode, when its tools make one up (Codex's
    /// `exec` and `wait`): the request is presented as sent, and a direct
    /// call to a name it declares nowhere is denied.
    pub client_code: Option<&'static ClientCodeMode>,
    /// A key the tools repeat, which a reader other than the proxy's could
    /// read otherwise: refused where calls can be denied
    /// ([`ToolPlan::one_reading`]).
    pub repeated_key: Option<Repeat>,
}

impl ToolPlan {
    /// Builds the plan for the raw `tools` value of a request its
    /// dialect's `reader` reads.
    pub fn build_for(
        reader: &ToolReader,
        tools: Option<&RawValue>,
        preset: &Preset,
        mode: Mode,
        runtime: Runtime,
    ) -> Result<ToolPlan, ProxyError> {
        // Read once per tool set, as the plan is: a repeated key is kept
        // for the requests that must refuse it, and is what is wrong with
        // tools that do not read.
        let repeated_key = tools.and_then(|t| first_repeat(t, reader.keys, "tools"));
        match ToolPlan::build_read(reader, tools, preset, mode, runtime) {
            Ok(plan) => Ok(ToolPlan {
                repeated_key,
                ..plan
            }),
            Err(e) => Err(repeated_key.map_or(e, ProxyError::from)),
        }
    }

    fn build_read(
        reader: &ToolReader,
        tools: Option<&RawValue>,
        preset: &Preset,
        mode: Mode,
        runtime: Runtime,
    ) -> Result<ToolPlan, ProxyError> {
        let all = (reader.parse)(tools)?;
        if mode == Mode::Code || preset.restricts_tools() {
            // Fail closed: a tool type the proxy does not know may be one
            // the client executes, which the wire must not announce.
            if let Some(e) = all.iter().find(|e| e.unknown) {
                return Err(ProxyError::InvalidRequest(format!(
                    "`tools` declares a tool of type `{}`, which this proxy does not know: it \
                     cannot tell whether your client executes its calls, so in tool mode `{mode}` \
                     it is refused. Declare it as a function tool, or send the request in native \
                     mode",
                    e.schema.name
                )));
            }
        }
        // A client that runs its own code mode is not wrapped in another:
        // its tools are presented as declared (as native mode would).
        let client_code = mode
            .is_code_capable()
            .then(|| client_code::recognise(&all))
            .flatten();
        let mode = if client_code.is_some() {
            Mode::Native
        } else {
            mode
        };
        // Tools the provider runs itself are no client tool: they stay on
        // the wire as they are, never in the SDK, never judged.
        let (kept, entries): (Vec<ToolEntry>, Vec<ToolEntry>) =
            all.into_iter().partition(|e| e.provider);
        let kept: Vec<WireItem<'_>> = kept.iter().map(wire_item).collect();
        let run_code = entries.iter().find(|e| e.schema.name == RUN_CODE);
        let (shown, hidden): (Vec<&ToolEntry>, Vec<&ToolEntry>) = entries
            .iter()
            .filter(|e| e.schema.name != RUN_CODE)
            .partition(|e| preset.shows(&e.schema.name));
        let has_tools = !entries.is_empty();
        let code_tools = has_tools && mode.is_code_capable();
        let runs_code = code_tools && runtime == Runtime::Embedded;
        if code_tools && !runs_code && run_code.is_none() {
            return Err(ProxyError::MissingRunCode(mode));
        }
        // With the embedded runtime the proxy's own run_code is the transport.
        let proxy_run_code = RawValue::from_string((reader.run_code_tool)())
            .map_err(|e| ProxyError::InvalidRequest(e.to_string()))?;
        let transport: Option<WireItem<'_>> = if runs_code {
            Some((&*proxy_run_code, None, Deferral::Loaded))
        } else {
            run_code.map(wire_item)
        };
        let wire: Option<Vec<WireItem<'_>>> = match mode {
            Mode::Code if has_tools => Some(transport.into_iter().collect()),
            Mode::Both if runs_code => Some(
                shown
                    .iter()
                    .map(|e| wire_item(e))
                    .chain(transport)
                    .collect(),
            ),
            Mode::Native | Mode::Both if !hidden.is_empty() => Some(
                entries
                    .iter()
                    .filter(|e| e.schema.name == RUN_CODE || preset.shows(&e.schema.name))
                    .map(wire_item)
                    .collect(),
            ),
            _ => None,
        };
        let wire = match wire {
            Some(items) if !kept.is_empty() => {
                Some(without_idle_search(items.into_iter().chain(kept).collect()))
            }
            other => other,
        };
        let wire_tools = match wire {
            Some(items) => Some((reader.finish_wire)(
                tools,
                RawValue::from_string(wire_array(&items))
                    .map_err(|e| ProxyError::InvalidRequest(format!("`tools`: {e}")))?,
            )?),
            None => None,
        };
        let visible_schemas: Vec<ToolSchema> = shown.iter().map(|e| e.schema.clone()).collect();
        let docs = if code_tools {
            render_docs(&visible_schemas)
        } else {
            ToolDocs::default()
        };
        let sdk = SdkParts::new(preset.sdk, &docs, &visible_schemas, runs_code);
        let rendering = code_tools.then_some(sdk.rendering);
        let mut sections = sections::render(preset, mode, &visible_schemas, code_tools, sdk);
        // Kept as long as the plan: no spare capacity (the SDK's text was
        // built by pushing, up to twice its length).
        for s in &mut sections {
            s.text.shrink_to_fit();
        }
        let prompt = sections::join(&sections);
        Ok(ToolPlan {
            mode,
            visible: shown.iter().map(|e| e.schema.name.clone()).collect(),
            hidden: hidden.iter().map(|e| e.schema.name.clone()).collect(),
            wire_tools,
            sections,
            prompt_json: crate::wire::to_raw(&prompt),
            prompt,
            visible_names: shown.iter().map(|e| e.schema.name.clone()).collect(),
            runs_code,
            docs: Arc::new(docs),
            sdk: rendering,
            freeform: shown
                .iter()
                .filter(|e| e.schema.freeform)
                .map(|e| e.schema.name.clone())
                .collect(),
            call_items: shown
                .iter()
                .filter_map(|e| e.call_item.map(|i| (e.schema.name.clone(), i)))
                .collect(),
            api: reader.api,
            preset: preset.clone(),
            client_code,
            repeated_key: None,
        })
    }

    /// Whether `name` is a visible tool that takes one string.
    pub fn is_freeform(&self, name: &str) -> bool {
        self.freeform.contains(name)
    }

    /// How `name` relates to this request's tools.
    pub fn visibility(&self, name: &str) -> Visibility {
        if self.visible.contains(name) {
            Visibility::Visible
        } else if self.hidden.contains(name) {
            Visibility::Hidden
        } else {
            Visibility::Undeclared
        }
    }

    /// Whether the preset shows a client tool called `name`, wherever it is declared.
    pub fn preset_shows(&self, name: &str) -> bool {
        self.preset.shows(name)
    }

    /// Whether the wire may lack a tool the client declared (code mode, or
    /// a preset with allow/deny lists), so every field naming tools is judged.
    pub fn narrows_tools(&self) -> bool {
        self.mode == Mode::Code || self.preset.restricts_tools()
    }

    /// Whether any call the model makes could be denied, so responses must be checked.
    pub fn can_deny(&self) -> bool {
        self.mode == Mode::Code || !self.hidden.is_empty() || self.client_code.is_some()
    }

    /// Refuses, where the proxy judges the turn (a call can be denied, or
    /// programs run), a request that repeats a key below its top level:
    /// one `repeated` finds in the request (every field but `tools`), or
    /// one in its tools. Elsewhere the proxy is transparent, and passes it
    /// on.
    pub fn one_reading(&self, repeated: impl FnOnce() -> Option<Repeat>) -> Result<(), ProxyError> {
        if !self.can_deny() && !self.runs_code {
            return Ok(());
        }
        match repeated().or_else(|| self.repeated_key.clone()) {
            Some(repeat) => Err(repeat.into()),
            None => Ok(()),
        }
    }

    /// Whether the wire carries a tool named `name`.
    pub fn on_wire(&self, name: &str) -> bool {
        match self.mode {
            Mode::Code => name == RUN_CODE,
            Mode::Native | Mode::Both => !self.hidden.contains(name),
        }
    }
}

/// A tool for the wire: its declaration, the group it belongs to, and its
/// part in deferred loading.
type WireItem<'a> = (&'a RawValue, Option<&'a Arc<ToolGroup>>, Deferral);

fn wire_item(e: &ToolEntry) -> WireItem<'_> {
    (e.raw.as_ref(), e.group.as_ref(), e.deferral)
}

/// The wire without the provider's tool search when no tool left on it is
/// deferred: the client's deferred tools went into the SDK, so the search
/// would find nothing (and a provider may refuse a search with nothing to
/// search: OpenAI does). A wire that keeps a deferred tool keeps it.
fn without_idle_search(items: Vec<WireItem<'_>>) -> Vec<WireItem<'_>> {
    if items.iter().any(|i| i.2 == Deferral::Deferred) {
        return items;
    }
    items
        .into_iter()
        .filter(|i| i.2 != Deferral::Search)
        .collect()
}

/// The text of a `tools` array: each tool as declared, the tools of a group
/// (a Responses `namespace`) written back into their group's declaration,
/// which then lists only the tools given here.
fn wire_array(items: &[WireItem<'_>]) -> String {
    let mut parts: Vec<std::borrow::Cow<'_, str>> = Vec::with_capacity(items.len());
    let mut i = 0;
    while i < items.len() {
        let (raw, group, _) = items[i];
        let Some(group) = group else {
            parts.push(raw.get().into());
            i += 1;
            continue;
        };
        let mut end = i + 1;
        while end < items.len() && items[end].1.is_some_and(|g| Arc::ptr_eq(g, group)) {
            end += 1;
        }
        let tools = raw_array(items[i..end].iter().map(|(r, _, _)| *r));
        let declared = group.object.to_vec_with(group.key, Some(&tools));
        parts.push(String::from_utf8_lossy(&declared).into_owned().into());
        i = end;
    }
    let mut out = String::with_capacity(parts.iter().map(|p| p.len() + 1).sum::<usize>() + 2);
    out.push('[');
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(p);
    }
    out.push(']');
    out
}

/// Plans by tool set, preset, SDK rendering, mode and runtime; bounded by bytes.
///
/// Keyed by a foldhash of the five, seeded per process; a hit is used only
/// when the stored tools text, preset, rendering, mode and runtime are the
/// request's own, so a collision is a miss, never a wrong plan (and an aimed
/// one buys a client no more than sending distinct tool sets does). Hashing
/// runs on every request over the whole tools text: foldhash reads it about
/// eight times as fast as SipHash.
pub struct PlanCache {
    cache: moka::sync::Cache<u64, Arc<CachedPlan>, foldhash::fast::RandomState>,
    /// Hashes the key: the whole tools text, on every request.
    hasher: foldhash::fast::RandomState,
}

struct CachedPlan {
    tools_text: Box<str>,
    preset: String,
    sdk: SdkStyle,
    mode: Mode,
    runtime: Runtime,
    plan: Arc<ToolPlan>,
}

impl PlanCache {
    /// A cache holding about `budget_bytes` of plans (tools text, SDK, sections).
    pub fn new(budget_bytes: u64) -> PlanCache {
        PlanCache {
            cache: moka::sync::Cache::builder()
                .max_capacity(budget_bytes.max(1))
                .weigher(|_: &u64, c: &Arc<CachedPlan>| crate::cache::weight(cached_bytes(c)))
                .build_with_hasher(foldhash::fast::RandomState::default()),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// Bytes held, as weighed against the budget.
    pub fn weighed_bytes(&self) -> u64 {
        self.cache.run_pending_tasks();
        self.cache.weighted_size()
    }

    /// The plan for `tools` of a request its dialect's `reader` reads, from
    /// the cache when the same tool set was planned before.
    pub fn get_or_build_for(
        &self,
        reader: &ToolReader,
        tools: Option<&RawValue>,
        preset: &Preset,
        mode: Mode,
        runtime: Runtime,
    ) -> Result<Arc<ToolPlan>, ProxyError> {
        let text = tools.map_or("", RawValue::get);
        let key = std::hash::BuildHasher::hash_one(
            &self.hasher,
            (
                text,
                preset.name.as_str(),
                preset.sdk,
                mode.as_str(),
                runtime.as_str(),
                reader.api.as_str(),
            ),
        );
        if let Some(hit) = self.cache.get(&key).filter(|c| {
            c.mode == mode
                && c.runtime == runtime
                && c.preset == preset.name
                && c.sdk == preset.sdk
                && c.plan.api == reader.api
                && &*c.tools_text == text
        }) {
            return Ok(hit.plan.clone());
        }
        let built = ToolPlan::build_for(reader, tools, preset, mode, runtime);
        // Its working copies are gone, whether it was built or refused.
        crate::cache::dropped_transient(text.len());
        let plan = Arc::new(built?);
        self.cache.insert(
            key,
            Arc::new(CachedPlan {
                tools_text: text.into(),
                preset: preset.name.clone(),
                sdk: preset.sdk,
                mode,
                runtime,
                plan: plan.clone(),
            }),
        );
        // moka evicts in batches, when enough writes have queued or time
        // has passed: a burst of distinct tool sets would hold many plans
        // over the budget until then (crate::cache::LARGE_BYTES). A miss is
        // rare, and this is cheap beside building the plan.
        self.cache.run_pending_tasks();
        Ok(plan)
    }
}

/// Bytes a cached plan holds, roughly: the tools text twice (the client's
/// and the parsed names and wire copy), the prompt and its sections.
fn cached_bytes(c: &CachedPlan) -> usize {
    let p = &c.plan;
    let names: usize = p.visible_names.iter().map(|n| 2 * (n.len() + 48)).sum();
    512 + 2 * c.tools_text.len()
        + p.wire_tools.as_ref().map_or(0, |w| w.get().len())
        + 2 * p.prompt.len()
        + p.docs.bytes()
        + p.sections
            .iter()
            .map(|s| s.id.len() + s.text.len() + 32)
            .sum::<usize>()
        + names
        + p.hidden.iter().map(|n| n.len() + 48).sum::<usize>()
}

/// The plan of `tools`, as `reader`'s dialect declares them, under the
/// built-in `standard` preset: what most tests of every dialect plan with.
#[cfg(test)]
pub(crate) fn standard_plan(
    reader: &ToolReader,
    tools: &serde_json::Value,
    mode: Mode,
    runtime: Runtime,
) -> ToolPlan {
    let raw = serde_json::value::to_raw_value(tools).expect("tools serialise");
    let catalog = crate::preset::Catalog::builtin(mode);
    let preset = catalog.get("standard").expect("the built-in preset");
    ToolPlan::build_for(reader, Some(&raw), preset, mode, runtime).expect("a valid plan")
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::preset::{Catalog, ConfigFile};

    const TOOLS: &str = r#"[
        {"type":"function","function":{"name":"read","description":"Read.","parameters":{"type":"object"}}},
        {"type":"function","function":{"name":"bash","parameters":{"type":"object"}}},
        {"type":"function","function":{"name":"run_code","parameters":{"type":"object"}}}
    ]"#;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    fn preset(toml_text: &str, name: &str) -> Arc<Preset> {
        let file: ConfigFile = toml::from_str(toml_text).unwrap();
        Catalog::build(Mode::Code, file)
            .unwrap()
            .get(name)
            .unwrap()
            .clone()
    }

    #[test]
    fn code_mode_wire_carries_only_run_code() {
        let plan = ToolPlan::build(
            Some(&raw(TOOLS)),
            &preset("", "code"),
            Mode::Code,
            Runtime::Client,
        )
        .unwrap();
        let wire: Vec<Value> =
            serde_json::from_str(plan.wire_tools.as_ref().unwrap().get()).unwrap();
        assert_eq!(wire.len(), 1);
        assert_eq!(wire[0]["function"]["name"], "run_code");
        assert_eq!(plan.visibility("read"), Visibility::Visible);
        assert!(plan.prompt.contains("read(args?: Record<string, unknown>)"));
        assert!(plan.can_deny());
    }

    #[test]
    fn deny_lists_hide_tools_in_every_mode() {
        let p = preset("[[preset]]\nname = \"safe\"\ndeny = [\"bash\"]\n", "safe");
        for mode in [Mode::Native, Mode::Both] {
            let plan = ToolPlan::build(Some(&raw(TOOLS)), &p, mode, Runtime::Client).unwrap();
            assert_eq!(plan.visibility("bash"), Visibility::Hidden);
            let wire = plan.wire_tools.as_ref().unwrap().get();
            assert!(!wire.contains("bash") && wire.contains("read"), "{wire}");
            assert!(plan.can_deny());
        }
    }

    #[test]
    fn a_tool_with_two_names_is_refused() {
        let tools = r#"[{"type":"custom","name":"read","custom":{"name":"bash"}}]"#;
        let err = ToolPlan::build(
            Some(&raw(tools)),
            &preset("", "standard"),
            Mode::Native,
            Runtime::Client,
        )
        .unwrap_err();
        assert!(err.to_string().contains("named both"), "{err}");
        let tools = r#"[{"type":"custom","custom":{"name":"bash"}}]"#;
        let p = preset("[[preset]]\nname = \"safe\"\ndeny = [\"bash\"]\n", "safe");
        let plan = ToolPlan::build(Some(&raw(tools)), &p, Mode::Native, Runtime::Client).unwrap();
        assert_eq!(plan.visibility("bash"), Visibility::Hidden);
    }

    #[test]
    fn a_key_the_tools_repeat_is_refused_only_where_the_turn_is_judged() {
        // The parameters read one way to serde, another to a first-key
        // reader; the plan reads them once per tool set.
        let tools = r#"[{"type":"function","function":{"name":"read",
            "parameters":{"type":"object","properties":{},"properties":{"p":{}}}}}]"#;
        let repeat = Repeat {
            path: "tools[0].function.parameters.properties".into(),
            also: None,
        };
        let code = ToolPlan::build(
            Some(&raw(tools)),
            &preset("", "code"),
            Mode::Code,
            Runtime::Embedded,
        )
        .unwrap();
        assert_eq!(code.repeated_key, Some(repeat.clone()));
        let err = code.one_reading(|| None).unwrap_err();
        assert_eq!(err.code(), "duplicate_key");
        assert!(
            err.to_string()
                .contains("`tools[0].function.parameters.properties`"),
            "{err}"
        );
        // The request's own repeat is named first.
        let own = Repeat {
            path: "messages[0].role".into(),
            also: None,
        };
        let err = code.one_reading(|| Some(own)).unwrap_err();
        assert!(err.to_string().contains("`messages[0].role`"), "{err}");
        // Native mode with nothing hidden: the proxy is transparent.
        let native = ToolPlan::build(
            Some(&raw(tools)),
            &preset("", "standard"),
            Mode::Native,
            Runtime::Client,
        )
        .unwrap();
        assert!(native.one_reading(|| panic!("not read")).is_ok());
        // Tools that do not read say why, when a repeat is the reason.
        let twice = r#"[{"type":"function","function":{"name":"read","name":"bash"}}]"#;
        let err = ToolPlan::build(
            Some(&raw(twice)),
            &preset("", "standard"),
            Mode::Native,
            Runtime::Client,
        )
        .unwrap_err();
        assert_eq!(err.code(), "duplicate_key", "{err}");
        assert!(
            err.to_string().contains("`tools[0].function.name`"),
            "{err}"
        );
    }

    #[test]
    fn code_mode_without_client_run_code_is_refused() {
        let tools = r#"[{"type":"function","function":{"name":"read"}}]"#;
        let err = ToolPlan::build(
            Some(&raw(tools)),
            &preset("", "code"),
            Mode::Code,
            Runtime::Client,
        )
        .unwrap_err();
        assert_eq!(err.code(), "run_code_missing");
    }

    #[test]
    fn native_without_restrictions_leaves_the_wire_alone() {
        let plan = ToolPlan::build(
            Some(&raw(TOOLS)),
            &preset("", "standard"),
            Mode::Native,
            Runtime::Client,
        )
        .unwrap();
        assert!(plan.wire_tools.is_none());
        assert!(!plan.can_deny());
        assert!(plan.prompt.is_empty());
    }

    #[test]
    fn the_cache_is_bounded_by_bytes() {
        let budget = 256 << 10;
        let cache = PlanCache::new(budget);
        let p = preset("", "code");
        let description = "d".repeat(2000);
        for i in 0..300 {
            let tools = format!(
                r#"[{{"type":"function","function":{{"name":"t{i}","description":"{description}","parameters":{{"type":"object"}}}}}},
                    {{"type":"function","function":{{"name":"run_code","parameters":{{"type":"object"}}}}}}]"#
            );
            cache
                .get_or_build(Some(&raw(&tools)), &p, Mode::Code, Runtime::Client)
                .unwrap();
            // Within the budget after every miss, not only once moka gets
            // round to evicting: a burst of misses never holds more.
            // (What the map holds, counted here: moka's own weighed size
            // leaves out what it has not yet processed.)
            let held: u64 = cache
                .cache
                .iter()
                .map(|(_, c)| cached_bytes(&c) as u64)
                .sum();
            assert!(held <= budget, "after {i}: {held}");
        }
        assert!(cache.cache.entry_count() < 300);
    }

    #[test]
    fn cache_returns_the_same_plan_for_the_same_tools() {
        let cache = PlanCache::new(1 << 20);
        let p = preset("", "code");
        let a = cache
            .get_or_build(Some(&raw(TOOLS)), &p, Mode::Code, Runtime::Client)
            .unwrap();
        let b = cache
            .get_or_build(Some(&raw(TOOLS)), &p, Mode::Code, Runtime::Client)
            .unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let c = cache
            .get_or_build(Some(&raw(TOOLS)), &p, Mode::Both, Runtime::Client)
            .unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
    }

    #[test]
    fn a_plan_cached_for_one_sdk_rendering_never_serves_the_other() {
        let cache = PlanCache::new(1 << 20);
        let full = preset("", "code");
        // The same preset name with the other rendering (CODEMODE_SDK=compact).
        let mut compact = (*full).clone();
        compact.sdk = SdkStyle::Compact;
        let tools = r#"[
            {"type":"function","function":{"name":"read","description":"Read a file. Paths are absolute.","parameters":{"type":"object"}}},
            {"type":"function","function":{"name":"run_code","parameters":{"type":"object"}}}
        ]"#;
        let get = |p: &Preset| {
            cache
                .get_or_build(Some(&raw(tools)), p, Mode::Code, Runtime::Embedded)
                .unwrap()
        };
        let a = get(&full);
        let b = get(&compact);
        assert!(!Arc::ptr_eq(&a, &b));
        assert!(a.prompt.contains("Paths are absolute."), "{}", a.prompt);
        assert!(!b.prompt.contains("Paths are absolute."), "{}", b.prompt);
        assert!(
            b.prompt.contains("tools.describe(\"name\")"),
            "{}",
            b.prompt
        );
        assert!(Arc::ptr_eq(&a, &get(&full)));
        assert!(Arc::ptr_eq(&b, &get(&compact)));
        // Both carry the full declarations for describe.
        assert_eq!(a.docs, b.docs);
        assert!(b.docs.get("read").unwrap().contains("Paths are absolute."));
    }
}
