//! A fast fake provider for load tests: answers every dialect the proxy
//! serves, by the request's path (Anthropic Messages for `/messages`, OpenAI
//! Responses for `/responses`, Gemini for `:generateContent` and
//! `:streamGenerateContent`, Chat Completions otherwise) with a fixed text
//! answer, or with `chunks` SSE events `delay_ms` apart when the request
//! streams (`"stream": true`, or Gemini's `:streamGenerateContent`).
//!
//! `cargo run --release --example fake_provider -- ADDR [chunks] [delay_ms] [program]`
//!
//! With `program`, a Chat Completions request whose last message is not a
//! tool result is answered with a `run_code` call (a program that calls no
//! tool), so a code-mode proxy with the embedded runtime runs a program and
//! asks again: what one request that runs a program costs (bench/ab.sh's
//! `PROGRAM=1`).

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

const COMPLETION: &str = r#"{"id":"chatcmpl-load","object":"chat.completion","created":1730000000,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"The file has 42 lines."},"finish_reason":"stop"}],"usage":{"prompt_tokens":320,"completion_tokens":9,"total_tokens":329}}"#;
const RESPONSE: &str = r#"{"id":"resp_load","object":"response","created_at":1730000000,"status":"completed","error":null,"incomplete_details":null,"model":"gpt-5","output":[{"id":"msg_load","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"The file has 42 lines."}]}],"usage":{"input_tokens":320,"output_tokens":9,"total_tokens":329}}"#;
const MESSAGE: &str = r#"{"id":"msg_load","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"The file has 42 lines."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":320,"output_tokens":9}}"#;
const GEMINI: &str = r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"The file has 42 lines."}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":320,"candidatesTokenCount":9,"totalTokenCount":329},"modelVersion":"gemini-2.5-pro"}"#;

const PROGRAM_CALL: &str = r#"{"id":"chatcmpl-load","object":"chat.completion","created":1730000000,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_load","type":"function","function":{"name":"run_code","arguments":"{\"code\":\"const n = [1, 2, 3].map((x) => x * 14); return n[2];\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":320,"completion_tokens":20,"total_tokens":340}}"#;

#[derive(Clone, Copy)]
enum Dialect {
    Chat,
    Responses,
    Messages,
    Gemini,
}

impl Dialect {
    fn of(path: &str) -> Dialect {
        if path.ends_with("/messages") {
            Dialect::Messages
        } else if path.ends_with("/responses") {
            Dialect::Responses
        } else if path.contains(":generateContent") || path.contains(":streamGenerateContent") {
            Dialect::Gemini
        } else {
            Dialect::Chat
        }
    }

    fn answer(self) -> &'static str {
        match self {
            Dialect::Chat => COMPLETION,
            Dialect::Responses => RESPONSE,
            Dialect::Messages => MESSAGE,
            Dialect::Gemini => GEMINI,
        }
    }

    /// The stream's first events, before the deltas.
    fn start(self) -> &'static str {
        match self {
            Dialect::Chat | Dialect::Gemini => "",
            Dialect::Responses => "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_load\",\"object\":\"response\",\"created_at\":1730000000,\"status\":\"in_progress\",\"model\":\"gpt-5\",\"output\":[]}}\n\nevent: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"msg_load\",\"type\":\"message\",\"status\":\"in_progress\",\"role\":\"assistant\",\"content\":[]}}\n\nevent: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"sequence_number\":2,\"item_id\":\"msg_load\",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"annotations\":[],\"text\":\"\"}}\n\n",
            Dialect::Messages => "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_load\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":320,\"output_tokens\":1}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        }
    }

    /// One delta of `text`.
    fn delta(self, i: usize, text: &str) -> String {
        match self {
            Dialect::Chat => format!(
                "data: {{\"id\":\"chatcmpl-load\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4.1\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":null}}]}}\n\n"
            ),
            Dialect::Responses => format!(
                "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"sequence_number\":{},\"item_id\":\"msg_load\",\"output_index\":0,\"content_index\":0,\"delta\":\"{text}\"}}\n\n",
                i + 3
            ),
            Dialect::Messages => format!(
                "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{text}\"}}}}\n\n"
            ),
            Dialect::Gemini => format!(
                "data: {{\"candidates\":[{{\"content\":{{\"role\":\"model\",\"parts\":[{{\"text\":\"{text}\"}}]}},\"index\":0}}],\"modelVersion\":\"gemini-2.5-pro\"}}\r\n\r\n"
            ),
        }
    }

    /// The stream's last events, after `chunks` deltas of `text`.
    fn end(self, chunks: usize, text: &str) -> String {
        match self {
            Dialect::Chat => "data: {\"id\":\"chatcmpl-load\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4.1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n".into(),
            Dialect::Responses => {
                let n = chunks + 3;
                format!(
                    "event: response.output_text.done\ndata: {{\"type\":\"response.output_text.done\",\"sequence_number\":{n},\"item_id\":\"msg_load\",\"output_index\":0,\"content_index\":0,\"text\":\"{text}\"}}\n\n\
                     event: response.output_item.done\ndata: {{\"type\":\"response.output_item.done\",\"sequence_number\":{},\"output_index\":0,\"item\":{{\"id\":\"msg_load\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{{\"type\":\"output_text\",\"annotations\":[],\"text\":\"{text}\"}}]}}}}\n\n\
                     event: response.completed\ndata: {{\"type\":\"response.completed\",\"sequence_number\":{},\"response\":{{\"id\":\"resp_load\",\"object\":\"response\",\"created_at\":1730000000,\"status\":\"completed\",\"model\":\"gpt-5\",\"output\":[{{\"id\":\"msg_load\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{{\"type\":\"output_text\",\"annotations\":[],\"text\":\"{text}\"}}]}}],\"usage\":{{\"input_tokens\":320,\"output_tokens\":{chunks},\"total_tokens\":{}}}}}}}\n\n",
                    n + 1,
                    n + 2,
                    320 + chunks
                )
            }
            Dialect::Messages => format!(
                "event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\n\
                 event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"end_turn\",\"stop_sequence\":null}},\"usage\":{{\"output_tokens\":{chunks}}}}}\n\n\
                 event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
            ),
            Dialect::Gemini => format!(
                "data: {{\"candidates\":[{{\"content\":{{\"role\":\"model\",\"parts\":[{{\"text\":\"\"}}]}},\"finishReason\":\"STOP\",\"index\":0}}],\"usageMetadata\":{{\"promptTokenCount\":320,\"candidatesTokenCount\":{chunks},\"totalTokenCount\":{}}},\"modelVersion\":\"gemini-2.5-pro\"}}\r\n\r\n",
                320 + chunks
            ),
        }
    }
}

type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

async fn handle(
    req: Request<Incoming>,
    chunks: usize,
    delay: Duration,
    program: bool,
) -> Result<Response<Body>, Infallible> {
    let dialect = Dialect::of(req.uri().path());
    let gemini_stream = req.uri().path().contains(":streamGenerateContent");
    let body = req
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let streaming = gemini_stream
        || serde_json::from_slice::<serde_json::Value>(&body)
            .is_ok_and(|v| v.get("stream") == Some(&serde_json::Value::Bool(true)));
    if !streaming {
        let answer = if program && matches!(dialect, Dialect::Chat) && !answers_a_tool(&body) {
            PROGRAM_CALL
        } else {
            dialect.answer()
        };
        let res = Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(answer.as_bytes())).boxed_unsync())
            .unwrap_or_default();
        return Ok(res);
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
    tokio::spawn(async move {
        let start = dialect.start();
        if !start.is_empty()
            && tx
                .send(Ok(Frame::data(Bytes::from_static(start.as_bytes()))))
                .await
                .is_err()
        {
            return;
        }
        let mut text = String::new();
        for i in 0..chunks {
            let piece = format!("token{i} ");
            let c = dialect.delta(i, &piece);
            text.push_str(&piece);
            if tx.send(Ok(Frame::data(Bytes::from(c)))).await.is_err() {
                return;
            }
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
        }
        let _ = tx
            .send(Ok(Frame::data(Bytes::from(dialect.end(chunks, &text)))))
            .await;
    });
    let stream = tokio_stream_from(rx);
    let res = Response::builder()
        .header("content-type", "text/event-stream")
        .body(StreamBody::new(stream).boxed_unsync())
        .unwrap_or_default();
    Ok(res)
}

/// Whether a chat request's last message is a tool's result.
fn answers_a_tool(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body).is_ok_and(|v| {
        v["messages"]
            .as_array()
            .and_then(|m| m.last())
            .is_some_and(|m| m["role"] == "tool")
    })
}

fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, Infallible>>,
) -> impl futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:9100".into());
    let chunks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let delay = Duration::from_millis(args.next().and_then(|a| a.parse().ok()).unwrap_or(5));
    let program = args.next().as_deref() == Some("program");
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    println!("fake provider on {}", listener.local_addr().expect("addr"));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |req| handle(req, chunks, delay, program));
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
