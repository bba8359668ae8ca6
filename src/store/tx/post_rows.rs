//! The rows of one post and the statements that write them on each backend: the message, its task
//! event, its inbox entries and, when it opens one, the thread's row, in one call (SQLite) or one
//! statement (PostgreSQL), with the measured reasons for their shapes. The post itself (its
//! thread's state, its replay, what it sets in motion) is `post.rs`'s. It calls no other block and
//! must not depend on any operation (`impl Store`).

use std::borrow::Cow;

use crate::domain::WrittenBy;
use crate::domain::{Impact, Outcome, PersonId, TaskState};
use crate::store::db::{Conn, Query, query};
use crate::store::error::{Result, StoreError, json_err};
use crate::store::model::input::NewMessage;

/// Every column of a message, those most posts leave NULL included (who wrote it when not its
/// agent, a command's result, the connection that wrote it): written here rather than by an
/// `UPDATE` after it, which on PostgreSQL was one more round trip of the writer per post of an
/// agent's connection.
const MESSAGE_INTO: &str = "INSERT INTO messages (id, thread_id, channel, position, kind, author, \
     agent, recipients, subject, body, attachments, impact, outcome, refers_to, idempotency_key, \
     request_hash, created_at, written_by, result, connection)";
const MESSAGE_VALUES: &str = "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, \
     $16, $17, $18, $19, $20";
const EVENT_INTO: &str =
    "INSERT INTO task_events (thread_id, seq, state, cause, message_id, created_at)";
/// $1 (message), $2 (thread), $3 (channel) and $17 (time) of the message serve the event too; its
/// seq and state are $21 and $22.
const EVENT_VALUES: &str = "$2, $21, $22, 'message', $1, $17";
/// The first recipient's number on SQLite, whose call binds the event's two values whenever it
/// binds recipients.
const SQLITE_FIRST_RECIPIENT: usize = 23;

/// An inbox entry's columns, and their values for recipient `id` (a person's row, with its
/// `inbox_seq` just moved) given the number of the reader its author's own entry is not for
/// ([`crate::store::model::input::Addressing::skip`]): set as the entry is written, not by an
/// `UPDATE` after it, which PostgreSQL, planning it on tables without statistics, ran on the
/// person's whole inbox (her key, `inbox_entries_pkey`) instead of the thread's entries.
fn entry_columns(skip: usize) -> (String, String) {
    (
        "(person_id, seq, entry_kind, message_id, thread_id, channel, notice, created_at, \
         skip_reader)"
            .to_owned(),
        format!(
            "id, inbox_seq, 'message', $1, $2, $3, NULL, $17, CASE WHEN id = $6 THEN ${skip} END"
        ),
    )
}

/// The values of a new thread's row that its first message does not carry.
pub(super) struct Opening {
    pub(super) subject: String,
    pub(super) state: &'static str,
    pub(super) asker: Option<String>,
    pub(super) outcome: Option<&'static str>,
    pub(super) task_state: Option<&'static str>,
    pub(super) context_id: Option<String>,
    pub(super) skill: Option<String>,
    pub(super) references: Option<String>,
    pub(super) event_seq: i64,
}

impl Opening {
    /// The thread's INSERT. Its own values are numbered from `$first` (bound by
    /// [`Opening::bind`]); the others are the message's (id $2, channel $3, kind $5, author $6,
    /// key $15, time $17).
    ///
    /// `guarded` (PostgreSQL): it inserts nothing when the author's idempotency key was used
    /// before, and the rows of its statement hang on it. Unguarded (SQLite): one row of values,
    /// and a used key shows as the message's unique index refusing the message; the caller then
    /// removes the thread's row ([`super::post`]). A guard would make it an `INSERT … SELECT`,
    /// which may write several rows: with the channel's foreign key, SQLite then gives it a
    /// statement journal, a copy of every page it changes (the thread's table, its key and its
    /// indexes). That was 11,700 of an intake's 421,000 instructions (`docs/performance.md`).
    fn insert_sql(first: usize, guarded: bool) -> String {
        let own: Vec<String> = (first..first + 9).map(|i| format!("${i}")).collect();
        let values = format!(
            "$2, $3, {}, $5, $6, {}, {}, {}, 1, $17, $17, {}, {}, {}, {}, {}",
            own[0], own[1], own[2], own[3], own[4], own[5], own[6], own[7], own[8],
        );
        let into = "INSERT INTO threads (id, channel, subject, opener_kind, opened_by, state, asker, \
             outcome, message_count, created_at, updated_at, task_state, context_id, skill, \
             reference_task_ids, task_event_seq)";
        if guarded {
            format!(
                "{into} SELECT {values} WHERE NOT EXISTS \
                 (SELECT 1 FROM messages WHERE author = $6 AND idempotency_key = $15)"
            )
        } else {
            format!("{into} VALUES ({values})")
        }
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
/// recipients (`$23`…, then the reader its author's entry skips) its counter moved and its inbox
/// entry. Up to [`SQLITE_SHAPES_MAX`]
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
        let first = SQLITE_FIRST_RECIPIENT;
        let skip = first + n;
        let mut sql = String::new();
        if opens {
            // Its own values are numbered after the recipients' and the skipped reader.
            sql.push_str(&Opening::insert_sql(skip + 1, false));
            sql.push_str("; ");
        }
        sql.push_str(&format!("{MESSAGE_INTO} VALUES ({MESSAGE_VALUES})"));
        if event {
            sql.push_str(&format!("; {EVENT_INTO} VALUES ({EVENT_VALUES})"));
        }
        // `OR FAIL`: an INSERT … SELECT may write several rows, so SQLite gives it a statement
        // journal of its own (each page it changes copied first, to undo the statement alone)
        // whenever a constraint may abort it; with FAIL it keeps what it wrote, which costs
        // nothing here: the writer undoes the whole failed post to its savepoint. Sparing it took
        // 2.4% off an intake's instructions (docs/performance-round-trip.md, third round). (A
        // foreign key makes one whatever the clause: `inbox_entries` has none.)
        let (columns, values) = entry_columns(skip);
        let entries = |ids: &str| {
            format!(
                "; UPDATE persons SET inbox_seq = inbox_seq + 1 WHERE id {ids}; \
                 INSERT OR FAIL INTO inbox_entries {columns} SELECT {values} FROM persons WHERE id {ids}"
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
pub(super) async fn insert_message_rows(
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
    let result = m
        .result
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(json_err)?;
    let written_by = (m.written_by != WrittenBy::Agent).then(|| m.written_by.as_str());
    let skip = m.addressing.skip.clone();
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
            .bind(m.created_at.0)
            .bind(written_by)
            .bind(result.clone())
            .bind(m.addressing.connection.clone());
        if with_event || with_recipients {
            let (seq, state) = event.unwrap_or((0, TaskState::Submitted));
            q = q.bind(seq).bind(state.as_str());
        }
        if with_recipients {
            for p in recipients {
                q = q.bind(p.as_str().to_owned());
            }
            q = q.bind(skip.clone());
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
    let next = if event.is_some() { 23 } else { 21 };
    // The recipients, then (with any) the reader the author's entry skips, then the new thread's
    // own values.
    let opening_first = next + n + usize::from(n > 0);
    if opening.is_some() {
        sql.push_str(&format!(
            "th AS ({} RETURNING id), msg AS ({MESSAGE_INTO} SELECT {MESSAGE_VALUES} FROM th RETURNING id)",
            Opening::insert_sql(opening_first, true),
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
        let (columns, values) = entry_columns(next + n);
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
             INSERT INTO inbox_entries {columns} SELECT {values} FROM upd"
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
    if n > 0 {
        q = q.bind(skip);
    }
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
