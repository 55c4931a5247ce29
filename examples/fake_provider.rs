//! A fast fake OpenAI provider for load tests: answers chat completions with
//! a fixed completion, or with `chunks` SSE chunks `delay_ms` apart when
//! the request streams.
//!
//! `cargo run --release --example fake_provider -- ADDR [chunks] [delay_ms]`

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

const COMPLETION: &str = r#"{"id":"chatcmpl-load","object":"chat.completion","created":1730000000,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"The file has 42 lines."},"finish_reason":"stop"}],"usage":{"prompt_tokens":320,"completion_tokens":9,"total_tokens":329}}"#;

type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

async fn handle(
    req: Request<Incoming>,
    chunks: usize,
    delay: Duration,
) -> Result<Response<Body>, Infallible> {
    let body = req
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let streaming = serde_json::from_slice::<serde_json::Value>(&body)
        .is_ok_and(|v| v.get("stream") == Some(&serde_json::Value::Bool(true)));
    if !streaming {
        let res = Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(COMPLETION.as_bytes())).boxed_unsync())
            .unwrap_or_default();
        return Ok(res);
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
    tokio::spawn(async move {
        for i in 0..chunks {
            let c = format!(
                "data: {{\"id\":\"chatcmpl-load\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4.1\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"token{i} \"}},\"finish_reason\":null}}]}}\n\n"
            );
            if tx.send(Ok(Frame::data(Bytes::from(c)))).await.is_err() {
                return;
            }
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
        }
        let end = "data: {\"id\":\"chatcmpl-load\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4.1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
        let _ = tx
            .send(Ok(Frame::data(Bytes::from_static(end.as_bytes()))))
            .await;
    });
    let stream = tokio_stream_from(rx);
    let res = Response::builder()
        .header("content-type", "text/event-stream")
        .body(StreamBody::new(stream).boxed_unsync())
        .unwrap_or_default();
    Ok(res)
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
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    println!("fake provider on {}", listener.local_addr().expect("addr"));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(req, chunks, delay));
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
