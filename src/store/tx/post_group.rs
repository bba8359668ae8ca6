//! The posts that each open a thread, written together in one statement on PostgreSQL
//! ([`post_group`]), with the measurements that made it worth it. The writer calls it for a run of
//! queued posts ([`QueuedPost::groupable`]) and falls back to one post at a time. It calls `post`
//! and must not depend on any operation (`impl Store`).

use super::post::{Posted, QueuedPost, after_rows, opening, posted, replayed};
use crate::domain::{AgentIdentity, Impact, MessageId, Outcome, PersonId};
use crate::store::db::{BoxFut, Conn, query};
use crate::store::error::{Result, StoreError, json_err};

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
pub(in crate::store) fn post_group<'c>(
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
            let rows = after_rows(tx, &post.cache, m, 1, event, &record);
            // An opening post withdraws nothing (it is no close).
            let (enqueued, _) = crate::store::trace::within(post.trace.clone(), rows).await?;
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
