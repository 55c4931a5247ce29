//! Writing events: the frames the proxy writes itself, and the pieces the
//! judges' fast paths splice into an event's original text.

use std::fmt::Write as _;

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::Value;

/// One `data:` event holding `value` (Chat Completions' frames).
pub fn data_event(value: &Value) -> Bytes {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(b"data: ");
    // Serialising a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, value);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// One event: its type on the `event:` line, `value` as its data
/// (Responses' and Messages' frames).
pub fn named_event(kind: &str, value: &Value) -> Bytes {
    let mut out = String::with_capacity(160);
    let _ = write!(out, "event: {kind}\ndata: ");
    let mut bytes = out.into_bytes();
    // Serialising a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut bytes, value);
    bytes.extend_from_slice(b"\n\n");
    Bytes::from(bytes)
}

/// Whether `kind` can stand on an `event:` line as it is.
pub fn is_event_name(kind: &str) -> bool {
    !kind.is_empty() && !kind.bytes().any(|b| b == b'\n' || b == b'\r')
}

/// How many decimal digits `n` takes.
pub fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Writes `n` in decimal.
pub fn push_number(out: &mut Vec<u8>, n: u64) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    let mut n = n;
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[at..]);
}

/// Where `raw`, borrowed from `data`, lies in it.
pub fn span_of(data: &str, raw: &RawValue) -> Option<(usize, usize)> {
    let start = (raw.get().as_ptr() as usize).checked_sub(data.as_ptr() as usize)?;
    let end = start + raw.get().len();
    (data.get(start..end) == Some(raw.get())).then_some((start, end))
}
