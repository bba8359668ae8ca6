//! The generated A2A protobuf types (`lf.a2a.v1`), the tonic server trait and their ProtoJSON
//! serde impls (pbjson: camelCase names, enum names as strings, defaults omitted, `optional`
//! fields emitted when set, unknown fields ignored).
//!
//! These types are wire types: they never leave `crate::a2a`. Convert to and from domain types in
//! one place.

#![allow(clippy::all, clippy::pedantic, missing_docs, rustdoc::all)]

tonic::include_proto!("lf.a2a.v1");
include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.serde.rs"));
