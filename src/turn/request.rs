//! What every driver reads and writes of a client's request, whatever its
//! dialect: the request itself says it, so no dialect forwards to it.

use bytes::Bytes;
use serde_json::value::RawValue;

use crate::conversation::Anchor;
use crate::error::ProxyError;
use crate::plan::ToolPlan;
use crate::splice::TenantSplices;
use crate::wire::{Entries, Keys, RawObject, Repeat};

/// A parsed client request, rewritten in place. Every field stays the
/// client's bytes unless the proxy changes it.
pub trait WireRequest: Clone + Send + Sync + 'static {
    /// The top-level field that holds the conversation (`messages`,
    /// `input`, `contents`).
    const HISTORY: &'static str;
    /// How the provider tells keys apart (Google's proto JSON takes
    /// `tool_config` for `toolConfig`).
    const KEYS: Keys = Keys::Exact;

    /// The request's top level, its values as the client sent them.
    fn object(&self) -> &RawObject;
    /// The entries of [`Self::HISTORY`], each the client's bytes unless
    /// rewritten; `None` while the field is as it came.
    fn history(&self) -> Option<&[Box<RawValue>]>;
    /// Whether the client asked for a stream.
    fn streams(&self) -> bool;

    /// A top-level field of the request, as it came.
    fn field(&self, key: &str) -> Option<&RawValue> {
        self.object().get(key)
    }
    /// The request's bytes for the upstream.
    fn to_bytes(&self) -> Bytes {
        Bytes::from(
            self.object()
                .to_vec_with_list(Self::HISTORY, self.history()),
        )
    }
    /// The first key the request repeats below its top level, in every
    /// field but `tools` (the plan reads those once per tool set), told
    /// apart as the provider tells keys apart; the proxy refuses it where
    /// it judges the turn ([`ToolPlan::one_reading`]); docs/security.md,
    /// "One reading of a request".
    fn repeated_key(&self) -> Option<Repeat> {
        self.object()
            .first_repeat(Self::KEYS, &["tools"], self.history())
    }
    /// The conversation the request continues, for its mixed turns'
    /// stored denials.
    fn anchor(&self) -> Anchor;
    /// Refuses a request the dialect cannot judge (Chat's `n` > 1).
    fn check(&self) -> Result<(), ProxyError> {
        Ok(())
    }
    /// Rewrites the request for the plan: tools, sections, `tool_choice`,
    /// stored denials spliced into the history.
    fn rewrite(&mut self, plan: &ToolPlan, splices: &TenantSplices) -> Result<(), ProxyError>;
}

/// The history a dialect's request holds, from what
/// [`RawObject::parse_lending`] read: its entries when the field held an
/// array; `None` when the field is absent or holds what `kept` accepts
/// (left as the object's value); refused with `message` otherwise.
pub fn lent_history(
    entries: Option<Entries>,
    object: &RawObject,
    key: &str,
    kept: fn(&RawValue) -> bool,
    message: &str,
) -> Result<Option<Entries>, ProxyError> {
    match (entries, object.get(key)) {
        (Some(entries), _) => Ok(Some(entries)),
        (None, None) => Ok(None),
        (None, Some(raw)) if kept(raw) => Ok(None),
        (None, Some(_)) => Err(ProxyError::InvalidRequest(message.to_owned())),
    }
}
