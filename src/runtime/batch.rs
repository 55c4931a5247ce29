//! A batch of calls found again by what it calls, for clients that echo
//! the calls the proxy handed them without the ids it gave them.

/// The key a batch of calls is found by when a client echoes it without
/// the ids the proxy gave them (the Gemini API makes a call's id optional,
/// and `langchain-google-genai`, agno and pi drop it): its calls' names
/// and arguments, in order, the arguments read as JSON with keys sorted
/// (a client may write them back in another order or spacing). `cb:` and
/// 32 hex digits; no call id's alias has a `:`. `None` for no calls.
///
/// Two of a tenant's programs that hand out the same batch share the key;
/// the one saved last keeps it (the batch a client echoes now is the one
/// it was handed last), and a result that does not fit the program it
/// reaches is refused there as any other.
pub fn batch_key<'a>(calls: impl Iterator<Item = (&'a str, &'a str)>) -> Option<String> {
    let mut h = ring::digest::Context::new(&ring::digest::SHA256);
    h.update(b"codemode-proxy batch v1\0");
    let mut any = false;
    for (name, args) in calls {
        any = true;
        let args = serde_json::from_str::<serde_json::Value>(args)
            .map_or_else(|_| args.to_owned(), |v| canonical(&v));
        for field in [name, &args] {
            h.update(&(field.len() as u64).to_be_bytes());
            h.update(field.as_bytes());
        }
    }
    let digest = h.finish();
    let hex: String = digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    any.then(|| format!("cb:{hex}"))
}

/// `value` as JSON text with every object's keys sorted.
fn canonical(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&map[*k])))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}
