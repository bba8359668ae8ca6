//! The steps of a personal session's commands (SPEC §4b) inside other transactions: recording a
//! new command with its opening post, gating a claim on its pickup deadline, and withdrawing an
//! unclaimed one (expired, or its session ended), with the confirmations still pending in it. It
//! calls `approvals` only.
//!
//! A command claimed once never expires (`claimed_at` is set in the claim's transaction), and one
//! withdrawn can never be claimed: both transactions lock the thread's row first (PostgreSQL; on
//! SQLite the writer is alone), so exactly one of them wins.

use super::approvals;
use crate::domain::{ThreadId, Timestamp};
use crate::store::db::{Conn, query};
use crate::store::error::Result;
use crate::store::model::records::personal::{COMMAND_COLUMNS, NewCommand, command};

/// Records that `thread` (opened in this transaction) is a command of `c.session`.
pub(in crate::store) async fn insert(
    tx: &mut Conn,
    thread: &ThreadId,
    c: &NewCommand,
) -> Result<()> {
    query("INSERT INTO session_commands (thread_id, session_id, pickup_by) VALUES ($1, $2, $3)")
        .bind(thread.as_str().to_owned())
        .bind(c.session.as_str().to_owned())
        .bind(c.pickup_by.0)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// What a claim of `thread` at `now` may do, by its command (the thread's row is locked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store) enum Pickup {
    /// Not a command, or a command claimed before, or one still within its deadline.
    Open,
    /// An unclaimed command past its deadline (withdrawn here), or one withdrawn before.
    Expired,
}

/// Whether a claim of `thread` at `now` may proceed; an unclaimed command past its deadline is
/// withdrawn in this transaction (the claim then answers that it expired).
pub(in crate::store) async fn pickup(
    tx: &mut Conn,
    thread: &ThreadId,
    now: Timestamp,
) -> Result<Pickup> {
    let row = query(format!(
        "SELECT {COMMAND_COLUMNS} FROM session_commands WHERE thread_id = $1"
    ))
    .bind(thread.as_str().to_owned())
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Ok(Pickup::Open);
    };
    let c = command(&row)?;
    if c.expired_at.is_some() {
        return Ok(Pickup::Expired);
    }
    if c.claimed_at.is_none() && c.pickup_by <= now {
        withdraw_locked(tx, thread, now).await?;
        return Ok(Pickup::Expired);
    }
    Ok(Pickup::Open)
}

/// Marks `thread`'s command claimed at `now` by `connection` (the first claim only): it never
/// expires after.
pub(in crate::store) async fn claimed(
    tx: &mut Conn,
    thread: &ThreadId,
    now: Timestamp,
    connection: Option<&str>,
) -> Result<()> {
    query(
        "UPDATE session_commands SET claimed_at = $2, claimed_by = $3 WHERE thread_id = $1 \
         AND claimed_at IS NULL",
    )
    .bind(thread.as_str().to_owned())
    .bind(now.0)
    .bind(connection.map(str::to_owned))
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Withdraws `thread`'s command if it is still unclaimed and not withdrawn — and, with `due`, only
/// when its deadline has passed: marks it expired, closes its thread (`canceled`) and takes it
/// out of every inbox (its entries are kept for no reader, so its receipts stay). Locks the thread's row first (`lock`). True when it withdrew it.
pub(in crate::store) async fn withdraw(
    tx: &mut Conn,
    thread: &ThreadId,
    now: Timestamp,
    due: bool,
    lock: &str,
) -> Result<bool> {
    let locked = query(format!("SELECT state FROM threads WHERE id = $1{lock}"))
        .bind(thread.as_str().to_owned())
        .fetch_optional(&mut *tx)
        .await?;
    if locked.is_none() {
        return Ok(false);
    }
    let due_clause = if due { " AND pickup_by <= $2" } else { "" };
    let pending = query(format!(
        "SELECT thread_id FROM session_commands WHERE thread_id = $1 AND claimed_at IS NULL \
         AND expired_at IS NULL{due_clause}"
    ))
    .bind(thread.as_str().to_owned())
    .bind(now.0)
    .fetch_optional(&mut *tx)
    .await?;
    if pending.is_none() {
        return Ok(false);
    }
    withdraw_locked(tx, thread, now).await?;
    Ok(true)
}

async fn withdraw_locked(tx: &mut Conn, thread: &ThreadId, now: Timestamp) -> Result<()> {
    let id = thread.as_str().to_owned();
    query("UPDATE session_commands SET expired_at = $2 WHERE thread_id = $1")
        .bind(id.clone())
        .bind(now.0)
        .execute(&mut *tx)
        .await?;
    query(
        "UPDATE threads SET state = 'closed', asker = NULL, asker_reader = NULL, \
         outcome = 'canceled', updated_at = $2 WHERE id = $1 AND state <> 'closed'",
    )
    .bind(id.clone())
    .bind(now.0)
    .execute(&mut *tx)
    .await?;
    // Nothing is left to allow: a confirmation still pending leaves her queue, decided by nobody.
    let server = crate::domain::PersonId::parse(crate::domain::SERVER_PERSON)?;
    approvals::withdraw_pending(tx, thread, &server, now).await?;
    // Out of every inbox, unread count and claim; the rows stay for the receipts.
    query("UPDATE inbox_entries SET reader = $2 WHERE thread_id = $1")
        .bind(id)
        .bind(crate::domain::WITHDRAWN_READER)
        .execute(&mut *tx)
        .await?;
    Ok(())
}
