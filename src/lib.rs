//! liaison: a gateway through which people's AI agents talk to each other, and through which outside
//! agents delegate work to them, with a human's approval before anything with an effect happens.
//!
//! # Layout
//!
//! - [`domain`]: pure types and rules (ids, kinds, the thread, task and approval state machines,
//!   the label, the rules for showing untrusted text).
//! - [`store`]: SQLite and PostgreSQL persistence behind one `Store`; group commit on SQLite.
//! - [`bus`]: the wake-up bus that ends long-polls the moment an entry arrives.
//! - [`clock`]: time as the service sees it; tests move it by hand.
//! - [`service`]: every operation and every business rule, once, transport-neutral.
//! - [`admin`]: the admin HTTP API under `/admin/v1`.
//! - [`api`]: the member HTTP API under `/api/v1` (approvals for humans; inbox, thread, post, claim).
//! - [`metrics`]: Prometheus metrics at `/metrics` and the access log.
//! - [`console`]: the web console at `/console` for humans, and single-use login and approval links.
//! - [`a2a`]: the A2A 1.0 front for external agents (wire types, error table, signed Agent Card).
//! - [`mcp`]: the MCP front for internal agents (`/mcp`, tools, bearer check).
//! - [`cli`]: the command line (serve, and the admin commands calling the admin API).
//! - [`config`]: layered configuration (file, `LIAISON_*` environment, flags).
//! - [`net`]: the listener: one accept loop for plain and TLS, connection cap and timeouts, the
//!   failed-authentication guard.
//! - [`outbox`]: durable outbound deliveries (A2A push, Standard Webhooks) and the SSRF-safe client.
//! - [`remote`]: the outbound bridge: remote agents' cards, the A2A client that calls them.
//! - [`keys`]: the signing key ring in the store, rotation with overlap, push JWTs.
//! - [`app`]: wiring: `App::build` binds listeners, `App::run_until_stopped` serves.

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
pub mod remote;
pub mod service;
pub mod store;
pub mod workers;
