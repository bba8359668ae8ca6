//! The web console's credentials: single-use login links, single-use approval links, and console
//! sessions. Only SHA-256 hashes of their secrets are stored. A link is used at most once, and only
//! before its expiry, by one conditional `UPDATE … RETURNING`, so two concurrent uses (on any
//! replica) cannot both succeed. Also the one read the console needs that no other front does:
//! the threads of a channel. An operation file (`impl Store` only): no building block (`tx/`) and
//! no other operation file may depend on it.

use super::Store;
use super::db::query;
use super::error::Result;
use super::model::input::NewLink;
use super::model::records::links::{
    LinkKind, LinkRecord, SESSION_COLUMNS, SessionRecord, link, session,
};
use super::model::records::threads::{THREAD_COLUMNS, ThreadRecord, thread};
use super::tx::audit::append_change;
use crate::domain::{ChannelName, PersonId, Timestamp};

impl Store {
    pub async fn insert_link(&self, l: NewLink) -> Result<()> {
        self.write(move |tx| {
            Box::pin(async move {
                match l.kind {
                    LinkKind::Login => {
                        query(
                            "INSERT INTO login_links (id, secret_hash, person, created_by, created_at, \
                             expires_at, admin) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                        )
                        .bind(l.id)
                        .bind(l.secret_hash)
                        .bind(l.person.as_str().to_owned())
                        .bind(l.created_by.as_str().to_owned())
                        .bind(l.created_at.0)
                        .bind(l.expires_at.0)
                        .bind(i64::from(l.admin))
                        .execute(&mut *tx)
                        .await?;
                    }
                    LinkKind::Approval => {
                        query(
                            "INSERT INTO approval_links (id, secret_hash, person, approval_id, created_by, \
                             created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                        )
                        .bind(l.id)
                        .bind(l.secret_hash)
                        .bind(l.person.as_str().to_owned())
                        .bind(l.approval.map(|a| a.as_str().to_owned()))
                        .bind(l.created_by.as_str().to_owned())
                        .bind(l.created_at.0)
                        .bind(l.expires_at.0)
                        .execute(&mut *tx)
                        .await?;
                    }
                    LinkKind::Confirmation => {
                        query(
                            "INSERT INTO confirmation_links (id, secret_hash, person, confirmation_id, \
                             created_by, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                        )
                        .bind(l.id)
                        .bind(l.secret_hash)
                        .bind(l.person.as_str().to_owned())
                        .bind(l.confirmation.map(|c| c.as_str().to_owned()))
                        .bind(l.created_by.as_str().to_owned())
                        .bind(l.created_at.0)
                        .bind(l.expires_at.0)
                        .execute(&mut *tx)
                        .await?;
                    }
                }
                if let Some(audit) = &l.audit {
                    append_change(tx, audit).await?;
                }
                Ok(())
            })
        })
        .await
    }

    /// The link with this secret hash, whatever its state (the service says why it is unusable).
    pub async fn link_by_hash(
        &self,
        kind: LinkKind,
        secret_hash: &str,
    ) -> Result<Option<LinkRecord>> {
        let sql = format!(
            "SELECT {} FROM {} WHERE secret_hash = $1",
            kind.columns(),
            kind.table()
        );
        let row = query(sql)
            .bind(secret_hash.to_owned())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(|r| link(kind, r)).transpose()
    }

    /// Records the CSRF token (hash) of the confirmation page just shown for a usable link; the
    /// last page shown is the one whose form can use it. False when the link is no longer usable.
    pub async fn show_link(
        &self,
        kind: LinkKind,
        secret_hash: String,
        csrf_hash: String,
        now: Timestamp,
    ) -> Result<bool> {
        let sql = format!(
            "UPDATE {} SET csrf_hash = $1 WHERE secret_hash = $2 AND used_at IS NULL AND expires_at > $3",
            kind.table()
        );
        self.write(move |tx| {
            Box::pin(async move {
                let done = query(sql)
                    .bind(csrf_hash)
                    .bind(secret_hash)
                    .bind(now.0)
                    .execute(tx)
                    .await?;
                Ok(done.rows_affected() == 1)
            })
        })
        .await
    }

    /// Uses a link once: only if it is unused, unexpired and `csrf_hash` is its page's token.
    /// Returns the link when this call used it, none otherwise.
    pub async fn use_link(
        &self,
        kind: LinkKind,
        secret_hash: String,
        csrf_hash: String,
        now: Timestamp,
    ) -> Result<Option<LinkRecord>> {
        let sql = format!(
            "UPDATE {} SET used_at = $1 WHERE secret_hash = $2 AND csrf_hash = $3 \
             AND used_at IS NULL AND expires_at > $1 RETURNING {}",
            kind.table(),
            kind.columns()
        );
        self.write(move |tx| {
            Box::pin(async move {
                let row = query(sql)
                    .bind(now.0)
                    .bind(secret_hash)
                    .bind(csrf_hash)
                    .fetch_optional(tx)
                    .await?;
                row.as_ref().map(|r| link(kind, r)).transpose()
            })
        })
        .await
    }

    pub async fn insert_session(&self, s: SessionRecord, secret_hash: String) -> Result<()> {
        self.write(move |tx| {
            Box::pin(async move {
                query(
                    "INSERT INTO console_sessions (id, secret_hash, person, created_at, expires_at, \
                     admin) VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(s.id)
                .bind(secret_hash)
                .bind(s.person.as_str().to_owned())
                .bind(s.created_at.0)
                .bind(s.expires_at.0)
                .bind(i64::from(s.admin))
                .execute(tx)
                .await?;
                Ok(())
            })
        })
        .await
    }

    /// The session with this secret hash, whatever its state.
    pub async fn session_by_hash(&self, secret_hash: &str) -> Result<Option<SessionRecord>> {
        let sql = format!("SELECT {SESSION_COLUMNS} FROM console_sessions WHERE secret_hash = $1");
        let row = query(sql)
            .bind(secret_hash.to_owned())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(session).transpose()
    }

    /// The session with this id and whether its person was removed, read from the database (not
    /// a cache): what ends the streams a session holds open.
    pub async fn session_standing(&self, id: &str) -> Result<Option<(SessionRecord, bool)>> {
        let sql = format!(
            "SELECT {SESSION_COLUMNS}, (SELECT removed_at FROM persons \
             WHERE persons.id = console_sessions.person) AS person_removed_at \
             FROM console_sessions WHERE id = $1"
        );
        let row = query(sql)
            .bind(id.to_owned())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref()
            .map(|r| {
                let removed = r.try_get::<Option<i64>, _>("person_removed_at")?.is_some();
                Ok((session(r)?, removed))
            })
            .transpose()
    }

    /// Ends a live session (logout); false when it had already ended.
    pub async fn end_session(&self, secret_hash: String, now: Timestamp) -> Result<bool> {
        self.write(move |tx| {
            Box::pin(async move {
                let done = query(
                    "UPDATE console_sessions SET ended_at = $1 WHERE secret_hash = $2 AND ended_at IS NULL",
                )
                .bind(now.0)
                .bind(secret_hash)
                .execute(tx)
                .await?;
                Ok(done.rows_affected() == 1)
            })
        })
        .await
    }

    /// The threads of a channel, most recently active first, at most `limit`.
    /// The channel's threads, most recently changed first: only those in `state` (a state's
    /// name) when given, only open ones awaiting someone other than `not_asked_by` when given,
    /// and only those whose subject contains `subject` (case-insensitive; ASCII case on SQLite).
    pub async fn channel_threads(
        &self,
        channel: &ChannelName,
        state: Option<&'static str>,
        not_asked_by: Option<&PersonId>,
        subject: Option<&str>,
        limit: i64,
    ) -> Result<Vec<ThreadRecord>> {
        let sql = format!(
            "SELECT {THREAD_COLUMNS} FROM threads /* scan: newest first by threads_channel, stopping at \
             the page */ WHERE channel = $1 AND ($2 IS NULL OR state = $2) \
             AND ($3 IS NULL OR (state = 'open' AND asker <> $3)) \
             AND ($4 IS NULL OR lower(subject) LIKE $4 ESCAPE '\\') \
             ORDER BY updated_at DESC, id DESC LIMIT $5"
        );
        let pattern = subject.map(|s| {
            let escaped = s
                .to_lowercase()
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_");
            format!("%{escaped}%")
        });
        let rows = query(sql)
            .bind(channel.as_str().to_owned())
            .bind(state)
            .bind(not_asked_by.map(|p| p.as_str().to_owned()))
            .bind(pattern)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(thread).collect()
    }
}
