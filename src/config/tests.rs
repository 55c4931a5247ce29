use std::collections::HashMap;
use std::io::Write;

use super::*;

fn from(vars: &[(&str, &str)]) -> Result<Config, ConfigErrors> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_lookup(|k| map.get(k).cloned())
}

#[test]
fn defaults_match_the_contract() {
    let c = from(&[]).unwrap();
    assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(c.upstream.to_string(), "https://api.openai.com/v1");
    assert_eq!(c.default_mode, Mode::Code);
    assert_eq!(c.runtime, Runtime::Embedded);
    assert_eq!(c.limits, crate::runtime::Limits::default());
    assert_eq!(c.max_repairs, 2);
    assert_eq!(c.client_select, ClientSelect::Allow);
    assert!(c.upstream_api_key.is_none());
}

#[test]
fn every_bad_variable_is_reported_at_once() {
    let errors = from(&[
        (LISTEN, "nowhere"),
        (UPSTREAM, "ftp://x"),
        (MODE, "fast"),
        (RUNTIME, "cloud"),
        (MAX_REPAIRS, "-1"),
        (CLIENT_SELECT, "maybe"),
        (MAX_BODY_BYTES, "0"),
        (WORKER_THREADS, "many"),
    ])
    .unwrap_err();
    let vars: Vec<_> = errors.0.iter().map(|e| e.var).collect();
    assert_eq!(
        vars,
        vec![
            LISTEN,
            UPSTREAM,
            MODE,
            RUNTIME,
            MAX_REPAIRS,
            CLIENT_SELECT,
            MAX_BODY_BYTES,
            WORKER_THREADS
        ]
    );
}

#[test]
fn a_bad_api_key_is_reported_without_its_value() {
    for var in [UPSTREAM_API_KEY, ANTHROPIC_API_KEY] {
        let errors = from(&[(var, "sk-secret\nvalue")]).unwrap_err();
        assert_eq!(errors.0[0].var, var);
        assert!(!errors.to_string().contains("sk-secret"));
    }
    let config = from(&[(UPSTREAM_API_KEY, " sk-a "), (ANTHROPIC_API_KEY, "sk-b")]).unwrap();
    assert_eq!(config.upstream_api_key.unwrap(), "Bearer sk-a");
    let anthropic = config.anthropic_api_key.unwrap();
    assert!(anthropic.is_sensitive());
    assert_eq!(anthropic, "sk-b");
}

#[test]
fn runtime_none_with_code_modes_names_the_rows() {
    let errors = from(&[(RUNTIME, "none")]).unwrap_err();
    let text = errors.to_string();
    assert!(text.contains("CODEMODE_MODE=code"), "{text}");
    assert!(
        text.contains("preset `code`") && text.contains("`tool_mode` row"),
        "{text}"
    );
}

#[test]
fn runtime_none_is_fine_when_no_mode_needs_code() {
    let mut f = tempfile();
    writeln!(f.1, "[[preset]]\nname = \"code\"\ntool_mode = \"native\"").unwrap();
    let c = from(&[(RUNTIME, "none"), (MODE, "native"), (CONFIG, &f.0)]).unwrap();
    assert_eq!(c.runtime, Runtime::None);
}

#[test]
fn config_file_problems_name_the_file_variable() {
    let errors = from(&[(CONFIG, "/no/such/file.toml")]).unwrap_err();
    assert_eq!(errors.0[0].var, CONFIG);
    let mut f = tempfile();
    writeln!(f.1, "[[preset]]\nname = \"x\"\nextends = \"ghost\"").unwrap();
    let errors = from(&[(CONFIG, &f.0)]).unwrap_err();
    assert!(errors.to_string().contains("ghost"));
}

#[test]
fn codemode_sdk_sets_the_default_rendering_and_presets_override_it() {
    let sdk = |c: &Config, name: &str| c.catalog.get(name).unwrap().sdk;
    let c = from(&[]).unwrap();
    assert_eq!(sdk(&c, "code"), SdkStyle::Auto);
    let mut f = tempfile();
    writeln!(f.1, "[[preset]]\nname = \"verbose\"\nsdk = \"full\"").unwrap();
    let c = from(&[(SDK, "compact"), (CONFIG, &f.0)]).unwrap();
    assert_eq!(sdk(&c, "code"), SdkStyle::Compact);
    assert_eq!(sdk(&c, "verbose"), SdkStyle::Full);
    let errors = from(&[(SDK, "short")]).unwrap_err();
    assert_eq!(errors.0[0].var, SDK);
    assert!(
        errors.to_string().contains("use auto, full or compact"),
        "{errors}"
    );
    let mut f = tempfile();
    writeln!(f.1, "[[preset]]\nname = \"lean\"\nsdk = \"tiny\"").unwrap();
    let errors = from(&[(CONFIG, &f.0)]).unwrap_err();
    assert_eq!(errors.0[0].var, CONFIG);
    assert!(
        errors.to_string().contains(
            "preset `lean` row `sdk`: `tiny` is not an SDK rendering; use auto, full or compact"
        ),
        "{errors}"
    );
}

fn tempfile() -> (String, std::fs::File) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "codemode-config-{}-{}.toml",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let file = std::fs::File::create(&path).unwrap();
    (path.to_string_lossy().into_owned(), file)
}

#[test]
fn absurd_limits_stop_start_up() {
    let errors = from(&[
        (RUN_MEMORY_MB, "17592186044416"),
        (RUN_SLICE_MS, "99999999999"),
        (RUN_CONCURRENCY, "0"),
        (EXECUTION_STORE_MB, "0"),
    ])
    .unwrap_err();
    let vars: Vec<_> = errors.0.iter().map(|e| e.var).collect();
    assert_eq!(
        vars,
        [
            RUN_SLICE_MS,
            RUN_MEMORY_MB,
            RUN_CONCURRENCY,
            EXECUTION_STORE_MB
        ]
    );
    assert!(errors.0[1].message.contains("from 1 to 4096"), "{errors}");
}

#[test]
fn hardening_defaults_are_seconds_and_bytes() {
    let c = from(&[]).unwrap();
    assert_eq!(c.connections.header_read_timeout, Duration::from_secs(10));
    assert_eq!(c.connections.keepalive_timeout, Duration::from_secs(60));
    assert_eq!(c.upstream_idle_timeout, Duration::from_secs(300));
    assert_eq!(c.max_upstream_body_bytes, 64 << 20);
    assert_eq!(c.budgets.executions_bytes, 256 << 20);
    assert!(c.run_slots.concurrency >= 1);
    assert_eq!(c.run_slots.queue, 1024);
    assert_eq!(c.run_slots.wait, Duration::from_secs(30));
    assert_eq!(c.run_slots.per_tenant(), 512);
    assert_eq!(c.stream_keepalive, Some(Duration::from_secs(10)));
}

#[test]
fn a_zero_keepalive_turns_the_stream_comments_off_and_waits_are_bounded() {
    let c = from(&[(STREAM_KEEPALIVE_MS, "0"), (RUN_QUEUE_TIMEOUT_MS, "250")]).unwrap();
    assert_eq!(c.stream_keepalive, None);
    assert_eq!(c.run_slots.wait, Duration::from_millis(250));
    let err = from(&[(RUN_QUEUE_TIMEOUT_MS, "forever")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("CODEMODE_RUN_QUEUE_TIMEOUT_MS"), "{err}");
}

#[test]
fn the_store_is_memory_or_a_redis_url() {
    assert_eq!(from(&[]).unwrap().store, StoreKind::Memory);
    assert_eq!(from(&[(STORE, "memory")]).unwrap().store, StoreKind::Memory);
    let c = from(&[(STORE, "redis://:s3cret@db.internal:6380/2")]).unwrap();
    assert_eq!(
        c.store,
        StoreKind::Redis {
            url: "redis://:s3cret@db.internal:6380/2".into(),
            prefix: "codemode:".into()
        }
    );
    assert_eq!(c.store.describe(), "redis://***@db.internal:6380/2");
    assert!(
        !format!("{c:?}").contains("s3cret"),
        "Debug shows no password"
    );
    let c = from(&[(STORE, "rediss://h"), (STORE_PREFIX, "team-a:")]).unwrap();
    assert!(matches!(c.store, StoreKind::Redis { prefix, .. } if prefix == "team-a:"));
}

#[test]
fn the_store_may_be_a_cluster_or_a_sentinel_master() {
    for url in [
        "redis+cluster://10.0.0.1:7000,10.0.0.2:7000",
        "rediss+cluster://:s3cret@a:7000",
        "redis+sentinel://s1:26379,s2:26379/mymaster",
        "rediss+sentinel://u:s3cret@s1:26379/mymaster/2",
    ] {
        let c = from(&[(STORE, url)]).unwrap();
        assert!(matches!(&c.store, StoreKind::Redis { url: u, .. } if u == url));
        assert!(
            !c.store.describe().contains("s3cret"),
            "{}",
            c.store.describe()
        );
    }
}

#[test]
fn a_malformed_store_is_refused_with_every_accepted_form() {
    for bad in [
        "redis+cluster://a:1/3",
        "redis+sentinel://s1:26379",
        "redis+sentinel://:s3cret@s1:x/m",
        "sentinel://s1/m",
    ] {
        let errors = from(&[(STORE, bad)]).unwrap_err();
        let text = errors.to_string();
        assert!(text.contains("CODEMODE_STORE:"), "{text}");
        for form in [
            "redis://",
            "rediss://",
            "redis+cluster://",
            "redis+sentinel://",
            "memory",
        ] {
            assert!(text.contains(form), "{bad}: {form} missing in {text}");
        }
        assert!(!text.contains("s3cret"), "{text}");
    }
}

#[test]
fn a_bad_store_is_named_without_its_password() {
    for bad in [
        "postgres://u:s3cret@h/0",
        "redis://u:s3/cr?et@h:notaport/0",
        "mem",
    ] {
        let errors = from(&[(STORE, bad)]).unwrap_err().0;
        assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
        assert_eq!(errors[0].var, STORE);
        assert!(!errors[0].message.contains("s3"), "{}", errors[0].message);
    }
    let errors = from(&[(STORE_PREFIX, "a b")]).unwrap_err().0;
    assert_eq!(errors[0].var, STORE_PREFIX);
}

#[test]
fn a_request_that_selects_nothing_gets_its_bindings_mode() {
    let c = from(&[("CODEMODE_MODE", "code")]).unwrap();
    assert_eq!(c.unselected_mode(None), Mode::Code);
    let (path, mut file) = tempfile();
    file.write_all(
        b"[[preset]]\nname = \"plain\"\ntool_mode = \"native\"\n\
          [[preset]]\nname = \"mixed\"\ntool_mode = \"both\"\n[scopes]\ndefault = \"mixed\"\n",
    )
    .unwrap();
    let c = from(&[("CODEMODE_MODE", "code"), ("CODEMODE_CONFIG", &path)]).unwrap();
    assert_eq!(c.unselected_mode(None), Mode::Both);
    assert_eq!(c.unselected_mode(Some("plain")), Mode::Native);
    assert_eq!(c.unselected_mode(Some("code")), Mode::Code);
    let _ = std::fs::remove_file(&path);
}
