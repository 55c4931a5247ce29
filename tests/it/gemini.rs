//! The Gemini API through the proxy (docs/agents.md, "gemini-cli and the
//! Gemini API"): what only this dialect has, beyond the scenario table:
//! calls without ids, the model and the stream in the path, Google's key
//! in a header or the query, the routes it refuses, its error shape, and
//! a program whose nested calls a client answers without echoing ids.

use crate::common::gemini_model::declarations;
use crate::common::{self, assert_event_stream, start, Script};
use serde_json::{json, Value};
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

const GENERATE: &str = "/v1beta/models/gemini-2.5-pro:generateContent";
const STREAM: &str = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse";

/// A Gemini provider answering every model method with `answers` in order
/// (as a stream when the path asks for one).
async fn gemini_provider(answers: Vec<Value>) -> MockServer {
    let server = MockServer::start().await;
    let json = Script::new(
        answers
            .iter()
            .map(|a| ResponseTemplate::new(200).set_body_json(a.clone())),
    );
    let sse = Script::new(answers.iter().map(|a| {
        ResponseTemplate::new(200).set_body_raw(
            format!("data: {a}\r\n\r\n").into_bytes(),
            "text/event-stream",
        )
    }));
    Mock::given(method("POST"))
        .and(path_regex(":generateContent$"))
        .respond_with(json)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path_regex(":streamGenerateContent$"))
        .respond_with(sse)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path_regex(":countTokens$"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"totalTokens": 42})))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"models": []})))
        .mount(&server)
        .await;
    server
}

async fn gemini_proxy(server: &MockServer, vars: &[(&str, &str)]) -> common::Proxy {
    let mut all = vec![("CODEMODE_GEMINI_UPSTREAM", server.uri())];
    all.extend(vars.iter().map(|(k, v)| (*k, v.to_string())));
    let all: Vec<(&str, &str)> = all.iter().map(|(k, v)| (*k, v.as_str())).collect();
    start(server, &all).await
}

/// The proxy in code mode with the embedded runtime, in front of `server`.
async fn code_proxy(server: &MockServer) -> common::Proxy {
    gemini_proxy(
        server,
        &[("CODEMODE_MODE", "code"), ("CODEMODE_RUNTIME", "embedded")],
    )
    .await
}

fn answer(parts: Value) -> Value {
    json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP",
                           "index": 0}],
           "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12},
           "modelVersion": "gemini-2.5-pro"})
}

fn call(name: &str, args: Value) -> Value {
    json!({"functionCall": {"name": name, "args": args}})
}

fn tools() -> Value {
    json!([{"functionDeclarations": [
        {"name": "read_file", "description": "Reads a file.",
         "parametersJsonSchema": {"type": "object", "properties": {"path": {"type": "string"}},
                                  "required": ["path"]}},
        {"name": "write_file", "description": "Writes a file.",
         "parametersJsonSchema": {"type": "object", "properties": {"path": {"type": "string"},
                                  "content": {"type": "string"}}, "required": ["path", "content"]}}
    ]}])
}

fn request(contents: Value) -> Value {
    json!({"contents": contents, "tools": tools(),
           "systemInstruction": {"parts": [{"text": "You are an agent."}]}})
}

fn user(text: &str) -> Value {
    json!({"role": "user", "parts": [{"text": text}]})
}

async fn bodies(server: &MockServer) -> Vec<(String, Value)> {
    server
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.method.as_str() == "POST")
        .map(|r| {
            (
                format!(
                    "{}{}",
                    r.url.path(),
                    r.url.query().map(|q| format!("?{q}")).unwrap_or_default()
                ),
                serde_json::from_slice(&r.body).unwrap(),
            )
        })
        .collect()
}

fn wire_names(body: &Value) -> Vec<String> {
    declarations(body)
        .iter()
        .map(|d| d["name"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test]
async fn a_native_call_without_an_id_never_reaches_the_client_and_the_model_is_told_the_route() {
    let server = gemini_provider(vec![
        answer(json!([call("read_file", json!({"path": "a.txt"}))])),
        answer(json!([{"text": "Done."}])),
    ])
    .await;
    let proxy = code_proxy(&server).await;
    let res = proxy
        .post(
            GENERATE,
            &request(json!([user("read a.txt")])),
            &[("x-goog-api-key", "k")],
        )
        .await;
    assert_eq!(res.status(), 200);
    let got: Value = res.json().await.unwrap();
    assert_eq!(
        got["candidates"][0]["content"]["parts"],
        json!([{"text": "Done."}])
    );
    // Both rounds' usage on the answer the client sees.
    assert_eq!(got["usageMetadata"]["promptTokenCount"], 20);
    let seen = bodies(&server).await;
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, GENERATE);
    assert_eq!(wire_names(&seen[0].1), ["run_code"]);
    let sdk = seen[0].1["systemInstruction"]["parts"][1]["text"]
        .as_str()
        .unwrap();
    assert!(
        sdk.contains("read_file") && sdk.contains("write_file"),
        "{sdk}"
    );
    let contents = seen[1].1["contents"].as_array().unwrap();
    let asked = &contents[1]["parts"][0]["functionCall"];
    let answered = &contents[2]["parts"][0]["functionResponse"];
    assert_eq!(asked["name"], "read_file");
    assert_eq!(answered["id"], asked["id"]);
    assert!(answered["response"]["error"]
        .as_str()
        .unwrap()
        .starts_with("UNKNOWN_TOOL"));
}

#[tokio::test]
async fn a_stream_hides_the_repaired_round_and_ends_with_every_rounds_usage() {
    let server = gemini_provider(vec![
        answer(
            json!([{"text": "Reading."}, call("write_file", json!({"path": "b", "content": "x"}))]),
        ),
        answer(json!([{"text": "Done."}])),
    ])
    .await;
    let proxy = code_proxy(&server).await;
    let res = proxy
        .post(
            STREAM,
            &request(json!([user("write b")])),
            &[("x-goog-api-key", "k")],
        )
        .await;
    assert_event_stream(&res);
    let text = res.text().await.unwrap();
    let chunks: Vec<Value> = text
        .replace("\r\n", "\n")
        .split("\n\n")
        .filter_map(|e| e.trim().strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(!text.contains("write_file"), "{text}");
    let finishes = chunks
        .iter()
        .filter(|c| c["candidates"][0].get("finishReason").is_some())
        .count();
    assert_eq!(finishes, 1, "{text}");
    assert_eq!(
        chunks.last().unwrap()["usageMetadata"]["promptTokenCount"],
        20
    );
    let words: String = chunks
        .iter()
        .flat_map(|c| {
            c["candidates"][0]["content"]["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(words, "Reading.Done.");
    let seen = bodies(&server).await;
    assert!(seen.iter().all(|(p, _)| p == STREAM), "{seen:?}");
}

/// Google's SDKs call `/v1` (or `/v1alpha`) by default: judged there as on
/// `/v1beta`, whole and streamed, and the path reaches Google as it came.
#[tokio::test]
async fn every_version_googles_sdks_call_is_judged_as_v1beta_is() {
    for version in ["v1", "v1alpha"] {
        let generate = format!("/{version}/models/gemini-2.5-pro:generateContent");
        let stream = format!("/{version}/models/gemini-2.5-pro:streamGenerateContent?alt=sse");
        for at in [&generate, &stream] {
            let server = gemini_provider(vec![
                answer(json!([call("read_file", json!({"path": "a.txt"}))])),
                answer(json!([{"text": "Done."}])),
            ])
            .await;
            let proxy = code_proxy(&server).await;
            let res = proxy
                .post(
                    at,
                    &request(json!([user("read a.txt")])),
                    &[("x-goog-api-key", "k")],
                )
                .await;
            assert_eq!(res.status(), 200, "{at}");
            let text = res.text().await.unwrap();
            assert!(!text.contains("read_file"), "{at}: {text}");
            assert!(text.contains("Done."), "{at}: {text}");
            let seen = bodies(&server).await;
            assert_eq!(seen.len(), 2, "{at}");
            assert!(seen.iter().all(|(p, _)| p == at), "{at}: {seen:?}");
            assert_eq!(wire_names(&seen[0].1), ["run_code"], "{at}");
        }
        // Native mode: transparent, on the version the client chose.
        let server = gemini_provider(vec![answer(json!([call("read_file", json!({}))]))]).await;
        let proxy = gemini_proxy(&server, &[("CODEMODE_MODE", "native")]).await;
        let res = proxy
            .post(
                &generate,
                &request(json!([user("hi")])),
                &[("x-goog-api-key", "k")],
            )
            .await;
        assert_eq!(res.status(), 200);
        assert!(res.text().await.unwrap().contains("read_file"));
        assert_eq!(bodies(&server).await[0].0, generate);
    }
}

/// The embedded runtime hands a program's calls to the client with minted
/// ids and the signature placeholder; a client that answers without ids
/// (by name and order) resumes the program, and the model sees one
/// `run_code` turn and its result.
#[tokio::test]
async fn a_program_resumes_on_answers_that_carry_no_id() {
    let program = "const a = await tools.read_file({path: 'a'}); \
                   const b = await tools.read_file({path: 'b'}); return a + b;";
    let server = gemini_provider(vec![
        answer(
            json!([{"functionCall": {"name": "run_code", "args": {"code": program}},
                       "thoughtSignature": "sig-run"}]),
        ),
        answer(json!([{"text": "AB it is."}])),
    ])
    .await;
    let proxy = code_proxy(&server).await;
    let key = [("x-goog-api-key", "k")];
    let mut contents = vec![user("join a and b")];
    let mut seen_ids = Vec::new();
    let mut final_text = None;
    for _ in 0..4 {
        let res = proxy.post(GENERATE, &request(json!(contents)), &key).await;
        assert_eq!(res.status(), 200);
        let got: Value = res.json().await.unwrap();
        let model = got["candidates"][0]["content"].clone();
        let calls: Vec<Value> = model["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p.get("functionCall").is_some())
            .cloned()
            .collect();
        if calls.is_empty() {
            final_text = model["parts"][0]["text"].as_str().map(str::to_owned);
            break;
        }
        assert_eq!(
            calls[0]["thoughtSignature"],
            "skip_thought_signature_validator"
        );
        let id = calls[0]["functionCall"]["id"].as_str().unwrap().to_owned();
        assert!(common::is_minted_shape(&id), "{id}");
        seen_ids.push(id);
        let path = calls[0]["functionCall"]["args"]["path"]
            .as_str()
            .unwrap()
            .to_uppercase();
        contents.push(model);
        // gemini-cli echoes ids; this client does not.
        contents.push(
            json!({"role": "user", "parts": [{"functionResponse": {"name": "read_file",
            "response": {"output": path}}}]}),
        );
    }
    assert_eq!(final_text.as_deref(), Some("AB it is."));
    assert_eq!(seen_ids.len(), 2);
    let seen = bodies(&server).await;
    assert_eq!(
        seen.len(),
        2,
        "the model is asked once more, after the program"
    );
    let replay = seen[1].1["contents"].as_array().unwrap();
    assert_eq!(replay.len(), 3, "{replay:?}");
    assert_eq!(replay[1]["parts"][0]["thoughtSignature"], "sig-run");
    let result = &replay[2]["parts"][0]["functionResponse"];
    assert_eq!(result["name"], "run_code");
    assert_eq!(result["id"], replay[1]["parts"][0]["functionCall"]["id"]);
    assert!(result["response"]["output"]
        .as_str()
        .unwrap()
        .contains("AB"));
}

/// `langchain-google-genai`, agno and pi echo the calls they were handed
/// and their responses without the ids (the API makes them optional): the
/// program is found by what the turn calls, resumes, and the model sees
/// its `run_code` turn and one result, never a call it did not make.
#[tokio::test]
async fn a_program_resumes_when_the_client_drops_every_id_it_was_given() {
    let program = "const a = await tools.read_file({path: 'a', limit: 5}); \
                   const [b, c] = await Promise.all([tools.read_file({path: 'b'}), tools.read_file({path: 'c'})]); \
                   return a + b + c;";
    let server = gemini_provider(vec![
        answer(json!([{"functionCall": {"name": "run_code", "args": {"code": program}}}])),
        answer(json!([{"text": "ABC it is."}])),
    ])
    .await;
    let proxy = code_proxy(&server).await;
    let key = [("x-goog-api-key", "k")];
    let mut contents = vec![user("join a, b and c")];
    let mut batches = 0;
    let final_text = loop {
        let res = proxy.post(GENERATE, &request(json!(contents)), &key).await;
        assert_eq!(res.status(), 200);
        let got: Value = res.json().await.unwrap();
        let mut model = got["candidates"][0]["content"].clone();
        let parts = model["parts"].as_array_mut().unwrap();
        if parts.iter().all(|p| p.get("functionCall").is_none()) {
            break parts[0]["text"].as_str().map(str::to_owned);
        }
        batches += 1;
        assert!(batches <= 2, "{got}");
        let mut answers = Vec::new();
        for part in parts.iter_mut() {
            // As the client keeps it: no id, no signature, arguments
            // written back in its own order.
            let call = part["functionCall"].as_object_mut().unwrap();
            call.remove("id");
            let args = call["args"].clone();
            let mut reordered = serde_json::Map::new();
            for (k, v) in args.as_object().unwrap().iter().rev() {
                reordered.insert(k.clone(), v.clone());
            }
            call.insert("args".into(), Value::Object(reordered));
            part.as_object_mut().unwrap().remove("thoughtSignature");
            let path = args["path"].as_str().unwrap().to_uppercase();
            answers.push(json!({"functionResponse": {"name": "read_file",
                "response": {"output": path}}}));
        }
        contents.push(model);
        contents.push(json!({"role": "user", "parts": answers}));
    };
    assert_eq!(final_text.as_deref(), Some("ABC it is."));
    assert_eq!(batches, 2);
    let seen = bodies(&server).await;
    assert_eq!(
        seen.len(),
        2,
        "the model is asked once more, after the program"
    );
    let replay = seen[1].1["contents"].as_array().unwrap();
    assert_eq!(replay.len(), 3, "{replay:?}");
    assert!(
        !seen[1].1.to_string().contains("read_file\",\"args"),
        "{replay:?}"
    );
    let result = &replay[2]["parts"][0]["functionResponse"];
    assert_eq!(result["name"], "run_code");
    assert!(result["response"]["output"]
        .as_str()
        .unwrap()
        .contains("ABC"));
}

/// A program belongs to the key that started it, in `x-goog-api-key` or
/// `?key=`: another key naming its calls gets the 400 an id the proxy never
/// minted gets, and the program is still its owner's.
#[tokio::test]
async fn a_gemini_program_belongs_to_the_key_that_started_it() {
    let program = "return await tools.read_file({path: 'a'});";
    for (owner, other) in [
        (("x-goog-api-key", "key-a"), ("x-goog-api-key", "key-b")),
        (("?key", "key-a"), ("?key", "key-b")),
    ] {
        let server = gemini_provider(vec![
            answer(json!([{"functionCall": {"name": "run_code", "args": {"code": program}}}])),
            answer(json!([{"text": "A it is."}])),
        ])
        .await;
        let proxy = code_proxy(&server).await;
        let send = |who: (&'static str, &'static str), contents: Value| {
            let (at, headers) = match who {
                ("?key", k) => (format!("{GENERATE}?key={k}"), vec![]),
                (h, k) => (GENERATE.to_owned(), vec![(h, k)]),
            };
            let proxy = &proxy;
            async move { proxy.post(&at, &request(contents), &headers).await }
        };
        let mut contents = vec![user("read a")];
        let res = send(owner, json!(contents)).await;
        assert_eq!(res.status(), 200);
        let got: Value = res.json().await.unwrap();
        let model = got["candidates"][0]["content"].clone();
        let id = model["parts"][0]["functionCall"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(common::is_minted_shape(&id), "{id}");
        contents.push(model);
        contents.push(json!({"role": "user", "parts": [{"functionResponse": {
            "id": id, "name": "read_file", "response": {"output": "A"}}}]}));
        let res = send(other, json!(contents)).await;
        assert_eq!(res.status(), 400, "{other:?}");
        let err: Value = res.json().await.unwrap();
        assert_eq!(err["error"]["status"], "INVALID_ARGUMENT", "{err}");
        assert_eq!(
            bodies(&server).await.len(),
            1,
            "the model was not asked for {other:?}"
        );
        let res = send(owner, json!(contents)).await;
        assert_eq!(res.status(), 200, "{owner:?}");
        assert!(res.text().await.unwrap().contains("A it is."));
    }
}

#[tokio::test]
async fn the_operators_key_stands_in_for_the_clients_header_and_query_key() {
    let server = gemini_provider(vec![answer(json!([{"text": "hi"}]))]).await;
    let proxy = gemini_proxy(
        &server,
        &[
            ("CODEMODE_MODE", "code"),
            ("CODEMODE_RUNTIME", "embedded"),
            ("CODEMODE_GEMINI_API_KEY", "operator-key"),
        ],
    )
    .await;
    let res = proxy
        .post(
            &format!("{GENERATE}?key=client-key"),
            &request(json!([user("hi")])),
            &[("authorization", "Bearer x")],
        )
        .await;
    assert_eq!(res.status(), 200);
    let got = &server.received_requests().await.unwrap()[0];
    assert_eq!(got.headers["x-goog-api-key"], "operator-key");
    assert!(got.headers.get("authorization").is_none());
    assert_eq!(got.url.query(), None, "the client's ?key= is dropped");

    // Without the operator's key, the client's goes as it came.
    let server = gemini_provider(vec![answer(json!([{"text": "hi"}]))]).await;
    let proxy = code_proxy(&server).await;
    let res = proxy
        .post(
            &format!("{STREAM}&key=client-key"),
            &request(json!([user("hi")])),
            &[],
        )
        .await;
    assert_eq!(res.status(), 200);
    let got = &server.received_requests().await.unwrap()[0];
    assert_eq!(got.url.query(), Some("alt=sse&key=client-key"));
}

#[tokio::test]
async fn googles_routes_the_proxy_cannot_judge_are_refused_in_code_mode_in_googles_shape() {
    let server = gemini_provider(vec![]).await;
    let proxy = gemini_proxy(&server, &[("CODEMODE_MODE", "code")]).await;
    let key = [("x-goog-api-key", "k")];
    let body = request(json!([user("hi")]));
    for (at, status) in [
        ("/v1beta/cachedContents", 403),
        ("/v1beta/models/gemini-2.5-pro:batchGenerateContent", 403),
        ("/v1beta/tunedModels/t1:generateContent", 403),
        (
            "/v1/projects/p/locations/l/publishers/google/models/gemini-2.5-pro:generateContent",
            400,
        ),
        ("/v1beta/models/Gemini-2.5-pro:GenerateContent", 400),
    ] {
        let res = proxy.post(at, &body, &key).await;
        assert_eq!(res.status(), status, "{at}");
        let err: Value = res.json().await.unwrap();
        assert_eq!(err["error"]["code"], status, "{at}: {err}");
        assert!(err["error"]["status"].is_string(), "{at}: {err}");
        assert!(
            err["error"]["details"][0]["reason"].is_string(),
            "{at}: {err}"
        );
    }
    // A bad body gets Google's shape with the proxy's code.
    let res = proxy
        .post_raw(
            GENERATE,
            "{not json",
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["status"], "INVALID_ARGUMENT");
    assert_eq!(err["error"]["details"][0]["reason"], "invalid_json");
    // The model list is read with the client's key.
    let res = proxy
        .get("/v1beta/models", &[("x-goog-api-key", "k")])
        .await;
    assert_eq!(res.status(), 200);
    assert!(
        bodies(&server).await.is_empty(),
        "no model request reached the provider"
    );
}

#[tokio::test]
async fn count_tokens_counts_the_request_as_it_would_be_sent() {
    let server = gemini_provider(vec![]).await;
    let proxy = code_proxy(&server).await;
    let mut inner = request(json!([user("hi")]));
    inner["model"] = json!("models/gemini-2.5-pro");
    let res = proxy
        .post(
            "/v1beta/models/gemini-2.5-pro:countTokens",
            &json!({"generateContentRequest": inner}),
            &[("x-goog-api-key", "k")],
        )
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap()["totalTokens"], 42);
    let seen = bodies(&server).await;
    assert_eq!(
        wire_names(&seen[0].1["generateContentRequest"]),
        ["run_code"]
    );
}

#[tokio::test]
async fn native_mode_is_transparent() {
    let server = gemini_provider(vec![answer(json!([call(
        "read_file",
        json!({"path": "a"})
    )]))])
    .await;
    let proxy = gemini_proxy(&server, &[("CODEMODE_MODE", "native")]).await;
    let body = request(json!([user("read a")]));
    let res = proxy
        .post(GENERATE, &body, &[("x-goog-api-key", "k")])
        .await;
    assert_eq!(res.status(), 200);
    let got: Value = res.json().await.unwrap();
    assert_eq!(
        got["candidates"][0]["content"]["parts"][0]["functionCall"]["name"],
        "read_file"
    );
    assert_eq!(bodies(&server).await[0].1, body);
}

/// The model's content of an answer as the client reads it: whole, or the
/// parts of every chunk of a stream in order.
async fn model_content(res: reqwest::Response, stream: bool) -> Value {
    assert_eq!(res.status(), 200);
    if !stream {
        let got: Value = res.json().await.unwrap();
        return got["candidates"][0]["content"].clone();
    }
    let text = res.text().await.unwrap();
    let parts: Vec<Value> = text
        .replace("\r\n", "\n")
        .split("\n\n")
        .filter_map(|e| e.trim().strip_prefix("data: "))
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .flat_map(|c| {
            c["candidates"][0]["content"]["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    json!({"role": "model", "parts": parts})
}

/// A conversation through the code-mode proxy, whole or streamed: the
/// model answers with `answers` in order (the first its `run_code` turn),
/// and the client answers each call it is handed with the part
/// `respond` makes of it, keeping the calls as it got them. The requests
/// the model got, and the client's last model content.
async fn converse(
    answers: Vec<Value>,
    stream: bool,
    respond: impl Fn(&Value) -> Value,
) -> (Vec<(String, Value)>, Value) {
    let server = gemini_provider(answers).await;
    let proxy = code_proxy(&server).await;
    let key = [("x-goog-api-key", "k")];
    let path = if stream { STREAM } else { GENERATE };
    let mut contents = vec![user("read a")];
    for _ in 0..6 {
        let res = proxy.post(path, &request(json!(contents)), &key).await;
        let model = model_content(res, stream).await;
        let calls: Vec<&Value> = model["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p.get("functionCall").is_some())
            .collect();
        if calls.is_empty() {
            return (bodies(&server).await, model);
        }
        let answers: Vec<Value> = calls.iter().map(|c| respond(c)).collect();
        contents.push(model.clone());
        contents.push(json!({"role": "user", "parts": answers}));
    }
    panic!("the conversation did not end: {contents:?}");
}

/// gemini-cli's answer to a call: `{output}`, named by the call's id.
fn cli_answer(call: &Value, output: &str) -> Value {
    json!({"functionResponse": {"id": call["functionCall"]["id"],
        "name": call["functionCall"]["name"], "response": {"output": output}}})
}

/// A `run_code` call the model sent without an id is replayed to it as it
/// sent it, in every later request: no id the proxy gave it for its own
/// bookkeeping, its thought signature and its text beside it kept, and
/// its result answering it by name and place (no id either). Whether the
/// program waits on the client (its result reaches the model when the
/// client's results come back) or ends in the request that ran it.
#[tokio::test]
async fn an_id_less_run_code_turn_is_replayed_to_the_model_as_it_sent_it() {
    let waits = "const a = await tools.read_file({path: 'a'}); return a;";
    let ends = "return 6 * 7;";
    for stream in [false, true] {
        for (code, beside) in [(waits, false), (ends, false), (waits, true)] {
            let mut turn = json!({"role": "model", "parts": [
                {"text": "Reading a.", "thoughtSignature": "sig-words"},
                {"functionCall": {"name": "run_code", "args": {"code": code}},
                 "thoughtSignature": "sig-run"}]});
            if beside {
                // A native call beside it, denied in code mode.
                turn["parts"]
                    .as_array_mut()
                    .unwrap()
                    .push(call("write_file", json!({"path": "b", "content": "x"})));
            }
            let (seen, last) = converse(
                vec![
                    json!({"candidates": [{"content": turn, "finishReason": "STOP", "index": 0}],
                           "modelVersion": "gemini-2.5-pro"}),
                    answer(json!([{"text": "Done."}])),
                ],
                stream,
                |call| cli_answer(call, "A"),
            )
            .await;
            let at = format!("stream: {stream}, program: {code}, a call beside: {beside}");
            assert_eq!(seen.len(), 2, "{at}: {seen:?}");
            let words: String = last["parts"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect();
            assert!(words.ends_with("Done."), "{at}: {last}");
            let replay = seen[1].1["contents"].as_array().unwrap();
            assert_eq!(replay.len(), 3, "{at}: {replay:?}");
            assert_eq!(replay[1], turn, "{at}: the model's turn as it sent it");
            let result = &replay[2]["parts"][0]["functionResponse"];
            assert_eq!(
                result.as_object().unwrap().keys().collect::<Vec<_>>(),
                ["name", "response"],
                "{at}: answered by name and place: {result}"
            );
            assert_eq!(result["name"], "run_code", "{at}");
            let output = result["response"]["output"].as_str().unwrap();
            let expected = if code == waits {
                "Result: \"A\""
            } else {
                "Result: 42"
            };
            assert_eq!(output, expected, "{at}");
            if beside {
                let denial = &replay[2]["parts"][1]["functionResponse"];
                assert_eq!(denial["name"], "write_file", "{at}: {replay:?}");
                assert!(denial.get("id").is_none(), "{at}: {denial}");
            }
            assert!(
                !seen[1].1.to_string().contains("\"call_"),
                "{at}: {:?}",
                seen[1].1
            );
        }
    }
}

/// A program gets a tool's output, not the wrapper its client put it in
/// (docs/embedded-runtime.md, "What a program's call resolves to"):
/// gemini-cli's `{output}`, `google-genai`'s `{result}` and `{error}`,
/// `@ai-sdk/google`'s `{name, content}`, `@google/genai`'s MCP
/// `{content: [text parts]}`; a response that is none of them exactly
/// reaches the program as it came. Whole and streamed, with the call's id
/// echoed and without.
#[tokio::test]
async fn a_program_gets_the_tools_output_out_of_each_clients_wrapper() {
    let code = "const r = await tools.read_file({path: 'a'}); return r;";
    let cases = [
        (json!({"output": "A"}), "A"),
        (json!({"result": "A"}), "A"),
        (json!({"result": {"lines": 3}}), r#"{"lines":3}"#),
        (json!({"error": "ENOENT: a"}), "ENOENT: a"),
        (json!({"name": "read_file", "content": "A"}), "A"),
        (
            json!({"name": "read_file", "content": [{"type": "text", "text": "A"},
                                                    {"type": "text", "text": "B"}]}),
            "AB",
        ),
        (json!({"content": [{"type": "text", "text": "A"}]}), "A"),
        (
            json!({"output": "A", "exitCode": 0}),
            r#"{"output":"A","exitCode":0}"#,
        ),
        (
            json!({"name": "write_file", "content": "A"}),
            r#"{"name":"write_file","content":"A"}"#,
        ),
        (json!({"lines": 3}), r#"{"lines":3}"#),
    ];
    for stream in [false, true] {
        for (echo_id, (response, output)) in [true, false].into_iter().cycle().zip(&cases) {
            let (seen, _) = converse(
                vec![
                    answer(json!([{"functionCall": {"name": "run_code", "args": {"code": code}}}])),
                    answer(json!([{"text": "Done."}])),
                ],
                stream,
                |call| {
                    let mut part = json!({"functionResponse": {
                        "name": call["functionCall"]["name"], "response": response}});
                    if echo_id {
                        part["functionResponse"]["id"] = call["functionCall"]["id"].clone();
                    }
                    part
                },
            )
            .await;
            let at = format!("stream: {stream}, id echoed: {echo_id}, {response}");
            assert_eq!(seen.len(), 2, "{at}: {seen:?}");
            let result = &seen[1].1["contents"][2]["parts"][0]["functionResponse"];
            assert_eq!(result["name"], "run_code", "{at}");
            assert_eq!(
                result["response"]["output"],
                format!("Result: {}", json!(output)),
                "{at}"
            );
        }
    }
}
