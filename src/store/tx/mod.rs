//! The store's in-transaction building blocks: functions of the writer's open transaction
//! (`tx: &mut Conn`) that the operations (`impl Store`, in the area files) compose, each a step
//! that must be atomic with the others of its transaction (a post with its inbox entries, its
//! approval and its outbox deliveries; a settlement with its audit entry and its effects).
//!
//! They only call downward, and never an operation nor `Store` itself: what they need of it (the
//! lock clause, the webhook cache) is handed in. From the bottom up: `inbox`, `approvals`, `audit`,
//! `members`, `enqueue`, `fence` and `post_rows` call no other block; `commands` calls `approvals`; `task_events`, `remote_hops` and `claim_call` call `enqueue`;
//! `post` calls `post_rows`, `approvals`, `commands`, `enqueue`, `fence` and `remote_hops`; `post_group` and `finish`
//! call `post` (and `finish` `enqueue`). They depend on `db`, `error`, `model` and `cache` only.

pub(in crate::store) mod approvals;
pub(in crate::store) mod audit;
pub(in crate::store) mod claim_call;
pub(in crate::store) mod commands;
pub(in crate::store) mod enqueue;
pub(in crate::store) mod fence;
pub(in crate::store) mod finish;
pub(in crate::store) mod inbox;
pub(in crate::store) mod members;
pub(in crate::store) mod post;
pub(in crate::store) mod post_group;
mod post_rows;
pub(in crate::store) mod remote_hops;
pub(in crate::store) mod task_events;
