//! What one call to a remote agent carries, whatever its binding: the headers (`A2A-Version`,
//! the remote's credentials and extra headers), the cap on the answer, and the guarded outbound
//! client; and the stream of task events a streaming call answers. The client ([`super::client`])
//! builds a [`Call`]; the gRPC binding ([`super::grpc`]) takes one, so neither depends on the other
//! in both directions.

use std::pin::Pin;

use futures::Stream;
use reqwest::header::HeaderMap;

use super::CallError;
use crate::net::outbound::OutboundClient;
use crate::wire::pb;

/// A stream of task events from a remote; it ends after the last event, or with one error.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<pb::StreamResponse, CallError>> + Send>>;

/// One call's context.
pub(crate) struct Call<'a> {
    /// Every request goes through its address guard and timeouts.
    pub(crate) outbound: &'a OutboundClient,
    /// `A2A-Version`, the credentials and the extra headers of the target.
    pub(crate) headers: HeaderMap,
    /// The largest answer read (larger is an error, never a larger buffer).
    pub(crate) max_answer: usize,
}
