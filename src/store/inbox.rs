//! Inboxes: where one consumer stands in a person's inbox, its acknowledgement (a cursor never
//! moves back: the exactly-once drain), and the entries after a cursor. The entries are written by
//! the transactions that cause them (`tx::post_rows`, `tx::inbox`). An operation file (`impl Store`
//! only): no building block (`tx/`) and no other operation file may depend on it.

use super::Store;
use super::db::query;
use super::error::{Result, StoreError};
use super::model::records::inbox::{InboxEntry, InboxPosition, entry};
use crate::domain::{PersonId, Timestamp};

impl Store {
    /// Where `consumer` stands in `person`'s inbox (a consumer never seen has acknowledged nothing).
    pub async fn inbox_position(&self, person: &PersonId, consumer: &str) -> Result<InboxPosition> {
        let row = query(
            "SELECT p.inbox_seq AS last, COALESCE((SELECT c.acked FROM consumers c \
             WHERE c.person_id = p.id AND c.name = $2), 0) AS acked FROM persons p WHERE p.id = $1",
        )
        .bind(person.as_str().to_owned())
        .bind(consumer.to_owned())
        .fetch_optional(&self.pool)
        .await?
        .ok_or(StoreError::NotFound("person"))?;
        Ok(InboxPosition {
            acked: row.try_get("acked")?,
            last: row.try_get("last")?,
        })
    }

    /// Acknowledges everything up to `after` for `consumer`; never moves a cursor back. Refuses a
    /// cursor beyond the last entry, changing nothing.
    pub async fn acknowledge(
        &self,
        person: PersonId,
        consumer: String,
        after: i64,
        now: Timestamp,
    ) -> Result<InboxPosition> {
        self.write(move |tx| {
            Box::pin(async move {
                let last: i64 = query("SELECT inbox_seq FROM persons WHERE id = $1")
                    .bind(person.as_str().to_owned())
                    .fetch_optional(&mut *tx)
                    .await?
                    .ok_or(StoreError::NotFound("person"))?
                    .try_get("inbox_seq")?;
                if after > last {
                    return Err(StoreError::CursorAhead { after, last });
                }
                let row = query(
                    "INSERT INTO consumers (person_id, name, acked, updated_at) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (person_id, name) DO UPDATE SET \
                     acked = CASE WHEN excluded.acked > consumers.acked THEN excluded.acked ELSE consumers.acked END, \
                     updated_at = excluded.updated_at RETURNING acked",
                )
                .bind(person.as_str().to_owned())
                .bind(consumer)
                .bind(after)
                .bind(now.0)
                .fetch_one(&mut *tx)
                .await?;
                Ok(InboxPosition { acked: row.try_get("acked")?, last })
            })
        })
        .await
    }

    /// Entries of `person`'s inbox with `seq > after`, oldest first, at most `limit`.
    pub async fn inbox_entries(
        &self,
        person: &PersonId,
        after: i64,
        limit: i64,
    ) -> Result<Vec<InboxEntry>> {
        let rows = query(
            "SELECT seq, entry_kind, message_id, thread_id, channel, notice, created_at FROM inbox_entries \
             WHERE person_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        )
        .bind(person.as_str().to_owned())
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(entry).collect()
    }
}
