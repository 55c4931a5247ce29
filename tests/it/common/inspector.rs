//! The inspector's tests share: the proxy with the admin token in front of
//! a scripted model of any dialect, an agent that runs one program of two
//! reads through it, and reads of the inspector's API.

use serde_json::{json, Value};
use wiremock::MockServer;

use super::messages_model::{fs_input_schema_tools, run_code_use, text, MessagesModel};
use super::responses_model::{fs_function_tools, run_code_call, said, ResponsesModel};
use super::{call, calls_completion, mount, provider, start, text_completion, usage, Proxy};

/// The admin token the tests run with.
pub const TOKEN: &str = "inspector-test-token-0123456789";

/// The program every dialect's model runs: two reads, some console output.
pub const CODE: &str = "const a = await tools.read({path: 'a.txt'});\nconst b = await tools.read({path: 'b.txt'});\nconsole.log('read two files');\nreturn a + ' ' + b;";

/// A program that reads a long log and a config at once and keeps a
/// little of them: what the docs' screenshot shows.
pub const LOG_CODE: &str = "const [log, config] = await Promise.all([\n  tools.read({path: 'server.log'}),\n  tools.read({path: 'config.toml'}),\n]);\nconst errors = log.split('\\n').filter((l) => l.includes('ERROR'));\nconsole.log(`${errors.length} errors in ${log.length} bytes`);\nreturn {errors: errors.slice(0, 3), timeout: /timeout_ms = (\\d+)/.exec(config)[1]};";

/// What the agent's files hold.
pub const FILES: [(&str, &str); 2] = [
    ("a.txt", "alpha-secret-contents"),
    ("b.txt", "bravo-secret-contents"),
];

/// The wire APIs a program can come through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    Chat,
    Responses,
    Messages,
}

impl Api {
    pub const ALL: [Api; 3] = [Api::Chat, Api::Responses, Api::Messages];

    /// The route and body of an agent's request on this API: `history`
    /// so far, the agent's file tools in the API's own shape.
    pub fn request(self, history: &[Value]) -> (&'static str, Value) {
        match self {
            Api::Chat => (
                "/v1/chat/completions",
                json!({"model": "gpt-test", "messages": history, "tools": super::agent::fs_tools()}),
            ),
            Api::Responses => (
                "/v1/responses",
                json!({"model": "gpt-test", "input": history, "tools": fs_function_tools(), "store": false}),
            ),
            Api::Messages => (
                "/v1/messages",
                json!({"model": "claude-test", "max_tokens": 1024, "messages": history,
                       "tools": fs_input_schema_tools()}),
            ),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Responses => "responses",
            Api::Messages => "messages",
        }
    }
}

/// A Chat completion whose one call is `run_code` with [`CODE`].
pub fn runs_code(usage: Value) -> Value {
    calls_completion(
        vec![call(
            "call_prog",
            "run_code",
            &json!({"code": CODE}).to_string(),
        )],
        usage,
    )
}

/// A model that runs [`CODE`] once and then answers, on `api`.
pub async fn program_model(api: Api) -> MockServer {
    match api {
        Api::Chat => {
            provider([
                runs_code(usage(100, 20)),
                text_completion("The files say alpha and bravo.", usage(150, 10)),
            ])
            .await
        }
        Api::Responses => {
            ResponsesModel::new([
                vec![
                    said("Let me run a program."),
                    run_code_call("call_prog", CODE),
                ],
                vec![said("The files say alpha and bravo.")],
            ])
            .serve()
            .await
        }
        Api::Messages => {
            let code = CODE.replace("tools.read({path:", "tools.Read({file_path:");
            MessagesModel::new([
                vec![
                    text("Let me run a program."),
                    run_code_use("toolu_prog", &code),
                ],
                vec![text("The files say alpha and bravo.")],
            ])
            .serve()
            .await
        }
    }
}

/// The proxy with the inspector on, in front of `server` (every dialect's
/// upstream), running programs itself; `vars` add to or override.
pub async fn inspected_proxy(server: &MockServer, vars: &[(&str, &str)]) -> Proxy {
    let upstream = format!("{}/v1", server.uri());
    let mut all = vec![
        ("CODEMODE_RUNTIME", "embedded"),
        ("CODEMODE_ADMIN_TOKEN", TOKEN),
        ("CODEMODE_ANTHROPIC_UPSTREAM", upstream.as_str()),
    ];
    all.extend_from_slice(vars);
    start(server, &all).await
}

/// The agent's side of [`CODE`] on `api`: asks, runs each read it is
/// handed, asks again, until the model answers; sends `headers` each time.
/// Returns the number of requests it made.
pub async fn run_program(proxy: &Proxy, api: Api, headers: &[(&str, &str)]) -> usize {
    let mut history: Vec<Value> = vec![json!({"role": "user", "content": "Read a.txt and b.txt"})];
    for turn in 1..=6 {
        let (path, body) = api.request(&history);
        let mut all = headers.to_vec();
        if api == Api::Messages {
            all.push(("anthropic-version", "2023-06-01"));
        }
        let res = proxy.post(path, &body, &all).await;
        let status = res.status();
        let answer: Value = res.json().await.unwrap();
        assert_eq!(status, 200, "{answer}");
        if !run_tools(api, &answer, &mut history) {
            return turn;
        }
    }
    panic!("the program did not end");
}

fn file(path: &str) -> String {
    match path {
        "server.log" => (0..400)
            .map(|i| {
                let level = if i % 97 == 13 {
                    "ERROR upstream timed out"
                } else {
                    "INFO request served"
                };
                format!(
                    "2025-11-30T12:{:02}:{:02}Z {level} id={i:04} in {} ms\n",
                    i / 60,
                    i % 60,
                    7 + i % 23
                )
            })
            .collect(),
        "config.toml" => "[server]\nlisten = \"0.0.0.0:8080\"\ntimeout_ms = 2500\n".to_owned(),
        _ => FILES
            .iter()
            .find(|(p, _)| *p == path)
            .map_or("no such file", |(_, c)| c)
            .to_owned(),
    }
}

/// Adds the answer and the results of its calls to `history`; whether it had calls.
fn run_tools(api: Api, answer: &Value, history: &mut Vec<Value>) -> bool {
    match api {
        Api::Chat => {
            let message = answer["choices"][0]["message"].clone();
            history.push(message.clone());
            let calls = message["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for c in &calls {
                let args: Value =
                    serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap();
                history.push(json!({"role": "tool", "tool_call_id": c["id"],
                                    "content": file(args["path"].as_str().unwrap_or(""))}));
            }
            !calls.is_empty()
        }
        Api::Responses => {
            // The turn's items, then one output per call (as `input +=
            // response.output` and a loop over its calls make it).
            let output = answer["output"].as_array().unwrap();
            history.extend(output.iter().cloned());
            let mut ran = false;
            for item in output.iter().filter(|i| i["type"] == "function_call") {
                let args: Value =
                    serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
                history.push(
                    json!({"type": "function_call_output", "call_id": item["call_id"],
                                    "output": file(args["path"].as_str().unwrap_or(""))}),
                );
                ran = true;
            }
            ran
        }
        Api::Messages => {
            let content = answer["content"].as_array().unwrap().clone();
            history.push(json!({"role": "assistant", "content": content}));
            let results: Vec<Value> = content
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| {
                    json!({"type": "tool_result", "tool_use_id": b["id"],
                                "content": file(b["input"]["file_path"].as_str().unwrap_or(""))})
                })
                .collect();
            let ran = !results.is_empty();
            if ran {
                history.push(json!({"role": "user", "content": results}));
            }
            ran
        }
    }
}

/// `GET path` with the token (or none); the status and the JSON body.
pub async fn get(proxy: &Proxy, path: &str, token: Option<&str>) -> (u16, Value) {
    let mut req = proxy.http.get(proxy.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// The newest execution the inspector lists, whole.
pub async fn newest_execution(proxy: &Proxy) -> Value {
    let (status, list) = get(proxy, "/codemode/api/executions", Some(TOKEN)).await;
    assert_eq!(status, 200, "{list}");
    let id = list["executions"][0]["id"]
        .as_str()
        .expect("an execution is listed")
        .to_owned();
    let (status, whole) = get(
        proxy,
        &format!("/codemode/api/executions/{id}"),
        Some(TOKEN),
    )
    .await;
    assert_eq!(status, 200, "{whole}");
    whole
}

/// One provider for every dialect at once, for a page that shows them all:
/// the chat script runs [`CODE`], answers, then calls `read` directly (a
/// denial the proxy repairs) and answers; the Messages model runs
/// [`CODE`] and the Responses model [`LOG_CODE`].
pub async fn all_models() -> MockServer {
    let server = provider([
        runs_code(usage(100, 20)),
        text_completion("The files say alpha and bravo.", usage(150, 10)),
        calls_completion(
            vec![call("call_d", "read", r#"{"path":"a.txt"}"#)],
            usage(90, 5),
        ),
        text_completion("I can read it through run_code instead.", usage(95, 9)),
    ])
    .await;
    let responses = ResponsesModel::new([
        vec![
            said("Let me look at the log."),
            run_code_call("call_prog_r", LOG_CODE),
        ],
        vec![said("The files say alpha and bravo.")],
    ]);
    mount(&server, "POST", "/v1/responses", responses).await;
    let code = CODE.replace("tools.read({path:", "tools.Read({file_path:");
    let messages = MessagesModel::new([
        vec![
            text("Let me run a program."),
            run_code_use("toolu_prog", &code),
        ],
        vec![text("The files say alpha and bravo.")],
    ]);
    mount(&server, "POST", "/v1/messages", messages).await;
    server
}
