//! Reading `name=value` pairs of a query string or a form body
//! (`application/x-www-form-urlencoded`): `+` is a space, `%XX` a byte.

/// The first value of `name` in `pairs` (`a=1&b=2`), decoded; `None`
/// when it is absent or does not decode to UTF-8.
pub(crate) fn param(pairs: &str, name: &str) -> Option<String> {
    pairs.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (decode(key)? == name).then(|| decode(value)).flatten()
    })
}

fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::param;

    #[test]
    fn values_are_found_by_name_and_decoded() {
        assert_eq!(
            param("a=1&token=x%2By+z", "token").as_deref(),
            Some("x+y z")
        );
        assert_eq!(
            param("dialect=responses", "dialect").as_deref(),
            Some("responses")
        );
        assert_eq!(param("a=1", "token"), None);
        assert_eq!(param("token=%zz", "token"), None);
        assert_eq!(param("token", "token").as_deref(), Some(""));
    }
}
