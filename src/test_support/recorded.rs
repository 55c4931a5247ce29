//! The recorded streams under `fixtures/streams/`, what each is expected
//! to give, and the checks every dialect's fixture tests make alike.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Judged, RoundEnd};

/// A recorded stream and what it is expected to give.
pub struct Fixture {
    /// The file's stem: the quirk it shows.
    pub name: String,
    /// The upstream's bytes, as recorded.
    pub bytes: Vec<u8>,
    /// Its `.json`: `provider`, `behaviour`, `evidence`, `expect`.
    pub meta: Value,
}

/// Every `.sse` file under `fixtures/streams/<dir>` (`""` for chat's) with
/// its `.json`, sorted by name.
pub fn fixtures(dir: &str) -> Vec<Fixture> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/streams")
        .join(dir);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sse"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(p.with_extension("json"))
                .unwrap_or_else(|e| panic!("{}: its .json: {e}", p.display()));
            let meta: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: its .json: {e}", p.display()));
            for key in ["provider", "behaviour", "evidence", "expect"] {
                assert!(meta.get(key).is_some(), "{} lacks {key}", p.display());
            }
            Fixture {
                name: p
                    .file_stem()
                    .expect("a file name")
                    .to_string_lossy()
                    .into_owned(),
                bytes: std::fs::read(&p).expect("a readable fixture"),
                meta,
            }
        })
        .collect()
}

/// The `(name, arguments)` pairs of `expect.calls`.
pub fn expected_calls(expect: &Value) -> Vec<(String, String)> {
    expect["calls"]
        .as_array()
        .expect("expect.calls")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().expect("a call's name").to_owned(),
                c["arguments"]
                    .as_str()
                    .expect("a call's arguments")
                    .to_owned(),
            )
        })
        .collect()
}

/// The `(name, code)` pairs of `expect.denied`.
pub fn expected_denials(expect: &Value) -> Vec<(String, String)> {
    expect["denied"]
        .as_array()
        .expect("expect.denied")
        .iter()
        .map(|d| {
            (
                d["name"].as_str().expect("a denied call's name").to_owned(),
                d["code"].as_str().expect("a denial's code").to_owned(),
            )
        })
        .collect()
}

/// The fixture `name` under `fixtures/streams/<dir>`.
pub fn fixture(dir: &str, name: &str) -> Fixture {
    fixtures(dir)
        .into_iter()
        .find(|f| f.name == name)
        .expect("the fixture")
}

/// The fixtures under `fixtures/streams/<dir>` whose round is repaired.
pub fn repair_fixtures(dir: &str) -> impl Iterator<Item = Fixture> {
    fixtures(dir)
        .into_iter()
        .filter(|f| f.meta["expect"]["outcome"] == "repair")
}

/// A fixture whose outcome is `error`: the upstream's error is recognised,
/// nothing is repaired after it, and the client gets each of its
/// `errors` (counted by the dialect's client as `errors_seen`).
pub fn error_outcome_holds(name: &str, judged: &Judged, errors_seen: usize, expect: &Value) {
    assert!(judged.errored, "{name}: the upstream's error is recognised");
    assert!(
        matches!(judged.end, RoundEnd::Done { splice: None }),
        "{name}: no repair after an error"
    );
    assert_eq!(
        errors_seen as u64,
        expect["errors"].as_u64().unwrap(),
        "{name}: the error events reach the client"
    );
}

/// A fixture whose outcome is `final`: the stream ended without an error,
/// and a splice was kept exactly where `expect.splice` says the turn mixed
/// passed and denied calls.
pub fn final_outcome_holds(name: &str, judged: &Judged, expect: &Value) {
    let RoundEnd::Done { splice } = &judged.end else {
        panic!("{name}: expected the end, got {:?}", judged.end)
    };
    assert!(!judged.errored, "{name}");
    assert_eq!(
        splice.is_some(),
        expect
            .get("splice")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        "{name}: a mixed turn stores its denials"
    );
}
