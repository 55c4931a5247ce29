//! A batch of calls found again by what it calls, for clients that echo
//! the calls the proxy handed them without the ids it gave them.

/// The key a batch of calls is found by when a client echoes it without
/// the ids the proxy gave them (the Gemini API makes a call's id optional,
/// and `langchain-google-genai`, agno and pi drop it; agno rewrites a chat
/// id that does not start with `call_`): its calls' names and arguments,
/// in any order (a client may send a batch back reordered), the arguments
/// read as JSON with keys sorted (a client may write them back in another
/// order or spacing). `cb:` and 32 hex digits; no call id's alias has a
/// `:`. `None` for no calls.
///
/// Two of a tenant's programs that hand out the same batch share the key;
/// the one saved last keeps it (the batch a client echoes now is the one
/// it was handed last), and a result that does not fit the program it
/// reaches is refused there as any other.
pub fn batch_key<'a>(calls: impl Iterator<Item = (&'a str, &'a str)>) -> Option<String> {
    let entries: Vec<CallEntry> = calls
        .map(|(name, args)| CallEntry::of(name, args))
        .collect();
    key_of(&entries)
}

/// One call as [`batch_key`] reads it: the digest of its name and
/// canonical arguments, made once per call, so a reader trying a call in
/// several candidate batches neither reads nor hashes its arguments again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct CallEntry([u8; 32]);

impl CallEntry {
    /// The entry of a call of tool `name` with arguments `args` (JSON text).
    pub fn of(name: &str, args: &str) -> CallEntry {
        let args = canonical_args(args);
        let mut h = ring::digest::Context::new(&ring::digest::SHA256);
        for field in [name, &args] {
            h.update(&(field.len() as u64).to_be_bytes());
            h.update(field.as_bytes());
        }
        let mut out = [0u8; 32];
        out.copy_from_slice(h.finish().as_ref());
        CallEntry(out)
    }
}

/// The [`batch_key`] of calls already read into entries.
pub fn key_of<'a>(entries: impl IntoIterator<Item = &'a CallEntry>) -> Option<String> {
    let mut sorted: Vec<&CallEntry> = entries.into_iter().collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_unstable();
    let mut h = ring::digest::Context::new(&ring::digest::SHA256);
    h.update(b"codemode-proxy batch v3\0");
    for entry in sorted {
        h.update(&entry.0);
    }
    let digest = h.finish();
    Some(format!("cb:{}", crate::tenant::hex(&digest.as_ref()[..16])))
}

/// The key under which a store notes that a call of tool `name` with
/// arguments `args` (JSON text, read as [`batch_key`] reads them) was
/// handed out in some batch: `cc:` and 16 hex digits. A reader looking for
/// a batch asks once per call before it makes any batch's key, so a
/// history of calls no program handed out costs no digest. The hash
/// (FNV-1a, 64 bits) need not resist a chosen collision: a call it
/// wrongly admits costs the batch key's lookup, which is exact.
pub fn call_key(name: &str, args: &str) -> String {
    let args = canonical_args(args);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for field in [name, &args] {
        for byte in (field.len() as u64)
            .to_be_bytes()
            .iter()
            .chain(field.as_bytes())
        {
            h = (h ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("cc:{h:016x}")
}

/// Whether one of `tenant`'s programs handed out a call of tool `name`
/// with arguments `args` in a batch ([`call_key`]): a group of calls
/// holding one that was not can be no batch the proxy knows.
pub fn handed_out(
    store: &dyn crate::runtime::ExecutionLookup,
    tenant: &crate::tenant::Tenant,
    name: &str,
    args: &str,
) -> bool {
    store.alias(tenant, &call_key(name, args)).is_some()
}

/// Whether `tenant` holds a batch of exactly these calls (`(name,
/// arguments)`, in any order), asking first for each call's mark
/// ([`handed_out`]): a turn with a call no program handed out costs no
/// digest.
pub fn may_echo_calls(
    store: &dyn crate::runtime::ExecutionLookup,
    tenant: &crate::tenant::Tenant,
    calls: &[(&str, &str)],
) -> bool {
    if !calls
        .iter()
        .all(|(name, args)| handed_out(store, tenant, name, args))
    {
        return false;
    }
    let entries: Vec<CallEntry> = calls
        .iter()
        .map(|(name, args)| CallEntry::of(name, args))
        .collect();
    may_echo(store, tenant, &entries)
}

/// Whether `tenant` holds a batch handed out with exactly these calls (in
/// any order): the one store lookup a reader makes before it reads the
/// results sent after them.
pub fn may_echo<'a>(
    store: &dyn crate::runtime::ExecutionLookup,
    tenant: &crate::tenant::Tenant,
    entries: impl IntoIterator<Item = &'a CallEntry>,
) -> bool {
    key_of(entries).is_some_and(|key| store.alias(tenant, &key).is_some())
}

/// `value` as JSON text with every object's keys sorted, written into
/// `out` (one buffer for the whole value: every call of every turn of a
/// history is read so on each request).
fn write_canonical(out: &mut Vec<u8>, value: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut fields: Vec<(&String, &Value)> = map.iter().collect();
            fields.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in fields.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                crate::wire::write_json_string(out, k);
                out.push(b':');
                write_canonical(out, v);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(out, item);
            }
            out.push(b']');
        }
        // A scalar's JSON text cannot fail to write into a Vec.
        other => drop(serde_json::to_writer(&mut *out, other)),
    }
}

/// One call of a turn a client sent back, as its dialect reads it: the id
/// it carries (the client's own, or none), the tool it names, its
/// arguments as JSON text.
#[derive(Clone, Debug)]
pub struct EchoedCall<'a> {
    /// The id the client gave the call, if any.
    pub id: Option<&'a str>,
    /// The tool it calls.
    pub name: &'a str,
    /// Its arguments, as JSON text.
    pub args: std::borrow::Cow<'a, str>,
}

/// One result the client sent after such a turn: the call id it names (if
/// any) and its content, as written (only compared).
#[derive(Clone, Debug)]
pub struct EchoedResult<'a> {
    /// The call id the result names, if any.
    pub id: Option<&'a str>,
    /// Its content, as the client wrote it.
    pub content: &'a str,
}

/// A turn a client sent back with ids the proxy never gave (rewritten, or
/// dropped), found to be a batch one of the tenant's programs handed out:
/// the id the proxy gave each of its calls, and each result's.
#[derive(Debug, PartialEq, Eq)]
pub struct Echo {
    /// The minted id of each call of the turn, in the turn's order.
    pub calls: Vec<String>,
    /// The minted id each result answers, in the results' order; `None`
    /// for a result that names none of the turn's calls.
    pub results: Vec<Option<String>>,
}

/// The batch a turn echoes without the proxy's ids, when it is one: the
/// turn's calls (names and arguments, in any order) are exactly a batch of
/// calls one of `tenant`'s programs handed out ([`batch_key`]). Each
/// dialect reads its turn's calls and results and writes the ids back; the
/// matching is here, once.
///
/// A call is the batch's call with its name and arguments (the first one
/// not taken, in order). A result answers the call whose id it names, as
/// the client paired them (the `k`-th result naming an id answers the
/// `k`-th call with that id, so calls without ids are answered in order).
/// `Ok(None)`: not a batch the proxy knows (the model's own `run_code`,
/// a native call). `Err` names what the proxy cannot tell: the turn sent
/// identical calls back in another order than they were handed out, and
/// their results differ.
pub fn echoed_batch(
    store: &dyn crate::runtime::ExecutionLookup,
    tenant: &crate::tenant::Tenant,
    calls: &[EchoedCall<'_>],
    results: &[EchoedResult<'_>],
) -> Result<Option<Echo>, String> {
    if calls.is_empty() || calls.iter().any(|c| c.name == crate::mode::RUN_CODE) {
        return Ok(None);
    }
    let Some(key) = batch_key(calls.iter().map(|c| (c.name, c.args.as_ref()))) else {
        return Ok(None);
    };
    let Some(first) = store.alias(tenant, &key) else {
        return Ok(None);
    };
    let Some((exec_id, start)) = crate::runtime::parse_call_id(&first) else {
        return Ok(None);
    };
    let Some(exec) = store.get(tenant, exec_id) else {
        return Ok(None);
    };
    let Some(batch) = exec.calls.get(start..start + calls.len()) else {
        return Ok(None);
    };
    let entry = |name: &str, args: &str| (name.to_owned(), canonical_args(args));
    let handed: Vec<(String, String)> = batch.iter().map(|c| entry(&c.name, &c.args)).collect();
    let sent: Vec<(String, String)> = calls.iter().map(|c| entry(c.name, &c.args)).collect();
    // Each call of the turn is the first call of the batch like it not yet taken.
    let mut taken = vec![false; handed.len()];
    let mut numbers = Vec::with_capacity(sent.len());
    for s in &sent {
        let Some(j) = (0..handed.len()).find(|&j| !taken[j] && handed[j] == *s) else {
            return Ok(None);
        };
        taken[j] = true;
        numbers.push(start + j);
    }
    // The client's own pairing: the k-th result naming an id answers the
    // k-th call carrying it (no id is an id too).
    let mut used: Vec<usize> = vec![0; calls.len()];
    let answered: Vec<Option<usize>> = results
        .iter()
        .map(|r| {
            let same: Vec<usize> = (0..calls.len())
                .filter(|&i| {
                    calls[i].id.filter(|id| !id.is_empty()) == r.id.filter(|id| !id.is_empty())
                })
                .collect();
            let k = same.iter().map(|&i| used[i]).sum::<usize>();
            let i = *same.get(k)?;
            used[i] += 1;
            Some(i)
        })
        .collect();
    // Identical calls sent back in another order: which is which is a
    // guess, harmless only when their results agree.
    let reordered = numbers.iter().enumerate().any(|(i, &n)| n != start + i);
    if reordered {
        for i in 0..sent.len() {
            for j in i + 1..sent.len() {
                if sent[i] != sent[j] {
                    continue;
                }
                let content = |c: usize| {
                    answered
                        .iter()
                        .position(|a| *a == Some(c))
                        .map(|r| results[r].content)
                };
                let (a, b) = (content(i), content(j));
                if a.is_some() && b.is_some() && a != b {
                    return Err(format!(
                        "the assistant turn sends back two `{}` calls with the same arguments, in \
                         another order than the proxy handed them out and with ids it did not \
                         give them (`{}`, `{}`), and their results differ: the proxy cannot tell \
                         which result answers which of the program's calls `{}` and `{}`. Send \
                         the calls back with the ids they came with, or in the order they came",
                        sent[i].0,
                        calls[i].id.unwrap_or(""),
                        calls[j].id.unwrap_or(""),
                        exec.call_id(numbers[i]),
                        exec.call_id(numbers[j]),
                    ));
                }
            }
        }
    }
    Ok(Some(Echo {
        calls: numbers.iter().map(|&n| exec.call_id(n)).collect(),
        results: answered
            .into_iter()
            .map(|a| a.map(|i| exec.call_id(numbers[i])))
            .collect(),
    }))
}

/// Arguments as compared: JSON with every object's keys sorted, or the
/// text as it came when it is not JSON.
fn canonical_args(args: &str) -> String {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(args) else {
        return args.to_owned();
    };
    let mut out = Vec::with_capacity(args.len());
    write_canonical(&mut out, &value);
    // JSON written from a parsed value is UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;

    /// The canonical text as batch keys were first written (a string per
    /// value, joined): the keys a store holds must not change.
    fn canonical_as_first_written(value: &Value) -> String {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let fields: Vec<String> = keys
                    .iter()
                    .map(|k| {
                        let key = Value::String((*k).clone());
                        format!("{key}:{}", canonical_as_first_written(&map[*k]))
                    })
                    .collect();
                format!("{{{}}}", fields.join(","))
            }
            Value::Array(items) => {
                let items: Vec<String> = items.iter().map(canonical_as_first_written).collect();
                format!("[{}]", items.join(","))
            }
            other => other.to_string(),
        }
    }

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "\\PC{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::btree_map("\\PC{0,6}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn the_canonical_text_is_the_one_keys_were_first_written_with(value in json()) {
            let text = serde_json::to_string(&value).unwrap();
            let read: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(super::canonical_args(&text), canonical_as_first_written(&read));
        }
    }

    #[test]
    fn text_that_is_not_json_is_compared_as_it_came() {
        assert_eq!(super::canonical_args("{oops"), "{oops");
        assert_eq!(
            super::canonical_args(r#"{ "b": [1, {"d":2,"c":3}], "a": "x" }"#),
            r#"{"a":"x","b":[1,{"c":3,"d":2}]}"#
        );
    }
}
