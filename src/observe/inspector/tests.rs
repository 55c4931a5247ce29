use super::*;

/// A program as the runtime would report it.
#[derive(Default)]
struct Fake {
    id: String,
    code: String,
    calls: Vec<(String, String, Option<String>)>,
    outcome: Option<String>,
}

impl Watched for Fake {
    fn exec_id(&self) -> &str {
        &self.id
    }
    fn run_call_id(&self) -> &str {
        "call_1"
    }
    fn created_ms(&self) -> u64 {
        now_ms()
    }
    fn code(&self) -> &str {
        &self.code
    }
    fn call_count(&self) -> usize {
        self.calls.len()
    }
    fn call(&self, n: usize) -> (&str, &str, Option<&str>) {
        let (name, args, result) = &self.calls[n];
        (name, args, result.as_deref())
    }
    fn outcome(&self) -> Option<&str> {
        self.outcome.as_deref()
    }
    fn console(&self) -> Option<&str> {
        self.outcome.as_ref().map(|_| "hello")
    }
    fn end(&self) -> ProgramEnd {
        ProgramEnd {
            outcome: Outcome::Ok,
            nested_calls: self.calls.len() as u64,
            context_bytes_saved: 42,
        }
    }
}

const CTX: Context<'static> = Context {
    scope: "ci",
    preset: "code",
    dialect: "chat",
    model: "gpt-test",
    sdk: "compact",
};

fn program(id: &str) -> Fake {
    Fake {
        id: id.into(),
        code: "const a = await tools.read({path: 'a'});\nreturn a;".into(),
        ..Fake::default()
    }
}

#[test]
fn a_program_is_followed_from_start_to_end() {
    let inspector = Inspector::new(1 << 20, false, 600_000);
    let mut p = program("x1");
    inspector.program(&CTX, &p, Phase::Running, false);
    p.calls
        .push(("read".into(), r#"{"path":"a"}"#.into(), None));
    inspector.program(&CTX, &p, Phase::Waiting, false);
    let listed = inspector.executions(10);
    assert_eq!(listed["executions"][0]["state"], "waiting");
    assert_eq!(listed["executions"][0]["calls_waiting"], 1);

    p.calls[0].2 = Some("alpha".into());
    inspector.program(&CTX, &p, Phase::Running, false);
    p.outcome = Some("Output:\nhello\n\nResult: \"alpha\"".into());
    inspector.program(&CTX, &p, Phase::Ended, true);

    let whole = inspector.execution("1").expect("kept");
    assert_eq!(whole["state"], "finished");
    assert_eq!(whole["scope"], "ci");
    assert_eq!(whole["model"], "gpt-test");
    assert_eq!(whole["sdk"], "compact");
    assert_eq!(whole["code"], p.code);
    assert_eq!(whole["round_trips_saved"], 1);
    assert_eq!(whole["context_bytes_saved"], 42);
    assert_eq!(whole["console_bytes"], 5);
    let call = &whole["calls"][0];
    assert_eq!(call["tool"], "read");
    assert_eq!(call["args_bytes"], 12);
    assert_eq!(call["result_bytes"], 5);
    assert!(call["handed_at_ms"].as_u64().is_some());
    assert!(call["result_at_ms"].as_u64() >= call["handed_at_ms"].as_u64());
    let text = whole.to_string();
    assert!(!text.contains("alpha"), "no payloads unless asked: {text}");
    assert!(
        !text.contains("x1"),
        "the execution id is never shown: {text}"
    );
}

#[test]
fn payloads_are_kept_only_when_on() {
    let inspector = Inspector::new(1 << 20, true, 600_000);
    let mut p = program("x1");
    p.calls.push((
        "read".into(),
        r#"{"path":"a"}"#.into(),
        Some("alpha".into()),
    ));
    p.outcome = Some("Result: 1".into());
    inspector.program(&CTX, &p, Phase::Ended, false);
    let whole = inspector.execution("1").unwrap();
    assert_eq!(whole["calls"][0]["args"], r#"{"path":"a"}"#);
    assert_eq!(whole["calls"][0]["result"], "alpha");
    assert_eq!(whole["console"], "hello");
    assert_eq!(whole["result"], "Result: 1");
}

#[test]
fn what_it_keeps_stays_within_its_budget() {
    let budget = 64 << 10;
    let inspector = Inspector::new(budget, false, 600_000);
    for i in 0..200 {
        let mut p = program(&format!("x{i}"));
        p.code = "x".repeat(1000);
        inspector.program(&CTX, &p, Phase::Running, false);
    }
    let memory = inspector.memory();
    assert!(
        memory["used_bytes"].as_u64().unwrap() <= budget as u64,
        "{memory}"
    );
    assert!(inspector.execution("1").is_none(), "the oldest went");
    assert!(inspector.execution("200").is_some(), "the newest stays");
    // An evicted program that reports again comes back as a new record.
    inspector.program(&CTX, &program("x0"), Phase::Running, false);
    assert!(inspector.execution("201").is_some());
    let kept = inspector.kept();
    assert_eq!(
        kept.index.len(),
        kept.programs.len(),
        "no index entry outlives its record"
    );
}

#[test]
fn a_listener_gets_each_update_and_nobody_listening_costs_no_event() {
    let inspector = Inspector::new(1 << 20, false, 600_000);
    inspector.program(&CTX, &program("early"), Phase::Running, false);
    let mut rx = inspector.subscribe();
    inspector.program(&CTX, &program("x1"), Phase::Running, false);
    let (kind, data) = rx.try_recv().expect("an event");
    assert_eq!(kind, "execution");
    let v: Value = serde_json::from_str(&data).unwrap();
    assert_eq!(v["state"], "running");
    assert!(rx.try_recv().is_err(), "the update before it was not sent");
}

#[test]
fn denials_are_listed_with_what_became_of_them() {
    let inspector = Inspector::new(1 << 20, false, 600_000);
    let seen = vec![DenialSeen {
        at_ms: 5,
        tool: "read".into(),
        code: "UNKNOWN_TOOL",
    }];
    inspector.denials(&CTX, seen, Repair::Succeeded);
    let listed = inspector.recent_denials(10);
    let d = &listed["denials"][0];
    assert_eq!(d["tool"], "read");
    assert_eq!(d["code"], "UNKNOWN_TOOL");
    assert_eq!(d["repair"], "succeeded");
    assert_eq!(inspector.totals()["now"]["denials_unknown_tool"], 1);
}

#[test]
fn a_lost_program_expires() {
    let inspector = Inspector::new(1 << 20, false, 600_000);
    let mut p = program("x1");
    p.calls.push(("read".into(), "{}".into(), None));
    inspector.program(&CTX, &p, Phase::Waiting, false);
    inspector.lost("x1");
    assert_eq!(inspector.execution("1").unwrap()["state"], "expired");
}
