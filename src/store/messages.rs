//! Threads and messages: the post, a message stored atomically with everything it implies (the
//! writer runs it as a queued post, `tx::post`), and the reads of messages and threads.
//! An operation file (`impl Store` only): no building block (`tx/`) and no other operation file may
//! depend on it.

use super::Store;
use super::db::query;
use super::error::Result;
use super::model::input::NewMessage;
use super::model::records::threads::{
    MESSAGE_COLUMNS, MessageRecord, PostOutcome, THREAD_COLUMNS, ThreadRecord, message, thread,
};
use super::tx::post::QueuedPost;
use crate::domain::{MessageId, PersonId, ThreadId};

impl Store {
    /// Stores a message atomically: idempotency, thread state transition, the message, the release of
    /// a claim on reply or close, and one inbox entry per recipient.
    pub async fn post(&self, m: NewMessage) -> Result<PostOutcome> {
        let post = QueuedPost {
            m,
            lock: self.for_update(),
            cache: self.webhooks.clone(),
            trace: None,
        };
        let (outcome, enqueued) = self.writer.post(post).await??;
        Ok(PostOutcome {
            outbox_due: enqueued,
            ..outcome
        })
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

    /// The trace context of the request that opened thread `id`, kept while tracing was on.
    pub async fn thread_trace(
        &self,
        id: &ThreadId,
    ) -> Result<Option<crate::telemetry::TraceContext>> {
        let row = query("SELECT traceparent, tracestate FROM thread_traces WHERE thread_id = $1")
            .bind(id.as_str().to_owned())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            Ok(crate::telemetry::TraceContext {
                traceparent: r.try_get("traceparent")?,
                tracestate: r.try_get("tracestate")?,
            })
        })
        .transpose()
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

    /// The message `author` posted with idempotency key `key`, if any (the unique index
    /// `messages_idempotency_key` makes it at most one).
    pub async fn message_by_key(
        &self,
        author: &PersonId,
        key: &str,
    ) -> Result<Option<MessageRecord>> {
        let id: Option<String> =
            query("SELECT id FROM messages WHERE author = $1 AND idempotency_key = $2")
                .bind(author.as_str().to_owned())
                .bind(key.to_owned())
                .fetch_optional(&self.pool)
                .await?
                .map(|row| row.try_get("id"))
                .transpose()?;
        match id {
            Some(id) => self.message(&MessageId::parse(id)?).await,
            None => Ok(None),
        }
    }

    /// The message `author` posted with the greatest idempotency key in `from..=to`, if any: one
    /// read down the unique index `messages_idempotency_key`, whatever the number of keys in the
    /// range. Callers give bounds that differ only in a fixed-width run of digits, which every
    /// collation orders the same way as bytes.
    pub async fn last_message_by_key_in(
        &self,
        author: &PersonId,
        from: &str,
        to: &str,
    ) -> Result<Option<MessageRecord>> {
        let id: Option<String> = query(
            "SELECT id FROM messages WHERE author = $1 AND idempotency_key >= $2 \
             AND idempotency_key <= $3 ORDER BY idempotency_key DESC LIMIT 1",
        )
        .bind(author.as_str().to_owned())
        .bind(from.to_owned())
        .bind(to.to_owned())
        .fetch_optional(&self.pool)
        .await?
        .map(|row| row.try_get("id"))
        .transpose()?;
        match id {
            Some(id) => self.message(&MessageId::parse(id)?).await,
            None => Ok(None),
        }
    }
}
