//! The ids the proxy mints for a program, its calls and the answers that
//! carry them, shaped like the provider's (docs/embedded-runtime.md, "Ids"):
//! clients check them (agno renames a chat call id that does not start with
//! `call_` or is longer than 40 characters), so they must read as the
//! provider's would.
//!
//! A call id is its dialect's prefix and a 24-character body of letters and
//! digits, as OpenAI's `call_…` and Anthropic's `toolu_…` are. The body
//! names the call without the store: an alias (5), the execution id (16)
//! and the call's number (3); the alias, hashed from the other two, tells
//! an id this proxy minted from any other, and is what an agent that
//! shortens ids keeps ([`short_form`]). An execution id is 12 random
//! characters (71 bits from the OS) and a 4-character tag binding them to
//! the tenant, so an id whose record is gone is still known as this
//! tenant's ([`minted_for`]).
//!
//! Ids minted before this shape (`cm_<alias>_<execution>_<n>`, executions
//! `<created>x<random>x<tag>`) still read, so a program started by an older
//! replica resumes on a newer one.

use std::sync::LazyLock;

use memchr::memmem;

use super::{ExecutionLookup, Tenant};
use crate::tenant::{hex, os_random};

/// Prefix of a call id on chat, Responses and Gemini (OpenAI's shape).
pub const CALL_PREFIX: &str = "call_";
/// Prefix of a call id on Messages (Anthropic's `tool_use` ids).
pub const TOOL_USE_PREFIX: &str = "toolu_";

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const EXEC_RANDOM: usize = 12;
const EXEC_TAG: usize = 4;
const EXEC_LEN: usize = EXEC_RANDOM + EXEC_TAG;
const ALIAS_LEN: usize = 5;
const NUMBER_LEN: usize = 3;
/// Letters and digits after a call id's prefix.
pub const BODY_LEN: usize = ALIAS_LEN + EXEC_LEN + NUMBER_LEN;
/// Calls one execution can name (`62^3`); far above any `max_calls`.
const MAX_CALLS: usize = 62 * 62 * 62;

/// Prefix of the ids of calls minted before the provider-shaped ids.
const LEGACY_PREFIX: &str = "cm_";
const LEGACY_ALIAS_LEN: usize = 7;

/// Writes `v` into `out` in base 62, most significant first (what does not
/// fit is dropped: callers give random or hashed values).
fn base62(mut v: u128, out: &mut [u8]) {
    for c in out.iter_mut().rev() {
        *c = BASE62[(v % 62) as usize];
        v /= 62;
    }
}

fn from_base62(s: &[u8]) -> Option<u128> {
    s.iter().try_fold(0u128, |acc, &c| {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'A'..=b'Z' => c - b'A' + 10,
            b'a'..=b'z' => c - b'a' + 36,
            _ => return None,
        };
        Some(acc * 62 + u128::from(d))
    })
}

fn alnum(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// A fresh execution id for `tenant` (see the module's text).
pub fn mint_execution_id(tenant: &Tenant) -> String {
    let mut random = [0u8; 16];
    os_random(&mut random);
    let mut id = [0u8; EXEC_LEN];
    base62(u128::from_le_bytes(random), &mut id[..EXEC_RANDOM]);
    let random = std::str::from_utf8(&id[..EXEC_RANDOM]).unwrap_or_default();
    let tag = exec_tag(tenant, random);
    id[EXEC_RANDOM..].copy_from_slice(&tag);
    String::from_utf8_lossy(&id).into_owned()
}

fn exec_tag(tenant: &Tenant, random: &str) -> [u8; EXEC_TAG] {
    let tag = u64::from_str_radix(&tenant.tag(&["execution", random]), 16).unwrap_or(0);
    let mut out = [0u8; EXEC_TAG];
    base62(u128::from(tag), &mut out);
    out
}

/// Whether `exec_id` is one this proxy family minted for `tenant`, and when
/// it was created if the id says (older ids did). Such an id whose record
/// is missing was lost (evicted, or the proxy restarted) or expired: the
/// model is told and runs the program again. Any other id, another
/// tenant's included, is one the proxy does not know.
pub fn minted_for(exec_id: &str, tenant: &Tenant) -> Option<Minted> {
    if exec_id.len() == EXEC_LEN && alnum(exec_id) {
        let (random, tag) = exec_id.split_at(EXEC_RANDOM);
        return (exec_tag(tenant, random) == tag.as_bytes()).then_some(Minted { created_ms: None });
    }
    legacy_minted_for(exec_id, tenant).map(|created| Minted {
        created_ms: Some(created),
    })
}

/// What [`minted_for`] knows of an execution id it recognises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Minted {
    /// When it was created (ms since the epoch), for ids that say.
    pub created_ms: Option<u64>,
}

fn legacy_minted_for(exec_id: &str, tenant: &Tenant) -> Option<u64> {
    let mut parts = exec_id.split('x');
    let (created, random, tag) = (parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| {
        s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    if parts.next().is_some()
        || created.is_empty()
        || created.len() > 16
        || !hex(created, created.len())
        || !hex(random, 32)
        || !hex(tag, 16)
        || tenant.tag(&[created, random]) != tag
    {
        return None;
    }
    u64::from_str_radix(created, 16).ok()
}

/// The body (24 letters and digits) of call `n` of execution `exec_id`,
/// for an execution id of the current shape.
fn body(exec_id: &str, n: usize) -> Option<[u8; BODY_LEN]> {
    if exec_id.len() != EXEC_LEN || !alnum(exec_id) || n >= MAX_CALLS {
        return None;
    }
    let mut out = [0u8; BODY_LEN];
    base62(u128::from(alias_hash(exec_id, n)), &mut out[..ALIAS_LEN]);
    out[ALIAS_LEN..ALIAS_LEN + EXEC_LEN].copy_from_slice(exec_id.as_bytes());
    base62(n as u128, &mut out[ALIAS_LEN + EXEC_LEN..]);
    Some(out)
}

/// The id of call `n` of execution `exec_id` as chat, Responses and Gemini
/// hand it out: `call_` and its body (see the module's text).
pub fn call_id(exec_id: &str, n: usize) -> String {
    call_id_as(CALL_PREFIX, exec_id, n)
}

/// The id of call `n` of execution `exec_id` behind `prefix` (a dialect's:
/// [`CALL_PREFIX`], [`TOOL_USE_PREFIX`]).
pub fn call_id_as(prefix: &str, exec_id: &str, n: usize) -> String {
    match body(exec_id, n) {
        Some(body) => format!("{prefix}{}", String::from_utf8_lossy(&body)),
        None => legacy_call_id(exec_id, n),
    }
}

/// An id for something the proxy writes about call `start` of `exec_id`
/// (the answer that carries a batch of calls, a call's item), for the APIs
/// whose ids are hex (Responses' `resp_…` and `fc_…`, 50 hex digits after
/// the prefix): `01` then the call body's bytes, so it reads back.
pub fn hex_answer_id(prefix: &str, exec_id: &str, start: usize) -> String {
    match body(exec_id, start) {
        Some(body) => format!("{prefix}01{}", hex(&body)),
        None => format!("{prefix}cm_{exec_id}_{start}"),
    }
}

/// `(execution id, batch start)` of an id made by [`hex_answer_id`].
pub fn parse_hex_answer_id(prefix: &str, id: &str) -> Option<(String, usize)> {
    let rest = id.strip_prefix(prefix)?;
    if let Some(hexed) = rest.strip_prefix("01") {
        if hexed.len() != BODY_LEN * 2 {
            return None;
        }
        let bytes: Option<Vec<u8>> = (0..BODY_LEN)
            .map(|i| u8::from_str_radix(hexed.get(2 * i..2 * i + 2)?, 16).ok())
            .collect();
        let body = String::from_utf8(bytes?).ok()?;
        let (exec, n) = parse_body(&body)?;
        return Some((exec.to_owned(), n));
    }
    let (exec, start) = rest.strip_prefix("cm_")?.rsplit_once('_')?;
    Some((exec.to_owned(), start.parse().ok()?))
}

fn parse_body(body: &str) -> Option<(&str, usize)> {
    if body.len() != BODY_LEN || !alnum(body) {
        return None;
    }
    let exec = &body[ALIAS_LEN..ALIAS_LEN + EXEC_LEN];
    let n = from_base62(&body.as_bytes()[ALIAS_LEN + EXEC_LEN..])? as usize;
    let mut alias = [0u8; ALIAS_LEN];
    base62(u128::from(alias_hash(exec, n)), &mut alias);
    (alias == body.as_bytes()[..ALIAS_LEN]).then_some((exec, n))
}

/// `(execution id, call number)` of a call id this proxy minted, as it
/// wrote it or as a lenient client echoes it: any dialect's prefix, with or
/// without its underscore (an agent that keeps only letters and digits).
pub fn parse_call_id(id: &str) -> Option<(&str, usize)> {
    if id.len() >= BODY_LEN {
        let (prefix, body) = id.split_at(id.len() - BODY_LEN);
        let known = ["", "call_", "call", "toolu_", "toolu"];
        if known.contains(&prefix) {
            if let Some(found) = parse_body(body) {
                return Some(found);
            }
        }
    }
    parse_legacy_call_id(id)
}

/// Whether `id` may be one of this proxy's call ids, whole: what a history
/// reader checks before it looks for the call's record.
pub fn is_minted(id: &str) -> bool {
    parse_call_id(id).is_some()
}

/// Whether `text` (a message of a history, as JSON) may hold a minted call
/// id: a quoted string starting `call` or `toolu` that is one whole
/// ([`is_minted`]) or shortened ([`short_form`]), or one of the older ids
/// (`"cm` and a letter, digit or `_`). A history reader parses only the
/// messages that may.
///
/// Run on every message of every request: memchr's searchers, built once,
/// not `match_indices`, whose searcher is set up anew for each message and
/// was 16% of a request's instructions with a 40-call history.
pub fn may_name_minted(text: &str) -> bool {
    static QUOTE_CALL: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b"\"call"));
    static QUOTE_TOOLU: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b"\"toolu"));
    static QUOTE_CM: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b"\"cm"));
    let bytes = text.as_bytes();
    let whole = |i: usize| {
        let rest = &text[i + 1..];
        let s = &rest[..memchr::memchr(b'"', rest.as_bytes()).unwrap_or(rest.len())];
        is_minted(s) || short_form(s).is_some()
    };
    QUOTE_CALL.find_iter(bytes).any(whole)
        || QUOTE_TOOLU.find_iter(bytes).any(whole)
        || QUOTE_CM.find_iter(bytes).any(|i| {
            bytes
                .get(i + 3)
                .is_some_and(|b| *b == b'_' || b.is_ascii_alphanumeric())
        })
}

/// The short form a call id has when an agent kept only its first 9 letters
/// and digits (opencode for Mistral models): `call` and the alias (`cm` and
/// the alias for the older ids), if `id` can be one. Ids as long as a whole
/// one are not short forms, so a provider's own ids cost no lookup.
///
/// Asked of every `"call...` in every entry of a history (`call_id` keys
/// and provider ids among them), so it counts before it allocates.
pub fn short_form(id: &str) -> Option<String> {
    // A byte of a multi-byte character is never an ASCII letter or digit.
    let alnum = || id.bytes().filter(u8::is_ascii_alphanumeric);
    let len = alnum().count();
    let opens = |prefix: &[u8]| alnum().take(prefix.len()).eq(prefix.iter().copied());
    let current = len == ALIAS_KEY_LEN && opens(b"call");
    let legacy = len >= ALIAS_KEY_LEN && opens(b"cm");
    (current || legacy).then(|| alnum().map(char::from).collect())
}

/// Letters and digits of a call id kept as its alias key.
const ALIAS_KEY_LEN: usize = 9;

/// The short key of a minted call id: its first 9 letters and digits.
pub fn alias_key(call_id: &str) -> String {
    call_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(ALIAS_KEY_LEN)
        .collect()
}

/// `(execution id, call number)` of call id `id` in `tenant`'s history:
/// a minted id as written, or one an agent shortened to its first letters
/// and digits (found through the alias the proxy recorded). `None` for any
/// other id, and for a shortened one the proxy holds no call for.
pub fn resolve_call_id(
    id: &str,
    tenant: &Tenant,
    store: &dyn ExecutionLookup,
) -> Option<(String, usize)> {
    if let Some((exec, n)) = parse_call_id(id) {
        return Some((exec.to_owned(), n));
    }
    let short = short_form(id)?;
    let full = store.alias(tenant, &short[..ALIAS_KEY_LEN])?;
    let full_alnum: String = full.chars().filter(char::is_ascii_alphanumeric).collect();
    if !full_alnum.starts_with(&short) {
        return None;
    }
    parse_call_id(&full).map(|(exec, n)| (exec.to_owned(), n))
}

/// The id of the `run_code` call the proxy shows the model in place of a
/// program whose record is gone (its own call cannot be replayed): behind
/// `prefix`, 24 letters and digits hashed from the execution id, the same
/// on every request so the model's prompt stays the same; never one that
/// reads as a call of the program.
pub fn lost_program_call_id(prefix: &str, exec_id: &str) -> String {
    let high = alias_hash(exec_id, usize::MAX);
    let low = alias_hash(exec_id, usize::MAX - 1);
    let mut body = [0u8; BODY_LEN];
    base62((u128::from(high) << 64) | u128::from(low), &mut body);
    format!("{prefix}{}", String::from_utf8_lossy(&body))
}

/// A fresh call id for a call the proxy names itself (one that came
/// without an id): `call_` and 24 random letters and digits.
pub fn random_call_id() -> String {
    let mut random = [0u8; 16];
    os_random(&mut random);
    let mut body = [0u8; BODY_LEN];
    base62(u128::from_le_bytes(random), &mut body);
    format!("{CALL_PREFIX}{}", String::from_utf8_lossy(&body))
}

/// The alias hash of call `n` of `exec_id`.
///
/// FNV-1a and a MurmurHash3 finaliser rather than a cryptographic hash: the
/// secret is the execution id, which the client holds whole anyway; the
/// alias must only spread well, be the same on every build and replica
/// (it names a call across restarts), and be cheap, since every id in a
/// history is checked on every request.
fn alias_hash(exec_id: &str, n: usize) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = exec_id.bytes().chain([0]).chain((n as u64).to_le_bytes());
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

fn legacy_alias(exec_id: &str, n: usize) -> [u8; LEGACY_ALIAS_LEN] {
    let mut h = alias_hash(exec_id, n);
    let mut out = [0u8; LEGACY_ALIAS_LEN];
    for c in &mut out {
        *c = b"0123456789abcdefghijklmnopqrstuvwxyz"[(h % 36) as usize];
        h /= 36;
    }
    out
}

fn legacy_call_id(exec_id: &str, n: usize) -> String {
    let alias = legacy_alias(exec_id, n);
    let alias = std::str::from_utf8(&alias).unwrap_or_default();
    format!("{LEGACY_PREFIX}{alias}_{exec_id}_{n}")
}

fn parse_legacy_call_id(id: &str) -> Option<(&str, usize)> {
    let rest = id.strip_prefix(LEGACY_PREFIX)?;
    let (alias, rest) = rest.split_once('_')?;
    let (exec, n) = rest.rsplit_once('_')?;
    let n = n.parse().ok()?;
    (alias.as_bytes() == legacy_alias(exec, n)).then_some((exec, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn a_short_form_is_what_the_first_definition_found(id in "(call|cm|c)?[a-zA-Z0-9_\\-é]{0,12}") {
            let alnum: String = id.chars().filter(char::is_ascii_alphanumeric).collect();
            let current = alnum.starts_with("call") && alnum.len() == ALIAS_KEY_LEN;
            let legacy = alnum.starts_with("cm") && alnum.len() >= ALIAS_KEY_LEN;
            let first = (current || legacy).then_some(alnum);
            proptest::prop_assert_eq!(short_form(&id), first);
        }
    }

    #[test]
    fn call_ids_are_shaped_like_the_providers_and_name_their_call() {
        let tenant = Tenant::anonymous("s");
        let exec = mint_execution_id(&tenant);
        assert_eq!(exec.len(), 16);
        assert!(alnum(&exec));
        assert_eq!(
            minted_for(&exec, &tenant),
            Some(Minted { created_ms: None })
        );
        assert_eq!(minted_for(&exec, &Tenant::anonymous("t")), None);
        for n in [0, 1, 61, 62, 99, 3843, MAX_CALLS - 1] {
            let id = call_id(&exec, n);
            assert_eq!(id.len(), 29, "{id}: OpenAI's length");
            assert!(id.starts_with("call_") && alnum(&id[5..]), "{id}");
            assert_eq!(parse_call_id(&id), Some((exec.as_str(), n)));
            let toolu = call_id_as(TOOL_USE_PREFIX, &exec, n);
            assert_eq!(toolu.len(), 30, "{toolu}");
            assert_eq!(parse_call_id(&toolu), Some((exec.as_str(), n)));
            // Read back without the underscore, or with no prefix.
            assert_eq!(
                parse_call_id(&id.replace('_', "")),
                Some((exec.as_str(), n))
            );
            assert_eq!(parse_call_id(&id[5..]), Some((exec.as_str(), n)));
        }
        assert_eq!(parse_call_id("call_0OeHoXJVOvDLtcj4Jc3JRaaP"), None);
        assert_eq!(parse_call_id("toolu_01Gb18aiytIMZorzBGMkrW60"), None);
        // A changed alias, number or execution is not an id the proxy made.
        let id = call_id(&exec, 3);
        for i in 5..id.len() {
            let mut bytes = id.clone().into_bytes();
            bytes[i] = if bytes[i] == b'a' { b'b' } else { b'a' };
            let changed = String::from_utf8(bytes).unwrap();
            let parsed = parse_call_id(&changed);
            assert!(
                parsed != Some((exec.as_str(), 3)),
                "{changed} still names the call"
            );
        }
    }

    #[test]
    fn answer_ids_in_hex_read_back() {
        let tenant = Tenant::anonymous("s");
        let exec = mint_execution_id(&tenant);
        let id = hex_answer_id("resp_", &exec, 7);
        assert_eq!(id.len(), 5 + 50, "{id}: OpenAI's length");
        assert!(id[5..].bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(parse_hex_answer_id("resp_", &id), Some((exec.clone(), 7)));
        assert_eq!(
            parse_hex_answer_id(
                "resp_",
                "resp_ae530282bd36cb9d21f6be6abf0d7c1c1e21862ab8a18a8902"
            ),
            None
        );
    }

    #[test]
    fn older_ids_still_read() {
        let tenant = Tenant::anonymous("s");
        let created = "18c0b2d3a4f";
        let random = "0123456789abcdef0123456789abcdef";
        let exec = format!("{created}x{random}x{}", tenant.tag(&[created, random]));
        assert_eq!(
            minted_for(&exec, &tenant),
            Some(Minted {
                created_ms: Some(u64::from_str_radix(created, 16).unwrap())
            })
        );
        let id = call_id(&exec, 2);
        assert!(id.starts_with("cm_"), "{id}");
        assert_eq!(parse_call_id(&id), Some((exec.as_str(), 2)));
        let resp = format!("resp_cm_{exec}_4");
        assert_eq!(parse_hex_answer_id("resp_", &resp), Some((exec, 4)));
    }

    #[test]
    fn messages_that_may_name_a_minted_id_are_spotted() {
        let tenant = Tenant::anonymous("t");
        let exec = mint_execution_id(&tenant);
        for id in [
            call_id(&exec, 4),
            call_id_as(TOOL_USE_PREFIX, &exec, 4),
            alias_key(&call_id(&exec, 4)),
        ] {
            assert!(
                may_name_minted(&format!(r#"{{"tool_call_id":"{id}"}}"#)),
                "{id}"
            );
        }
        assert!(!may_name_minted(
            r#"{"tool_call_id":"call_0OeHoXJVOvDLtcj4Jc3JRaaP"}"#
        ));
        assert!(!may_name_minted(
            r#"{"tool_use_id":"toolu_01Gb18aiytIMZorzBGMkrW60"}"#
        ));
        assert!(!may_name_minted(r#"{"content":"call me"}"#));
    }

    #[test]
    fn random_call_ids_look_like_openais() {
        let a = random_call_id();
        assert_eq!(a.len(), 29);
        assert!(a.starts_with("call_") && alnum(&a[5..]));
        assert_ne!(a, random_call_id());
        assert!(!is_minted(&a));
    }
}
