//! Threads, messages and inboxes: the posting transaction and the exactly-once drain.

use std::borrow::Cow;

use super::Store;
use super::db::{BoxFut, Conn, Query, query};
use super::error::{Result, StoreError, json_err};
use super::model::input::{LoggedEvent, NewMessage};
use super::model::records::inbox::{EntryContent, InboxEntry, InboxPosition, entry};
use super::model::records::threads::{
    MESSAGE_COLUMNS, MessageRecord, PostOutcome, THREAD_COLUMNS, TaskInfo, ThreadRecord, message,
    thread,
};
use super::outbox::WebhookCache;
use crate::domain::{
    AgentIdentity, Impact, Kind, MessageId, Outcome, PersonId, TaskEvent, TaskState, ThreadId,
    ThreadState, Timestamp,
};

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

/// A post as the writer queues it: its effects are all rows of its transaction and its inputs
/// carry its ids and time, so it may run again (the writer then replays it rather than give it a
/// savepoint of its own), and on PostgreSQL the posts that open a thread may be written together
/// ([`post_group`]).
pub(super) struct QueuedPost {
    pub m: NewMessage,
    pub lock: &'static str,
    pub cache: std::sync::Arc<super::outbox::WebhookCache>,
}

/// A post's answer. A key used for another request is refused before the post writes anything,
/// so the job itself succeeds (nothing to undo, no other post to replay) and the refusal is
/// answered after the commit: a client reusing keys cannot make the writer run others' posts
/// again.
pub(super) type Posted = Result<(PostOutcome, bool)>;

impl QueuedPost {
    /// Writes the post alone.
    pub(super) async fn run(&self, tx: &mut Conn) -> Result<Posted> {
        match post_in(tx, self.m.clone(), self.lock, &self.cache).await {
            Err(StoreError::IdempotencyMismatch) => Ok(Err(StoreError::IdempotencyMismatch)),
            done => done.map(Ok),
        }
    }

    /// Whether [`post_group`] may write it: on PostgreSQL, a post that opens a thread and sets
    /// nothing else in motion (no approval, no remote agent). (`lock` is ` FOR UPDATE` on
    /// PostgreSQL only.)
    pub(super) fn groupable(&self) -> bool {
        !self.lock.is_empty()
            && self.m.opens_thread
            && self.m.approval.is_none()
            && self.m.remote.is_none()
    }
}

/// Writes posts that each open a thread ([`QueuedPost::groupable`]) in one statement, on
/// PostgreSQL: their threads, messages, task events and inbox entries, the recipients' counters
/// locked once in id order and each moved by its number of entries (the entries numbered in the
/// posts' order, as one post after the other would have). Where a statement per post cost the
/// writer's PostgreSQL backend about 235 µs of CPU (most of it starting and ending a statement
/// with five data-modifying parts and three foreign-key checks), this costs it about 89 µs per
/// post (measured at 64 in flight, about 12 posts per statement).
///
/// A post whose idempotency key was used before writes nothing and is answered with the earlier
/// message (or refused), as alone. Any other failure (a recipient or the channel gone, one key
/// twice in the group) fails the whole group: the writer then undoes it and writes each post
/// alone, so that only the failing one fails, with its own error.
pub(super) fn post_group<'c>(
    tx: &'c mut Conn,
    group: &'c [&'c QueuedPost],
) -> BoxFut<'c, Result<Vec<Posted>>> {
    Box::pin(async move {
        let mut input = Vec::with_capacity(group.len());
        let mut threads = Vec::with_capacity(group.len());
        for (ord, post) in group.iter().enumerate() {
            let m = &post.m;
            let (record, o) = opening(m)?;
            let mut inboxes: Vec<&str> = m.recipients.iter().map(PersonId::as_str).collect();
            inboxes.sort_unstable();
            inboxes.dedup();
            let object = serde_json::json!({
                "ord": ord,
                "id": m.id.as_str(),
                "thread": m.thread.as_str(),
                "channel": m.channel.as_str(),
                "kind": m.kind.as_str(),
                "author": m.author.as_str(),
                "agent": m.agent.as_ref().map(AgentIdentity::as_str),
                "recipients": serde_json::to_string(&m.recipients).map_err(json_err)?,
                "subject": m.subject,
                "body": m.body,
                "attachments": serde_json::to_string(&m.attachments).map_err(json_err)?,
                "impact": m.impact.map(Impact::as_str),
                "outcome": m.outcome.map(Outcome::as_str),
                "refers_to": m.refers_to.as_ref().map(MessageId::as_str),
                "idem": m.idempotency_key,
                "request_hash": m.request_hash,
                "created_at": m.created_at.0,
                "th_subject": o.subject,
                "th_state": o.state,
                "asker": o.asker,
                "th_outcome": o.outcome,
                "task_state": o.task_state,
                "context_id": o.context_id,
                "skill": o.skill,
                "refs": o.references,
                "event_seq": o.event_seq,
                "inboxes": inboxes,
            });
            input.push(serde_json::to_string(&object).map_err(json_err)?);
            threads.push(record);
        }
        // One statement per run of posts whose input fits in GROUP_BYTES (a post above it goes
        // alone).
        let mut written: Vec<usize> = Vec::with_capacity(group.len());
        let mut start = 0;
        while start < input.len() {
            let mut end = start + 1;
            let mut size = input[start].len() + 2;
            while end < input.len() && size + input[end].len() < GROUP_BYTES {
                size += input[end].len() + 1;
                end += 1;
            }
            let run = format!("[{}]", input[start..end].join(","));
            let row = query(GROUP_SQL).bind(run).fetch_one(&mut *tx).await?;
            if row.try_get::<i64, _>("entries")? != row.try_get::<i64, _>("wanted")? {
                return Err(StoreError::NotFound("recipient"));
            }
            written.extend(
                row.try_get::<String, _>("written")?
                    .split(',')
                    .filter_map(|ord| ord.parse::<usize>().ok()),
            );
            start = end;
        }
        let mut written = written.into_iter().peekable();
        let mut answers = Vec::with_capacity(group.len());
        for (ord, (post, record)) in group.iter().zip(threads).enumerate() {
            let m = &post.m;
            if written.next_if_eq(&ord).is_none() {
                // Its key was used before: the earlier post answers it, or it is refused.
                answers.push(match replayed(tx, m).await {
                    Ok(Some(earlier)) => Ok((earlier, false)),
                    Err(StoreError::IdempotencyMismatch) => Err(StoreError::IdempotencyMismatch),
                    Ok(None) => return Err(StoreError::NotFound("message")),
                    Err(e) => return Err(e),
                });
                continue;
            }
            let event = record.task.as_ref().map(|t| (t.last_event, t.state));
            let enqueued = after_rows(tx, &post.cache, m, 1, event, &record).await?;
            answers.push(Ok((posted(m.clone(), 1, record), enqueued)));
        }
        Ok(answers)
    })
}

/// Most bytes of posts' input in one [`GROUP_SQL`] statement. A statement's call must fit in one
/// TLS record (16 KiB): sqlx does not set `TCP_NODELAY`, so a call written as two records waits
/// for PostgreSQL's delayed acknowledgement of the first (measured: 40–47 ms per statement on a
/// TLS connection to `127.0.0.1`, 700 intakes/s instead of thousands).
const GROUP_BYTES: usize = 12 * 1024;

/// [`post_group`]'s statement. `$1` is a JSON array with one object per post (`ord` its place in
/// the group, `inboxes` its recipients, sorted and distinct); it answers the inbox entries
/// written and wanted, and the places of the posts written (sorted, comma-separated). The key's
/// check is a lateral lookup per post so that it is always the index's (an anti-join may hash the
/// whole table).
const GROUP_SQL: &str = "WITH input AS (SELECT * FROM json_to_recordset($1::json) AS i(ord bigint, \
     id text, thread text, channel text, kind text, author text, agent text, recipients text, \
     subject text, body text, attachments text, impact text, outcome text, refers_to text, \
     idem text, request_hash text, created_at bigint, th_subject text, th_state text, asker text, \
     th_outcome text, task_state text, context_id text, skill text, refs text, event_seq bigint, \
     inboxes json)), \
     fresh AS (SELECT i.* FROM input i LEFT JOIN LATERAL (SELECT 1 AS used FROM messages m \
     WHERE m.author = i.author AND m.idempotency_key = i.idem LIMIT 1) k ON true \
     WHERE k.used IS NULL), \
     th AS (INSERT INTO threads (id, channel, subject, opener_kind, opened_by, state, asker, outcome, \
     message_count, created_at, updated_at, task_state, context_id, skill, reference_task_ids, \
     task_event_seq) SELECT thread, channel, th_subject, kind, author, th_state, asker, th_outcome, \
     1, created_at, created_at, task_state, context_id, skill, refs, event_seq FROM fresh ORDER BY ord), \
     msg AS (INSERT INTO messages (id, thread_id, channel, position, kind, author, agent, recipients, \
     subject, body, attachments, impact, outcome, refers_to, idempotency_key, request_hash, \
     created_at) SELECT id, thread, channel, 1, kind, author, agent, recipients, subject, body, \
     attachments, impact, outcome, refers_to, idem, request_hash, created_at FROM fresh ORDER BY ord), \
     ev AS (INSERT INTO task_events (thread_id, seq, state, cause, message_id, created_at) \
     SELECT thread, event_seq, task_state, 'message', id, created_at FROM fresh WHERE event_seq > 0), \
     rc AS (SELECT f.ord, f.id, f.thread, f.channel, f.created_at, r.person FROM fresh f \
     CROSS JOIN LATERAL json_array_elements_text(f.inboxes) AS r(person)), \
     upd AS (UPDATE persons p SET inbox_seq = p.inbox_seq + c.n \
     FROM (SELECT person, count(*) AS n FROM rc GROUP BY person) c \
     WHERE p.id = c.person AND p.id IN (SELECT id FROM persons WHERE id IN (SELECT person FROM rc) \
     ORDER BY id FOR UPDATE) RETURNING p.id, p.inbox_seq, c.n), \
     ins AS (INSERT INTO inbox_entries (person_id, seq, entry_kind, message_id, thread_id, channel, \
     notice, created_at) SELECT rc.person, u.inbox_seq - u.n + row_number() OVER \
     (PARTITION BY rc.person ORDER BY rc.ord), 'message', rc.id, rc.thread, rc.channel, NULL, \
     rc.created_at FROM rc JOIN upd u ON u.id = rc.person RETURNING 1) \
     SELECT (SELECT count(*) FROM ins) AS entries, (SELECT count(*) FROM rc) AS wanted, \
     COALESCE((SELECT string_agg(ord::text, ',' ORDER BY ord) FROM fresh), '') AS written";

/// The outcome of a post whose idempotency key `author` used before: the earlier message and its
/// thread, or a refusal when the earlier request was a different one. `None` when the key is unused.
async fn replayed(tx: &mut Conn, m: &NewMessage) -> Result<Option<PostOutcome>> {
    let Some(key) = &m.idempotency_key else {
        return Ok(None);
    };
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS}, request_hash FROM messages WHERE author = $1 AND idempotency_key = $2"
    );
    let earlier = query(sql)
        .bind(m.author.as_str().to_owned())
        .bind(key.clone())
        .fetch_optional(&mut *tx)
        .await?;
    let Some(row) = earlier else {
        return Ok(None);
    };
    if row.try_get::<String, _>("request_hash")? != m.request_hash {
        return Err(StoreError::IdempotencyMismatch);
    }
    let message = message(&row)?;
    let sql = format!("SELECT {THREAD_COLUMNS} FROM threads WHERE id = $1");
    let row = query(sql)
        .bind(message.thread.as_str().to_owned())
        .fetch_one(&mut *tx)
        .await?;
    Ok(Some(PostOutcome {
        message,
        thread: thread(&row)?,
        replayed: true,
    }))
}

pub(super) async fn post_in(
    tx: &mut Conn,
    m: NewMessage,
    lock: &'static str,
    cache: &WebhookCache,
) -> Result<(PostOutcome, bool)> {
    // A new thread checks its key in the statement that creates it (one round trip less);
    // a post in an existing thread checks first.
    if !m.opens_thread
        && let Some(outcome) = replayed(tx, &m).await?
    {
        return Ok((outcome, false));
    }

    let mut merged_opening = None;
    let (thread_record, position) = if m.opens_thread {
        // The thread's row goes with the message's rows, in one call (below).
        let (record, opening) = opening(&m)?;
        merged_opening = Some(opening);
        (record, 1)
    } else {
        let sql = format!("SELECT {THREAD_COLUMNS} FROM threads WHERE id = $1{lock}");
        let row = query(sql)
            .bind(m.thread.as_str().to_owned())
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound("thread"))?;
        let mut record = thread(&row)?;
        if let Some(task) = &mut record.task {
            let by_party = m.author == record.opened_by;
            task.state = task.state.apply(TaskEvent::Posted {
                kind: m.kind,
                by_party,
                outcome: m.outcome,
            })?;
            task.last_event += 1;
        }
        record.state = record.state.apply(m.kind, &m.author, m.outcome)?;
        record.message_count += 1;
        record.updated_at = m.created_at;
        let (name, asker, outcome) = record.state.parts();
        query(
            "UPDATE threads SET state = $1, asker = $2, outcome = $3, message_count = $4, updated_at = $5, \
             task_state = $6, task_event_seq = $7 WHERE id = $8",
        )
        .bind(name)
        .bind(asker.map(|a| a.as_str().to_owned()))
        .bind(outcome.map(Outcome::as_str))
        .bind(record.message_count)
        .bind(m.created_at.0)
        .bind(record.task.as_ref().map(|t| t.state.as_str()))
        .bind(record.task.as_ref().map_or(0, |t| t.last_event))
        .bind(m.thread.as_str().to_owned())
        .execute(&mut *tx)
        .await?;
        let position = record.message_count;
        (record, position)
    };

    // A remote agent has no inbox: what it is sent goes out through the outbox.
    let mut inboxes: Vec<PersonId> = m
        .recipients
        .iter()
        .filter(|p| m.remote.as_ref().is_none_or(|hop| hop.remote != **p))
        .cloned()
        .collect();
    inboxes.sort();
    inboxes.dedup();
    let event = thread_record.task.as_ref().map(|t| (t.last_event, t.state));
    let merged = merged_opening.is_some();
    let inserted =
        match insert_message_rows(tx, &m, position, event, &inboxes, lock, merged_opening).await {
            Ok(inserted) => inserted,
            // SQLite: with the thread's row in the same call, a used key shows as the message's
            // unique index refusing it (the thread's INSERT found the key and inserted nothing).
            // SQLite undid the failed statement, so the earlier message can be read (on
            // PostgreSQL a failed statement aborts the transaction: it never gets here, see below).
            Err(e @ StoreError::Conflict(_)) if merged && lock.is_empty() => {
                return match replayed(tx, &m).await? {
                    Some(outcome) if outcome.message.id != m.id => Ok((outcome, false)),
                    _ => Err(e),
                };
            }
            Err(e) => return Err(e),
        };
    if !inserted {
        // PostgreSQL: the statement's rows all hang on the thread's INSERT, which found the key
        // used and inserted nothing (or, with no recipient row written, a recipient is missing:
        // then the message found is this post's own and the job fails).
        return match replayed(tx, &m).await? {
            Some(outcome) if outcome.message.id != m.id => Ok((outcome, false)),
            _ => Err(StoreError::NotFound("recipient")),
        };
    }

    let enqueued = after_rows(tx, cache, &m, position, event, &thread_record).await?;
    Ok((posted(m, position, thread_record), enqueued))
}

/// The row of the thread `m` opens: as the store answers it, and the values its INSERT needs.
fn opening(m: &NewMessage) -> Result<(ThreadRecord, Opening)> {
    let state = ThreadState::start(m.kind, &m.author)?;
    let (name, asker, outcome) = state.parts();
    let task = m.task.as_ref().map(|t| TaskInfo {
        state: TaskState::Submitted,
        context_id: t.context_id.clone(),
        skill: t.skill.clone(),
        reference_task_ids: t.reference_task_ids.clone(),
        last_event: 1,
    });
    let references = match &task {
        Some(t) => Some(serde_json::to_string(&t.reference_task_ids).map_err(json_err)?),
        None => None,
    };
    let opening = Opening {
        subject: m.subject.clone().unwrap_or_default(),
        state: name,
        asker: asker.map(|a| a.as_str().to_owned()),
        outcome: outcome.map(Outcome::as_str),
        task_state: task.as_ref().map(|t| t.state.as_str()),
        context_id: task.as_ref().map(|t| t.context_id.clone()),
        skill: task.as_ref().map(|t| t.skill.clone()),
        references,
        event_seq: if task.is_some() { 1 } else { 0 },
    };
    let record = ThreadRecord {
        id: m.thread.clone(),
        channel: m.channel.clone(),
        subject: m.subject.clone().unwrap_or_default(),
        opener_kind: m.kind,
        opened_by: m.author.clone(),
        state,
        message_count: 1,
        created_at: m.created_at,
        updated_at: m.created_at,
        task,
    };
    Ok((record, opening))
}

/// What a post does beyond its rows: the outbox's hooks (webhooks, pushes, a remote agent's
/// round), its approval, and a reply's release of the thread's claim. Says whether a delivery was
/// enqueued: only then are the outbox's workers woken after the commit.
async fn after_rows(
    tx: &mut Conn,
    cache: &WebhookCache,
    m: &NewMessage,
    position: i64,
    event: Option<(i64, TaskState)>,
    thread_record: &ThreadRecord,
) -> Result<bool> {
    let mut enqueued = super::outbox::on_message(tx, cache, m, position).await?;
    if let Some(a) = &m.approval {
        super::approvals::insert(tx, a, m).await?;
        enqueued |= super::outbox::on_approval_pending(tx, cache, a, m).await?;
    }
    if let Some(hop) = &m.remote {
        super::remote_tasks::on_post(tx, m, hop).await?;
        enqueued = true;
    }
    if let Some((seq, state)) = event {
        let event = LoggedEvent {
            thread: &m.thread,
            seq,
            state,
            cause: "message",
            message: Some(&m.id),
            now: m.created_at,
            channel: thread_record.channel.as_str(),
            party: &thread_record.opened_by,
            new_task: m.opens_thread,
        };
        enqueued |= super::outbox::on_task_event(tx, cache, &event).await?;
    }

    if matches!(m.kind, Kind::Reply | Kind::Close) {
        query("DELETE FROM claims WHERE thread_id = $1")
            .bind(m.thread.as_str().to_owned())
            .execute(&mut *tx)
            .await?;
    }

    Ok(enqueued)
}

/// The answer of a post whose rows were written.
fn posted(m: NewMessage, position: i64, thread: ThreadRecord) -> PostOutcome {
    let message = MessageRecord {
        id: m.id,
        thread: m.thread,
        channel: m.channel,
        position,
        kind: m.kind,
        author: m.author,
        agent: m.agent,
        recipients: m.recipients,
        subject: m.subject,
        body: m.body,
        attachments: m.attachments,
        impact: m.impact,
        outcome: m.outcome,
        refers_to: m.refers_to,
        idempotency_key: m.idempotency_key,
        created_at: m.created_at,
    };
    PostOutcome {
        message,
        thread,
        replayed: false,
    }
}

const MESSAGE_INTO: &str = "INSERT INTO messages (id, thread_id, channel, position, kind, author, \
     agent, recipients, subject, body, attachments, impact, outcome, refers_to, idempotency_key, \
     request_hash, created_at)";
const MESSAGE_VALUES: &str =
    "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17";
const EVENT_INTO: &str =
    "INSERT INTO task_events (thread_id, seq, state, cause, message_id, created_at)";
/// $1 (message), $2 (thread), $3 (channel) and $17 (time) of the message serve the event too; its
/// seq and state are $18 and $19.
const EVENT_VALUES: &str = "$2, $18, $19, 'message', $1, $17";

/// The values of a new thread's row that its first message does not carry.
struct Opening {
    subject: String,
    state: &'static str,
    asker: Option<String>,
    outcome: Option<&'static str>,
    task_state: Option<&'static str>,
    context_id: Option<String>,
    skill: Option<String>,
    references: Option<String>,
    event_seq: i64,
}

impl Opening {
    /// The thread's INSERT, which inserts nothing when the author's idempotency key was used
    /// before. Its own values are numbered from `$first` (bound by [`Opening::bind`]); the
    /// others are the message's (id $2, channel $3, kind $5, author $6, key $15, time $17).
    fn insert_sql(first: usize) -> String {
        let own: Vec<String> = (first..first + 9).map(|i| format!("${i}")).collect();
        format!(
            "INSERT INTO threads (id, channel, subject, opener_kind, opened_by, state, asker, outcome, \
             message_count, created_at, updated_at, task_state, context_id, skill, reference_task_ids, \
             task_event_seq) SELECT $2, $3, {}, $5, $6, {}, {}, {}, 1, $17, $17, {}, {}, {}, {}, {} \
             WHERE NOT EXISTS (SELECT 1 FROM messages WHERE author = $6 AND idempotency_key = $15)",
            own[0], own[1], own[2], own[3], own[4], own[5], own[6], own[7], own[8],
        )
    }

    /// Binds the values [`Opening::insert_sql`] numbered, in order.
    fn bind(self, q: Query) -> Query {
        q.bind(self.subject)
            .bind(self.state)
            .bind(self.asker)
            .bind(self.outcome)
            .bind(self.task_state)
            .bind(self.context_id)
            .bind(self.skill)
            .bind(self.references)
            .bind(self.event_seq)
    }
}

/// The SQLite call that writes a post's rows (see [`insert_message_rows`]): the thread's row
/// first when the post `opens` it, the message, its task `event`, then for each of the `n`
/// recipients (`$20`…) its counter moved and its inbox entry. Up to [`SQLITE_SHAPES_MAX`]
/// recipients, each gets its own pair of statements, keyed by equality: a list `id IN ($20, $21)`
/// makes SQLite build a temporary index of the list on every run (a B-tree opened, a page
/// zeroed, closed again), about 5% of an intake's instructions. The text is the same for every
/// post of one shape, so those shapes are built once.
fn sqlite_post_sql(opens: bool, event: bool, n: usize) -> Cow<'static, str> {
    static SHAPES: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
        let mut shapes = Vec::new();
        for opens in [false, true] {
            for event in [false, true] {
                for n in 0..=SQLITE_SHAPES_MAX {
                    shapes.push(build(opens, event, n));
                }
            }
        }
        shapes
    });
    fn build(opens: bool, event: bool, n: usize) -> String {
        let first = 20;
        let mut sql = String::new();
        if opens {
            // Its own values are numbered after the recipients'.
            sql.push_str(&Opening::insert_sql(first + n));
            sql.push_str("; ");
        }
        sql.push_str(&format!("{MESSAGE_INTO} VALUES ({MESSAGE_VALUES})"));
        if event {
            sql.push_str(&format!("; {EVENT_INTO} VALUES ({EVENT_VALUES})"));
        }
        let entries = |ids: &str| {
            format!(
                "; UPDATE persons SET inbox_seq = inbox_seq + 1 WHERE id {ids}; \
                 INSERT INTO inbox_entries (person_id, seq, entry_kind, message_id, thread_id, channel, \
                 notice, created_at) SELECT id, inbox_seq, 'message', $1, $2, $3, NULL, $17 FROM persons \
                 WHERE id {ids}"
            )
        };
        if n <= SQLITE_SHAPES_MAX {
            for i in first..first + n {
                sql.push_str(&entries(&format!("= ${i}")));
            }
        } else {
            // Past the kept shapes, one pair for all: a pair per recipient would be that many
            // statements to prepare, each distinct, more than the connection keeps.
            let ids: Vec<String> = (first..first + n).map(|i| format!("${i}")).collect();
            sql.push_str(&entries(&format!("IN ({})", ids.join(", "))));
        }
        sql
    }
    if n > SQLITE_SHAPES_MAX {
        return Cow::Owned(build(opens, event, n));
    }
    let index = (usize::from(opens) * 2 + usize::from(event)) * (SQLITE_SHAPES_MAX + 1) + n;
    Cow::Borrowed(SHAPES[index].as_str())
}

/// Most recipients of a post whose SQLite call is built once and kept ([`sqlite_post_sql`]).
const SQLITE_SHAPES_MAX: usize = 8;

/// The rows of a post that need no answer: the message, its task event (`event`: sequence number
/// and state, for a task), and its entry in each inbox of `recipients` (sorted, distinct) with
/// that person's next sequence number.
///
/// On SQLite they are all sent as one call (its numbered parameters span the statements,
/// [`sqlite_post_sql`]); the rows they affect, one each and two per recipient, are counted. On
/// PostgreSQL, which takes one statement per call, the recipients' counters are first locked in
/// id order (`lock` is ` FOR UPDATE`), so that concurrent posts on several replicas cannot
/// deadlock on them; the statement is the same whatever the number of recipients.
async fn insert_message_rows(
    tx: &mut Conn,
    m: &NewMessage,
    position: i64,
    event: Option<(i64, TaskState)>,
    recipients: &[PersonId],
    lock: &'static str,
    opening: Option<Opening>,
) -> Result<bool> {
    let n = recipients.len();
    let recipients_json = serde_json::to_string(&m.recipients).map_err(json_err)?;
    let attachments = serde_json::to_string(&m.attachments).map_err(json_err)?;
    let bind = |sql: Cow<'static, str>, with_event: bool, with_recipients: bool| {
        let mut q = query(sql)
            .bind(m.id.as_str().to_owned())
            .bind(m.thread.as_str().to_owned())
            .bind(m.channel.as_str().to_owned())
            .bind(position)
            .bind(m.kind.as_str())
            .bind(m.author.as_str().to_owned())
            .bind(m.agent.as_ref().map(|a| a.as_str().to_owned()))
            .bind(recipients_json.clone())
            .bind(m.subject.clone())
            .bind(m.body.clone())
            .bind(attachments.clone())
            .bind(m.impact.map(Impact::as_str))
            .bind(m.outcome.map(Outcome::as_str))
            .bind(m.refers_to.as_ref().map(|r| r.as_str().to_owned()))
            .bind(m.idempotency_key.clone())
            .bind(m.request_hash.clone())
            .bind(m.created_at.0);
        if with_event || with_recipients {
            let (seq, state) = event.unwrap_or((0, TaskState::Submitted));
            q = q.bind(seq).bind(state.as_str());
        }
        if with_recipients {
            for p in recipients {
                q = q.bind(p.as_str().to_owned());
            }
        }
        q
    };
    if lock.is_empty() {
        let opened = opening.is_some();
        let sql = sqlite_post_sql(opened, event.is_some(), n);
        // One row each for the thread (when it opens), the message and the task event, two per
        // recipient.
        let expected = u64::from(opened) + 1 + u64::from(event.is_some()) + 2 * n as u64;
        let mut q = bind(sql, opened || event.is_some(), opened || n > 0);
        if let Some(o) = opening {
            q = o.bind(q);
        }
        let done = q.execute(&mut *tx).await?;
        if done.rows_affected() != expected {
            return Err(StoreError::NotFound("recipient"));
        }
        return Ok(true);
    }
    let message_sql = format!("{MESSAGE_INTO} VALUES ({MESSAGE_VALUES})");
    let event_sql = format!("{EVENT_INTO} VALUES ({EVENT_VALUES})");
    // PostgreSQL takes one statement per call, so the rows are written by one statement with
    // data-modifying CTEs; its parameters are numbered without gaps (each must have a use). For a
    // new thread, its row leads (`th`), and every other row hangs on it: when the author's
    // idempotency key was used before, nothing at all is written and the caller answers the
    // earlier message. (Foreign keys are checked at the statement's end, after `th`.)
    let mut sql = String::from("WITH ");
    let next = if event.is_some() { 20 } else { 18 };
    if opening.is_some() {
        sql.push_str(&format!(
            "th AS ({} RETURNING id), msg AS ({MESSAGE_INTO} SELECT {MESSAGE_VALUES} FROM th RETURNING id)",
            Opening::insert_sql(next + n),
        ));
        if event.is_some() {
            sql.push_str(&format!(
                ", ev AS ({EVENT_INTO} SELECT {EVENT_VALUES} FROM msg RETURNING seq)"
            ));
        }
    } else {
        sql.push_str(&format!("msg AS ({message_sql} RETURNING id)"));
        if event.is_some() {
            sql.push_str(&format!(", ev AS ({event_sql} RETURNING seq)"));
        }
    }
    let expected = if n > 0 {
        let ids = (next..next + n)
            .map(|i| format!("${i}"))
            .collect::<Vec<_>>()
            .join(", ");
        // The counters are locked in id order by the inner SELECT before the UPDATE takes them;
        // they move only if the message was written.
        sql.push_str(&format!(
            ", upd AS (UPDATE persons SET inbox_seq = inbox_seq + 1 WHERE id IN \
             (SELECT id FROM persons WHERE id IN ({ids}) ORDER BY id{lock}) \
             AND EXISTS (SELECT 1 FROM msg) RETURNING id, inbox_seq) \
             INSERT INTO inbox_entries (person_id, seq, entry_kind, message_id, thread_id, channel, notice, \
             created_at) SELECT id, inbox_seq, 'message', $1, $2, $3, NULL, $17 FROM upd"
        ));
        n as u64
    } else {
        sql.push_str(" SELECT id FROM msg");
        1
    };
    let q = bind(sql.into(), event.is_some(), false);
    let mut q = recipients
        .iter()
        .fold(q, |q, p| q.bind(p.as_str().to_owned()));
    let opened = opening.is_some();
    if let Some(o) = opening {
        q = o.bind(q);
    }
    // Inbox entries written, or (without recipients) whether the message was.
    let written = if n > 0 {
        q.execute(&mut *tx).await?.rows_affected()
    } else {
        u64::from(q.fetch_optional(&mut *tx).await?.is_some())
    };
    match written {
        // Nothing hung on the thread's row: the key was used (the caller checks).
        0 if opened => Ok(false),
        w if w == expected => Ok(true),
        _ => Err(StoreError::NotFound("recipient")),
    }
}

/// Appends one entry to a person's inbox with the next sequence number; returns it.
pub(super) async fn append_entry(
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
