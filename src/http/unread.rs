//! A response sent before its request's body was read to the end (a body over a limit, a form
//! refused at its first field, a credential refused before the body mattered): hyper then closes
//! the HTTP/1.1 connection rather than read the rest, so the response says `Connection: close`.
//! Without it a keep-alive client sends its next request into a connection that is closing, and
//! that request fails. One middleware around every route; HTTP/2 (gRPC) has no such header and
//! resets the stream instead. Depends on nothing of liaison's.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, Version, header};
use axum::middleware::Next;
use axum::response::Response;
use http_body::Body as _;

/// Adds `Connection: close` to a response whose HTTP/1 request body was not read to its end.
pub async fn close_when_unread(req: Request, next: Next) -> Response {
    let http1 = matches!(req.version(), Version::HTTP_10 | Version::HTTP_11);
    if !http1 || req.body().is_end_stream() {
        return next.run(req).await;
    }
    let read = Arc::new(AtomicBool::new(false));
    let req = req.map(|body| {
        Body::new(Watched {
            body,
            read: read.clone(),
        })
    });
    let mut response = next.run(req).await;
    if !read.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A request body that notes when it has been read to the end.
struct Watched {
    body: Body,
    read: Arc<AtomicBool>,
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let frame = Pin::new(&mut this.body).poll_frame(cx);
        if matches!(frame, Poll::Ready(None)) || this.body.is_end_stream() {
            this.read.store(true, Ordering::Release);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
