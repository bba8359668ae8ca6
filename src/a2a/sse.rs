//! Server-Sent Events for the two HTTP bindings' streams: one `data:` event per JSON value, and a
//! comment every [`KEEP_ALIVE`] while nothing else is sent, so that proxies and load balancers do
//! not close a stream that waits on a human for minutes or hours. Framing is axum's `Sse`.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse as _, Response};
use futures::{Stream, StreamExt as _};
use serde_json::Value;

/// The interval of keep-alive comments on an idle stream.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// `text/event-stream` of `frames`, each as one event's data, with keep-alive comments.
pub fn response(frames: impl Stream<Item = Value> + Send + 'static) -> Response {
    let events = frames.map(|frame| Ok::<_, Infallible>(Event::default().data(frame.to_string())));
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn next_chunk(body: &mut axum::body::BodyDataStream) -> String {
        let chunk = body.next().await.expect("a chunk").expect("no error");
        String::from_utf8(chunk.to_vec()).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_stream_sends_keep_alive_comments_between_events() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<Value>();
        let response = response(rx);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let mut body = response.into_body().into_data_stream();
        tx.unbounded_send(serde_json::json!({"n": 1})).unwrap();
        assert_eq!(next_chunk(&mut body).await, "data: {\"n\":1}\n\n");
        // Nothing to send: the (paused) clock reaches the interval and a comment goes out.
        assert_eq!(next_chunk(&mut body).await, ": keep-alive\n\n");
        assert_eq!(next_chunk(&mut body).await, ": keep-alive\n\n");
        tx.unbounded_send(serde_json::json!({"n": 2})).unwrap();
        assert_eq!(next_chunk(&mut body).await, "data: {\"n\":2}\n\n");
        drop(tx);
        assert!(
            body.next().await.is_none(),
            "the stream ends with its events"
        );
    }
}
