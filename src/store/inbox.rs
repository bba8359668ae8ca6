//! Inboxes: where one consumer stands in a person's inbox, its acknowledgement (a cursor never
//! moves back: the exactly-once drain), and the entries after a cursor. The entries are written by
//! the transactions that cause them (`tx::post_rows`, `tx::inbox`). An operation file (`impl Store`
//! only): no building block (`tx/`) and no other operation file may depend on it.

use super::Store;
use super::db::query;
use super::error::{Result, StoreError};
use super::model::records::inbox::{InboxEntry, InboxPosition, ReceiptRecord, entry, receipt};
use super::writer::Then;
use crate::domain::personal::SessionId;
use crate::domain::{ChannelName, MessageId, PersonId, ThreadId, Timestamp};

/// The entries of an inbox one reader may see (SPEC §4b): those for all the person's readers or
/// for this one (`$r`), and not the author's own. `e` is `inbox_entries`.
const VISIBLE: &str =
    "(e.reader IS NULL OR e.reader = $r) AND (e.skip_reader IS NULL OR e.skip_reader <> $r)";

/// [`VISIBLE`] with the reader as parameter `$n`.
fn visible(n: usize) -> String {
    VISIBLE.replace("$r", &format!("${n}"))
}

/// Where a consumer stands, by its stored key (`key`: `reader.consumer_key(name)`), else by the
/// person's plain consumer of the same name (`fallback`: a consumer used before connections
/// existed, which a connection carries on from), else 0. Parameters: `$1` person, `$2` key,
/// `$3` fallback.
const ACKED: &str = "COALESCE((SELECT c.acked FROM consumers c WHERE c.person_id = $1 AND c.name = $2), \
     (SELECT c.acked FROM consumers c WHERE c.person_id = $1 AND c.name = $3), 0)";

/// What an acknowledgement changed for others: the authors whose receipts moved on, and the
/// channels of those messages (every reader of their threads sees the receipts).
#[derive(Debug, Default)]
pub struct Acknowledged {
    pub authors: Vec<PersonId>,
    pub channels: Vec<ChannelName>,
}

impl Store {
    /// Where the consumer stored as `key` stands in `person`'s inbox (a consumer never seen has
    /// acknowledged what `fallback`, the plain consumer of its name, has; else nothing).
    pub async fn inbox_position(
        &self,
        person: &PersonId,
        key: &str,
        fallback: &str,
    ) -> Result<InboxPosition> {
        let row = query(format!(
            "SELECT p.inbox_seq AS last, {ACKED} AS acked FROM persons p WHERE p.id = $1"
        ))
        .bind(person.as_str().to_owned())
        .bind(key.to_owned())
        .bind(fallback.to_owned())
        .fetch_optional(&self.pool)
        .await?
        .ok_or(StoreError::NotFound("person"))?;
        Ok(InboxPosition {
            acked: row.try_get("acked")?,
            last: row.try_get("last")?,
        })
    }

    /// Acknowledges everything up to `after` for the consumer stored as `consumer` (reading as
    /// `reader`, carrying on from `fallback` as [`Store::inbox_position`] says); never moves a
    /// cursor back. Refuses a cursor beyond the last entry, changing nothing. Also answers the
    /// authors of the messages this acknowledged and their channels (their receipts changed: the
    /// authors' consoles and every reader of those threads are told).
    pub async fn acknowledge(
        &self,
        person: PersonId,
        consumer: String,
        fallback: String,
        reader: String,
        after: i64,
        now: Timestamp,
    ) -> Result<(InboxPosition, Acknowledged)> {
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
                let before: i64 = query(format!("SELECT {ACKED} AS acked"))
                    .bind(person.as_str().to_owned())
                    .bind(consumer.clone())
                    .bind(fallback)
                    .fetch_one(&mut *tx)
                    .await?
                    .try_get("acked")?;
                let mut acked = Acknowledged::default();
                if after > before {
                    let rows = query(format!(
                        // The author by a scalar subquery on the message's key, not a join: a join's
                        // plan made on empty statistics may scan the messages for each entry
                        // (`Store::claimable_threads` says how that went).
                        "SELECT DISTINCT (SELECT m.author FROM messages m WHERE m.id = e.message_id) AS author, \
                         e.channel FROM inbox_entries e \
                         WHERE e.person_id = $1 AND e.seq > $2 AND e.seq <= $3 AND e.message_id IS NOT NULL AND {}",
                        visible(4)
                    ))
                    .bind(person.as_str().to_owned())
                    .bind(before)
                    .bind(after)
                    .bind(reader.clone())
                    .fetch_all(&mut *tx)
                    .await?;
                    for r in &rows {
                        acked
                            .authors
                            .push(PersonId::parse(r.try_get::<String, _>("author")?)?);
                        acked
                            .channels
                            .push(ChannelName::parse(r.try_get::<String, _>("channel")?)?);
                    }
                    acked.authors.sort();
                    acked.authors.dedup();
                    acked.channels.sort();
                    acked.channels.dedup();
                    // The receipts of the messages this acknowledges (SPEC §4).
                    query(format!(
                        "INSERT INTO receipts (person_id, consumer, seq, message_id, thread_id, read_at, acked_at) \
                         SELECT e.person_id, $2, e.seq, e.message_id, e.thread_id, NULL, $5 FROM inbox_entries e \
                         WHERE e.person_id = $1 AND e.seq > $3 AND e.seq <= $4 AND e.message_id IS NOT NULL \
                         AND {} ON CONFLICT (person_id, consumer, seq) DO UPDATE SET \
                         acked_at = COALESCE(receipts.acked_at, excluded.acked_at)",
                        visible(6)
                    ))
                    .bind(person.as_str().to_owned())
                    .bind(consumer.clone())
                    .bind(before)
                    .bind(after)
                    .bind(now.0)
                    .bind(reader)
                    .execute(&mut *tx)
                    .await?;
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
                Ok((InboxPosition { acked: row.try_get("acked")?, last }, acked))
            })
        })
        .await
    }

    /// Entries of `person`'s inbox that `reader` may see with `seq > after`, oldest first, at
    /// most `limit`; with `session`, only those of that personal session's commands.
    pub async fn inbox_entries(
        &self,
        person: &PersonId,
        reader: &str,
        after: i64,
        limit: i64,
        session: Option<&SessionId>,
    ) -> Result<Vec<InboxEntry>> {
        let in_session = if session.is_some() {
            " AND e.thread_id IN (SELECT c.thread_id FROM session_commands c WHERE c.session_id = $5)"
        } else {
            ""
        };
        let rows = query(format!(
            "SELECT e.seq, e.entry_kind, e.message_id, e.thread_id, e.channel, e.notice, e.created_at \
             FROM inbox_entries e WHERE e.person_id = $1 AND e.seq > $2 AND {}{in_session} ORDER BY e.seq LIMIT $3",
            visible(4)
        ))
        .bind(person.as_str().to_owned())
        .bind(after)
        .bind(limit)
        .bind(reader.to_owned());
        let rows = match session {
            Some(s) => rows.bind(s.as_str().to_owned()),
            None => rows,
        }
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(entry).collect()
    }

    /// How many entries of `person`'s inbox after `after` `reader` may see, counting at most
    /// `upto`: the count reads every entry it counts, so without a bound a consumer that never
    /// acknowledges (an agent that only claims) would pay for its whole history on every call.
    pub async fn visible_after(
        &self,
        person: &PersonId,
        reader: &str,
        after: i64,
        upto: i64,
    ) -> Result<i64> {
        let row = query(format!(
            "SELECT COUNT(*) AS n FROM (SELECT 1 AS one FROM inbox_entries e \
             WHERE e.person_id = $1 AND e.seq > $2 AND {} LIMIT $4) v",
            visible(3)
        ))
        .bind(person.as_str().to_owned())
        .bind(after)
        .bind(reader.to_owned())
        .bind(upto)
        .fetch_one(&self.pool)
        .await?;
        row.try_get("n")
    }

    /// Whether `reader` of `person` has an entry of `message` of `thread` (it was addressed to
    /// that reader). By thread and person (`inbox_entries_thread`): by person alone it read the
    /// person's whole inbox, a cost growing with every message she ever received.
    pub async fn addressed_to(
        &self,
        person: &PersonId,
        reader: &str,
        thread: &ThreadId,
        message: &MessageId,
    ) -> Result<bool> {
        self.has_entry(person, reader, thread, Some(message)).await
    }

    /// [`Store::addressed_to`] of `thread`'s first message (what a claim takes), in one read;
    /// false when it has none.
    pub async fn opener_addressed_to(
        &self,
        person: &PersonId,
        reader: &str,
        thread: &ThreadId,
    ) -> Result<bool> {
        self.has_entry(person, reader, thread, None).await
    }

    /// Whether `reader` of `person` has an entry of `message` of `thread`, or (none) of the
    /// thread's first message, found by a subquery on the messages' `(thread_id, position)` key.
    async fn has_entry(
        &self,
        person: &PersonId,
        reader: &str,
        thread: &ThreadId,
        message: Option<&MessageId>,
    ) -> Result<bool> {
        let of = match message {
            Some(_) => "$4",
            None => {
                "(SELECT m.id FROM messages m WHERE m.thread_id = $3 ORDER BY m.position LIMIT 1)"
            }
        };
        let mut q = query(format!(
            "SELECT 1 AS found FROM inbox_entries e WHERE e.thread_id = $3 AND e.person_id = $1 \
             AND e.message_id = {of} AND {} LIMIT 1",
            visible(2)
        ))
        .bind(person.as_str().to_owned())
        .bind(reader.to_owned())
        .bind(thread.as_str().to_owned());
        if let Some(m) = message {
            q = q.bind(m.as_str().to_owned());
        }
        Ok(q.fetch_optional(&self.pool).await?.is_some())
    }

    /// The readers a message was addressed to: per person, its entries' `reader` (none: all the
    /// person's readers) and `skip_reader`.
    pub async fn message_readers(
        &self,
        thread: &ThreadId,
        message: &MessageId,
    ) -> Result<Vec<(PersonId, Option<String>, Option<String>)>> {
        // By the thread first: `inbox_entries_thread` finds the thread's entries, and no index
        // has `message_id` first (by the message alone, this read scanned every inbox entry of
        // the server on every reply, a cost growing with the server's history).
        let rows = query(
            "SELECT person_id, reader, skip_reader FROM inbox_entries \
             WHERE thread_id = $1 AND message_id = $2 ORDER BY person_id, seq",
        )
        .bind(thread.as_str().to_owned())
        .bind(message.as_str().to_owned())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    PersonId::parse(r.try_get::<String, _>("person_id")?)?,
                    r.try_get("reader")?,
                    r.try_get("skip_reader")?,
                ))
            })
            .collect()
    }

    /// Records that `consumer`'s inbox call returned these message entries (seq, message, thread):
    /// the "read" of their receipts. A second return of the same entry keeps the first time.
    ///
    /// Written behind (a receipt is information, not an acknowledgement): this returns before the
    /// write is durable, and `then` hears of its commit. It rides with the writer's next batch,
    /// or is committed 50 ms later when no write comes (`writer::behind`); a crash before then loses it
    /// (the entries stay unacknowledged, and are returned, and read, again).
    pub async fn record_reads(
        &self,
        person: PersonId,
        consumer: String,
        entries: Vec<(i64, MessageId, ThreadId)>,
        now: Timestamp,
        then: Then,
    ) -> Result<()> {
        if entries.is_empty() {
            then(Ok(()));
            return Ok(());
        }
        self.writer.run_behind(move |tx| {
            Box::pin(async move {
                let rows: Vec<String> = (0..entries.len())
                    .map(|i| {
                        let b = 4 + i * 3;
                        format!("($1, $2, ${b}, ${}, ${}, $3, NULL)", b + 1, b + 2)
                    })
                    .collect();
                let sql = format!(
                    "INSERT INTO receipts (person_id, consumer, seq, message_id, thread_id, read_at, acked_at) \
                     VALUES {} ON CONFLICT (person_id, consumer, seq) DO UPDATE SET \
                     read_at = COALESCE(receipts.read_at, excluded.read_at)",
                    rows.join(", ")
                );
                let mut q = query(sql)
                    .bind(person.as_str().to_owned())
                    .bind(consumer)
                    .bind(now.0);
                for (seq, message, thread) in entries {
                    q = q
                        .bind(seq)
                        .bind(message.as_str().to_owned())
                        .bind(thread.as_str().to_owned());
                }
                q.execute(&mut *tx).await?;
                Ok(())
            })
        }, then)
        .await
    }

    /// The receipts of the messages `messages` of `thread`: one row per recipient and consumer
    /// (one with no consumer while none has seen it), in message, person and consumer order.
    /// The receipts are joined by the thread as well: by person and sequence alone (the key's
    /// consumer between them) each entry read every receipt its person ever had, and a thread's
    /// view, which a claim of `next` now answers with, cost more with every task (issue 49).
    pub async fn thread_receipts(
        &self,
        thread: &ThreadId,
        messages: &[MessageId],
    ) -> Result<Vec<ReceiptRecord>> {
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = (0..messages.len()).map(|i| format!("${}", i + 2)).collect();
        let sql = format!(
            "SELECT e.message_id, e.person_id, e.created_at AS delivered_at, r.consumer, r.read_at, \
             r.acked_at FROM inbox_entries e LEFT JOIN receipts r ON r.thread_id = e.thread_id \
             AND r.person_id = e.person_id AND r.seq = e.seq WHERE e.thread_id = $1 AND e.message_id IN ({}) \
             ORDER BY e.message_id, e.person_id, r.consumer",
            ids.join(", ")
        );
        let mut q = query(sql).bind(thread.as_str().to_owned());
        for m in messages {
            q = q.bind(m.as_str().to_owned());
        }
        let rows = q.fetch_all(&self.pool).await?;
        rows.iter().map(receipt).collect()
    }
}
