//! A program's calls sent back with ids the proxy never gave: agno rewrites
//! every chat id that does not start with `call_` (or is longer than 40
//! characters), other clients reorder a batch or its results. The batch
//! is found by what it calls, its results paired with its calls by the
//! client's own ids, on Chat, Responses and Messages, JSON and streamed.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde_json::{json, Value};
use wiremock::{Request, Respond, ResponseTemplate};

use crate::common::inspector::{get, inspected_proxy, newest_execution, Api, TOKEN};
use crate::common::messages_model::{run_code_use, text, MessagesModel};
use crate::common::responses_model::{run_code_call, said, ResponsesModel};
use crate::common::{call, scripted, sse_client, Proxy};

/// Two reads at once, then one more: two batches handed out.
const CODE: &str = "const [a, b] = await Promise.all([tools.read({path: 'a.txt'}), tools.read({path: 'b.txt'})]); const c = await tools.read({path: 'c.txt'}); return [a, b, c].join(' ');";

/// Two identical reads and another at once.
const TWINS: &str = "const [a, b, c] = await Promise.all([tools.read({path: 'a.txt'}), tools.read({path: 'a.txt'}), tools.read({path: 'b.txt'})]); return a + b + c;";

/// A chat model answering `messages` in order, as a completion or a
/// stream, whichever the request asks for.
struct ChatModel(Mutex<VecDeque<Value>>);

impl Respond for ChatModel {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        match self.0.lock().unwrap().pop_front() {
            Some(message) => scripted::serve(&body, message),
            None => ResponseTemplate::new(500).set_body_string("script exhausted"),
        }
    }
}

/// The model of `api` that runs `code` once, then answers.
async fn model(api: Api, code: &str) -> wiremock::MockServer {
    match api {
        Api::Chat => {
            scripted::model_server(ChatModel(Mutex::new(VecDeque::from([
                json!({"role": "assistant", "content": null, "tool_calls": [
                    call("call_prog", "run_code", &json!({"code": code}).to_string())]}),
                json!({"role": "assistant", "content": "Done."}),
            ]))))
            .await
        }
        Api::Responses => {
            ResponsesModel::new([vec![run_code_call("call_prog", code)], vec![said("Done.")]])
                .serve()
                .await
        }
        Api::Messages => {
            let code = code.replace("tools.read({path:", "tools.Read({file_path:");
            MessagesModel::new([vec![run_code_use("toolu_prog", &code)], vec![text("Done.")]])
                .serve()
                .await
        }
    }
}

/// How the client sends a batch back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Echo {
    /// Every call given an id of the client's own (agno: `call_` and more).
    Rewritten,
    /// Rewritten, and the calls sent back in reverse order (their results
    /// in the order the calls came).
    Reordered,
    /// Every id dropped, from the calls and their results.
    Dropped,
}

/// What a file holds: its name, upper-cased (identical reads of one file
/// answered differently with `twins`).
fn content(path: &str, nth: usize, twins: bool) -> String {
    let path = path.trim_end_matches(".txt").to_uppercase();
    if twins {
        format!("{path}{nth}")
    } else {
        path
    }
}

/// One request of the agent; the status and the answer (a stream read
/// back into the whole answer it stands for).
async fn ask(proxy: &Proxy, api: Api, history: &[Value], stream: bool) -> (u16, Value) {
    let (path, mut body) = api.request(history);
    if stream {
        body["stream"] = json!(true);
    }
    let res = proxy
        .post(path, &body, &[("anthropic-version", "2023-06-01")])
        .await;
    let status = res.status().as_u16();
    let bytes = res.bytes().await.unwrap();
    let streamed = stream && status == 200;
    let answer = match api {
        _ if !streamed => serde_json::from_slice(&bytes).unwrap(),
        Api::Chat => json!({"choices": [{"message": sse_client::reassemble(&bytes).message()}]}),
        Api::Responses => sse_client::payloads(&bytes)
            .iter()
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .find(|e| e["type"] == "response.completed")
            .map(|e| e["response"].clone())
            .expect("a streamed response completes"),
        Api::Messages => messages_of(&bytes),
    };
    (status, answer)
}

/// A Messages stream read back into its message.
fn messages_of(bytes: &[u8]) -> Value {
    let mut blocks: Vec<Value> = Vec::new();
    let mut inputs: Vec<String> = Vec::new();
    for event in sse_client::payloads(bytes)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
    {
        match event["type"].as_str() {
            Some("content_block_start") => {
                blocks.push(event["content_block"].clone());
                inputs.push(String::new());
            }
            Some("content_block_delta") => {
                let delta = &event["delta"];
                let last = blocks.len() - 1;
                if let Some(t) = delta["text"].as_str() {
                    let was = blocks[last]["text"].as_str().unwrap_or("").to_owned();
                    blocks[last]["text"] = json!(was + t);
                }
                if let Some(j) = delta["partial_json"].as_str() {
                    inputs[last].push_str(j);
                }
            }
            _ => {}
        }
    }
    for (b, input) in blocks.iter_mut().zip(inputs) {
        if b["type"] == "tool_use" && !input.is_empty() {
            b["input"] = serde_json::from_str(&input).unwrap();
        }
    }
    json!({"content": blocks})
}

/// The calls of an answer: (id, name, path), in order.
fn calls_of(api: Api, answer: &Value) -> Vec<(String, String, String)> {
    let s = |v: &Value| v.as_str().unwrap_or("").to_owned();
    match api {
        Api::Chat => answer["choices"][0]["message"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let args: Value =
                    serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap();
                (s(&c["id"]), s(&c["function"]["name"]), s(&args["path"]))
            })
            .collect(),
        Api::Responses => answer["output"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|i| i["type"] == "function_call")
            .map(|i| {
                let args: Value = serde_json::from_str(i["arguments"].as_str().unwrap()).unwrap();
                (s(&i["call_id"]), s(&i["name"]), s(&args["path"]))
            })
            .collect(),
        Api::Messages => answer["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| (s(&b["id"]), s(&b["name"]), s(&b["input"]["file_path"])))
            .collect(),
    }
}

/// The answer's text.
fn text_of(api: Api, answer: &Value) -> String {
    match api {
        Api::Chat => answer["choices"][0]["message"]["content"].to_string(),
        Api::Responses | Api::Messages => answer.to_string(),
    }
}

/// Sends the answer's batch back as `echo` says, with each call's result
/// (`results[k]` for call `k` as handed out).
fn echo_back(
    api: Api,
    answer: &Value,
    echo: Echo,
    results: &[String],
    fresh: &mut usize,
    history: &mut Vec<Value>,
) {
    // The client's ids, as agno makes them.
    let mut new_id = || {
        *fresh += 1;
        format!("call_{:024}", *fresh)
    };
    let order: Vec<usize> = match echo {
        Echo::Rewritten | Echo::Dropped => (0..results.len()).collect(),
        Echo::Reordered => (0..results.len()).rev().collect(),
    };
    match api {
        Api::Chat => {
            let mut message = answer["choices"][0]["message"].clone();
            let calls = message["tool_calls"].as_array().unwrap().clone();
            let mut ids = Vec::new();
            let sent: Vec<Value> = order
                .iter()
                .map(|&k| {
                    let mut c = calls[k].clone();
                    let id = new_id();
                    c["id"] = json!(id);
                    ids.push((k, id));
                    c
                })
                .collect();
            message["tool_calls"] = json!(sent);
            history.push(message);
            ids.sort();
            for (k, id) in ids {
                history.push(json!({"role": "tool", "tool_call_id": id, "content": results[k]}));
            }
            if echo == Echo::Dropped {
                forget(history, "id", "tool_call_id");
            }
        }
        Api::Responses => {
            let output = answer["output"].as_array().unwrap();
            let calls: Vec<&Value> = output
                .iter()
                .filter(|i| i["type"] == "function_call")
                .collect();
            history.extend(
                output
                    .iter()
                    .filter(|i| i["type"] != "function_call")
                    .cloned(),
            );
            let mut ids = Vec::new();
            for &k in &order {
                let mut c = calls[k].clone();
                let id = new_id();
                c["call_id"] = json!(id);
                c.as_object_mut().unwrap().remove("id");
                ids.push((k, id));
                history.push(c);
            }
            ids.sort();
            for (k, id) in ids {
                history.push(
                    json!({"type": "function_call_output", "call_id": id, "output": results[k]}),
                );
            }
            if echo == Echo::Dropped {
                forget(history, "call_id", "call_id");
            }
        }
        Api::Messages => {
            let content = answer["content"].as_array().unwrap();
            let uses: Vec<&Value> = content.iter().filter(|b| b["type"] == "tool_use").collect();
            let mut blocks: Vec<Value> = content
                .iter()
                .filter(|b| b["type"] != "tool_use")
                .cloned()
                .collect();
            let mut ids = Vec::new();
            for &k in &order {
                let mut b = uses[k].clone();
                let id = format!("toolu_{}", new_id());
                b["id"] = json!(id);
                ids.push((k, id));
                blocks.push(b);
            }
            history.push(json!({"role": "assistant", "content": blocks}));
            ids.sort();
            let answers: Vec<Value> = ids
                .into_iter()
                .map(|(k, id)| {
                    json!({"type": "tool_result", "tool_use_id": id, "content": results[k]})
                })
                .collect();
            history.push(json!({"role": "user", "content": answers}));
            if echo == Echo::Dropped {
                forget(history, "id", "tool_use_id");
            }
        }
    }
}

/// Drops the ids the client just gave (`call_<n>` in field `call` of a
/// call, `result` of a result), wherever they stand in the last turn.
fn forget(history: &mut [Value], call: &str, result: &str) {
    fn walk(v: &mut Value, call: &str, result: &str) {
        match v {
            Value::Object(map) => {
                for key in [call, result] {
                    let client_id = map
                        .get(key)
                        .and_then(Value::as_str)
                        .is_some_and(|id| id.contains("call_0000"));
                    if client_id {
                        map.remove(key);
                    }
                }
                map.values_mut().for_each(|v| walk(v, call, result));
            }
            Value::Array(items) => items.iter_mut().for_each(|v| walk(v, call, result)),
            _ => {}
        }
    }
    for v in history.iter_mut().rev().take(4) {
        walk(v, call, result);
    }
}

/// The agent's loop on `api`, sending each batch back as `echo` says;
/// returns the requests it made and the model's last answer.
async fn run(proxy: &Proxy, api: Api, echo: Echo, stream: bool) -> (usize, Value) {
    let mut history = vec![json!({"role": "user", "content": "Read a, b and c"})];
    let mut fresh = 0;
    for turn in 1..=5 {
        let (status, answer) = ask(proxy, api, &history, stream).await;
        assert_eq!(status, 200, "{api:?} {echo:?} stream {stream}: {answer}");
        let calls = calls_of(api, &answer);
        if calls.is_empty() {
            return (turn, answer);
        }
        for (id, _, _) in &calls {
            assert!(crate::common::is_minted_shape(id), "{id}");
        }
        let results: Vec<String> = calls
            .iter()
            .enumerate()
            .map(|(n, (_, _, path))| content(path, n, false))
            .collect();
        echo_back(api, &answer, echo, &results, &mut fresh, &mut history);
        if echo == Echo::Dropped {
            let sent = json!(history).to_string();
            assert!(!sent.contains("call_0000"), "{sent}");
        }
    }
    panic!("the program did not end");
}

/// What the model was told the program returned, from its last request.
async fn program_result(server: &wiremock::MockServer, api: Api) -> String {
    let requests = server.received_requests().await.unwrap();
    let bodies: Vec<Value> = requests
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert_eq!(bodies.len(), 2, "the model is asked twice: {bodies:?}");
    let last = &bodies[1];
    assert!(
        !last.to_string().contains("call_0000"),
        "no call of the program reaches the model: {last}"
    );
    let result = match api {
        Api::Chat => last["messages"].as_array().unwrap().last().unwrap()["content"].clone(),
        Api::Responses => last["input"].as_array().unwrap().last().unwrap()["output"].clone(),
        Api::Messages => {
            last["messages"].as_array().unwrap().last().unwrap()["content"][0]["content"].clone()
        }
    };
    result.to_string()
}

#[tokio::test]
async fn a_batch_sent_back_with_rewritten_reordered_or_no_ids_resumes_its_program() {
    for api in Api::ALL {
        for echo in [Echo::Rewritten, Echo::Reordered, Echo::Dropped] {
            for stream in [false, true] {
                let server = model(api, CODE).await;
                let proxy = inspected_proxy(&server, &[]).await;
                let (turns, answer) = run(&proxy, api, echo, stream).await;
                let what = format!("{api:?} {echo:?} stream {stream}");
                assert!(text_of(api, &answer).contains("Done."), "{what}: {answer}");
                assert_eq!(turns, 3, "{what}: two batches, then the answer");
                let result = program_result(&server, api).await;
                assert!(result.contains("A B C"), "{what}: {result}");
                let e = newest_execution(&proxy).await;
                assert_eq!(e["state"], "finished", "{what}: {e}");
            }
        }
    }
}

#[tokio::test]
async fn identical_calls_sent_back_reordered_with_different_results_are_refused() {
    for api in Api::ALL {
        let server = model(api, TWINS).await;
        let proxy = inspected_proxy(&server, &[]).await;
        let mut history = vec![json!({"role": "user", "content": "Read a twice"})];
        let (status, answer) = ask(&proxy, api, &history, false).await;
        assert_eq!(status, 200, "{answer}");
        let calls = calls_of(api, &answer);
        assert_eq!(calls.len(), 3, "{answer}");
        let results: Vec<String> = calls
            .iter()
            .enumerate()
            .map(|(n, (_, _, path))| content(path, n, true))
            .collect();
        echo_back(
            api,
            &answer,
            Echo::Reordered,
            &results,
            &mut 0,
            &mut history,
        );
        let (status, error) = ask(&proxy, api, &history, false).await;
        assert_eq!(status, 400, "{api:?}: {error}");
        let message = error["error"]["message"].as_str().unwrap_or("");
        assert!(
            message.contains("cannot tell which result answers which")
                && message.contains(&calls[0].0)
                && message.contains(&calls[1].0),
            "{api:?}: {error}"
        );
        if api == Api::Messages {
            assert_eq!(error["type"], "error", "Anthropic's error shape: {error}");
        }
        // The same results in the order the calls came resume the program.
        let mut history = vec![json!({"role": "user", "content": "Read a twice"})];
        echo_back(
            api,
            &answer,
            Echo::Rewritten,
            &results,
            &mut 0,
            &mut history,
        );
        let (status, answer) = ask(&proxy, api, &history, false).await;
        assert_eq!(status, 200, "{api:?}: {answer}");
        let result = program_result(&server, api).await;
        assert!(result.contains("A0A1B2"), "{api:?}: {result}");
    }
}

/// The agno case when the user moves on: the batch, sent back with ids of
/// the client's own, is followed by a new question. The program is ended
/// as interrupted, and says so in the metrics and the inspector.
#[tokio::test]
async fn a_program_the_client_moves_away_from_with_rewritten_ids_is_recorded_as_abandoned() {
    let server = model(Api::Chat, CODE).await;
    let proxy = inspected_proxy(&server, &[]).await;
    let mut history = vec![json!({"role": "user", "content": "Read a, b and c"})];
    let (_, answer) = ask(&proxy, Api::Chat, &history, false).await;
    assert_eq!(newest_execution(&proxy).await["state"], "waiting");
    let results = vec!["A".to_owned(), "B".to_owned()];
    echo_back(
        Api::Chat,
        &answer,
        Echo::Rewritten,
        &results,
        &mut 0,
        &mut history,
    );
    history.push(json!({"role": "user", "content": "Never mind."}));
    let (status, answer) = ask(&proxy, Api::Chat, &history, false).await;
    assert_eq!(status, 200, "{answer}");
    let e = newest_execution(&proxy).await;
    assert_eq!(e["state"], "interrupted", "{e}");
    let metrics = proxy.metrics().await;
    assert!(
        metrics.contains(r#"codemode_programs_abandoned_total{reason="interrupted"} 1"#),
        "{metrics}"
    );
    let (_, list) = get(&proxy, "/codemode/api/executions", Some(TOKEN)).await;
    assert_eq!(list["executions"][0]["state"], "interrupted", "{list}");
}

/// A client that never sends a batch back (or sends it in a shape nothing
/// matches): once its lifetime passes the store drops the program, and
/// the metrics and the inspector say so.
#[tokio::test]
async fn a_program_whose_calls_never_come_back_is_recorded_when_the_store_drops_it() {
    let server = model(Api::Chat, CODE).await;
    let proxy = inspected_proxy(&server, &[("CODEMODE_RUN_LIFETIME_SECS", "1")]).await;
    let history = vec![json!({"role": "user", "content": "Read a, b and c"})];
    let (status, answer) = ask(&proxy, Api::Chat, &history, false).await;
    assert_eq!(status, 200, "{answer}");
    let metrics = proxy.metrics().await;
    assert!(
        metrics.contains(r#"codemode_programs_abandoned_total{reason="unanswered"} 0"#),
        "{metrics}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let metrics = proxy.metrics().await;
    assert!(
        metrics.contains(r#"codemode_programs_abandoned_total{reason="unanswered"} 1"#),
        "{metrics}"
    );
    assert_eq!(newest_execution(&proxy).await["state"], "expired");
}
