//! The conversations real agents have (issue 9), at the wire level: a
//! scripted model that enforces OpenAI's rules on every request it gets,
//! the proxy in code mode with the embedded runtime, and a client that
//! does what opencode, LangGraph, the AI SDK and the Agents SDK do: stop a
//! program partway, attach media after results, rewrite tool-call ids,
//! track usage, restart the proxy under a waiting program.

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use common::agent::fs_tools;
use common::scripted::{chunk, openai_rules, provider_error, serve, transcript};
use common::sse_client::reassemble;
use common::{start, Proxy};
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

// ---------------------------------------------------------------------------
// The scripted model
// ---------------------------------------------------------------------------

/// One answer of the model.
enum Reply {
    /// An assistant message, served as JSON or as SSE as the request asks.
    Message(Value),
    /// A streamed body, served as it is.
    Sse(String),
}

/// One request the model got, and how it answered.
#[derive(Clone)]
struct Seen {
    body: Value,
    raw: String,
    status: u16,
    refusal: String,
}

#[derive(Default)]
struct ModelState {
    script: VecDeque<Reply>,
    seen: Vec<Seen>,
}

#[derive(Clone)]
struct Model(Arc<Mutex<ModelState>>);

impl Respond for Model {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let raw = String::from_utf8_lossy(&req.body).into_owned();
        let mut st = self.0.lock().unwrap();
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let (status, refusal, template) = match openai_rules(&messages) {
            Some(m) => (400, m.clone(), provider_error(&m)),
            None => match st.script.pop_front() {
                None => (
                    500,
                    "script exhausted".to_owned(),
                    ResponseTemplate::new(500).set_body_string("script exhausted"),
                ),
                Some(Reply::Message(m)) => (200, String::new(), serve(&body, m)),
                Some(Reply::Sse(s)) => (
                    200,
                    String::new(),
                    ResponseTemplate::new(200).set_body_raw(s.into_bytes(), "text/event-stream"),
                ),
            },
        };
        st.seen.push(Seen {
            body,
            raw,
            status,
            refusal,
        });
        template
    }
}

/// The fake provider: its server and what its model saw.
struct Upstream {
    server: MockServer,
    model: Model,
}

impl Upstream {
    async fn new(script: impl IntoIterator<Item = Reply>) -> Upstream {
        let server = MockServer::start().await;
        let model = Model(Arc::new(Mutex::new(ModelState {
            script: script.into_iter().collect(),
            ..Default::default()
        })));
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(model.clone())
            .mount(&server)
            .await;
        Upstream { server, model }
    }

    fn seen(&self) -> Vec<Seen> {
        self.model.0.lock().unwrap().seen.clone()
    }

    /// The messages of the model's request `i` (0-based).
    fn messages(&self, i: usize) -> Vec<Value> {
        let seen = self.seen();
        assert!(
            i < seen.len(),
            "the model got {} requests, not {}:{}",
            seen.len(),
            i + 1,
            self.transcript()
        );
        seen[i].body["messages"].as_array().cloned().unwrap()
    }

    /// Each request in short, for assertion messages.
    fn transcript(&self) -> String {
        let seen = self.seen();
        transcript(seen.iter().map(|s| (&s.body, s.status, s.refusal.as_str())))
    }

    /// The model answered every request (never a 400 for a broken
    /// history), and was shown no call but `run_code`.
    fn assert_well_formed(&self) {
        for s in self.seen() {
            assert_eq!(
                s.status,
                200,
                "the model refused a request: {}\nthe model saw:{}",
                s.refusal,
                self.transcript()
            );
            for m in s.body["messages"].as_array().cloned().unwrap_or_default() {
                for c in m["tool_calls"].as_array().cloned().unwrap_or_default() {
                    assert_eq!(
                        c["function"]["name"],
                        "run_code",
                        "the model was shown a native call: {c}\nthe model saw:{}",
                        self.transcript()
                    );
                }
            }
        }
    }
}

/// The proxy in code mode with the embedded runtime, in front of `up`.
async fn proxy(up: &Upstream) -> Proxy {
    start(
        &up.server,
        &[("CODEMODE_RUNTIME", "embedded"), ("CODEMODE_MODE", "code")],
    )
    .await
}

/// The model's turn that runs `code`.
fn program(id: &str, text: Option<&str>, code: &str) -> Value {
    json!({"role": "assistant", "content": text, "tool_calls": [{"id": id, "type": "function",
        "function": {"name": "run_code", "arguments": json!({"code": code}).to_string()}}]})
}

fn run(id: &str, code: &str) -> Reply {
    Reply::Message(program(id, None, code))
}

fn say(text: &str) -> Reply {
    Reply::Message(json!({"role": "assistant", "content": text}))
}

const ONE_READ: &str = "return await tools.read({path: 'a.txt'});";
const TWO_PARALLEL: &str = "const [a, b] = await Promise.all([tools.read({path: 'a.txt'}), tools.read({path: 'b.txt'})]); return a + b;";
const TWO_SEQUENTIAL: &str = "const a = await tools.read({path: 'a.txt'}); const b = await tools.read({path: 'b.txt'}); return a + b;";
const THREE_SEQUENTIAL: &str = "const a = await tools.read({path: 'a.txt'}); const b = await tools.read({path: 'b.txt'}); const c = await tools.read({path: 'c.txt'}); return [a, b, c].join('|');";
const THREE_PARALLEL: &str = "const parts = await Promise.all(['a.txt', 'b.txt', 'c.txt'].map(path => tools.read({path}))); return parts.join('|');";

const READ_A: &str = r#"tools.read({"path": "a.txt"})"#;
const READ_B: &str = r#"tools.read({"path": "b.txt"})"#;

// ---------------------------------------------------------------------------
// The client
// ---------------------------------------------------------------------------

fn conversation(text: &str) -> Vec<Value> {
    vec![
        json!({"role": "system", "content": "You are an agent."}),
        json!({"role": "user", "content": text}),
    ]
}

fn request(messages: &[Value], stream: bool) -> Value {
    let mut body = json!({"model": "test-model", "messages": messages, "tools": fs_tools()});
    if stream {
        body["stream"] = json!(true);
    }
    body
}

/// One request; asserts a 200 and returns the assistant message, as the
/// client's SDK would make it of a completion or a stream.
async fn ask(proxy: &Proxy, messages: &[Value], stream: bool) -> Value {
    let res = proxy.chat(&request(messages, stream), &[]).await;
    let status = res.status();
    let bytes = res.bytes().await.unwrap();
    assert_eq!(
        status,
        200,
        "the proxy answered {status}: {}",
        String::from_utf8_lossy(&bytes)
    );
    if !stream {
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        return v["choices"][0]["message"].clone();
    }
    let view = reassemble(&bytes);
    assert!(view.errors.is_empty(), "stream errors: {:?}", view.errors);
    let mut m = json!({"role": "assistant", "content": if view.text.is_empty() { Value::Null } else { json!(view.text) }});
    if !view.calls.is_empty() {
        let calls: Vec<Value> = view
            .calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        m["tool_calls"] = json!(calls);
    }
    m
}

fn calls_of(turn: &Value) -> Vec<Value> {
    turn["tool_calls"].as_array().cloned().unwrap_or_default()
}

fn file(path: &str) -> &'static str {
    match path {
        "a.txt" => "alpha",
        "b.txt" => "beta",
        "c.txt" => "gamma",
        _ => "ENOENT",
    }
}

/// The client's tool message for `call` (a read).
fn result(call: &Value) -> Value {
    assert_eq!(call["function"]["name"], "read", "{call}");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    json!({"role": "tool", "tool_call_id": call["id"], "content": file(args["path"].as_str().unwrap())})
}

/// Pushes `turn` and the results of all its calls.
fn answer_all(messages: &mut Vec<Value>, turn: &Value) {
    messages.push(turn.clone());
    for c in calls_of(turn) {
        messages.push(result(&c));
    }
}

/// The agent's tool loop until an answer; `rename` rewrites every tool-call
/// id the client keeps (in its assistant turns and tool messages).
async fn drive(
    proxy: &Proxy,
    messages: &mut Vec<Value>,
    stream: bool,
    rename: fn(&str) -> String,
) -> Value {
    for _ in 0..10 {
        let mut turn = ask(proxy, messages, stream).await;
        let calls = calls_of(&turn);
        if calls.is_empty() {
            messages.push(turn.clone());
            return turn;
        }
        for c in turn["tool_calls"].as_array_mut().unwrap() {
            let id = rename(c["id"].as_str().unwrap());
            c["id"] = json!(id);
        }
        answer_all(messages, &turn);
    }
    panic!("the agent loop did not end");
}

/// opencode for Mistral-family models: every tool-call id cut down to its
/// first 9 letters and digits.
fn shorten(id: &str) -> String {
    id.chars()
        .filter(char::is_ascii_alphanumeric)
        .take(9)
        .collect()
}

/// The `data:` payloads of an SSE body, in order.
fn sse_payloads(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .replace("\r\n", "\n")
        .split("\n\n")
        .filter_map(|block| {
            let data: Vec<&str> = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// 1. Interrupted programs
// ---------------------------------------------------------------------------

/// The tail of the model's request after an interrupted program: the
/// model's `run_code` turn, a result that says it was interrupted and lists
/// each call with its result (or `no result`), then `after` unchanged.
fn assert_interrupted(
    up: &Upstream,
    request: usize,
    run_id: &str,
    listed: &[(&str, Option<&str>)],
    after: &[Value],
) {
    let m = up.messages(request);
    let n = m.len();
    let k = after.len();
    assert!(n >= k + 2, "too few messages:{}", up.transcript());
    assert_eq!(
        &m[n - k..],
        after,
        "the messages after the program, in order"
    );
    let turn = &m[n - k - 2];
    assert_eq!(turn["role"], "assistant", "{}", up.transcript());
    assert_eq!(turn["tool_calls"][0]["id"], run_id, "{}", up.transcript());
    assert_eq!(turn["tool_calls"][0]["function"]["name"], "run_code");
    let res = &m[n - k - 1];
    assert_eq!(res["role"], "tool", "{}", up.transcript());
    assert_eq!(res["tool_call_id"], run_id);
    let content = res["content"].as_str().unwrap_or_default();
    assert!(
        content.starts_with("Error: InterruptedError"),
        "the result says the program was interrupted: {content}"
    );
    // Each call's entry runs from its text to the next listed call's.
    let at: Vec<usize> = listed
        .iter()
        .map(|(call, _)| {
            content
                .find(call)
                .unwrap_or_else(|| panic!("the result lists {call}: {content}"))
        })
        .collect();
    for (i, (call, result)) in listed.iter().enumerate() {
        let end = at
            .iter()
            .copied()
            .filter(|&p| p > at[i])
            .min()
            .unwrap_or(content.len());
        let entry = &content[at[i]..end];
        let expected = result.unwrap_or("no result");
        assert!(
            entry.contains(expected),
            "{call} is listed with {expected:?}: {content}"
        );
    }
}

#[tokio::test]
async fn interrupted_json_a_user_message_after_some_results_ends_the_program_as_interrupted() {
    let up = Upstream::new([
        Reply::Message(program("call_prog", Some("Reading both."), TWO_PARALLEL)),
        say("Here is a joke."),
        say("Here is a joke."),
    ])
    .await;
    let proxy = proxy(&up).await;
    let mut m = conversation("Read a and b");
    let turn = ask(&proxy, &m, false).await;
    let calls = calls_of(&turn);
    assert_eq!(calls.len(), 2, "{turn}");
    m.push(turn.clone());
    m.push(result(&calls[0]));
    let user = json!({"role": "user", "content": "Stop that. Tell me a joke."});
    m.push(user.clone());

    let answer = ask(&proxy, &m, false).await;
    assert_eq!(answer["content"], "Here is a joke.");
    up.assert_well_formed();
    assert_interrupted(
        &up,
        1,
        "call_prog",
        &[(READ_A, Some("alpha")), (READ_B, None)],
        &[user],
    );

    // The same history again: the same bytes upstream (prompt caching).
    ask(&proxy, &m, false).await;
    up.assert_well_formed();
    let seen = up.seen();
    assert_eq!(seen.len(), 3);
    assert_eq!(
        seen[1].raw, seen[2].raw,
        "the same history gives the same upstream request"
    );
}

#[tokio::test]
async fn interrupted_sse_a_user_message_with_no_results_at_all() {
    let up = Upstream::new([
        run("call_prog", TWO_PARALLEL),
        say("Sure, something else."),
        say("Sure, something else."),
    ])
    .await;
    let proxy = proxy(&up).await;
    let mut m = conversation("Read a and b");
    let turn = ask(&proxy, &m, true).await;
    assert_eq!(calls_of(&turn).len(), 2, "{turn}");
    m.push(turn);
    let user = json!({"role": "user", "content": "Never mind, do something else."});
    m.push(user.clone());

    let answer = ask(&proxy, &m, true).await;
    assert_eq!(answer["content"], "Sure, something else.");
    up.assert_well_formed();
    assert_interrupted(
        &up,
        1,
        "call_prog",
        &[(READ_A, None), (READ_B, None)],
        &[user],
    );
    ask(&proxy, &m, true).await;
    let seen = up.seen();
    assert_eq!(seen.len(), 3);
    assert_eq!(
        seen[1].raw, seen[2].raw,
        "the same history gives the same upstream request"
    );
}

#[tokio::test]
async fn interrupted_json_an_assistant_text_message_after_the_results_then_a_user_message() {
    // LangGraph's recursion limit, opencode's step limit: the agent writes
    // its own assistant message after the results, then the user goes on.
    let up = Upstream::new([run("call_prog", TWO_SEQUENTIAL), say("Going on.")]).await;
    let proxy = proxy(&up).await;
    let mut m = conversation("Read a then b");
    let turn = ask(&proxy, &m, false).await;
    answer_all(&mut m, &turn);
    let stop =
        json!({"role": "assistant", "content": "Sorry, need more steps to process this request."});
    let user = json!({"role": "user", "content": "Go on."});
    m.push(stop.clone());
    m.push(user.clone());

    let answer = ask(&proxy, &m, false).await;
    assert_eq!(answer["content"], "Going on.");
    up.assert_well_formed();
    assert_interrupted(
        &up,
        1,
        "call_prog",
        &[(READ_A, Some("alpha"))],
        &[stop, user],
    );
}

#[tokio::test]
async fn interrupted_sse_after_the_second_batch_lists_the_calls_of_both_batches() {
    let up = Upstream::new([run("call_prog", THREE_SEQUENTIAL), say("Stopped.")]).await;
    let proxy = proxy(&up).await;
    let mut m = conversation("Read a, b, c");
    let first = ask(&proxy, &m, true).await;
    answer_all(&mut m, &first);
    let second = ask(&proxy, &m, true).await;
    assert_eq!(
        calls_of(&second)[0]["function"]["arguments"],
        r#"{"path":"b.txt"}"#
    );
    answer_all(&mut m, &second);
    let user = json!({"role": "user", "content": "That is enough."});
    m.push(user.clone());

    let answer = ask(&proxy, &m, true).await;
    assert_eq!(answer["content"], "Stopped.");
    up.assert_well_formed();
    assert_interrupted(
        &up,
        1,
        "call_prog",
        &[(READ_A, Some("alpha")), (READ_B, Some("beta"))],
        &[user],
    );
}

// ---------------------------------------------------------------------------
// 2. Media after results (opencode)
// ---------------------------------------------------------------------------

fn media_message() -> Value {
    json!({"role": "user", "content": [
        {"type": "text", "text": "Attached media from tool result:"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="}},
    ]})
}

/// The model's request ends with its `run_code` turn, the program's real
/// result, then the media message.
fn assert_ended_then_media(up: &Upstream, request: usize, run_id: &str, holds: &[&str]) {
    let m = up.messages(request);
    let n = m.len();
    assert!(n >= 3, "{}", up.transcript());
    assert_eq!(m[n - 1], media_message(), "{}", up.transcript());
    assert_eq!(
        m[n - 3]["tool_calls"][0]["id"],
        run_id,
        "{}",
        up.transcript()
    );
    assert_eq!(m[n - 2]["tool_call_id"], run_id, "{}", up.transcript());
    let content = m[n - 2]["content"].as_str().unwrap_or_default();
    assert!(
        !content.contains("InterruptedError"),
        "the program resumed: {content}"
    );
    for h in holds {
        assert!(content.contains(h), "the result holds {h}: {content}");
    }
}

#[tokio::test]
async fn media_after_all_results_resumes_the_program_and_follows_its_result() {
    let up = Upstream::new([run("call_prog", ONE_READ), say("A picture of alpha.")]).await;
    let proxy = proxy(&up).await;
    let mut m = conversation("Look at a");
    let turn = ask(&proxy, &m, false).await;
    answer_all(&mut m, &turn);
    m.push(media_message());

    let answer = ask(&proxy, &m, false).await;
    assert_eq!(answer["content"], "A picture of alpha.");
    up.assert_well_formed();
    assert_ended_then_media(&up, 1, "call_prog", &["alpha"]);
}

#[tokio::test]
async fn media_between_two_batches_resumes_the_program_to_its_next_batch() {
    let up = Upstream::new([run("call_prog", TWO_SEQUENTIAL), say("Both read.")]).await;
    let proxy = proxy(&up).await;
    let mut m = conversation("Look at a and b");
    let first = ask(&proxy, &m, true).await;
    answer_all(&mut m, &first);
    m.push(media_message());

    let second = ask(&proxy, &m, true).await;
    let calls = calls_of(&second);
    assert_eq!(calls.len(), 1, "the program's next batch: {second}");
    assert_eq!(calls[0]["function"]["name"], "read");
    assert_eq!(calls[0]["function"]["arguments"], r#"{"path":"b.txt"}"#);
    assert_eq!(up.seen().len(), 1, "the model is not asked mid-program");
    answer_all(&mut m, &second);

    let answer = ask(&proxy, &m, true).await;
    assert_eq!(answer["content"], "Both read.");
    up.assert_well_formed();
    assert_ended_then_media(&up, 1, "call_prog", &["alphabeta"]);
}

// ---------------------------------------------------------------------------
// 3. Provider fields survive
// ---------------------------------------------------------------------------

fn fields_turn() -> Value {
    json!({"role": "assistant", "content": "Let me run a program.",
        "reasoning_content": "Two files, one after the other.",
        "tool_calls": [{"id": "call_p", "type": "function",
            "function": {"name": "run_code", "arguments": json!({"code": TWO_SEQUENTIAL}).to_string()},
            "extra_content": {"google": {"thought_signature": "sig=="}}}],
        "provider_specific": {"x": 1}})
}

/// Every request to the model after the first carries `turn` unchanged.
fn assert_replayed(up: &Upstream, turn: &Value) {
    let seen = up.seen();
    assert!(seen.len() >= 2, "{}", up.transcript());
    for i in 1..seen.len() {
        let m = up.messages(i);
        let replayed = m
            .iter()
            .find(|m| m["tool_calls"][0]["function"]["name"] == "run_code")
            .unwrap_or_else(|| panic!("request {} replays the model's turn", i + 1));
        assert_eq!(
            replayed,
            turn,
            "request {} replays the model's turn as it came",
            i + 1
        );
    }
}

#[tokio::test]
async fn fields_json_the_model_turn_is_replayed_with_every_field() {
    let up = Upstream::new([
        Reply::Message(fields_turn()),
        say("alphabeta"),
        say("You are welcome."),
    ])
    .await;
    let proxy = proxy(&up).await;
    let mut m = conversation("Read a then b");
    let answer = drive(&proxy, &mut m, false, str::to_owned).await;
    assert_eq!(answer["content"], "alphabeta");
    m.push(json!({"role": "user", "content": "Thanks."}));
    ask(&proxy, &m, false).await;
    up.assert_well_formed();
    assert_eq!(up.seen().len(), 3);
    assert_replayed(&up, &fields_turn());
}

#[tokio::test]
async fn fields_sse_the_model_turn_is_replayed_as_an_sdk_accumulates_it() {
    let args = json!({"code": TWO_SEQUENTIAL}).to_string();
    let (a1, rest) = args.split_at(10);
    let (a2, a3) = rest.split_at(25);
    let mut s = chunk(
        json!({"role": "assistant", "content": "", "provider_specific": {"x": 1}}),
        None,
    );
    s += &chunk(json!({"reasoning_content": "Two files, "}), None);
    s += &chunk(json!({"reasoning_content": "one after the other."}), None);
    s += &chunk(json!({"content": "Let me run "}), None);
    s += &chunk(json!({"content": "a program."}), None);
    s += &chunk(
        json!({"tool_calls": [{"index": 0, "id": "call_p", "type": "function",
            "function": {"name": "run_code", "arguments": a1},
            "extra_content": {"google": {"thought_signature": "sig=="}}}]}),
        None,
    );
    s += &chunk(
        json!({"tool_calls": [{"index": 0, "function": {"arguments": a2}}]}),
        None,
    );
    s += &chunk(
        json!({"tool_calls": [{"index": 0, "function": {"arguments": a3}}]}),
        None,
    );
    s += &chunk(json!({}), Some("tool_calls"));
    s += "data: [DONE]\n\n";
    let up = Upstream::new([Reply::Sse(s), say("alphabeta"), say("You are welcome.")]).await;
    let proxy = proxy(&up).await;
    let mut m = conversation("Read a then b");
    let answer = drive(&proxy, &mut m, true, str::to_owned).await;
    assert_eq!(answer["content"], "alphabeta");
    m.push(json!({"role": "user", "content": "Thanks."}));
    ask(&proxy, &m, true).await;
    up.assert_well_formed();
    assert_eq!(up.seen().len(), 3);
    assert_replayed(&up, &fields_turn());
}

#[tokio::test]
async fn fields_sse_a_repair_replays_the_denied_turn_with_its_fields() {
    let denied = json!({"role": "assistant", "content": null,
        "reasoning_content": "Read it directly.",
        "tool_calls": [{"id": "call_d", "type": "function",
            "function": {"name": "read", "arguments": "{\"path\":\"a.txt\"}"},
            "extra_content": {"google": {"thought_signature": "dsig=="}}}]});
    let up = Upstream::new([Reply::Message(denied), say("I will use run_code next.")]).await;
    let proxy = proxy(&up).await;
    let answer = ask(&proxy, &conversation("Read a"), true).await;
    assert_eq!(answer["content"], "I will use run_code next.");
    let seen = up.seen();
    assert_eq!(seen.len(), 2, "one repair:{}", up.transcript());
    assert!(seen.iter().all(|s| s.status == 200), "{}", up.transcript());
    let m = up.messages(1);
    let turn = m
        .iter()
        .find(|m| m["tool_calls"][0]["id"] == "call_d")
        .expect("the repair replays the denied turn");
    assert_eq!(turn["reasoning_content"], "Read it directly.", "{turn}");
    assert_eq!(
        turn["tool_calls"][0]["extra_content"],
        json!({"google": {"thought_signature": "dsig=="}}),
        "{turn}"
    );
}

#[tokio::test]
async fn fields_json_the_hand_off_turn_carries_the_model_reasoning() {
    let up = Upstream::new([Reply::Message(fields_turn())]).await;
    let proxy = proxy(&up).await;
    let turn = ask(&proxy, &conversation("Read a then b"), false).await;
    assert_eq!(calls_of(&turn)[0]["function"]["name"], "read");
    assert_eq!(
        turn["reasoning_content"], "Two files, one after the other.",
        "{turn}"
    );
}

// ---------------------------------------------------------------------------
// 4. Shortened ids (opencode with Mistral-family models)
// ---------------------------------------------------------------------------

#[tokio::test]
async fn short_ids_of_one_batch_stay_distinct() {
    let up = Upstream::new([run("call_prog", THREE_PARALLEL)]).await;
    let proxy = proxy(&up).await;
    let turn = ask(&proxy, &conversation("Read all"), false).await;
    let ids: Vec<String> = calls_of(&turn)
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 3, "{turn}");
    let short: std::collections::BTreeSet<String> = ids.iter().map(|id| shorten(id)).collect();
    assert_eq!(
        short.len(),
        3,
        "distinct when shortened: {ids:?} -> {short:?}"
    );
}

async fn short_ids_resume(code: &str) {
    let up = Upstream::new([run("call_prog", code), say("Read all three.")]).await;
    let proxy = proxy(&up).await;
    let mut m = conversation("Read all");
    let answer = drive(&proxy, &mut m, false, shorten).await;
    assert_eq!(answer["content"], "Read all three.");
    up.assert_well_formed();
    let seen = up.seen();
    assert_eq!(seen.len(), 2, "{}", up.transcript());
    let last = up.messages(1);
    let res = last.last().unwrap();
    assert_eq!(res["tool_call_id"], "call_prog", "{}", up.transcript());
    let content = res["content"].as_str().unwrap_or_default();
    for f in ["alpha", "beta", "gamma"] {
        assert!(content.contains(f), "the result holds {f}: {content}");
    }
}

#[tokio::test]
async fn short_ids_resume_a_sequential_program() {
    short_ids_resume(THREE_SEQUENTIAL).await;
}

#[tokio::test]
async fn short_ids_resume_a_parallel_program() {
    short_ids_resume(THREE_PARALLEL).await;
}

#[tokio::test]
async fn short_id_of_a_call_with_another_name_is_refused_and_the_proxy_keeps_serving() {
    let up = Upstream::new([run("call_prog", ONE_READ), say("It says alpha.")]).await;
    let proxy = proxy(&up).await;
    let mut m = conversation("Read a");
    let turn = ask(&proxy, &m, false).await;
    let call = calls_of(&turn)[0].clone();
    let full = call["id"].as_str().unwrap().to_owned();
    let short = shorten(&full);

    let mut wrong = m.clone();
    wrong.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": short, "type": "function",
        "function": {"name": "write", "arguments": "{\"path\":\"a.txt\",\"content\":\"x\"}"}}]}));
    wrong.push(json!({"role": "tool", "tool_call_id": short, "content": "ok"}));
    let res = proxy.chat(&request(&wrong, false), &[]).await;
    let status = res.status();
    let err: Value = res.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["error"]["type"], "invalid_request_error", "{err}");
    let message = err["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&short) || message.contains(&full),
        "the error names the id: {message}"
    );
    assert_eq!(up.seen().len(), 1, "nothing was fed to the model");

    let mut right = call.clone();
    right["id"] = json!(short);
    answer_all(
        &mut m,
        &json!({"role": "assistant", "content": null, "tool_calls": [right]}),
    );
    let answer = ask(&proxy, &m, false).await;
    assert_eq!(answer["content"], "It says alpha.");
    up.assert_well_formed();
}

// ---------------------------------------------------------------------------
// 5. Usage on hand-off turns
// ---------------------------------------------------------------------------

fn zero_usage() -> Value {
    json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
}

/// The response to the request that returns the first batch's results
/// (the program hands out its second batch), as raw bytes.
async fn second_batch(stream: bool, include_usage: bool) -> Vec<u8> {
    let up = Upstream::new([run("call_prog", TWO_SEQUENTIAL)]).await;
    let proxy = proxy(&up).await;
    let mut m = conversation("Read a then b");
    let first = ask(&proxy, &m, stream).await;
    answer_all(&mut m, &first);
    let mut body = request(&m, stream);
    if include_usage {
        body["stream_options"] = json!({"include_usage": true});
    }
    let res = proxy.chat(&body, &[]).await;
    assert_eq!(res.status(), 200);
    let bytes = res.bytes().await.unwrap().to_vec();
    assert_eq!(up.seen().len(), 1, "a hand-off, not a model turn");
    bytes
}

#[tokio::test]
async fn usage_json_hand_off_reports_zero_tokens() {
    let got: Value = serde_json::from_slice(&second_batch(false, false).await).unwrap();
    assert_eq!(call_names_of(&got), vec!["read"], "{got}");
    assert_eq!(got["usage"], zero_usage(), "{got}");
}

fn call_names_of(completion: &Value) -> Vec<String> {
    calls_of(&completion["choices"][0]["message"])
        .iter()
        .map(|c| c["function"]["name"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test]
async fn usage_sse_hand_off_has_a_zero_usage_chunk_when_asked() {
    let bytes = second_batch(true, true).await;
    let payloads = sse_payloads(&bytes);
    assert_eq!(
        payloads.last().map(String::as_str),
        Some("[DONE]"),
        "{payloads:?}"
    );
    let chunks: Vec<Value> = payloads
        .iter()
        .filter_map(|p| serde_json::from_str(p).ok())
        .collect();
    let with_usage: Vec<&Value> = chunks.iter().filter(|c| c["usage"].is_object()).collect();
    assert_eq!(with_usage.len(), 1, "one usage chunk: {payloads:?}");
    assert_eq!(with_usage[0]["choices"], json!([]), "{}", with_usage[0]);
    assert_eq!(with_usage[0]["usage"], zero_usage());
    assert_eq!(
        chunks.last().unwrap()["usage"],
        zero_usage(),
        "the usage chunk is the last before [DONE]"
    );
    assert_eq!(reassemble(&bytes).call_names(), vec!["read"]);
}

#[tokio::test]
async fn usage_sse_hand_off_has_no_usage_chunk_unless_asked() {
    let bytes = second_batch(true, false).await;
    let view = reassemble(&bytes);
    assert_eq!(view.call_names(), vec!["read"]);
    assert!(view.usage.is_empty(), "{:?}", view.usage);
}

// ---------------------------------------------------------------------------
// 6. Text across rounds
// ---------------------------------------------------------------------------

fn compute_then_answer() -> [Reply; 2] {
    [
        Reply::Message(program(
            "call_prog",
            Some("Let me compute."),
            "return 1 + 1;",
        )),
        say("It is 2."),
    ]
}

#[tokio::test]
async fn text_json_the_opening_text_and_the_answer_with_a_blank_line() {
    let up = Upstream::new(compute_then_answer()).await;
    let proxy = proxy(&up).await;
    let answer = ask(&proxy, &conversation("1+1?"), false).await;
    assert_eq!(answer["content"], "Let me compute.\n\nIt is 2.");
    up.assert_well_formed();
}

#[tokio::test]
async fn text_sse_the_opening_text_and_the_answer_with_a_blank_line() {
    let up = Upstream::new(compute_then_answer()).await;
    let proxy = proxy(&up).await;
    let answer = ask(&proxy, &conversation("1+1?"), true).await;
    assert_eq!(answer["content"], "Let me compute.\n\nIt is 2.");
    up.assert_well_formed();
}

// ---------------------------------------------------------------------------
// 7. Restart
// ---------------------------------------------------------------------------

#[tokio::test]
async fn restart_a_new_proxy_tells_the_model_the_record_was_lost_and_goes_on() {
    let up = Upstream::new([
        run("call_prog", ONE_READ),
        say("The program was lost; I will run it again later."),
        say("Hello again."),
    ])
    .await;
    let a = proxy(&up).await;
    let mut m = conversation("Read a");
    let turn = ask(&a, &m, false).await;
    drop(a);
    answer_all(&mut m, &turn);

    let b = proxy(&up).await;
    let answer = ask(&b, &m, false).await;
    m.push(answer);
    up.assert_well_formed();
    let sent = up.messages(1);
    let res = sent.last().unwrap();
    assert_eq!(res["role"], "tool", "{}", up.transcript());
    let run_id = res["tool_call_id"].as_str().unwrap_or_default();
    let turn = &sent[sent.len() - 2];
    assert_eq!(turn["tool_calls"][0]["id"], run_id);
    assert_eq!(turn["tool_calls"][0]["function"]["name"], "run_code");
    let content = res["content"].as_str().unwrap_or_default();
    assert!(content.contains("lost"), "the result says so: {content}");

    let user = json!({"role": "user", "content": "Hello?"});
    m.push(user.clone());
    let answer = ask(&b, &m, false).await;
    assert_eq!(answer["content"], "Hello again.");
    up.assert_well_formed();
    assert_eq!(up.messages(2).last().unwrap(), &user);
}
