//! The A2A 1.0 front for external agents: wire types, the error table, the signed Agent Card.
//!
//! Everything protocol-shaped lives here; prost types (`pb`) never leave this module. It depends on
//! the domain types and (for the bindings, later) the service layer, never on the store.
//! Decisions on the protocol's loose ends are in `README.md` next to this file.

pub mod card;
pub mod errors;
pub mod http;
pub mod jsonrpc;
pub mod keys;
pub mod params;
mod pb;
pub mod protojson;
pub mod push_auth;
pub mod query;
pub mod wkt;
