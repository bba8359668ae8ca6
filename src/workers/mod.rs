//! The workers: loops that run beside the fronts, each around a step the tests can drive.
//!
//! - [`lease`]: the one lease loop (claim what is due into bounded slots, sleep until woken, due
//!   or the sweep), used by the outbox worker and the remote follower.
//! - [`outbox`]: drains the durable outbox (A2A pushes, webhooks, sends to remote agents).
//! - [`remote`]: the outbound bridge's sender and follower.
//! - [`sweep`]: expires approvals whose deadline passed; purges records past their retention.
//!
//! Workers stand above the fronts (a push is rendered by the A2A front) and ask the service for
//! everything; none reads the store. Only the app starts them.

pub mod lease;
pub mod outbox;
pub mod remote;
pub mod sweep;
