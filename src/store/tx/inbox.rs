//! The inbox's building block: appending an entry to a person's inbox, inside the transaction
//! that caused it (a post's entries are written by the post's own statements, `post_rows`). It
//! calls no other block and must not depend on any operation (`impl Store`).

use crate::domain::{PersonId, Timestamp};
use crate::store::db::{Conn, query};
use crate::store::error::{Result, StoreError};
use crate::store::model::records::inbox::EntryContent;

/// Appends one entry to a person's inbox with the next sequence number; returns it.
pub(in crate::store) async fn append_entry(
    tx: &mut Conn,
    person: &PersonId,
    content: &EntryContent,
    now: Timestamp,
) -> Result<i64> {
    let seq: i64 =
        query("UPDATE persons SET inbox_seq = inbox_seq + 1 WHERE id = $1 RETURNING inbox_seq")
            .bind(person.as_str().to_owned())
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound("recipient"))?
            .try_get("inbox_seq")?;
    let (kind, message, thread, channel, notice) = match content {
        EntryContent::Message {
            message,
            thread,
            channel,
        } => (
            "message",
            Some(message.as_str().to_owned()),
            Some(thread.as_str().to_owned()),
            Some(channel.as_str().to_owned()),
            None,
        ),
        EntryContent::Notice { notice } => ("notice", None, None, None, Some(notice.to_string())),
    };
    query(
        "INSERT INTO inbox_entries (person_id, seq, entry_kind, message_id, thread_id, channel, notice, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(person.as_str().to_owned())
    .bind(seq)
    .bind(kind)
    .bind(message)
    .bind(thread)
    .bind(channel)
    .bind(notice)
    .bind(now.0)
    .execute(&mut *tx)
    .await?;
    Ok(seq)
}
