//! The mutations: where a call can stand in an answer or event, and that
//! place written as a client that reads leniently would still read it.

use serde_json::{json, Value};

/// One step of a path, owning its key.
#[derive(Clone, Debug)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// Every call-bearing path in `value`: each of `keys` wherever it stands
/// under another, and every entry of a list found there.
pub fn paths(value: &Value, keys: &[&str]) -> Vec<Vec<Seg>> {
    fn walk(value: &Value, keys: &[&str], at: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
        match value {
            Value::Object(fields) => {
                for (key, child) in fields.iter().filter(|(k, _)| keys.contains(&k.as_str())) {
                    at.push(Seg::Key(key.clone()));
                    out.push(at.clone());
                    walk(child, keys, at, out);
                    at.pop();
                }
            }
            Value::Array(entries) => {
                for (i, child) in entries.iter().enumerate() {
                    at.push(Seg::Index(i));
                    out.push(at.clone());
                    walk(child, keys, at, out);
                    at.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, keys, &mut Vec::new(), &mut out);
    out
}

#[derive(Clone, Copy, Debug)]
pub enum Mutation {
    /// A list as an object keyed "0", "1", ...
    Keyed,
    /// An object or a name as a list holding it.
    Wrapped,
    Null,
    /// The key twice: as it was, then `null`.
    Repeated,
}

pub const MUTATIONS: [Mutation; 4] = [
    Mutation::Keyed,
    Mutation::Wrapped,
    Mutation::Null,
    Mutation::Repeated,
];

fn place<'a>(value: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    path.iter().try_fold(value, |v, seg| match seg {
        Seg::Key(k) => v.get_mut(k.as_str()),
        Seg::Index(i) => v.get_mut(*i),
    })
}

/// `value` with `mutation` at `path`, as JSON text; `None` where it does
/// not apply (a list keyed, a number wrapped, an entry repeated).
pub fn mutated(value: &Value, path: &[Seg], mutation: Mutation) -> Option<String> {
    if let Mutation::Repeated = mutation {
        if !matches!(path.last(), Some(Seg::Key(_))) {
            return None;
        }
        let mut out = String::new();
        write_repeating(value, path, &mut out);
        return Some(out);
    }
    let mut copy = value.clone();
    let at = place(&mut copy, path)?;
    *at = match (mutation, &*at) {
        (Mutation::Keyed, Value::Array(entries)) => Value::Object(
            entries
                .iter()
                .enumerate()
                .map(|(i, e)| (i.to_string(), e.clone()))
                .collect(),
        ),
        (Mutation::Wrapped, v @ (Value::Object(_) | Value::String(_))) => json!([v]),
        (Mutation::Null, _) => Value::Null,
        _ => return None,
    };
    Some(copy.to_string())
}

/// `value` as JSON text, the key `path` ends in written twice: as it was,
/// then `null`.
fn write_repeating(value: &Value, path: &[Seg], out: &mut String) {
    let text = |s: &str| Value::String(s.to_owned()).to_string();
    match (value, path) {
        (Value::Object(fields), [Seg::Key(target), rest @ ..]) => {
            out.push('{');
            for (i, (key, child)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&text(key));
                out.push(':');
                if key != target {
                    out.push_str(&child.to_string());
                } else if rest.is_empty() {
                    out.push_str(&child.to_string());
                    out.push(',');
                    out.push_str(&text(key));
                    out.push_str(":null");
                } else {
                    write_repeating(child, rest, out);
                }
            }
            out.push('}');
        }
        (Value::Array(entries), [Seg::Index(n), rest @ ..]) => {
            out.push('[');
            for (i, child) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if i == *n {
                    write_repeating(child, rest, out);
                } else {
                    out.push_str(&child.to_string());
                }
            }
            out.push(']');
        }
        _ => out.push_str(&value.to_string()),
    }
}
