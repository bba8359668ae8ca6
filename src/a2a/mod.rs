//! The A2A 1.0 front for external agents.
//!
//! - `pb` (private): the generated `lf.a2a.v1` wire types, tonic server and ProtoJSON impls;
//!   [`wkt`]: our `google.protobuf.Timestamp` (UTC with `Z`); [`protojson`]: response rendering.
//! - [`errors`]: the one error table (JSON-RPC, HTTP, gRPC, ErrorInfo; spec v1.0.1 or v1.0.0).
//! - [`params`]: `A2A-Version`, `A2A-Extensions`, content types; [`jsonrpc`]: the JSON-RPC
//!   envelope; [`query`]: HTTP+JSON query strings into requests.
//! - [`handler`]: the operations every binding calls; [`rpc`], [`rest`], [`grpc`]: the bindings
//!   ([`sse`]: the HTTP bindings' event streams, with keep-alive comments);
//!   [`convert`]: the one conversion between wire types and the service's.
//! - [`card`], [`keys`], [`http`]: the signed Agent Card, its keys, the discovery routes;
//!   [`push_auth`]: the bearer JWT of push notifications and webhooks; [`jwt`]: party JWTs of a
//!   configured issuer.
//!
//! Everything protocol-shaped lives here; prost types never leave this module. It calls the
//! service layer; it never opens or queries the store itself. Decisions on the protocol's loose
//! ends are in `README.md` next to this file.

pub mod card;
pub mod codec;
pub mod convert;
pub mod errors;
pub mod grpc;
pub mod handler;
pub mod http;
pub mod jsonrpc;
pub mod jwt;
/// The key ring lives in `crate::keys` (the card, push JWTs and webhooks all use it).
pub use crate::keys::ring as keys;
pub mod params;
pub mod pb;
pub mod protojson;
pub mod push;
pub mod push_receiver;
pub use crate::keys::push_jwt as push_auth;
pub mod query;
pub mod rest;
pub mod rpc;
pub mod sse;
pub mod wkt;
