//! The fencing check of a claim's token: a step of the transaction that writes what the token
//! guards (a post, a claim's renewal), run after that transaction has locked the thread's row, so
//! that no claim can be made between the check and the write. It calls no other block.

use crate::domain::{AgentIdentity, PersonId, ThreadId, Timestamp};
use crate::store::db::{Conn, query};
use crate::store::error::{Result, StoreError};
use crate::store::model::records::coordination::{CLAIM_COLUMNS, ClaimRecord, claim};

/// Checks that `token` is still `session`'s of `person` on `thread`: the newest token the thread
/// issued (no session claimed it since), and, while a claim row carries it, that row is this
/// session's. An expired claim nobody took over still fences with its token; so does a claim
/// released (or ended by a reply) with no claim since.
///
/// Refuses with [`StoreError::StaleClaim`] (naming the live claim, if any) or, for a token the
/// thread never issued, [`StoreError::UnknownFencingToken`]. It writes nothing.
pub(in crate::store) async fn check(
    tx: &mut Conn,
    thread: &ThreadId,
    person: &PersonId,
    session: &AgentIdentity,
    token: i64,
    now: Timestamp,
) -> Result<()> {
    let counter: i64 = query("SELECT claim_fence FROM threads WHERE id = $1")
        .bind(thread.as_str().to_owned())
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(StoreError::NotFound("thread"))?
        .try_get("claim_fence")?;
    if token < 1 || token > counter {
        return Err(StoreError::UnknownFencingToken(token));
    }
    let current = current_claim(tx, thread).await?;
    let mine = current
        .as_ref()
        .is_none_or(|c| &c.person == person && &c.session == session);
    if token == counter && mine {
        return Ok(());
    }
    Err(StoreError::StaleClaim {
        token,
        holder: current
            .filter(|c| c.expires_at > now)
            .map(|c| Box::new((&c).into())),
    })
}

/// The claim row of `thread`, live or lapsed, if any: read inside the transaction that locked the
/// thread's row (PostgreSQL) or in the single writer (SQLite), so it is the one a write replaces.
pub(in crate::store) async fn current_claim(
    tx: &mut Conn,
    thread: &ThreadId,
) -> Result<Option<ClaimRecord>> {
    let sql = format!("SELECT {CLAIM_COLUMNS} FROM claims WHERE thread_id = $1");
    query(sql)
        .bind(thread.as_str().to_owned())
        .fetch_optional(&mut *tx)
        .await?
        .as_ref()
        .map(claim)
        .transpose()
}
