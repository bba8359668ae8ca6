//! A response body that holds a value (a guard) until the body is finished or dropped: how a
//! request stays counted while its SSE stream or long-poll answer is still being sent.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::response::Response;

/// `response` with `guard` kept alive as long as its body.
pub fn hold<G: Send + Unpin + 'static>(response: Response, guard: G) -> Response {
    response.map(|body| {
        Body::new(Held {
            body,
            _guard: guard,
        })
    })
}

struct Held<G> {
    body: Body,
    _guard: G,
}

impl<G: Send + Unpin + 'static> http_body::Body for Held<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
