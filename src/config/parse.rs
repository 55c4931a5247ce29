//! Reading one variable: unset takes the default, a bad value is recorded
//! (naming the variable) and reading goes on, so every mistake is found.

use std::fmt;

/// Parses `var` with `parse`, recording a failure; `default` when unset.
pub(super) fn parse_or<T>(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: Option<T>,
    fail: &mut impl FnMut(&'static str, String),
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Option<T> {
    match get(var) {
        None => default,
        Some(v) => match parse(&v) {
            Ok(t) => Some(t),
            Err(e) => {
                fail(var, e);
                None
            }
        },
    }
}

pub(super) fn positive<T: std::str::FromStr + PartialOrd + Default>(
    v: &str,
    what: &str,
) -> Result<T, String> {
    v.trim()
        .parse::<T>()
        .ok()
        .filter(|n| *n > T::default())
        .ok_or_else(|| format!("`{v}` is not {what} greater than zero"))
}

/// A positive number no larger than `max`: absurd values (a memory limit
/// that would wrap to "no limit") stop start-up instead.
pub(super) fn bounded<T>(v: &str, what: &str, max: T) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + Default + fmt::Display + Copy,
{
    v.trim()
        .parse::<T>()
        .ok()
        .filter(|n| *n > T::default() && *n <= max)
        .ok_or_else(|| format!("`{v}` is not {what} from 1 to {max}"))
}
