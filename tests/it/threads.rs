//! The binary's serving threads (`CODEMODE_WORKER_THREADS`,
//! `CODEMODE_SCHEDULER`): each scheduler answers on every thread, a
//! SIGTERM drains what every thread has in flight, and connections to the
//! provider are reused.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::binary::spawn_proxy;
use crate::common::*;
use serde_json::Value;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Names of the process's threads.
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .map(|name| name.trim().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

async fn requests_in_flight_on_every_thread_are_answered_at_sigterm(scheduler: &str) {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(text_completion("hello", usage(1, 1)))
                .set_delay(Duration::from_millis(1500)),
        )
        .mount(&provider)
        .await;
    let upstream = format!("{}/v1", provider.uri());
    let (mut proxy, addr) = spawn_proxy(
        &[
            ("CODEMODE_LISTEN", "127.0.0.1:0"),
            ("CODEMODE_UPSTREAM", &upstream),
            ("CODEMODE_WORKER_THREADS", "2"),
            ("CODEMODE_SCHEDULER", scheduler),
        ],
        Stdio::null(),
    );
    let pid = proxy.0.id();
    // Four connections of their own: the threads take two each.
    let answers: Vec<_> = (0..4)
        .map(|i| {
            let addr = addr.clone();
            tokio::spawn(async move {
                let res = http_client()
                    .post(format!("http://{addr}/v1/chat/completions"))
                    .json(&user_chat(&format!("request {i}")))
                    .send()
                    .await
                    .expect("an answer, not a closed connection");
                (res.status(), res.json::<Value>().await.unwrap())
            })
        })
        .collect();
    for _ in 0..100 {
        if provider.received_requests().await.unwrap_or_default().len() == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(provider.received_requests().await.unwrap().len(), 4);
    if scheduler == "per-core" {
        // The second thread serves on a runtime of its own.
        assert!(
            thread_names(pid).iter().any(|n| n == "codemode-core-1"),
            "{:?}",
            thread_names(pid)
        );
    }
    let killed = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    for answer in answers {
        let (status, body) = answer.await.unwrap();
        assert_eq!(status, 200, "{scheduler}: {body}");
        assert_eq!(body["choices"][0]["message"]["content"], "hello");
    }
    let mut exit = None;
    for _ in 0..100 {
        exit = proxy.0.try_wait().unwrap();
        if exit.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        exit.is_some_and(|e| e.success()),
        "{scheduler}: exited on its own once drained: {exit:?}"
    );
}

#[tokio::test]
async fn a_runtime_per_core_answers_on_every_thread_and_drains_them_all() {
    requests_in_flight_on_every_thread_are_answered_at_sigterm("per-core").await;
}

#[tokio::test]
async fn the_shared_runtime_answers_and_drains_as_before() {
    requests_in_flight_on_every_thread_are_answered_at_sigterm("shared").await;
}

/// A provider that answers every request with a chat text and counts the
/// connections it accepted.
async fn counting_provider() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let answer = text_completion("hello", usage(1, 1)).to_string();
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let answer = answer.clone();
                        async move {
                            // Read the whole request before answering, as a provider does.
                            let _ = http_body_util::BodyExt::collect(req.into_body()).await;
                            Ok::<_, std::convert::Infallible>(
                                hyper::Response::builder()
                                    .header("content-type", "application/json")
                                    .body(http_body_util::Full::new(bytes::Bytes::from(answer)))
                                    .unwrap(),
                            )
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (format!("http://{addr}/v1"), accepted)
}

/// Each thread keeps its own pool: requests one after another, on
/// connections that land on both threads, reuse at most one provider
/// connection per thread.
#[tokio::test]
async fn each_thread_reuses_its_connections_to_the_provider() {
    for scheduler in ["per-core", "shared"] {
        let (upstream, accepted) = counting_provider().await;
        let (_proxy, addr) = spawn_proxy(
            &[
                ("CODEMODE_LISTEN", "127.0.0.1:0"),
                ("CODEMODE_UPSTREAM", &upstream),
                ("CODEMODE_WORKER_THREADS", "2"),
                ("CODEMODE_SCHEDULER", scheduler),
            ],
            Stdio::null(),
        );
        // Eight clients, each with a connection of its own, held open
        // while the others send: they spread over both threads.
        let clients: Vec<_> = (0..8).map(|_| http_client()).collect();
        for round in 0..3 {
            for client in &clients {
                let res = client
                    .post(format!("http://{addr}/v1/chat/completions"))
                    .json(&user_chat(&format!("round {round}")))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(res.status(), 200);
                let body: Value = res.json().await.unwrap();
                assert_eq!(body["choices"][0]["message"]["content"], "hello");
            }
        }
        let opened = accepted.load(Ordering::SeqCst);
        assert!(
            (1..=2).contains(&opened),
            "{scheduler}: 24 requests one at a time opened {opened} provider connections"
        );
    }
}
