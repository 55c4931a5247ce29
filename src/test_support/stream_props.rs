//! What the Messages and Responses stream properties generate alike (a
//! text's deltas, a call's input and where it is cut) and how they compare
//! two runs of a judge.

use proptest::prelude::*;

use super::{fixtures, Judged, RoundEnd};

/// A text block's or message's text, in deltas.
pub fn text_deltas() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec("[a-zA-Z .,`\u{e9}]{1,8}", 1..4)
}

/// A thinking block's or reasoning item's summary.
pub fn summary() -> impl Strategy<Value = String> {
    "[a-z ]{1,16}"
}

/// A call's input, as a map written out as JSON (escapes and newlines in
/// its values).
pub fn call_input() -> impl Strategy<Value = std::collections::BTreeMap<String, String>> {
    proptest::collection::btree_map("[a-z]{1,6}", "[a-zA-Z0-9 \"\\\\{}\n]{0,12}", 0..4)
}

/// Where a call's input is cut into deltas (see [`split`]).
pub fn call_cuts() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0usize..64, 0..5)
}

/// `text` in pieces at `cuts` (each a byte offset, kept on char boundaries).
pub fn split(text: &str, cuts: &[usize]) -> Vec<String> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (text.len() + 1)).collect();
    points.sort_unstable();
    let mut pieces = Vec::new();
    let mut last = 0;
    for p in points.into_iter().chain([text.len()]) {
        if p > last && text.is_char_boundary(p) {
            pieces.push(text[last..p].to_owned());
            last = p;
        }
    }
    pieces
}

/// The client got the same bytes and the round ended the same way.
pub fn same(a: &Judged, b: &Judged) -> Result<(), TestCaseError> {
    prop_assert!(
        a.client == b.client,
        "the client's bytes differ:\n{}\nagainst\n{}",
        String::from_utf8_lossy(&a.client),
        String::from_utf8_lossy(&b.client)
    );
    prop_assert_eq!(a.end_text(), b.end_text());
    Ok(())
}

/// The fixture under `fixtures/streams/<dir>` that `pick` picks, judged
/// by `judge` at `cuts`, gives what it gives whole.
pub fn a_fixture_cut_gives_what_it_gives_whole(
    dir: &str,
    pick: prop::sample::Index,
    cuts: &[usize],
    judge: impl Fn(&[u8], &[usize]) -> Judged,
) -> Result<(), TestCaseError> {
    let all = fixtures(dir);
    let f = &all[pick.index(all.len())];
    same(&judge(&f.bytes, cuts), &judge(&f.bytes, &[]))
}

/// Of a turn whose calls were `calls` (each name with its input as the
/// model wrote it), the client got `got`: `run_code`'s calls alone,
/// exactly as written; the round is repaired when every call was denied,
/// and the denials are spliced when only some were. Whether it was
/// repaired.
pub fn only_run_code_got_through(
    calls: &[(&str, &str)],
    got: &[(String, String)],
    end: &RoundEnd,
) -> Result<bool, TestCaseError> {
    let allowed: Vec<(String, String)> = calls
        .iter()
        .filter(|(n, _)| *n == "run_code")
        .map(|(n, i)| (n.to_string(), i.to_string()))
        .collect();
    prop_assert_eq!(got, &allowed[..]);
    let repaired = matches!(end, RoundEnd::Repair { .. });
    prop_assert_eq!(repaired, !calls.is_empty() && allowed.is_empty());
    if let RoundEnd::Done { splice } = end {
        prop_assert_eq!(
            splice.is_some(),
            !allowed.is_empty() && allowed.len() < calls.len()
        );
    }
    Ok(repaired)
}
