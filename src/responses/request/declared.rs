//! Where a Responses request declares tools besides `tools`: each
//! `additional_tools` input item (Codex declares its tools there for some
//! models) and each `tool_search_output` (the tools a client's search
//! loaded). The plan reads them all as one array; when the wire changes,
//! the request keeps none of them (docs/security.md, "Fail closed").

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::ProxyError;
use crate::wire::{raw_array, RawObject};

/// The fields of an input item this reader looks at.
#[derive(Deserialize)]
struct Declares<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    tools: Option<&'a RawValue>,
}

/// What an input item declares.
enum Site<'a> {
    /// An `additional_tools` item and its `tools`.
    Additional(&'a RawValue),
    /// A `tool_search_output` and the tools it loaded, if any.
    Search(Option<&'a RawValue>),
}

/// The declaration site `raw` (the item at `input[i]`) is, if any. Most
/// items (messages, calls, outputs) are told apart by their opening type
/// or, failing that, their bytes, so a long history is not parsed (nor
/// searched) item by item.
fn site(raw: &RawValue, i: usize) -> Result<Option<Site<'_>>, ProxyError> {
    let text = raw.get();
    let declares = |kind: &str| matches!(kind, "additional_tools" | "tool_search_output");
    let may_declare = match crate::responses::items::peeked_type(text) {
        Some(kind) => declares(kind),
        None => text.contains("additional_tools") || text.contains("tool_search_output"),
    };
    if !may_declare {
        return Ok(None);
    }
    let Ok(item) = serde_json::from_str::<Declares<'_>>(text) else {
        return Ok(None);
    };
    let tools = item.tools.filter(|t| t.get() != "null");
    match item.kind.as_deref() {
        Some("additional_tools") => match tools {
            Some(t) => Ok(Some(Site::Additional(t))),
            None => Err(ProxyError::InvalidRequest(format!(
                "`input[{i}]` is an `additional_tools` item without `tools`; list its tools in `tools`"
            ))),
        },
        Some("tool_search_output") => Ok(Some(Site::Search(tools))),
        _ => Ok(None),
    }
}

/// Every tool the request declares: `tools`, then each declaring item's, in
/// input order, as one array; `tools` as sent when no item declares any.
pub(super) fn tools<'a>(
    tools: Option<&'a RawValue>,
    input: &'a [Box<RawValue>],
) -> Result<Option<Cow<'a, RawValue>>, ProxyError> {
    let tools = tools.filter(|t| t.get() != "null");
    let mut extra = Vec::new();
    for (i, item) in input.iter().enumerate() {
        match site(item, i)? {
            Some(Site::Additional(t) | Site::Search(Some(t))) => extra.push((i, t)),
            Some(Site::Search(None)) | None => {}
        }
    }
    if extra.is_empty() {
        return Ok(tools.map(Cow::Borrowed));
    }
    let mut all: Vec<&RawValue> = match tools {
        Some(t) => serde_json::from_str(t.get()).map_err(|_| {
            ProxyError::InvalidRequest(
                "`tools` must be an array of tool objects (each with a `type`)".into(),
            )
        })?,
        None => Vec::new(),
    };
    for (i, raw) in extra {
        let listed: Vec<&RawValue> = serde_json::from_str(raw.get()).map_err(|_| {
            ProxyError::InvalidRequest(format!(
                "`input[{i}].tools` must be an array of tool objects"
            ))
        })?;
        all.extend(listed);
    }
    RawValue::from_string(raw_array(all))
        .map(|r| Some(Cow::Owned(r)))
        .map_err(|e| ProxyError::InvalidRequest(format!("`tools`: {e}")))
}

/// Takes every declaration out of `input` (the wire tools stand for them):
/// `additional_tools` items go; a search output stays answered, its tools
/// emptied (they are in the SDK).
pub(super) fn take_out(input: &mut Vec<Box<RawValue>>) {
    input.retain(|item| !matches!(site(item, 0), Ok(Some(Site::Additional(_)))));
    for item in input.iter_mut() {
        if !matches!(site(item, 0), Ok(Some(Site::Search(Some(_))))) {
            continue;
        }
        if let Ok(mut object) = RawObject::parse(item.get().as_bytes()) {
            object.set("tools", crate::wire::to_raw(&serde_json::json!([])));
            let text = object.to_text();
            if let Ok(raw) = RawValue::from_string(text) {
                *item = raw;
            }
        }
    }
}
