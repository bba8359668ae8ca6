//! A person's sessions with her own agents (SPEC §4b): opening one (and her personal channel the
//! first time), its join code (stored as a hash, used at most once by one conditional write),
//! the connections bound to it, ending it, and its commands' pickup deadlines (the sweep
//! withdraws those nobody claimed in time). An operation file (`impl Store` only): no building
//! block (`tx/`) and no other operation file may depend on it.

use super::Store;
use super::db::query;
use super::error::{Result, StoreError};
use super::model::records::directory::ChannelRecord;
use super::model::records::personal::{
    COMMAND_COLUMNS, CommandRecord, JoinAttempt, NewPersonalSession, PersonalSessionRecord,
    SESSION_COLUMNS, command, session,
};
use super::model::records::threads::{THREAD_COLUMNS, ThreadRecord, thread};
use super::tx::commands;
use super::tx::members::upsert_member;
use crate::domain::personal::SessionId;
use crate::domain::{PersonId, ThreadId, Timestamp};

/// Most sessions one listing returns (newest first).
pub const SESSIONS_LISTED: i64 = 100;

impl Store {
    /// Opens a session, making `channel` (her personal channel, with her as its only member)
    /// first if it does not exist yet.
    pub async fn open_personal_session(
        &self,
        s: NewPersonalSession,
        channel: ChannelRecord,
    ) -> Result<()> {
        self.write_directory(move |tx| {
            Box::pin(async move {
                let policy = serde_json::to_string(&channel.policy)
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                query(
                    "INSERT INTO channels (name, description, policy, created_at) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (name) DO NOTHING",
                )
                .bind(channel.name.as_str().to_owned())
                .bind(channel.description.clone())
                .bind(policy)
                .bind(channel.created_at.0)
                .execute(&mut *tx)
                .await?;
                for m in &channel.members {
                    upsert_member(tx, &channel.name, m).await?;
                }
                query(
                    "INSERT INTO personal_sessions (id, person_id, connection, title, created_at) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(s.id.as_str().to_owned())
                .bind(s.person.as_str().to_owned())
                .bind(s.connection)
                .bind(s.title)
                .bind(s.created_at.0)
                .execute(&mut *tx)
                .await?;
                Ok(())
            })
        })
        .await
    }

    /// How many sessions of `person` have not ended.
    pub async fn open_session_count(&self, person: &PersonId) -> Result<i64> {
        let row = query(
            "SELECT COUNT(*) AS n FROM personal_sessions WHERE person_id = $1 AND ended_at IS NULL",
        )
        .bind(person.as_str().to_owned())
        .fetch_one(&self.pool)
        .await?;
        row.try_get("n")
    }

    /// The sessions of `person`, newest first (at most [`SESSIONS_LISTED`]), without their joins.
    pub async fn personal_sessions(&self, person: &PersonId) -> Result<Vec<PersonalSessionRecord>> {
        let rows = query(format!(
            "SELECT {SESSION_COLUMNS} FROM personal_sessions WHERE person_id = $1 \
             ORDER BY created_at DESC, id DESC LIMIT $2"
        ))
        .bind(person.as_str().to_owned())
        .bind(SESSIONS_LISTED)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(session).collect()
    }

    /// One session with the connections that joined it.
    pub async fn personal_session(&self, id: &SessionId) -> Result<Option<PersonalSessionRecord>> {
        let row = query(format!(
            "SELECT {SESSION_COLUMNS} FROM personal_sessions WHERE id = $1"
        ))
        .bind(id.as_str().to_owned())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let mut s = session(&row)?;
        let joins = query(
            "SELECT token_id, joined_at FROM session_joins WHERE session_id = $1 ORDER BY joined_at, token_id",
        )
        .bind(id.as_str().to_owned())
        .fetch_all(&self.pool)
        .await?;
        for j in &joins {
            s.joined
                .push((j.try_get("token_id")?, Timestamp(j.try_get("joined_at")?)));
        }
        Ok(Some(s))
    }

    /// Replaces the session's join code (its hash) with a new one valid until `expires_at`; the
    /// old one is dead. False when the session is not `person`'s or has ended.
    pub async fn set_join_code(
        &self,
        id: SessionId,
        person: PersonId,
        code_hash: String,
        expires_at: Timestamp,
    ) -> Result<bool> {
        self.write(move |tx| {
            Box::pin(async move {
                let done = query(
                    "UPDATE personal_sessions SET code_hash = $3, code_expires_at = $4 \
                     WHERE id = $1 AND person_id = $2 AND ended_at IS NULL",
                )
                .bind(id.as_str().to_owned())
                .bind(person.as_str().to_owned())
                .bind(code_hash)
                .bind(expires_at.0)
                .execute(&mut *tx)
                .await?;
                Ok(done.rows_affected() == 1)
            })
        })
        .await
    }

    /// Uses the join code whose hash is `code_hash`, for connection `token` of `person`, at
    /// `now`: one conditional write, so a code is used at most once on any replica.
    pub async fn join_personal_session(
        &self,
        code_hash: String,
        person: PersonId,
        token: String,
        now: Timestamp,
    ) -> Result<JoinAttempt> {
        let lock = self.for_update();
        self.write(move |tx| {
            Box::pin(async move {
                let row = query(format!(
                    "SELECT {SESSION_COLUMNS} FROM personal_sessions WHERE code_hash = $1 \
                     AND person_id = $2 AND ended_at IS NULL AND code_expires_at > $3{lock}"
                ))
                .bind(code_hash)
                .bind(person.as_str().to_owned())
                .bind(now.0)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(row) = row else {
                    return Ok(JoinAttempt::Unknown);
                };
                let mut s = session(&row)?;
                if s.connection.as_ref().is_some_and(|c| c != &token) {
                    return Ok(JoinAttempt::OtherConnection(s));
                }
                query(
                    "UPDATE personal_sessions SET code_hash = NULL, code_expires_at = NULL WHERE id = $1",
                )
                .bind(s.id.as_str().to_owned())
                .execute(&mut *tx)
                .await?;
                query(
                    "INSERT INTO session_joins (session_id, token_id, joined_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (session_id, token_id) DO UPDATE SET joined_at = excluded.joined_at",
                )
                .bind(s.id.as_str().to_owned())
                .bind(token.clone())
                .bind(now.0)
                .execute(&mut *tx)
                .await?;
                s.code_expires_at = None;
                s.joined.push((token, now));
                Ok(JoinAttempt::Joined(s))
            })
        })
        .await
    }

    /// Ends `person`'s session `id` at `now`: its code dies, and its commands nobody claimed are
    /// withdrawn. The threads withdrawn, or `None` when there was no such live session.
    pub async fn end_personal_session(
        &self,
        id: SessionId,
        person: PersonId,
        now: Timestamp,
    ) -> Result<Option<Vec<ThreadId>>> {
        let lock = self.for_update();
        self.write(move |tx| {
            Box::pin(async move {
                let done = query(
                    "UPDATE personal_sessions SET ended_at = $3, code_hash = NULL, code_expires_at = NULL \
                     WHERE id = $1 AND person_id = $2 AND ended_at IS NULL",
                )
                .bind(id.as_str().to_owned())
                .bind(person.as_str().to_owned())
                .bind(now.0)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() != 1 {
                    return Ok(None);
                }
                let rows = query(
                    "SELECT thread_id FROM session_commands WHERE session_id = $1 \
                     AND claimed_at IS NULL AND expired_at IS NULL ORDER BY thread_id",
                )
                .bind(id.as_str().to_owned())
                .fetch_all(&mut *tx)
                .await?;
                let mut withdrawn = Vec::new();
                for r in &rows {
                    let t = ThreadId::parse(r.try_get::<String, _>("thread_id")?)?;
                    if commands::withdraw(tx, &t, now, false, lock).await? {
                        withdrawn.push(t);
                    }
                }
                Ok(Some(withdrawn))
            })
        })
        .await
    }

    /// The commands of a session with their threads, oldest first.
    pub async fn session_commands(
        &self,
        id: &SessionId,
    ) -> Result<Vec<(CommandRecord, ThreadRecord)>> {
        let thread_columns = THREAD_COLUMNS
            .split(", ")
            .map(|c| format!("t.{}", c.trim()))
            .collect::<Vec<_>>()
            .join(", ");
        let rows = query(format!(
            "SELECT c.thread_id, c.session_id, c.pickup_by, c.claimed_at, c.claimed_by, c.expired_at, {thread_columns} \
             FROM session_commands c JOIN threads t ON t.id = c.thread_id \
             WHERE c.session_id = $1 ORDER BY t.created_at, t.id"
        ))
        .bind(id.as_str().to_owned())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok((command(r)?, thread(r)?))).collect()
    }

    /// The command `thread` is, if it is one.
    pub async fn command(&self, thread: &ThreadId) -> Result<Option<CommandRecord>> {
        let row = query(format!(
            "SELECT {COMMAND_COLUMNS} FROM session_commands WHERE thread_id = $1"
        ))
        .bind(thread.as_str().to_owned())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(command).transpose()
    }

    /// Commands nobody claimed whose deadline passed by `now`, oldest deadline first, with their
    /// persons.
    pub async fn due_commands(
        &self,
        now: Timestamp,
        limit: i64,
    ) -> Result<Vec<(ThreadId, PersonId)>> {
        let rows = query(
            "SELECT c.thread_id, s.person_id FROM session_commands c \
             JOIN personal_sessions s ON s.id = c.session_id \
             WHERE c.claimed_at IS NULL AND c.expired_at IS NULL AND c.pickup_by <= $1 \
             ORDER BY c.pickup_by LIMIT $2",
        )
        .bind(now.0)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    ThreadId::parse(r.try_get::<String, _>("thread_id")?)?,
                    PersonId::parse(r.try_get::<String, _>("person_id")?)?,
                ))
            })
            .collect()
    }

    /// Withdraws `thread`'s command if nobody claimed it and its deadline passed by `now`. True
    /// when this call withdrew it.
    pub async fn expire_command(&self, thread: ThreadId, now: Timestamp) -> Result<bool> {
        let lock = self.for_update();
        self.write(move |tx| {
            Box::pin(async move { commands::withdraw(tx, &thread, now, true, lock).await })
        })
        .await
    }
}
