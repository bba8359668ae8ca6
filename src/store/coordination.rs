//! Claims on threads, presence and advisory leases: the coordination between agent sessions.
//! Expiry is always "expires_at <= now" at read time, so nothing needs a cleanup job to be correct.
//! An operation file (`impl Store` only): no building block (`tx/`) and no other operation file
//! may depend on it.

use super::db::{Conn, query};
use super::error::Result;
use super::model::input::NewProgress;
use super::model::records::coordination::{
    CLAIM_COLUMNS, ClaimAttempt, ClaimRecord, LeaseAttempt, LeaseRecord, PROGRESS_COLUMNS,
    PresenceRecord, ProgressAdded, ProgressRecord, QueuePlace, claim, lease, presence, progress,
};
use super::model::records::inbox::EntryContent;
use super::tx::claim_call::{self, ClaimInput};
use super::tx::enqueue::WebhookCache;
use super::tx::inbox::append_entry;
use super::tx::{approvals, commands, fence, task_events};
use super::{Backend, Store};
use crate::domain::{
    AgentIdentity, ApprovalState, PersonId, TaskEvent, TaskState, ThreadId, Timestamp,
};

/// People who share at least one channel with `$1`, and `$1` itself.
const FLEET_SCOPE: &str = "(SELECT m2.person_id FROM channel_members m1 JOIN channel_members m2 \
     ON m1.channel = m2.channel WHERE m1.person_id = $1 UNION SELECT $1)";

impl Store {
    /// Claims `thread` for `session` of `person` until `expires_at`, atomically. The same session
    /// claiming again renews its lease and keeps its fencing token; a new holder (no claim, or an
    /// expired one of another session taken over) gets the thread's next token. With `fence`, the
    /// caller's token is checked first, in the same transaction (`tx::fence::check`): a stale one
    /// refuses the claim and nothing is written. The thread's newest approval, if any, gates the
    /// claim in the same transaction: pending refuses it, approved is consumed by it (SPEC §5:
    /// single use), consumed lets the work go on (a renewal, or another session of the recipients
    /// after the first one's lease expired).
    #[allow(clippy::too_many_arguments)]
    pub async fn claim(
        &self,
        thread: ThreadId,
        person: PersonId,
        connection: Option<String>,
        session: AgentIdentity,
        now: Timestamp,
        expires_at: Timestamp,
        fence: Option<i64>,
    ) -> Result<ClaimAttempt> {
        let lock = self.for_update();
        let one_call = self.backend() == Backend::Postgres;
        let cache = self.webhooks.clone();
        let input = ClaimInput {
            thread,
            person,
            connection,
            session,
            now,
            expires_at,
            fence,
        };
        self.write(move |tx| {
            Box::pin(async move {
                // PostgreSQL: one round trip for the common claim; the steps below only for what
                // the function leaves to them (it wrote nothing then).
                if one_call && let Some(attempt) = claim_call::run(tx, &cache, &input).await? {
                    return Ok(attempt);
                }
                claim_steps(tx, &cache, lock, input).await
            })
        })
        .await
    }

    /// Releases a claim held by this session; false when it held none.
    pub async fn release_claim(
        &self,
        thread: ThreadId,
        person: PersonId,
        session: AgentIdentity,
    ) -> Result<bool> {
        self.write(move |tx| {
            Box::pin(async move {
                let done = query(
                    "DELETE FROM claims WHERE thread_id = $1 AND person_id = $2 AND session = $3",
                )
                .bind(thread.as_str().to_owned())
                .bind(person.as_str().to_owned())
                .bind(session.as_str().to_owned())
                .execute(tx)
                .await?;
                Ok(done.rows_affected() > 0)
            })
        })
        .await
    }

    /// The live claim on a thread, if any.
    pub async fn live_claim(
        &self,
        thread: &ThreadId,
        now: Timestamp,
    ) -> Result<Option<ClaimRecord>> {
        let row = query(format!(
            "SELECT {CLAIM_COLUMNS} FROM claims WHERE thread_id = $1 AND expires_at > $2"
        ))
        .bind(thread.as_str().to_owned())
        .bind(now.0)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(claim).transpose()
    }

    /// Open request and handoff threads whose opener was addressed to `reader` of `person`
    /// (SPEC §4b: not to the connection that wrote it) with no live claim, oldest first.
    ///
    /// The opener's entry is looked up per open thread by a scalar subquery, by the thread first
    /// (`messages (thread_id, position)`, then `inbox_entries_thread`), never as a join: written
    /// as `EXISTS (… JOIN …)`, PostgreSQL flattened it into a semi-join whose plan, made while the
    /// tables were empty (a new database, or autovacuum off) and kept by the connection, read
    /// every entry the person ever received for each open thread and scanned the messages for
    /// each: a claim took seconds after a few thousand tasks, and the statement deadline cut it
    /// (issue 49's PostgreSQL round trip at 64 in flight). A subquery with `LIMIT` is not
    /// flattened: its only plan starts from the thread.
    ///
    /// One page of that queue: at most `limit` threads after `after` (the [`QueuePlace`] of the
    /// last thread of the page before; `None`: from the oldest), so a caller can read on past
    /// threads it cannot take (awaiting approval, claimed since) instead of stopping at a first
    /// page. A thread with a live claim is passed over before its opener's entry is looked up:
    /// the claimed ones are the oldest while claimers work, and each lookup costs two index
    /// searches (SQLite, 64 delegations in flight: 1,878 → 1,398 VM steps per 20 threads read).
    pub async fn claimable_threads(
        &self,
        person: &PersonId,
        reader: &str,
        now: Timestamp,
        after: Option<&QueuePlace>,
        limit: i64,
    ) -> Result<Vec<QueuePlace>> {
        // Two static texts (from the start, or after a place): their plans are kept by address.
        macro_rules! queue_page {
            ($after:literal) => {
                concat!(
                    "SELECT t.id, t.created_at FROM threads t WHERE t.state = 'open' ",
                    $after,
                    "AND (t.opener_kind IN ('request', 'handoff') OR t.task_state IS NOT NULL) \
                     AND NOT EXISTS (SELECT 1 FROM claims c WHERE c.thread_id = t.id AND c.expires_at > $2) \
                     AND (SELECT 1 FROM messages m JOIN inbox_entries e ON e.thread_id = m.thread_id AND e.message_id = m.id \
                     WHERE m.thread_id = t.id AND m.position = 1 AND e.person_id = $1 \
                     AND (e.reader IS NULL OR e.reader = $4) AND (e.skip_reader IS NULL OR e.skip_reader <> $4) LIMIT 1) = 1 \
                     ORDER BY t.created_at, t.id LIMIT $3"
                )
            };
        }
        let sql = if after.is_some() {
            queue_page!("AND (t.created_at, t.id) > ($5, $6) ")
        } else {
            queue_page!("")
        };
        let mut q = query(sql)
            .bind(person.as_str().to_owned())
            .bind(now.0)
            .bind(limit)
            .bind(reader.to_owned());
        if let Some(place) = after {
            q = q.bind(place.created_at).bind(place.id.as_str().to_owned());
        }
        let rows = q.fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| {
                Ok(QueuePlace {
                    id: ThreadId::parse(r.try_get::<String, _>("id")?)?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect()
    }

    pub async fn set_presence(&self, p: PresenceRecord) -> Result<()> {
        self.write(move |tx| {
            Box::pin(async move {
                query(
                    "INSERT INTO presence (person_id, agent, transition, task, updated_at, expires_at) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (person_id, agent) DO UPDATE SET \
                     transition = excluded.transition, task = excluded.task, \
                     updated_at = excluded.updated_at, expires_at = excluded.expires_at",
                )
                .bind(p.person.as_str().to_owned())
                .bind(p.agent.as_str().to_owned())
                .bind(p.transition.as_str())
                .bind(p.task)
                .bind(p.updated_at.0)
                .bind(p.expires_at.0)
                .execute(tx)
                .await?;
                Ok(())
            })
        })
        .await
    }

    /// Live presence of everyone who shares a channel with `person` (and `person`'s own).
    pub async fn fleet(&self, person: &PersonId, now: Timestamp) -> Result<Vec<PresenceRecord>> {
        let sql = format!(
            "SELECT person_id, agent, transition, task, updated_at, expires_at FROM presence \
             WHERE expires_at > $2 AND person_id IN {FLEET_SCOPE} ORDER BY person_id, agent"
        );
        let rows = query(sql)
            .bind(person.as_str().to_owned())
            .bind(now.0)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(presence).collect()
    }

    /// Acquires (or renews) a lease. With `force`, incompatible holders are removed and each is told
    /// through an inbox notice in the same transaction.
    pub async fn acquire_lease(
        &self,
        want: LeaseRecord,
        force: bool,
        now: Timestamp,
    ) -> Result<LeaseAttempt> {
        let backend = self.backend();
        self.write(move |tx| Box::pin(acquire_in(tx, backend, want, force, now)))
            .await
    }

    /// Releases this holder's lease; false when it held none (or it had expired).
    pub async fn release_lease(
        &self,
        resource: String,
        person: PersonId,
        agent: AgentIdentity,
        now: Timestamp,
    ) -> Result<bool> {
        self.write(move |tx| {
            Box::pin(async move {
                let done = query(
                    "DELETE FROM leases WHERE resource = $1 AND person_id = $2 AND agent = $3 AND expires_at > $4",
                )
                .bind(resource)
                .bind(person.as_str().to_owned())
                .bind(agent.as_str().to_owned())
                .bind(now.0)
                .execute(tx)
                .await?;
                Ok(done.rows_affected() > 0)
            })
        })
        .await
    }

    /// Live leases held by people who share a channel with `person` (and `person`'s own), by resource.
    pub async fn leases(&self, person: &PersonId, now: Timestamp) -> Result<Vec<LeaseRecord>> {
        let sql = format!(
            "SELECT resource, person_id, agent, mode, acquired_at, expires_at FROM leases \
             WHERE expires_at > $2 AND person_id IN {FLEET_SCOPE} ORDER BY resource, acquired_at"
        );
        let rows = query(sql)
            .bind(person.as_str().to_owned())
            .bind(now.0)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(lease).collect()
    }
}

/// The claim one statement at a time (SQLite; on PostgreSQL what `liaison_claim` leaves to it):
/// see [`Store::claim`].
async fn claim_steps(
    tx: &mut Conn,
    cache: &WebhookCache,
    lock: &str,
    input: ClaimInput,
) -> Result<ClaimAttempt> {
    let ClaimInput {
        thread,
        person,
        connection,
        session,
        now,
        expires_at,
        fence,
    } = input;
    let sql = format!("SELECT state, task_state FROM threads WHERE id = $1{lock}");
    let Some(row) = query(sql)
        .bind(thread.as_str().to_owned())
        .fetch_optional(&mut *tx)
        .await?
    else {
        return Ok(ClaimAttempt::Closed);
    };
    if row.try_get::<String, _>("state")? == "closed" {
        return Ok(ClaimAttempt::Closed);
    }
    let task_state: Option<TaskState> = row
        .try_get::<Option<String>, _>("task_state")?
        .map(|s| s.parse())
        .transpose()?;
    // A command of a personal session is claimed before its deadline or never.
    if commands::pickup(tx, &thread, now).await? == commands::Pickup::Expired {
        return Ok(ClaimAttempt::Expired);
    }
    if let Some(token) = fence {
        fence::check(tx, &thread, &person, &session, token, now).await?;
    }
    let gate = approvals::latest_in(tx, &thread, lock).await?;
    if let Some(a) = &gate
        && !a.state.allows_work()
    {
        return Ok(ClaimAttempt::AwaitingApproval(Box::new(a.clone())));
    }
    // A task the claim cannot move (one that has ended) is refused before anything is written,
    // by the task's own rule (`task_events::on_claim` applies it again as it logs the event):
    // claims of `next` that lost a race to an answer end here, not in a rollback of the claim
    // they wrote.
    if let Some(state) = task_state {
        state.apply(TaskEvent::Claimed)?;
    }
    // The thread's row is locked (PostgreSQL) or the writer is alone (SQLite): the
    // claim read here is the one the write below replaces.
    let current = fence::current_claim(tx, &thread).await?;
    let renewal = current
        .as_ref()
        .is_some_and(|c| c.person == person && c.session == session && c.connection == connection);
    if let Some(c) = current.as_ref().filter(|c| !renewal && c.expires_at > now) {
        return Ok(ClaimAttempt::Held(c.clone()));
    }
    let (claimed_at, fencing_token) = match &current {
        Some(c) if renewal => {
            let live = c.expires_at > now;
            (if live { c.claimed_at } else { now }, c.fencing_token)
        }
        _ => {
            let token: i64 = query(
                "UPDATE threads SET claim_fence = claim_fence + 1 WHERE id = $1 \
                     RETURNING claim_fence",
            )
            .bind(thread.as_str().to_owned())
            .fetch_one(&mut *tx)
            .await?
            .try_get("claim_fence")?;
            (now, token)
        }
    };
    query(
        "INSERT INTO claims (thread_id, person_id, session, claimed_at, expires_at, fencing_token, \
             connection) VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (thread_id) DO UPDATE SET person_id = excluded.person_id, \
             session = excluded.session, claimed_at = excluded.claimed_at, \
             expires_at = excluded.expires_at, fencing_token = excluded.fencing_token, \
             connection = excluded.connection",
    )
    .bind(thread.as_str().to_owned())
    .bind(person.as_str().to_owned())
    .bind(session.as_str().to_owned())
    .bind(claimed_at.0)
    .bind(expires_at.0)
    .bind(fencing_token)
    .bind(connection.clone())
    .execute(&mut *tx)
    .await?;
    if let Some(a) = gate.filter(|a| a.state == ApprovalState::Approved) {
        approvals::consume(tx, &a, &person, &session, now).await?;
    }
    commands::claimed(tx, &thread, now, connection.as_deref()).await?;
    let outbox_due = task_events::on_claim(tx, cache, &thread, now).await?;
    Ok(ClaimAttempt::Claimed {
        claim: ClaimRecord {
            thread,
            person,
            session,
            claimed_at,
            expires_at,
            fencing_token,
            connection,
        },
        outbox_due,
    })
}

async fn acquire_in(
    tx: &mut Conn,
    backend: Backend,
    want: LeaseRecord,
    force: bool,
    now: Timestamp,
) -> Result<LeaseAttempt> {
    if backend == Backend::Postgres {
        // Serialises acquirers of one resource, including when no row exists yet.
        query("SELECT pg_advisory_xact_lock(hashtext($1))::text AS locked")
            .bind(want.resource.clone())
            .fetch_one(&mut *tx)
            .await?;
    }
    query("DELETE FROM leases WHERE resource = $1 AND expires_at <= $2")
        .bind(want.resource.clone())
        .bind(now.0)
        .execute(&mut *tx)
        .await?;
    let rows = query(
        "SELECT resource, person_id, agent, mode, acquired_at, expires_at FROM leases WHERE resource = $1",
    )
    .bind(want.resource.clone())
    .fetch_all(&mut *tx)
    .await?;
    let holders = rows.iter().map(lease).collect::<Result<Vec<_>>>()?;
    let mine = |l: &LeaseRecord| l.person == want.person && l.agent == want.agent;
    let conflicts: Vec<LeaseRecord> = holders
        .iter()
        .filter(|l| !mine(l) && !want.mode.compatible_with(l.mode))
        .cloned()
        .collect();
    if !conflicts.is_empty() && !force {
        return Ok(LeaseAttempt::Held(conflicts));
    }
    for old in &conflicts {
        query("DELETE FROM leases WHERE resource = $1 AND person_id = $2 AND agent = $3")
            .bind(old.resource.clone())
            .bind(old.person.as_str().to_owned())
            .bind(old.agent.as_str().to_owned())
            .execute(&mut *tx)
            .await?;
        let notice = serde_json::json!({
            "type": "lease_taken",
            "resource": old.resource,
            "your_agent": old.agent,
            "taken_by": want.person,
            "taken_by_agent": want.agent,
            "mode": want.mode,
        });
        append_entry(tx, &old.person, &EntryContent::Notice { notice }, now).await?;
    }
    let acquired_at = holders
        .iter()
        .find(|l| mine(l))
        .map_or(now, |l| l.acquired_at);
    query(
        "INSERT INTO leases (resource, person_id, agent, mode, acquired_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (resource, person_id, agent) DO UPDATE SET mode = excluded.mode, expires_at = excluded.expires_at",
    )
    .bind(want.resource.clone())
    .bind(want.person.as_str().to_owned())
    .bind(want.agent.as_str().to_owned())
    .bind(want.mode.as_str())
    .bind(acquired_at.0)
    .bind(want.expires_at.0)
    .execute(&mut *tx)
    .await?;
    let lease = LeaseRecord {
        acquired_at,
        ..want
    };
    Ok(LeaseAttempt::Acquired {
        lease,
        displaced: conflicts,
    })
}

impl Store {
    /// Adds a progress note to the thread `n.session` of `n.person` holds a live claim on, within
    /// the bounds given (see [`ProgressAdded`]); for a working task, also an event of its log.
    pub async fn add_progress(&self, n: NewProgress) -> Result<ProgressAdded> {
        let lock = self.for_update();
        let cache = self.webhooks.clone();
        self.write(move |tx| {
            Box::pin(async move {
                let thread = n.thread.as_str().to_owned();
                // The thread's row first (PostgreSQL; SQLite's writer is alone): another replica
                // adding a note (or logging a task event) waits here, so the note's number and
                // the task event's, read below, are the last ones committed.
                let sql = format!("SELECT 1 AS found FROM threads WHERE id = $1{lock}");
                if query(sql)
                    .bind(thread.clone())
                    .fetch_optional(&mut *tx)
                    .await?
                    .is_none()
                {
                    return Ok(ProgressAdded::NoClaim);
                }
                let held = query(
                    "SELECT 1 AS held FROM claims WHERE thread_id = $1 AND person_id = $2 \
                     AND session = $3 AND expires_at > $4",
                )
                .bind(thread.clone())
                .bind(n.person.as_str().to_owned())
                .bind(n.session.as_str().to_owned())
                .bind(n.now.0)
                .fetch_optional(&mut *tx)
                .await?;
                if held.is_none() {
                    return Ok(ProgressAdded::NoClaim);
                }
                let sql = format!(
                    "SELECT {PROGRESS_COLUMNS} FROM progress_notes WHERE thread_id = $1 ORDER BY seq DESC LIMIT 1"
                );
                let last = query(sql)
                    .bind(thread.clone())
                    .fetch_optional(&mut *tx)
                    .await?
                    .map(|r| progress(&r))
                    .transpose()?;
                if let Some(last) = &last
                    && last.tool == n.tool
                    && last.target == n.target
                    && last.outcome == n.outcome
                    && last.session == n.session
                    && n.now.0 - last.updated_at.0 < n.coalesce_ms
                {
                    query(
                        "UPDATE progress_notes SET repeats = repeats + 1, updated_at = $1 \
                         WHERE thread_id = $2 AND seq = $3",
                    )
                    .bind(n.now.0)
                    .bind(thread.clone())
                    .bind(last.seq)
                    .execute(&mut *tx)
                    .await?;
                    let mut folded = last.clone();
                    folded.repeats += 1;
                    folded.updated_at = n.now;
                    return Ok(ProgressAdded::Coalesced(folded));
                }
                let seq = last.as_ref().map_or(1, |l| l.seq + 1);
                if seq > n.per_thread {
                    return Ok(ProgressAdded::Full);
                }
                let recent: i64 = query(
                    "SELECT count(*) AS n FROM progress_notes WHERE thread_id = $1 AND created_at > $2",
                )
                .bind(thread.clone())
                .bind(n.now.0 - 60_000)
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
                if recent >= n.per_minute {
                    return Ok(ProgressAdded::RateLimited);
                }
                let note = ProgressRecord {
                    seq,
                    person: n.person,
                    session: n.session,
                    tool: n.tool,
                    target: n.target,
                    outcome: n.outcome.to_owned(),
                    repeats: 1,
                    created_at: n.now,
                    updated_at: n.now,
                };
                query(
                    "INSERT INTO progress_notes (thread_id, seq, person_id, session, tool, target, \
                     outcome, repeats, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $8)",
                )
                .bind(thread)
                .bind(seq)
                .bind(note.person.as_str().to_owned())
                .bind(note.session.as_str().to_owned())
                .bind(note.tool.clone())
                .bind(note.target.clone())
                .bind(note.outcome.clone())
                .bind(n.now.0)
                .execute(&mut *tx)
                .await?;
                let outbox_due =
                    task_events::on_progress(tx, &cache, &n.thread, n.now, &note.text()).await?;
                Ok(ProgressAdded::Added { note, outbox_due })
            })
        })
        .await
    }

    /// The newest `limit` progress notes of a thread, oldest first.
    pub async fn progress_notes(
        &self,
        thread: &ThreadId,
        limit: i64,
    ) -> Result<Vec<ProgressRecord>> {
        let sql = format!(
            "SELECT {PROGRESS_COLUMNS} FROM progress_notes WHERE thread_id = $1 ORDER BY seq DESC LIMIT $2"
        );
        let rows = query(sql)
            .bind(thread.as_str().to_owned())
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        let mut notes = rows.iter().map(progress).collect::<Result<Vec<_>>>()?;
        notes.reverse();
        Ok(notes)
    }

    /// The live claims `person` holds, newest first.
    pub async fn claims_of(&self, person: &PersonId, now: Timestamp) -> Result<Vec<ClaimRecord>> {
        let rows = query(format!(
            "SELECT {CLAIM_COLUMNS} FROM claims \
             WHERE person_id = $1 AND expires_at > $2 ORDER BY claimed_at DESC, thread_id"
        ))
        .bind(person.as_str().to_owned())
        .bind(now.0)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(claim).collect()
    }
}
