use proptest::prelude::*;
use serde_json::value::RawValue;

use super::*;
use crate::wire::{parse_noting_repeats, RawObject};

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).unwrap()
}

fn exact(text: &str) -> Option<Repeat> {
    first_repeat(&raw(text), Keys::Exact, "x")
}

fn proto(key: &str, text: &str) -> Option<Repeat> {
    first_repeat(&raw(text), Keys::Proto, key)
}

fn at(path: &str) -> Option<Repeat> {
    Some(Repeat {
        path: path.into(),
        also: None,
    })
}

fn spelled(path: &str, also: &str) -> Option<Repeat> {
    Some(Repeat {
        path: path.into(),
        also: Some(also.into()),
    })
}

#[test]
fn a_repeated_key_is_named_by_its_path_at_any_depth() {
    assert_eq!(exact(r#"{"a":1,"a":2}"#), at("x.a"));
    assert_eq!(
        exact(r#"{"a":[{"b":1},{"c":{"d":1,"e":[],"d":2}}]}"#),
        at("x.a[1].c.d")
    );
    assert_eq!(exact(r#"[[], {"a":{}}, [{"b":1,"b":1}]]"#), at("x[2][0].b"));
    // The same key in sibling objects, or at another depth, is no repeat.
    assert_eq!(
        exact(r#"{"a":{"a":1},"b":{"a":1},"c":[{"a":1},{"a":1}]}"#),
        None
    );
    // Compared unescaped; strings holding quotes and brackets are skipped.
    assert_eq!(exact(r#"{"n":1,"\u006e":2}"#), at("x.n"));
    assert_eq!(
        exact(r#"{"a":"\"}{\\","b":["]","\"a\":"],"c":"\\\"","a\"":1}"#),
        None
    );
    assert_eq!(exact(r#"{"\"":1,"\u0022":2}"#), at("x.\""));
    assert_eq!(exact(r#""{\"a\":1,\"a\":2}""#), None);
    assert_eq!(exact("12"), None);
}

#[test]
fn wide_objects_are_checked_as_well_as_narrow_ones() {
    let keys: Vec<String> = (0..200).map(|i| format!("\"k{i}\":{i}")).collect();
    assert_eq!(exact(&format!("{{{}}}", keys.join(","))), None);
    for again in [3, 16, 17, 150] {
        let text = format!("{{{},\"k{again}\":0}}", keys.join(","));
        assert_eq!(exact(&text), at(&format!("x.k{again}")), "{again}");
    }
    let wide = format!("[{{{}}},{{\"k1\":1}}]", keys.join(","));
    assert_eq!(exact(&wide), None);
}

#[test]
fn proto_json_reads_both_spellings_of_a_field_as_one_key() {
    assert_eq!(
        proto(
            "toolConfig",
            r#"{"functionCallingConfig":{"allowedFunctionNames":[],"allowed_function_names":["bash"]}}"#
        ),
        spelled(
            "toolConfig.functionCallingConfig.allowedFunctionNames",
            "toolConfig.functionCallingConfig.allowed_function_names"
        )
    );
    assert_eq!(
        proto(
            "generation_config",
            r#"{"candidate_count":1,"candidateCount":2}"#
        ),
        spelled(
            "generation_config.candidate_count",
            "generation_config.candidateCount"
        )
    );
    assert_eq!(
        proto(
            "contents",
            r#"[{"parts":[{"text":"a"},{"function_call":{"name":"a"},"functionCall":{}}]}]"#
        ),
        spelled(
            "contents[0].parts[1].function_call",
            "contents[0].parts[1].functionCall"
        )
    );
    // Exact: two spellings are two keys.
    assert_eq!(
        first_repeat(&raw(r#"{"a_b":1,"aB":2}"#), Keys::Exact, "x"),
        None
    );
}

#[test]
fn free_form_json_and_map_keys_are_the_clients_own_names() {
    // A call's `args` and a JSON schema are `Struct`s: their keys as written.
    let contents = r#"[{"parts":[{"functionCall":{"name":"f","args":{"user_id":1,"userId":2,"x":{"a_b":1,"aB":2}}}}]}]"#;
    assert_eq!(proto("contents", contents), None);
    let args = r#"[{"parts":[{"functionCall":{"args":{"a":1,"a":2}}}]}]"#;
    assert_eq!(
        proto("contents", args),
        at("contents[0].parts[0].functionCall.args.a")
    );
    let tools = r#"[{"functionDeclarations":[{"name":"f","parametersJsonSchema":{"properties":{"file_path":{"max_items":1,"maxItems":2}}},
        "parameters":{"properties":{"file_path":{},"filePath":{"type":"STRING"}}}}]}]"#;
    assert_eq!(proto("tools", tools), None);
    // A map's values are messages again.
    let schema = r#"[{"functionDeclarations":[{"parameters":{"properties":{"p":{"max_items":1,"maxItems":2}}}}]}]"#;
    assert_eq!(
        proto("tools", schema),
        spelled(
            "tools[0].functionDeclarations[0].parameters.properties.p.max_items",
            "tools[0].functionDeclarations[0].parameters.properties.p.maxItems"
        )
    );
    assert_eq!(proto("labels", r#"{"team_a":"x","teamA":"y"}"#), None);
    assert_eq!(proto("response_json_schema", r#"{"a_b":1,"aB":2}"#), None);
}

#[test]
fn a_raw_object_checks_every_field_it_is_asked_to_and_google_spellings_at_the_top() {
    let body = br#"{"tools":[{"a":1,"a":2}],"x":{"b":{"c":1,"c":2}}}"#;
    let object = RawObject::parse(body).unwrap();
    assert_eq!(
        object.first_repeat(Keys::Exact, &[], None),
        at("tools[0].a")
    );
    assert_eq!(
        object.first_repeat(Keys::Exact, &["tools"], None),
        at("x.b.c")
    );
    let google =
        RawObject::parse(br#"{"contents":[],"generationConfig":{},"generation_config":{}}"#)
            .unwrap();
    assert_eq!(
        google.first_repeat(Keys::Proto, &[], None),
        spelled("generationConfig", "generation_config")
    );
    assert_eq!(google.first_repeat(Keys::Exact, &[], None), None);
}

// ---- the scan against the full reading ----------------------------------------

/// A JSON value as generated: objects keep repeated keys.
#[derive(Clone, Debug)]
enum Json {
    Leaf(&'static str),
    Array(Vec<Json>),
    Object(Vec<(&'static str, Json)>),
}

/// Keys as written: spellings of one proto field, escapes, and characters
/// the scan must skip inside strings.
const KEYS: &[&str] = &[
    "a",
    "b",
    "a_b",
    "aB",
    r"\u0061",
    r#"q\"}"#,
    "{[",
    "c_d_e",
    "cDE",
    "long_key_name_x",
    "longKeyNameX",
    r#"abcdefg\"hijk"#,
];
/// Leaves, with strings long enough to be read eight bytes at a time and
/// escapes at several offsets of a word.
const LEAVES: &[&str] = &[
    "1",
    "-2.5e3",
    "null",
    "true",
    r#""x\"}{[,:""#,
    r#""\\""#,
    r#""""#,
    r#""abcdefgh\"ijklmnop\\\"q{\"a\":1,\"a\":2}""#,
    r#""\\\\\\\\\\\\\\\\""#,
    r#""aaaaaaa\\""#,
    r#""aaaaaa\"\\b\nccccccccccccccc""#,
];

impl Json {
    /// The text, with each key written as `key` spells it.
    fn text(&self, key: &dyn Fn(&str) -> String) -> String {
        match self {
            Json::Leaf(l) => (*l).to_owned(),
            Json::Array(items) => {
                let items: Vec<String> = items.iter().map(|i| i.text(key)).collect();
                format!("[ {} ]", items.join(" ,"))
            }
            Json::Object(entries) => {
                let entries: Vec<String> = entries
                    .iter()
                    .map(|(k, v)| format!("\"{}\" : {}", key(k), v.text(key)))
                    .collect();
                format!("{{{}}}", entries.join(","))
            }
        }
    }
}

fn json() -> impl Strategy<Value = Json> {
    let leaf = prop::sample::select(LEAVES).prop_map(Json::Leaf);
    leaf.prop_recursive(5, 80, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Json::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(Json::Object),
        ]
    })
}

proptest! {
    #[test]
    fn the_scan_finds_a_repeat_exactly_when_the_full_reading_does(value in json()) {
        let text = value.text(&|k| k.to_owned());
        let (_, repeated) = parse_noting_repeats(text.as_bytes()).unwrap();
        prop_assert_eq!(exact(&text).is_some(), repeated, "{}", text);
        // Proto JSON: the full reading of the text with every key in
        // lowerCamel (none of these keys holds free-form JSON).
        let folded = value.text(&|k| camel(k).into_owned());
        let (_, repeated) = parse_noting_repeats(folded.as_bytes()).unwrap();
        prop_assert_eq!(proto("x", &text).is_some(), repeated, "{}", text);
    }
}

proptest! {
    /// A history held entry by entry ([`RawObject::parse_lending`]) is
    /// checked as the whole array was, path for path.
    #[test]
    fn entries_held_apart_repeat_where_their_array_does(
        items in prop::collection::vec(json(), 0..5),
        proto_keys in any::<bool>(),
    ) {
        let keys = if proto_keys { Keys::Proto } else { Keys::Exact };
        let array = Json::Array(items).text(&|k| k.to_owned());
        let whole = first_repeat(&raw(&array), keys, "contents");
        let entries: Vec<Box<RawValue>> = serde_json::from_str(&array).unwrap();
        prop_assert_eq!(super::first_repeat_in_entries(&entries, keys, "contents"), whole, "{}", array);
        let body = format!(r#"{{"model":"m","contents":{array}}}"#);
        let (object, lent) = RawObject::parse_lending(body.as_bytes(), Some("contents")).unwrap();
        let lent = lent.unwrap();
        prop_assert_eq!(
            object.first_repeat(keys, &[], Some(&lent)),
            first_repeat(&raw(&array), keys, "contents"),
        );
    }
}
