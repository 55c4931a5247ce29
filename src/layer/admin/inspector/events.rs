//! `GET /codemode/api/events`: the inspector's live updates as
//! server-sent events.
//!
//! | event | data |
//! |---|---|
//! | `execution` | a program's summary, each time it starts, waits, resumes or ends |
//! | `denial` | a denial, once what became of it is known |
//! | `totals` | the totals now, every few seconds (also a keep-alive) |
//! | `resync` | updates were missed: read the lists again |
//!
//! A task forwards the inspector's broadcast into a small channel the
//! body reads; when the client goes away the body drops its end and the
//! task ends.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::Response;
use http_body::Frame;
use tokio::sync::{broadcast, mpsc};

use crate::body::{boxed, ProxyBody};
use crate::observe::inspector::Inspector;

/// How often the totals go out.
const TOTALS_EVERY: Duration = Duration::from_secs(5);
/// Frames held for a slow client before the task waits for it.
const BUFFERED: usize = 32;

/// The event stream of `inspector`'s updates.
pub(super) fn stream(inspector: Arc<Inspector>) -> Response<ProxyBody> {
    let mut updates = inspector.subscribe();
    let (tx, rx) = mpsc::channel(BUFFERED);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(TOTALS_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            let frame = tokio::select! {
                update = updates.recv() => match update {
                    Ok((kind, data)) => frame(kind, &data),
                    Err(broadcast::error::RecvError::Lagged(_)) => frame("resync", "{}"),
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = tick.tick() => frame("totals", &inspector.totals_now().to_string()),
                () = tx.closed() => return,
            };
            if tx.send(frame).await.is_err() {
                return;
            }
        }
    });
    let mut res = Response::new(boxed(EventBody { rx }));
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    // Proxies in front (nginx) must pass each event on as it comes.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    res
}

/// One SSE event; `data` is one line of JSON.
fn frame(event: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

/// The response body: the frames the task sends.
struct EventBody {
    rx: mpsc::Receiver<Bytes>,
}

impl http_body::Body for EventBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx
            .poll_recv(cx)
            .map(|frame| frame.map(|b| Ok(Frame::data(b))))
    }
}
