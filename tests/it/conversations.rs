//! The conversations real agents have (issue 9), at the wire level: a
//! scripted model that enforces OpenAI's rules on every request it gets,
//! the proxy in code mode with the embedded runtime, and a client that
//! does what opencode, LangGraph, the AI SDK and the Agents SDK do: stop a
//! program partway, attach media after results, rewrite tool-call ids,
//! track usage, restart the proxy under a waiting program.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

use crate::common::agent::fs_tools;
use crate::common::scripted::{
    chunk, model_server, openai_rules, provider_error, serve, transcript,
};
use crate::common::sse_client::{payloads, reassemble};
use crate::common::{call_names, start, usage, Proxy};
use serde_json::{json, Value};
use wiremock::{MockServer, Request, Respond, ResponseTemplate};

// --------------------------------------------------------- The scripted model

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

/// The model: what it still has to say, and what it saw.
#[derive(Clone, Default)]
struct Model {
    script: Arc<Mutex<VecDeque<Reply>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Respond for Model {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let raw = String::from_utf8_lossy(&req.body).into_owned();
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let (status, refusal, template) = if let Some(m) = openai_rules(&messages) {
            (400, m.clone(), provider_error(&m))
        } else if let Some(reply) = self.script.lock().unwrap().pop_front() {
            let template = match reply {
                Reply::Message(m) => serve(&body, m),
                Reply::Sse(s) => ResponseTemplate::new(200).set_body_raw(s, "text/event-stream"),
            };
            (200, String::new(), template)
        } else {
            let exhausted = "script exhausted";
            let template = ResponseTemplate::new(500).set_body_string(exhausted);
            (500, exhausted.to_owned(), template)
        };
        let seen = Seen {
            body,
            raw,
            status,
            refusal,
        };
        self.seen.lock().unwrap().push(seen);
        template
    }
}

/// The id of the model's `run_code` call.
const PROG: &str = "call_prog";

/// The model's turn that runs `code`.
fn program(text: Option<&str>, code: &str) -> Value {
    json!({"role": "assistant", "content": text, "tool_calls": [{"id": PROG, "type": "function",
        "function": {"name": "run_code", "arguments": json!({"code": code}).to_string()}}]})
}

fn run(code: &str) -> Reply {
    Reply::Message(program(None, code))
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

// ----------------------------------------------------------------- The client

fn request(messages: &[Value], stream: bool) -> Value {
    let mut body = json!({"model": "test-model", "messages": messages, "tools": fs_tools()});
    if stream {
        body["stream"] = json!(true);
    }
    body
}

fn calls_of(turn: &Value) -> Vec<Value> {
    turn["tool_calls"].as_array().cloned().unwrap_or_default()
}

/// The client's tool message for `call` (a read).
fn result(call: &Value) -> Value {
    assert_eq!(call["function"]["name"], "read", "{call}");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    let content = match args["path"].as_str().unwrap() {
        "a.txt" => "alpha",
        "b.txt" => "beta",
        "c.txt" => "gamma",
        _ => "ENOENT",
    };
    json!({"role": "tool", "tool_call_id": call["id"], "content": content})
}

/// Pushes `turn` and the results of all its calls.
fn answer_all(messages: &mut Vec<Value>, turn: &Value) {
    messages.push(turn.clone());
    for c in calls_of(turn) {
        messages.push(result(&c));
    }
}

/// The proxy in code mode with the embedded runtime, in front of `model`.
async fn proxy(model: &MockServer) -> Proxy {
    start(
        model,
        &[("CODEMODE_RUNTIME", "embedded"), ("CODEMODE_MODE", "code")],
    )
    .await
}

/// A conversation: a scripted model, the proxy in code mode with the
/// embedded runtime in front of it, and the client's messages so far (a
/// system prompt and the user's `text` first).
struct Chat {
    server: MockServer,
    model: Model,
    proxy: Proxy,
    m: Vec<Value>,
    stream: bool,
}

// What the client does.
impl Chat {
    async fn new(script: impl IntoIterator<Item = Reply>, text: &str, stream: bool) -> Chat {
        let model = Model::default();
        model.script.lock().unwrap().extend(script);
        let server = model_server(model.clone()).await;
        let proxy = proxy(&server).await;
        let m = vec![
            json!({"role": "system", "content": "You are an agent."}),
            json!({"role": "user", "content": text}),
        ];
        Chat {
            server,
            model,
            proxy,
            m,
            stream,
        }
    }

    /// Sends the conversation; asserts a 200 and returns the assistant
    /// message, as the client's SDK would make it of a completion or a
    /// stream.
    async fn ask(&self) -> Value {
        let res = self.proxy.chat(&request(&self.m, self.stream), &[]).await;
        let status = res.status();
        let bytes = res.bytes().await.unwrap();
        assert_eq!(
            status,
            200,
            "the proxy answered {status}: {}",
            String::from_utf8_lossy(&bytes)
        );
        if !self.stream {
            let v: Value = serde_json::from_slice(&bytes).unwrap();
            return v["choices"][0]["message"].clone();
        }
        let view = reassemble(&bytes);
        assert!(view.errors.is_empty(), "stream errors: {:?}", view.errors);
        view.message()
    }

    /// Sends the conversation and keeps the turn with all its results.
    async fn turn(&mut self) -> Value {
        let turn = self.ask().await;
        answer_all(&mut self.m, &turn);
        turn
    }

    /// Adds `message` to the conversation; returns it.
    fn push(&mut self, message: Value) -> Value {
        self.m.push(message.clone());
        message
    }

    /// Sends the conversation: the answer is `text`, and every request the
    /// model got so far was well formed.
    async fn answers(&self, text: &str) {
        let answer = self.ask().await;
        assert_eq!(answer["content"], text);
        self.assert_well_formed();
    }

    /// The agent's tool loop until an answer; `rename` rewrites every
    /// tool-call id the client keeps (in its assistant turns and tool
    /// messages).
    async fn drive(&mut self, rename: fn(&str) -> String) -> Value {
        for _ in 0..10 {
            let mut turn = self.ask().await;
            if calls_of(&turn).is_empty() {
                return self.push(turn);
            }
            for c in turn["tool_calls"].as_array_mut().unwrap() {
                let id = rename(c["id"].as_str().unwrap());
                c["id"] = json!(id);
            }
            answer_all(&mut self.m, &turn);
        }
        panic!("the agent loop did not end");
    }

    /// The same history again gives the same bytes upstream (prompt
    /// caching): the model's third request is its second to the letter.
    async fn same_again(&self) {
        self.ask().await;
        self.assert_well_formed();
        let seen = self.seen();
        assert_eq!(seen.len(), 3);
        assert_eq!(
            seen[1].raw, seen[2].raw,
            "the same history gives the same upstream request"
        );
    }
}

// What the model saw.
impl Chat {
    fn seen(&self) -> Vec<Seen> {
        self.model.seen.lock().unwrap().clone()
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

    /// The text of the program's result in the model's second request,
    /// which ends with the model's `run_code` turn, that result, then
    /// `after` unchanged.
    fn program_result(&self, after: &[Value]) -> String {
        let m = self.messages(1);
        let (n, k) = (m.len(), after.len());
        assert!(n >= k + 2, "too few messages:{}", self.transcript());
        assert_eq!(
            &m[n - k..],
            after,
            "the messages after the program, in order:{}",
            self.transcript()
        );
        let (turn, res) = (&m[n - k - 2], &m[n - k - 1]);
        assert_eq!(turn["role"], "assistant", "{}", self.transcript());
        assert_eq!(turn["tool_calls"][0]["id"], PROG, "{}", self.transcript());
        assert_eq!(turn["tool_calls"][0]["function"]["name"], "run_code");
        assert_eq!(res["role"], "tool", "{}", self.transcript());
        assert_eq!(res["tool_call_id"], PROG, "{}", self.transcript());
        res["content"].as_str().unwrap_or_default().to_owned()
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

// ---------------------------------------------------- 1. Interrupted programs

/// A result that says the program was interrupted, and lists each call
/// with its result (or `no result`); `after` follows it unchanged.
fn assert_interrupted(c: &Chat, listed: &[(&str, Option<&str>)], after: &[Value]) {
    let content = c.program_result(after);
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
        let end = at.iter().copied().filter(|&p| p > at[i]).min();
        let entry = &content[at[i]..end.unwrap_or(content.len())];
        let expected = result.unwrap_or("no result");
        assert!(
            entry.contains(expected),
            "{call} is listed with {expected:?}: {content}"
        );
    }
}

#[tokio::test]
async fn interrupted_json_a_user_message_after_some_results_ends_the_program_as_interrupted() {
    let joke = "Here is a joke.";
    let reading = Reply::Message(program(Some("Reading both."), TWO_PARALLEL));
    let mut c = Chat::new([reading, say(joke), say(joke)], "Read a and b", false).await;
    let turn = c.ask().await;
    let calls = calls_of(&turn);
    assert_eq!(calls.len(), 2, "{turn}");
    c.push(turn.clone());
    c.push(result(&calls[0]));
    let user = c.push(json!({"role": "user", "content": "Stop that. Tell me a joke."}));

    c.answers(joke).await;
    let listed = [(READ_A, Some("alpha")), (READ_B, None)];
    assert_interrupted(&c, &listed, &[user]);
    c.same_again().await;
}

#[tokio::test]
async fn interrupted_sse_a_user_message_with_no_results_at_all() {
    let other = "Sure, something else.";
    let script = [run(TWO_PARALLEL), say(other), say(other)];
    let mut c = Chat::new(script, "Read a and b", true).await;
    let turn = c.ask().await;
    assert_eq!(calls_of(&turn).len(), 2, "{turn}");
    c.push(turn);
    let user = c.push(json!({"role": "user", "content": "Never mind, do something else."}));

    c.answers(other).await;
    assert_interrupted(&c, &[(READ_A, None), (READ_B, None)], &[user]);
    c.same_again().await;
}

#[tokio::test]
async fn interrupted_json_an_assistant_text_message_after_the_results_then_a_user_message() {
    // LangGraph's recursion limit, opencode's step limit: the agent writes
    // its own assistant message after the results, then the user goes on.
    let script = [run(TWO_SEQUENTIAL), say("Going on.")];
    let mut c = Chat::new(script, "Read a then b", false).await;
    c.turn().await;
    let stop = c.push(
        json!({"role": "assistant", "content": "Sorry, need more steps to process this request."}),
    );
    let user = c.push(json!({"role": "user", "content": "Go on."}));

    c.answers("Going on.").await;
    assert_interrupted(&c, &[(READ_A, Some("alpha"))], &[stop, user]);
}

#[tokio::test]
async fn interrupted_sse_after_the_second_batch_lists_the_calls_of_both_batches() {
    let script = [run(THREE_SEQUENTIAL), say("Stopped.")];
    let mut c = Chat::new(script, "Read a, b, c", true).await;
    c.turn().await;
    let second = c.turn().await;
    assert_eq!(
        calls_of(&second)[0]["function"]["arguments"],
        r#"{"path":"b.txt"}"#
    );
    let user = c.push(json!({"role": "user", "content": "That is enough."}));

    c.answers("Stopped.").await;
    let listed = [(READ_A, Some("alpha")), (READ_B, Some("beta"))];
    assert_interrupted(&c, &listed, &[user]);
}

// ------------------------------------------ 2. Media after results (opencode)

fn media_message() -> Value {
    json!({"role": "user", "content": [
        {"type": "text", "text": "Attached media from tool result:"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="}},
    ]})
}

/// The program's real result (it resumed), then the media message.
fn assert_ended_then_media(c: &Chat, holds: &[&str]) {
    let content = c.program_result(&[media_message()]);
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
    let script = [run(ONE_READ), say("A picture of alpha.")];
    let mut c = Chat::new(script, "Look at a", false).await;
    c.turn().await;
    c.push(media_message());

    c.answers("A picture of alpha.").await;
    assert_ended_then_media(&c, &["alpha"]);
}

#[tokio::test]
async fn media_between_two_batches_resumes_the_program_to_its_next_batch() {
    let script = [run(TWO_SEQUENTIAL), say("Both read.")];
    let mut c = Chat::new(script, "Look at a and b", true).await;
    c.turn().await;
    c.push(media_message());

    let second = c.turn().await;
    let calls = calls_of(&second);
    assert_eq!(calls.len(), 1, "the program's next batch: {second}");
    assert_eq!(calls[0]["function"]["name"], "read");
    assert_eq!(calls[0]["function"]["arguments"], r#"{"path":"b.txt"}"#);
    assert_eq!(c.seen().len(), 1, "the model is not asked mid-program");

    c.answers("Both read.").await;
    assert_ended_then_media(&c, &["alphabeta"]);
}

// ------------------------------------------------- 3. Provider fields survive

fn fields_turn() -> Value {
    json!({"role": "assistant", "content": "Let me run a program.",
        "reasoning_content": "Two files, one after the other.",
        "tool_calls": [{"id": "call_p", "type": "function",
            "function": {"name": "run_code", "arguments": json!({"code": TWO_SEQUENTIAL}).to_string()},
            "extra_content": {"google": {"thought_signature": "sig=="}}}],
        "provider_specific": {"x": 1}})
}

/// `fields_turn()` streamed in pieces, as a provider sends it.
fn fields_turn_sse() -> String {
    let args = json!({"code": TWO_SEQUENTIAL}).to_string();
    let (a1, rest) = args.split_at(10);
    let (a2, a3) = rest.split_at(25);
    let deltas = [
        json!({"role": "assistant", "content": "", "provider_specific": {"x": 1}}),
        json!({"reasoning_content": "Two files, "}),
        json!({"reasoning_content": "one after the other."}),
        json!({"content": "Let me run "}),
        json!({"content": "a program."}),
        json!({"tool_calls": [{"index": 0, "id": "call_p", "type": "function",
            "function": {"name": "run_code", "arguments": a1},
            "extra_content": {"google": {"thought_signature": "sig=="}}}]}),
        json!({"tool_calls": [{"index": 0, "function": {"arguments": a2}}]}),
        json!({"tool_calls": [{"index": 0, "function": {"arguments": a3}}]}),
    ];
    let s: String = deltas.into_iter().map(|d| chunk(d, None)).collect();
    s + &chunk(json!({}), Some("tool_calls")) + "data: [DONE]\n\n"
}

/// The model answers `first` (the fields turn), the program runs to its
/// answer, and the user thanks it: the second and third requests to the
/// model carry `fields_turn()` unchanged.
async fn fields_replayed(first: Reply, stream: bool) {
    let script = [first, say("alphabeta"), say("You are welcome.")];
    let mut c = Chat::new(script, "Read a then b", stream).await;
    let answer = c.drive(str::to_owned).await;
    assert_eq!(answer["content"], "alphabeta");
    c.push(json!({"role": "user", "content": "Thanks."}));
    c.ask().await;
    c.assert_well_formed();
    let seen = c.seen();
    assert_eq!(seen.len(), 3);
    for i in 1..seen.len() {
        let m = c.messages(i);
        let replayed = m
            .iter()
            .find(|m| m["tool_calls"][0]["function"]["name"] == "run_code")
            .unwrap_or_else(|| panic!("request {} replays the model's turn", i + 1));
        assert_eq!(
            replayed,
            &fields_turn(),
            "request {} replays the model's turn as it came",
            i + 1
        );
    }
}

#[tokio::test]
async fn fields_json_the_model_turn_is_replayed_with_every_field() {
    fields_replayed(Reply::Message(fields_turn()), false).await;
}

#[tokio::test]
async fn fields_sse_the_model_turn_is_replayed_as_an_sdk_accumulates_it() {
    fields_replayed(Reply::Sse(fields_turn_sse()), true).await;
}

#[tokio::test]
async fn fields_sse_a_repair_replays_the_denied_turn_with_its_fields() {
    let denied = json!({"role": "assistant", "content": null,
        "reasoning_content": "Read it directly.",
        "tool_calls": [{"id": "call_d", "type": "function",
            "function": {"name": "read", "arguments": "{\"path\":\"a.txt\"}"},
            "extra_content": {"google": {"thought_signature": "dsig=="}}}]});
    let script = [Reply::Message(denied), say("I will use run_code next.")];
    let c = Chat::new(script, "Read a", true).await;
    let answer = c.ask().await;
    assert_eq!(answer["content"], "I will use run_code next.");
    let seen = c.seen();
    assert_eq!(seen.len(), 2, "one repair:{}", c.transcript());
    assert!(seen.iter().all(|s| s.status == 200), "{}", c.transcript());
    let m = c.messages(1);
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
    let c = Chat::new([Reply::Message(fields_turn())], "Read a then b", false).await;
    let turn = c.ask().await;
    assert_eq!(calls_of(&turn)[0]["function"]["name"], "read");
    assert_eq!(
        turn["reasoning_content"], "Two files, one after the other.",
        "{turn}"
    );
}

// --------------------- 4. Shortened ids (opencode with Mistral-family models)

/// opencode for Mistral-family models: every tool-call id cut down to its
/// first 9 letters and digits.
fn shorten(id: &str) -> String {
    id.chars()
        .filter(char::is_ascii_alphanumeric)
        .take(9)
        .collect()
}

#[tokio::test]
async fn short_ids_of_one_batch_stay_distinct() {
    let c = Chat::new([run(THREE_PARALLEL)], "Read all", false).await;
    let turn = c.ask().await;
    let ids: Vec<String> = calls_of(&turn)
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 3, "{turn}");
    let short: BTreeSet<String> = ids.iter().map(|id| shorten(id)).collect();
    assert_eq!(
        short.len(),
        3,
        "distinct when shortened: {ids:?} -> {short:?}"
    );
}

/// The client shortens every id while `code` runs to its end.
async fn short_ids_resume(code: &str) {
    let mut c = Chat::new([run(code), say("Read all three.")], "Read all", false).await;
    let answer = c.drive(shorten).await;
    assert_eq!(answer["content"], "Read all three.");
    c.assert_well_formed();
    assert_eq!(c.seen().len(), 2, "{}", c.transcript());
    let content = c.program_result(&[]);
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
    let mut c = Chat::new([run(ONE_READ), say("It says alpha.")], "Read a", false).await;
    let turn = c.ask().await;
    let call = calls_of(&turn)[0].clone();
    let full = call["id"].as_str().unwrap().to_owned();
    let short = shorten(&full);

    let mut wrong = c.m.clone();
    wrong.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": short, "type": "function",
        "function": {"name": "write", "arguments": "{\"path\":\"a.txt\",\"content\":\"x\"}"}}]}));
    wrong.push(json!({"role": "tool", "tool_call_id": short, "content": "ok"}));
    let res = c.proxy.chat(&request(&wrong, false), &[]).await;
    let status = res.status();
    let err: Value = res.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["error"]["type"], "invalid_request_error", "{err}");
    let message = err["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&short) || message.contains(&full),
        "the error names the id: {message}"
    );
    assert_eq!(c.seen().len(), 1, "nothing was fed to the model");

    let mut right = call.clone();
    right["id"] = json!(short);
    answer_all(
        &mut c.m,
        &json!({"role": "assistant", "content": null, "tool_calls": [right]}),
    );
    c.answers("It says alpha.").await;
}

// ------------------------------------------------- 5. Usage on hand-off turns

/// The response to the request that returns the first batch's results
/// (the program hands out its second batch), as raw bytes.
async fn second_batch(stream: bool, include_usage: bool) -> Vec<u8> {
    let mut c = Chat::new([run(TWO_SEQUENTIAL)], "Read a then b", stream).await;
    c.turn().await;
    let mut body = request(&c.m, stream);
    if include_usage {
        body["stream_options"] = json!({"include_usage": true});
    }
    let res = c.proxy.chat(&body, &[]).await;
    assert_eq!(res.status(), 200);
    let bytes = res.bytes().await.unwrap().to_vec();
    assert_eq!(c.seen().len(), 1, "a hand-off, not a model turn");
    bytes
}

#[tokio::test]
async fn usage_json_hand_off_reports_zero_tokens() {
    let got: Value = serde_json::from_slice(&second_batch(false, false).await).unwrap();
    assert_eq!(call_names(&got), vec!["read"], "{got}");
    assert_eq!(got["usage"], usage(0, 0), "{got}");
}

#[tokio::test]
async fn usage_sse_hand_off_has_a_zero_usage_chunk_when_asked() {
    let bytes = second_batch(true, true).await;
    let payloads = payloads(&bytes);
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
    assert_eq!(with_usage[0]["usage"], usage(0, 0));
    assert_eq!(
        chunks.last().unwrap()["usage"],
        usage(0, 0),
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

// ------------------------------------------------------ 6. Text across rounds

/// The model's opening text and its answer after the program, joined by
/// a blank line.
async fn text_across_rounds(stream: bool) {
    let compute = Reply::Message(program(Some("Let me compute."), "return 1 + 1;"));
    let c = Chat::new([compute, say("It is 2.")], "1+1?", stream).await;
    c.answers("Let me compute.\n\nIt is 2.").await;
}

#[tokio::test]
async fn text_json_the_opening_text_and_the_answer_with_a_blank_line() {
    text_across_rounds(false).await;
}

#[tokio::test]
async fn text_sse_the_opening_text_and_the_answer_with_a_blank_line() {
    text_across_rounds(true).await;
}

// ----------------------------------------------------------------- 7. Restart

#[tokio::test]
async fn restart_a_new_proxy_tells_the_model_the_record_was_lost_and_goes_on() {
    let lost = say("The program was lost; I will run it again later.");
    let mut c = Chat::new([run(ONE_READ), lost, say("Hello again.")], "Read a", false).await;
    let turn = c.ask().await;
    drop(c.proxy);
    answer_all(&mut c.m, &turn);

    c.proxy = proxy(&c.server).await;
    let answer = c.ask().await;
    c.push(answer);
    c.assert_well_formed();
    let sent = c.messages(1);
    let res = sent.last().unwrap();
    assert_eq!(res["role"], "tool", "{}", c.transcript());
    let run_id = res["tool_call_id"].as_str().unwrap_or_default();
    let turn = &sent[sent.len() - 2];
    assert_eq!(turn["tool_calls"][0]["id"], run_id);
    assert_eq!(turn["tool_calls"][0]["function"]["name"], "run_code");
    let content = res["content"].as_str().unwrap_or_default();
    assert!(content.contains("lost"), "the result says so: {content}");

    let user = c.push(json!({"role": "user", "content": "Hello?"}));
    c.answers("Hello again.").await;
    assert_eq!(c.messages(2).last().unwrap(), &user);
}
