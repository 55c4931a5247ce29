//! What the store writes to Redis: key names and records.
//!
//! Keys, all under the configured prefix and all with a TTL:
//!
//! - `x:<tenant>:<execution id>`: an execution, for the run lifetime while it
//!   waits, for the longer of the lifetime and the splice TTL once it ended
//!   (as [`crate::runtime::MemoryExecutionStore`] keeps them);
//! - `a:<tenant>:<alias>`: the whole id of the call a shortened id names,
//!   written once (`NX`) for the longer of the two;
//! - `s:<splice key>`: a mixed turn's denials, for the splice TTL (the key
//!   is already a hash of the tenant and the turn).
//!
//! The same names in every form (one server, Cluster, Sentinel): every
//! command and the one script touch a single key, so no two keys need to
//! share a cluster hash slot and no key carries a `{hash tag}`; each key
//! is hashed whole and the keys spread over the slots.
//!
//! Values are JSON behind a four-byte version tag (`cmx1`, `cms1`): serde is
//! already here, a record reads with `redis-cli GET`, results and programs
//! are text anyway, and the fields are named so a record written by an older
//! replica still reads (new fields take defaults). An execution's tag is
//! followed by its revision in 16 hex digits, so the compare-and-set script
//! reads the revision with `GETRANGE` and never decodes JSON.

use std::time::Duration;

use crate::runtime::Execution;
use crate::splice::{Splice, SpliceKey};
use crate::tenant::{hex, Tenant};

/// Version tag of an execution record; the revision follows it.
const EXEC_TAG: &[u8; 4] = b"cmx1";
/// Version tag of a splice record.
const SPLICE_TAG: &[u8; 4] = b"cms1";
/// Hex digits of the revision after [`EXEC_TAG`].
const REVISION_DIGITS: usize = 16;

/// The store's key names.
#[derive(Clone, Debug)]
pub struct Keys {
    /// Before every key.
    pub prefix: String,
}

impl Keys {
    /// `tenant`'s execution `id`.
    pub fn execution(&self, tenant: &Tenant, id: &str) -> String {
        format!("{}x:{}:{id}", self.prefix, hex(tenant.as_bytes()))
    }

    /// `tenant`'s alias `short` (see [`alias_key`]).
    pub fn alias(&self, tenant: &Tenant, short: &str) -> String {
        format!("{}a:{}:{short}", self.prefix, hex(tenant.as_bytes()))
    }

    /// A mixed turn's denials.
    pub fn splice(&self, key: &SpliceKey) -> String {
        format!("{}s:{}", self.prefix, hex(key.as_bytes()))
    }
}

pub(super) fn revision_hex(revision: u64) -> String {
    format!("{revision:0width$x}", width = REVISION_DIGITS)
}

/// A lifetime in whole milliseconds, at least one (`PX 0` is an error).
pub(super) fn ttl_ms(ttl: Duration) -> u64 {
    // A hundred years at most: Redis takes any signed 64-bit PX, and no
    // record needs longer.
    u64::try_from(ttl.as_millis())
        .unwrap_or(u64::MAX)
        .clamp(1, 100 * 365 * 24 * 3600 * 1000)
}

/// An execution record: tag, revision, JSON.
pub fn encode_execution(exec: &Execution) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(EXEC_TAG);
    out.extend_from_slice(revision_hex(exec.revision).as_bytes());
    // Serializing plain data into a Vec cannot fail.
    serde_json::to_writer(&mut out, exec).unwrap_or_default();
    out
}

/// An execution from its record.
pub fn decode_execution(bytes: &[u8]) -> Result<Execution, String> {
    let body = bytes.strip_prefix(EXEC_TAG).ok_or_else(|| {
        format!(
            "not an execution record of this version ({})",
            tag_of(bytes)
        )
    })?;
    let json = body
        .get(REVISION_DIGITS..)
        .ok_or("an execution record cut short")?;
    serde_json::from_slice(json)
        .map_err(|e| format!("an execution record that does not parse: {e}"))
}

/// A splice record: tag, JSON.
pub fn encode_splice(splice: &Splice) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(SPLICE_TAG);
    serde_json::to_writer(&mut out, splice).unwrap_or_default();
    out
}

/// A splice from its record.
pub fn decode_splice(bytes: &[u8]) -> Result<Splice, String> {
    let json = bytes
        .strip_prefix(SPLICE_TAG)
        .ok_or_else(|| format!("not a splice record of this version ({})", tag_of(bytes)))?;
    serde_json::from_slice(json).map_err(|e| format!("a splice record that does not parse: {e}"))
}

fn tag_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(4)]).into_owned()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::runtime::CallRecord;
    use serde_json::json;

    pub(crate) fn execution() -> Execution {
        let mut e = Execution::new(
            Tenant::anonymous("s"),
            "call_1".into(),
            "return await tools.read({})".into(),
            Some("reading".into()),
            vec!["read".into()],
        );
        e.calls.push(CallRecord {
            name: "read".into(),
            args: r#"{"path":"a"}"#.into(),
            result: Some("text ✓".into()),
        });
        e.denied_calls = vec![json!({"id": "d1"})];
        e.revision = 0x2a;
        e
    }

    #[test]
    fn an_execution_survives_its_record() {
        let e = execution();
        let bytes = encode_execution(&e);
        assert!(bytes.starts_with(b"cmx1000000000000002a{"));
        assert_eq!(decode_execution(&bytes).unwrap(), e);
    }

    #[test]
    fn a_record_of_an_older_replica_reads_with_defaults() {
        // Written before `revision` existed: it reads as revision 0.
        let e = execution();
        let mut v = serde_json::to_value(&e).unwrap();
        v.as_object_mut().unwrap().remove("revision");
        let mut bytes = b"cmx10000000000000000".to_vec();
        bytes.extend(serde_json::to_vec(&v).unwrap());
        assert_eq!(decode_execution(&bytes).unwrap().revision, 0);
    }

    #[test]
    fn foreign_records_are_refused_not_misread() {
        for bad in [
            &b"cmx2000000000000000{}"[..],
            b"cmx1",
            b"cmx10000000000000000{",
            b"",
        ] {
            assert!(decode_execution(bad).is_err(), "{bad:?}");
        }
        assert!(decode_splice(b"cmx1{}").is_err());
    }

    #[test]
    fn a_splice_survives_its_record() {
        let s = Splice {
            denied_calls: vec![json!({"id": "c", "function": {"name": "shell"}})],
            denials: vec![json!({"role": "tool", "tool_call_id": "c", "content": "denied"})],
        };
        let bytes = encode_splice(&s);
        assert!(bytes.starts_with(b"cms1{"));
        assert_eq!(decode_splice(&bytes).unwrap(), s);
    }

    #[test]
    fn keys_carry_the_prefix_and_the_tenant() {
        let keys = Keys {
            prefix: "cm:".into(),
        };
        let (a, b) = (Tenant::anonymous("a"), Tenant::anonymous("b"));
        let ka = keys.execution(&a, "18cx00x11");
        assert!(
            ka.starts_with("cm:x:") && ka.ends_with(":18cx00x11"),
            "{ka}"
        );
        assert!(ka.contains(&hex(a.as_bytes())));
        assert_ne!(ka, keys.execution(&b, "18cx00x11"));
        assert_ne!(keys.alias(&a, "cmabcdefg"), keys.alias(&b, "cmabcdefg"));
        assert!(keys.alias(&a, "cmabcdefg").starts_with("cm:a:"));
        let s = keys.splice(&SpliceKey::of_turn(
            &a,
            &crate::conversation::Anchor::NONE,
            &["call_1"],
        ));
        assert!(
            s.starts_with("cm:s:") && s.len() == "cm:s:".len() + 64,
            "{s}"
        );
    }

    #[test]
    fn every_lifetime_is_a_valid_px() {
        assert_eq!(ttl_ms(Duration::ZERO), 1);
        assert_eq!(ttl_ms(Duration::from_secs(2)), 2000);
        assert!(ttl_ms(Duration::MAX) < i64::MAX as u64);
    }
}
