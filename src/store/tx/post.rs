//! One post: the transaction that stores a message atomically with everything it implies
//! (idempotency, the thread state machine's transition, its rows through `post_rows`, then its
//! approval, its outbox hooks, a remote agent's round and a reply's release of the claim), and the
//! post as the writer queues it ([`QueuedPost`]). It calls `post_rows`, `approvals`, `enqueue`,
//! `fence` and `remote_hops`, and must not depend on any operation (`impl Store`).

use std::sync::Arc;

use super::enqueue::{self, WebhookCache};
use super::post_rows::{Opening, insert_message_rows};
use super::{approvals, commands, fence, remote_hops};
use crate::domain::{Kind, Outcome, PersonId, TaskEvent, TaskState, ThreadState};
use crate::store::db::{Conn, query};
use crate::store::error::{Result, StoreError, json_err};
use crate::store::model::input::{LoggedEvent, NewMessage};
use crate::store::model::records::approvals::ApprovalRecord;
use crate::store::model::records::threads::{
    MESSAGE_COLUMNS, MessageRecord, PostOutcome, THREAD_COLUMNS, TaskInfo, ThreadRecord, message,
    thread,
};

/// A post as the writer queues it: its effects are all rows of its transaction and its inputs
/// carry its ids and time, so it may run again (the writer then replays it rather than give it a
/// savepoint of its own), and on PostgreSQL the posts that open a thread may be written together
/// ([`post_group`]).
///
/// [`post_group`]: super::post_group::post_group
pub(in crate::store) struct QueuedPost {
    pub m: NewMessage,
    pub lock: &'static str,
    pub cache: Arc<WebhookCache>,
    /// The trace context of the caller, while tracing is on (set by the writer).
    pub trace: Option<crate::telemetry::TraceContext>,
}

/// A post's answer. A key used for another request is refused before the post writes anything,
/// so the job itself succeeds (nothing to undo, no other post to replay) and the refusal is
/// answered after the commit: a client reusing keys cannot make the writer run others' posts
/// again.
pub(in crate::store) type Posted = Result<(PostOutcome, bool)>;

impl QueuedPost {
    /// Writes the post alone.
    pub(in crate::store) async fn run(&self, tx: &mut Conn) -> Result<Posted> {
        match post_in(tx, self.m.clone(), self.lock, &self.cache).await {
            // Refusals found before the post wrote anything (a reused key, a stale fencing token):
            // the job succeeds, and the caller is refused after the commit.
            Err(StoreError::IdempotencyMismatch) => Ok(Err(StoreError::IdempotencyMismatch)),
            Err(e @ (StoreError::StaleClaim { .. } | StoreError::UnknownFencingToken(_))) => {
                Ok(Err(e))
            }
            done => done.map(Ok),
        }
    }

    /// Whether [`post_group`] may write it: on PostgreSQL, a post that opens a thread and sets
    /// nothing else in motion (no approval, no remote agent). (`lock` is ` FOR UPDATE` on
    /// PostgreSQL only.)
    ///
    /// [`post_group`]: super::post_group::post_group
    pub(in crate::store) fn groupable(&self) -> bool {
        !self.lock.is_empty()
            && self.m.opens_thread
            && self.m.approval.is_none()
            && self.m.remote.is_none()
            && !self.m.has_extras()
    }
}

pub(in crate::store) async fn post_in(
    tx: &mut Conn,
    m: NewMessage,
    lock: &'static str,
    cache: &WebhookCache,
) -> Result<(PostOutcome, bool)> {
    // The remote task's state a remote agent's message reports commits with it, a replay of the
    // message included (the state seen again is recorded again).
    let observed = m.observed.clone();
    let done = write_post(tx, m, lock, cache).await?;
    if let Some(o) = &observed {
        remote_hops::observed(tx, o, lock).await?;
    }
    Ok(done)
}

async fn write_post(
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
        // The thread's row is locked (PostgreSQL) or the writer is alone (SQLite): no claim can
        // be made between this check and the post's rows.
        if let (Some(token), Some(session)) = (m.fencing_token, &m.agent) {
            fence::check(tx, &m.thread, &m.author, session, token, m.created_at).await?;
        }
        if let Some(task) = &mut record.task {
            let by_party = m.author == record.opened_by;
            task.state = task.state.apply(TaskEvent::Posted {
                kind: m.kind,
                by_party,
                outcome: m.outcome,
            })?;
            task.last_event += 1;
        }
        record.state = record.state.apply(
            m.kind,
            &m.author,
            m.addressing.connection.as_deref(),
            m.outcome,
        )?;
        record.message_count += 1;
        record.updated_at = m.created_at;
        let (name, asker, outcome) = record.state.parts();
        query(
            "UPDATE threads SET state = $1, asker = $2, outcome = $3, message_count = $4, updated_at = $5, \
             task_state = $6, task_event_seq = $7, asker_reader = $9 WHERE id = $8",
        )
        .bind(name)
        .bind(asker.map(|a| a.as_str().to_owned()))
        .bind(outcome.map(Outcome::as_str))
        .bind(record.message_count)
        .bind(m.created_at.0)
        .bind(record.task.as_ref().map(|t| t.state.as_str()))
        .bind(record.task.as_ref().map_or(0, |t| t.last_event))
        .bind(m.thread.as_str().to_owned())
        .bind(record.state.asker_reader().map(str::to_owned))
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
        .filter(|p| !m.addressing.narrowed(p))
        .cloned()
        .collect();
    // Her other connections' copy of her own post (SPEC §4b), when she is not among its
    // recipients: its entry is not for the connection that wrote it (`skip_reader`, set by
    // `insert_message_rows`).
    if m.addressing.skip.is_some() {
        inboxes.push(m.author.clone());
    }
    inboxes.sort();
    inboxes.dedup();
    let event = thread_record.task.as_ref().map(|t| (t.last_event, t.state));
    let merged = merged_opening.is_some();
    let inserted =
        match insert_message_rows(tx, &m, position, event, &inboxes, lock, merged_opening).await {
            Ok(inserted) => inserted,
            // SQLite: with the thread's row in the same call, a used key shows as the message's
            // unique index refusing it. SQLite undid the failed statement, so the earlier message
            // can be read (on PostgreSQL a failed statement aborts the transaction: it never gets
            // here, see below). The thread's INSERT before it is unguarded (`Opening::insert_sql`)
            // and wrote the new thread's row: it goes first, since a replay or a refused key is
            // answered with the job committed. A thread that has a message is not this post's
            // (its row was refused, the id being used).
            Err(e @ StoreError::Conflict(_)) if merged && lock.is_empty() => {
                query(
                    "DELETE FROM threads WHERE id = $1 \
                     AND NOT EXISTS (SELECT 1 FROM messages WHERE thread_id = $1)",
                )
                .bind(m.thread.as_str().to_owned())
                .execute(&mut *tx)
                .await?;
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

    if has_more_rows(&m) {
        write_extras(tx, &m).await?;
    }
    let (enqueued, withdrawn) = after_rows(tx, cache, &m, position, event, &thread_record).await?;
    let mut outcome = posted(m, position, thread_record);
    outcome.withdrawn = withdrawn;
    Ok((outcome, enqueued))
}

/// The outcome of a post whose idempotency key `author` used before: the earlier message and its
/// thread, or a refusal when the earlier request was a different one. `None` when the key is unused.
pub(super) async fn replayed(tx: &mut Conn, m: &NewMessage) -> Result<Option<PostOutcome>> {
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
        outbox_due: false,
        withdrawn: Vec::new(),
    }))
}

/// The row of the thread `m` opens: as the store answers it, and the values its INSERT needs.
pub(super) fn opening(m: &NewMessage) -> Result<(ThreadRecord, Opening)> {
    let state = ThreadState::start(m.kind, &m.author, m.addressing.connection.as_deref())?;
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
/// round), its approval, a reply's release of the thread's claim, and a close's withdrawal of the
/// approvals still pending in the thread. Says whether a delivery was enqueued (only then are the
/// outbox's workers woken after the commit), and which approvals were withdrawn.
pub(super) async fn after_rows(
    tx: &mut Conn,
    cache: &WebhookCache,
    m: &NewMessage,
    position: i64,
    event: Option<(i64, TaskState)>,
    thread_record: &ThreadRecord,
) -> Result<(bool, Vec<ApprovalRecord>)> {
    if m.opens_thread {
        crate::store::trace::opened(tx, m.thread.as_str()).await?;
    }
    if let Some(c) = m.command.as_ref().filter(|_| m.opens_thread) {
        commands::insert(tx, &m.thread, c).await?;
    }
    let mut enqueued = enqueue::on_message(tx, cache, m, position).await?;
    if let Some(a) = &m.approval {
        approvals::insert(tx, a, m).await?;
        enqueued |= enqueue::on_approval_pending(tx, cache, a, m).await?;
    }
    if let Some(hop) = &m.remote {
        remote_hops::on_post(tx, m, hop).await?;
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
            note: None,
        };
        enqueued |= enqueue::on_task_event(tx, cache, &event).await?;
    }

    if matches!(m.kind, Kind::Reply | Kind::Close) {
        query("DELETE FROM claims WHERE thread_id = $1")
            .bind(m.thread.as_str().to_owned())
            .execute(&mut *tx)
            .await?;
    }
    // The thread's row is locked (PostgreSQL) or the writer is alone (SQLite): a decision on
    // another replica either committed before (the approval is no longer pending) or waits and
    // then finds it withdrawn.
    let mut withdrawn = Vec::new();
    if m.kind == Kind::Close {
        withdrawn = approvals::withdraw_pending(tx, &m.thread, &m.author, m.created_at).await?;
        for a in &withdrawn {
            enqueued |= enqueue::on_approval_decided(tx, cache, a, m.created_at).await?;
        }
    }

    Ok((enqueued, withdrawn))
}

/// The answer of a post whose rows were written.
pub(super) fn posted(m: NewMessage, position: i64, thread: ThreadRecord) -> PostOutcome {
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
        written_by: m.written_by,
        result: m.result,
        connection: m.addressing.connection,
    };
    PostOutcome {
        message,
        thread,
        replayed: false,
        outbox_due: false,
        withdrawn: Vec::new(),
    }
}

/// Whether a post has rows its own statement ([`insert_message_rows`]) does not write: entries
/// for one connection each, or the connection that asked a new thread's question. (Who wrote
/// the message, its result, its connection and the reader its author's own entry skips are
/// written by that statement.)
fn has_more_rows(m: &NewMessage) -> bool {
    !m.addressing.narrow.is_empty() || (m.opens_thread && m.addressing.connection.is_some())
}

/// Writes what the post's own statement does not (see [`has_more_rows`]), in the same
/// transaction.
async fn write_extras(tx: &mut Conn, m: &NewMessage) -> Result<()> {
    // The entries for one connection each (SPEC §4b), in person order like the person-wide ones.
    let mut narrow = m.addressing.narrow.clone();
    narrow.sort();
    for (person, reader) in narrow {
        query("UPDATE persons SET inbox_seq = inbox_seq + 1 WHERE id = $1")
            .bind(person.as_str().to_owned())
            .execute(&mut *tx)
            .await?;
        let done = query(
            "INSERT INTO inbox_entries (person_id, seq, entry_kind, message_id, thread_id, channel, \
             notice, created_at, reader) SELECT id, inbox_seq, 'message', $2, $3, $4, NULL, $5, $6 \
             FROM persons WHERE id = $1",
        )
        .bind(person.as_str().to_owned())
        .bind(m.id.as_str().to_owned())
        .bind(m.thread.as_str().to_owned())
        .bind(m.channel.as_str().to_owned())
        .bind(m.created_at.0)
        .bind(reader)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            return Err(StoreError::NotFound("recipient"));
        }
    }
    // The connection that opened an open thread asked its question (the thread's INSERT is
    // batched; the column is the thread state's, see `ThreadState::asker_reader`).
    if m.opens_thread && m.addressing.connection.is_some() {
        query("UPDATE threads SET asker_reader = $1 WHERE id = $2 AND state = 'open'")
            .bind(m.addressing.connection.clone())
            .bind(m.thread.as_str().to_owned())
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}
