//! How a log line is spelled: tracing-subscriber's full text format or its
//! flattened JSON format, with the request's id, written without the
//! general formatting machinery.
//!
//! Every request writes an access line of twenty fields; spelled through
//! `core::fmt` and tracing-subscriber's visitors (a styled name, an `=` and
//! a `Debug` value per field) it cost more than the rest of a request's
//! handling. Here a field is a few direct writes.
//!
//! The request id comes from the request's ledger, current while code runs
//! for the request (see [`super::logging`]).
//!
//! Each format has its file ([`text`], [`json`]); this one holds what both
//! spell alike: the buffer a line is built in, the timestamp, a float.

mod json;
mod text;

use std::cell::RefCell;
use std::fmt::{self, Write as _};

use tracing_subscriber::fmt::format::Writer;

pub(crate) use json::{JsonFields, JsonLine};
pub(crate) use text::{TextFields, TextLine};

/// Runs `line` on a reused per-thread buffer, then hands the result to `w`
/// in one write: `w` is a `dyn fmt::Write`, and a line spelled straight
/// into it pays a dynamic call for each of its hundred-odd pieces.
fn buffered(w: &mut Writer<'_>, line: impl FnOnce(&mut String) -> fmt::Result) -> fmt::Result {
    thread_local! {
        static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
    }
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut out) => {
            out.clear();
            line(&mut out)?;
            w.write_str(&out)?;
            // One huge line does not pin its buffer for the thread's life.
            if out.capacity() > 64 << 10 {
                *out = String::new();
            }
            Ok(())
        }
        // A value's `Debug` that logs: its line gets its own buffer.
        Err(_) => {
            let mut out = String::new();
            line(&mut out)?;
            w.write_str(&out)
        }
    })
}

/// The time as tracing-subscriber's `SystemTime` spells it
/// (`2026-01-01T00:00:00.000000Z`); the part up to the second is spelled
/// once a second per thread.
fn push_timestamp(out: &mut String) {
    thread_local! {
        static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let (secs, micros) = (now.as_secs(), now.subsec_micros());
    SECOND.with(|second| {
        let mut second = second.borrow_mut();
        if second.0 != secs {
            *second = (secs, date_and_second(secs));
        }
        out.push_str(&second.1);
    });
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(micros);
    out.push_str(&"000000"[digits.len().min(6)..]);
    out.push_str(digits);
    out.push('Z');
}

/// `YYYY-MM-DDThh:mm:ss.` of `secs` since the Unix epoch, UTC (the civil
/// calendar from a day count, as in Howard Hinnant's `civil_from_days`).
pub(crate) fn date_and_second(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let of_day = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.",
        of_day / 3_600,
        of_day / 60 % 60,
        of_day % 60
    )
}

/// `value` as `Debug` spells an `f64`. The proxy's own floats are
/// milliseconds to the microsecond, spelled here without `core::fmt`'s
/// shortest-digits search.
fn push_f64(out: &mut String, value: f64) {
    // A value that is exactly the double nearest m/1000 for an integer m
    // below 2^40 is spelled by Debug as m/1000's decimal digits: the doubles
    // there are far closer together than 0.001, so no shorter decimal
    // names the same one.
    let thousandths = (value * 1000.0).round();
    if (0.0..(1u64 << 40) as f64).contains(&thousandths)
        && thousandths / 1000.0 == value
        && value.is_sign_positive()
        && (value == 0.0 || value >= 1e-4)
    {
        let m = thousandths as u64;
        out.push_str(itoa::Buffer::new().format(m / 1000));
        out.push('.');
        let frac = m % 1000;
        let digits = [
            b'0' + (frac / 100) as u8,
            b'0' + (frac / 10 % 10) as u8,
            b'0' + (frac % 10) as u8,
        ];
        let keep = match digits {
            [_, b'0', b'0'] => 1,
            [_, _, b'0'] => 2,
            _ => 3,
        };
        out.push_str(std::str::from_utf8(&digits[..keep]).unwrap_or("0"));
    } else {
        let _ = write!(out, "{value:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_spelled_as_rfc_3339_utc() {
        for (secs, text) in [
            (0, "1970-01-01T00:00:00."),
            (951_782_400, "2000-02-29T00:00:00."),
            (1_709_164_800, "2024-02-29T00:00:00."),
            (1_796_068_257, "2026-11-30T19:50:57."),
            (4_102_444_799, "2099-12-31T23:59:59."),
        ] {
            assert_eq!(date_and_second(secs), text);
        }
        let mut out = String::new();
        push_timestamp(&mut out);
        assert_eq!(out.len(), "2026-11-30T19:50:57.123456Z".len(), "{out}");
        assert!(out.ends_with('Z') && out.as_bytes()[19] == b'.', "{out}");
    }

    #[test]
    fn floats_are_spelled_as_debug_spells_them() {
        let mut values = vec![
            0.0,
            0.001,
            0.906,
            1.0,
            1.5,
            12.34,
            999.999,
            1e-4,
            5e-5,
            1e-7,
            0.1 + 0.2,
            1e9,
            1e12,
            1e16,
            1e17,
            1.0 / 3.0,
            -0.5,
            -0.0,
            f64::MAX,
            f64::MIN_POSITIVE,
        ];
        // Every microsecond count as the ledger turns it into milliseconds.
        values.extend((0..200_000u64).step_by(7).map(|us| us as f64 / 1000.0));
        values.extend((0..40).map(|shift| (1u64 << shift) as f64 / 1000.0 + 0.001));
        for v in values {
            let mut out = String::new();
            push_f64(&mut out, v);
            assert_eq!(out, format!("{v:?}"), "{v}");
        }
    }
}
