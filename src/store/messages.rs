//! Threads, messages and inboxes: the posting transaction and the exactly-once drain.

use super::Store;
use super::db::query;
use super::error::{Result, StoreError};
use super::model::input::NewMessage;
use super::model::records::inbox::{InboxEntry, InboxPosition, entry};
use super::model::records::threads::{
    MESSAGE_COLUMNS, MessageRecord, PostOutcome, THREAD_COLUMNS, ThreadRecord, message, thread,
};
use super::tx::post::QueuedPost;
use crate::domain::{MessageId, PersonId, ThreadId, Timestamp};

impl Store {
    /// Stores a message atomically: idempotency, thread state transition, the message, the release of
    /// a claim on reply or close, and one inbox entry per recipient.
    pub async fn post(&self, m: NewMessage) -> Result<PostOutcome> {
        let post = QueuedPost {
            m,
            lock: self.for_update(),
            cache: self.webhooks.clone(),
        };
        let (outcome, enqueued) = self.writer.post(post).await??;
        if enqueued {
            self.outbox_enqueued();
        }
        Ok(outcome)
    }

    pub async fn message(&self, id: &MessageId) -> Result<Option<MessageRecord>> {
        let sql = format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = $1");
        let row = query(sql)
            .bind(id.as_str().to_owned())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(message).transpose()
    }

    pub async fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        let sql = format!("SELECT {THREAD_COLUMNS} FROM threads WHERE id = $1");
        let row = query(sql)
            .bind(id.as_str().to_owned())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(thread).transpose()
    }

    /// Messages of a thread with `position > after`, in order, at most `limit`.
    pub async fn thread_messages(
        &self,
        id: &ThreadId,
        after: i64,
        limit: i64,
    ) -> Result<Vec<MessageRecord>> {
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE thread_id = $1 AND position > $2 ORDER BY position LIMIT $3"
        );
        let rows = query(sql)
            .bind(id.as_str().to_owned())
            .bind(after)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(message).collect()
    }

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
