//! The A2A 1.0 front for external agents: the server on three bindings over the protocol types of
//! `crate::wire`.
//!
//! - [`handler`]: the operations every binding calls; [`rpc`], [`rest`], [`grpc`]: the bindings
//!   ([`sse`]: the HTTP bindings' event streams, with keep-alive comments; [`body`]: a request's
//!   body, bounded by what its credential proved); [`convert`]: the one conversion between wire
//!   types and the service's, and the mapping of service errors into the A2A error table
//!   ([`approval`]: a task's human approval as its status message says it).
//! - [`card`], [`http`]: the signed Agent Card and the discovery routes (the keys are
//!   `crate::keys`); [`jwt`]: party JWTs of a configured issuer.
//! - [`push`]: a task event as push notification requests; [`push_receiver`]: liaison's receiver
//!   for the pushes of remote agents it follows.
//!
//! It calls the service layer; it never opens or queries the store itself. Decisions on the
//! protocol's loose ends are in `README.md` next to this file.

pub mod approval;
pub mod body;
pub mod card;
pub mod convert;
pub mod grpc;
pub mod handler;
pub mod http;
pub mod jwt;
pub mod push;
pub mod push_receiver;
pub mod rest;
pub mod rpc;
pub mod sse;
