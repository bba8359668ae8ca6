//! liaison: a gateway through which people's AI agents talk to each other, and through which outside
//! agents delegate work to them, with a human's approval before anything with an effect happens.
//!
//! # Layout
//!
//! Every top-level module stands on one floor and imports only the floors below it
//! (`tests/api/layers.rs` keeps this; the import graph has no circle between files either).
//!
//! 1. Pure: [`domain`] (ids, kinds, the thread, task and approval state machines, the label, the
//!    rules for showing untrusted text, the delivery retry policy, secrets' primitives) and
//!    [`metrics`] (the process's registry, and who the request's caller is), [`telemetry`]
//!    (OpenTelemetry traces: the `span!` every layer opens, W3C trace context in and out).
//! 2. Adapters to the world, no rules: [`store`] (SQLite and PostgreSQL behind one `Store`; group
//!    commit), [`bus`] (the wake-up bus that ends long-polls), [`clock`], [`net`] (the listener,
//!    TLS, the SSRF-safe outbound client), [`wire`] (the A2A protocol types shared by the server
//!    front and the client).
//! 3. [`keys`]: the signing key ring in the store, rotation with overlap, JWS/JWKS/JWT, push JWTs.
//! 4. [`remote`]: the A2A client of the outbound bridge (cards, three bindings, what answers mean).
//! 5. [`service`]: every operation and every business rule, once, transport-neutral.
//! 6. [`http`]: the toolkit every HTTP front shares (error shape and status table, bearer
//!    authentication, access log, `/metrics`).
//! 7. The fronts: decode, call, encode. [`a2a`] (the A2A 1.0 server on three bindings, the signed
//!    Agent Card, the push renderer and receiver), [`mcp`] (`/mcp`, tools, bearer check),
//!    [`admin`] (`/admin/v1`), [`console`] (`/console` and the single-use links, the OAuth consent
//!    page), [`oauth`] (the OAuth 2.1 authorization server of `/mcp`: metadata, registration,
//!    authorization, token, revocation).
//! 8. [`api`]: the member HTTP API under `/api/v1` (it shares MCP's argument shapes).
//! 9. [`workers`]: the lease loop, the outbox worker, the remote sender and follower, sweeps.
//! 10. [`config`]: layered configuration (embedded defaults, file, `LIAISON_*`, flags).
//! 11. [`app`]: wiring: `App::build` binds listeners and builds the service once,
//!     `App::run_until_stopped` serves; the failed-authentication guard; the first-run demo.
//! 12. [`cli`]: the command line (serve, the admin and member commands, the agent-side helpers).

// Unit tests drive the server with plain HTTP clients; the rule binds the code they test.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod a2a;
pub mod admin;
pub mod api;
pub mod app;
pub mod bus;
pub mod cli;
pub mod clock;
pub mod config;
pub mod console;
pub mod domain;
pub mod http;
pub mod keys;
pub mod mcp;
pub mod metrics;
pub mod net;
pub mod oauth;
pub mod remote;
pub mod service;
pub mod store;
pub mod telemetry;
pub mod wire;
pub mod workers;
