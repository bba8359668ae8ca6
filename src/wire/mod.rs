//! The A2A 1.0 protocol, shared by the server front (`crate::a2a`) and the A2A client of the
//! outbound bridge (`crate::remote`), the way the protocol, server and client are separate crates
//! in the A2A SDKs.
//!
//! - [`pb`]: the generated `lf.a2a.v1` wire types, the tonic server trait and ProtoJSON impls;
//!   [`wkt`]: our `google.protobuf.Timestamp` (UTC with `Z`); [`protojson`]: rendering;
//!   [`codec`]: the gRPC codec whose decode errors carry A2A's reasons.
//! - [`errors`]: the one error table (JSON-RPC, HTTP, gRPC, ErrorInfo; spec v1.0.1 or v1.0.0).
//! - [`params`]: `A2A-Version`, `A2A-Extensions`, content types, request bounds; [`jsonrpc`]: the
//!   JSON-RPC envelope; [`query`]: HTTP+JSON query strings into requests; [`parts`]: message
//!   parts into and out of liaison's body and attachments.
//!
//! Protocol only: it knows neither the service nor the store, and no front.

pub mod codec;
pub mod errors;
pub mod jsonrpc;
pub mod params;
pub mod parts;
pub mod pb;
pub mod protojson;
pub mod query;
pub mod wkt;
