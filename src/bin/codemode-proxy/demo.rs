//! `codemode-proxy demo`: Code Mode end to end without an API key.
//!
//! Starts a scripted model, the proxy in `code` mode (embedded runtime) and
//! in `native` mode in front of it, and a scripted agent holding ten files
//! in memory, then runs the same task both ways and prints what the model
//! saw, what the agent executed, and the model's round trips and prompt
//! tokens (estimated as request bytes / 4, the same for both).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use codemode_proxy::{server, Config};

const TASK: &str =
    "How many lines do the files in the project have in total, and which file is longest?";

/// What the scripted model saw: one entry per request.
#[derive(Default)]
struct ModelLog {
    requests: Vec<Value>,
    prompt_tokens: u64,
}

/// The scripted model: in code mode it writes one program; in native mode
/// it lists, reads every file, then answers, as a tool-calling model would.
fn model_answer(req: &Value) -> Value {
    let messages = req["messages"].as_array().cloned().unwrap_or_default();
    let tools: Vec<&str> = req["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
        .collect();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let call = |id: &str, name: &str, args: Value| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}});
    let turn = |content: Value, calls: Vec<Value>| {
        let mut message = json!({"role": "assistant", "content": content});
        let finish = if calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        if !calls.is_empty() {
            message["tool_calls"] = json!(calls);
        }
        json!({"id": "chatcmpl-demo", "object": "chat.completion", "created": 0, "model": "scripted",
               "choices": [{"index": 0, "message": message, "finish_reason": finish}]})
    };
    if tools == ["run_code"] {
        if last["role"] == "tool" {
            let result = last["content"].as_str().unwrap_or("");
            return turn(json!(format!("From the program: {result}")), vec![]);
        }
        let code = "const files = (await tools.list({})).split('\\n');\n\
                    const texts = await Promise.all(files.map(path => tools.read({path})));\n\
                    const lines = texts.map(t => t.split('\\n').length);\n\
                    const longest = files[lines.indexOf(Math.max(...lines))];\n\
                    return {files: files.length, lines: lines.reduce((a, b) => a + b, 0), longest};";
        return turn(
            json!("I'll count them with one program."),
            vec![call("call_prog", "run_code", json!({"code": code}))],
        );
    }
    let reads: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    if reads.is_empty() {
        return turn(Value::Null, vec![call("call_list", "list", json!({}))]);
    }
    if reads.len() == 1 {
        let files: Vec<&str> = reads[0]["content"].as_str().unwrap_or("").lines().collect();
        let calls = files
            .iter()
            .enumerate()
            .map(|(i, f)| call(&format!("call_read_{i}"), "read", json!({"path": f})))
            .collect();
        return turn(Value::Null, calls);
    }
    let lines: Vec<usize> = reads[1..]
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").split('\n').count())
        .collect();
    let total: usize = lines.iter().sum();
    turn(
        json!(format!(
            "The {} files have {total} lines in total.",
            lines.len()
        )),
        vec![],
    )
}

async fn serve_model(log: Arc<Mutex<ModelLog>>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                    let log = log.clone();
                    async move {
                        let body = req
                            .into_body()
                            .collect()
                            .await
                            .map(|c| c.to_bytes())
                            .unwrap_or_default();
                        let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let mut answer = model_answer(&parsed);
                        let prompt = (body.len() / 4) as u64;
                        answer["usage"] = json!({"prompt_tokens": prompt, "completion_tokens": 20, "total_tokens": prompt + 20});
                        if let Ok(mut l) = log.lock() {
                            l.prompt_tokens += prompt;
                            l.requests.push(parsed);
                        }
                        Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(
                            answer.to_string(),
                        ))))
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(addr)
}

async fn start_proxy(model: SocketAddr, mode: &str) -> std::io::Result<SocketAddr> {
    let vars: BTreeMap<&str, String> = [
        ("CODEMODE_UPSTREAM", format!("http://{model}/v1")),
        ("CODEMODE_MODE", mode.to_owned()),
        ("CODEMODE_RUNTIME", "embedded".to_owned()),
    ]
    .into_iter()
    .collect();
    let config = Config::from_lookup(|k| vars.get(k).cloned()).map_err(std::io::Error::other)?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let service = server::stack(config)?;
    tokio::spawn(server::serve(listener, service, std::future::pending()));
    Ok(addr)
}

fn files() -> BTreeMap<String, String> {
    (1..=10)
        .map(|i| {
            let body: Vec<String> = (0..(20 + i * 7))
                .map(|l| format!("fn line_{l}() {{ /* file {i} */ }}"))
                .collect();
            (format!("src/module_{i:02}.rs"), body.join("\n"))
        })
        .collect()
}

/// The agent's own tool loop: it knows `list` and `read`, nothing else.
async fn agent(proxy: SocketAddr) -> Result<(String, Vec<String>), String> {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let files = files();
    let tools = json!([
        {"type": "function", "function": {"name": "list", "description": "List the project's files.", "parameters": {"type": "object", "properties": {}}}},
        {"type": "function", "function": {"name": "read", "description": "Read a file.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
    ]);
    let mut messages = vec![json!({"role": "user", "content": TASK})];
    let mut executed = Vec::new();
    for _ in 0..10 {
        let body = json!({"model": "scripted", "messages": messages, "tools": tools});
        let req = hyper::Request::post(format!("http://{proxy}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| e.to_string())?;
        let res = client.request(req).await.map_err(|e| e.to_string())?;
        let bytes = res
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        let completion: Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
        let message = completion["choices"][0]["message"].clone();
        messages.push(message.clone());
        let Some(calls) = message["tool_calls"].as_array().filter(|c| !c.is_empty()) else {
            return Ok((
                message["content"].as_str().unwrap_or("").to_owned(),
                executed,
            ));
        };
        for c in calls {
            let name = c["function"]["name"].as_str().unwrap_or("");
            let args: Value =
                serde_json::from_str(c["function"]["arguments"].as_str().unwrap_or("{}"))
                    .unwrap_or(Value::Null);
            let result = match name {
                "list" => files.keys().cloned().collect::<Vec<_>>().join("\n"),
                "read" => files
                    .get(args["path"].as_str().unwrap_or(""))
                    .cloned()
                    .unwrap_or_default(),
                other => {
                    return Err(format!(
                        "the agent was asked to run a tool it does not have: {other}"
                    ))
                }
            };
            executed.push(format!("{name} {}", c["id"].as_str().unwrap_or("")));
            messages.push(json!({"role": "tool", "tool_call_id": c["id"], "content": result}));
        }
    }
    Err("the agent's loop did not end".into())
}

fn describe_model_view(requests: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(last) = requests.last() {
        for m in last["messages"].as_array().into_iter().flatten() {
            let line = match m["role"].as_str() {
                Some("assistant") => {
                    let calls: Vec<String> = m["tool_calls"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|c| c["function"]["name"].as_str().unwrap_or("").to_owned())
                        .collect();
                    format!("assistant calls {}", calls.join(", "))
                }
                Some("tool") => {
                    let c = m["content"].as_str().unwrap_or("");
                    format!(
                        "tool result, {} bytes: {}",
                        c.len(),
                        c.chars().take(60).collect::<String>().replace('\n', " ")
                    )
                }
                Some(role) => format!("{role} message"),
                None => continue,
            };
            out.push(line);
        }
    }
    out
}

/// Runs the demo and prints the comparison.
pub async fn run() -> std::io::Result<()> {
    let mut report = Vec::new();
    for mode in ["code", "native"] {
        let log = Arc::new(Mutex::new(ModelLog::default()));
        let model = serve_model(log.clone()).await?;
        let proxy = start_proxy(model, mode).await?;
        let (answer, executed) = agent(proxy).await.map_err(std::io::Error::other)?;
        let log = log
            .lock()
            .map_err(|_| std::io::Error::other("model log poisoned"))?;
        report.push((
            mode,
            answer,
            executed,
            describe_model_view(&log.requests),
            log.requests.len(),
            log.prompt_tokens,
        ));
    }
    println!("codemode-proxy demo. The task: {TASK}\n");
    for (mode, answer, executed, view, trips, tokens) in &report {
        println!("== {mode} mode ==");
        println!("What the model saw in its last request:");
        for line in view {
            println!("    {line}");
        }
        println!(
            "What the agent executed ({} calls, with its own tools):",
            executed.len()
        );
        for e in executed {
            println!("    {e}");
        }
        println!("Answer: {answer}");
        println!("Model round trips: {trips}; prompt tokens over the task: {tokens}\n");
    }
    if let [(_, _, _, _, ct, ctok), (_, _, _, _, nt, ntok)] = report.as_slice() {
        println!(
            "Code mode used {ct} model round trips and {ctok} prompt tokens; native mode {nt} and {ntok} ({:.0}% fewer tokens).",
            100.0 * (1.0 - *ctok as f64 / (*ntok).max(1) as f64)
        );
    }
    Ok(())
}
