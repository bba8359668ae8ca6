//! A2A tasks in the store: the event log, listing a party's tasks, parties and push configs.
//! An operation file (`impl Store` only): no building block (`tx/`) and no other operation file may
//! depend on it.

use super::Store;
use super::db::query;
use super::error::{Result, StoreError};
use super::model::input::{AdminChange, TaskFilter};
use super::model::records::directory::{MemberRecord, PartyRecord, PersonRecord, party};
use super::model::records::threads::{
    PushConfigRecord, THREAD_COLUMNS, TaskEventRecord, ThreadRecord, event, push_config, thread,
};
use super::tx::audit::append_change;
use super::tx::enqueue;
use super::tx::members::{live_channel, upsert_member};
use crate::domain::{ChannelName, PersonId, PersonKind, Rights, TaskState, ThreadId};

impl Store {
    /// Events of a task with `seq > after`, in order.
    pub async fn task_events(&self, thread: &ThreadId, after: i64) -> Result<Vec<TaskEventRecord>> {
        let rows = query(
            "SELECT seq, state, cause, message_id, created_at, note FROM task_events WHERE thread_id = $1 AND seq > $2 \
             ORDER BY seq",
        )
        .bind(thread.as_str().to_owned())
        .bind(after)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(event).collect()
    }

    /// Tasks opened by `party` matching `filter`, most recently updated first, and the total count.
    pub async fn tasks(
        &self,
        party: &PersonId,
        filter: &TaskFilter,
    ) -> Result<(Vec<ThreadRecord>, i64)> {
        // A2A's ListTasks answers the party's total: its tasks are counted, which retention keeps
        // to its window; the page reads `threads_opened_by` newest first.
        let condition = "/* scan: a party's tasks, counted for totalSize */ opened_by = $1 AND task_state IS NOT NULL AND ($2 IS NULL OR context_id = $2) \
                         AND ($3 IS NULL OR task_state = $3) AND ($4 IS NULL OR updated_at >= $4)";
        let sql = format!(
            "SELECT {THREAD_COLUMNS} FROM threads WHERE {condition} ORDER BY updated_at DESC, id DESC LIMIT $5 OFFSET $6"
        );
        let rows = query(sql)
            .bind(party.as_str().to_owned())
            .bind(filter.context_id.clone())
            .bind(filter.state.map(TaskState::as_str))
            .bind(filter.updated_since.map(|t| t.0))
            .bind(filter.limit)
            .bind(filter.offset)
            .fetch_all(&self.pool)
            .await?;
        let count_sql = format!("SELECT COUNT(*) AS n FROM threads WHERE {condition}");
        let total: i64 = query(count_sql)
            .bind(party.as_str().to_owned())
            .bind(filter.context_id.clone())
            .bind(filter.state.map(TaskState::as_str))
            .bind(filter.updated_since.map(|t| t.0))
            .fetch_one(&self.pool)
            .await?
            .try_get("n")?;
        Ok((rows.iter().map(thread).collect::<Result<_>>()?, total))
    }

    /// Creates an external person with their party settings, atomically.
    pub async fn insert_party(
        &self,
        person: PersonRecord,
        default_skill: Option<String>,
        jwt_subject: Option<String>,
        audit: AdminChange,
        joins: Vec<(ChannelName, Rights, AdminChange)>,
    ) -> Result<()> {
        if person.kind != PersonKind::External {
            return Err(StoreError::Corrupt(
                "a party must be an external person".into(),
            ));
        }
        self.write_directory(move |tx| {
            Box::pin(async move {
                query("INSERT INTO persons (id, kind, display_name, created_at) VALUES ($1, $2, $3, $4)")
                    .bind(person.id.as_str().to_owned())
                    .bind(person.kind.as_str())
                    .bind(person.display_name)
                    .bind(person.created_at.0)
                    .execute(&mut *tx)
                    .await?;
                query("INSERT INTO parties (person_id, default_skill, jwt_subject) VALUES ($1, $2, $3)")
                    .bind(person.id.as_str().to_owned())
                    .bind(default_skill)
                    .bind(jwt_subject)
                    .execute(&mut *tx)
                    .await?;
                append_change(tx, &audit).await?;
                for (channel, rights, change) in &joins {
                    if !live_channel(tx, channel).await? {
                        return Err(StoreError::NotFound("channel"));
                    }
                    let member = MemberRecord {
                        person: person.id.clone(),
                        rights: *rights,
                    };
                    upsert_member(tx, channel, &member).await?;
                    append_change(tx, change).await?;
                }
                Ok(())
            })
        })
        .await
    }

    /// Every party (external person not removed), with settings.
    pub async fn parties(&self) -> Result<Vec<PartyRecord>> {
        let rows = query(format!("{PARTIES} ORDER BY p.id"))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(party).collect()
    }

    pub async fn party(&self, id: &PersonId) -> Result<Option<PartyRecord>> {
        if let Some(p) = self.directory.party(id) {
            return Ok(Some(p));
        }
        let since = self.directory.epoch();
        let found = query(format!("{PARTIES} AND p.id = $1"))
            .bind(id.as_str().to_owned())
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(party)
            .transpose()?;
        if let Some(p) = &found {
            self.directory.put_party(since, p);
        }
        Ok(found)
    }

    /// The party a JWT subject maps to (checked on every JWT-authenticated request; the subject
    /// is unique and indexed).
    pub async fn party_by_subject(&self, subject: &str) -> Result<Option<PartyRecord>> {
        query(format!("{PARTIES} AND x.jwt_subject = $1"))
            .bind(subject.to_owned())
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(party)
            .transpose()
    }

    /// Stores (or replaces, by id) a push config of a task.
    /// A new config gets the task's events logged so far, in the same transaction.
    pub async fn put_push_config(&self, c: PushConfigRecord) -> Result<()> {
        self.write(move |tx| {
            Box::pin(async move {
                let known = query("SELECT 1 AS one FROM push_configs WHERE thread_id = $1 AND id = $2")
                    .bind(c.thread.as_str().to_owned())
                    .bind(c.id.clone())
                    .fetch_optional(&mut *tx)
                    .await?
                    .is_some();
                let (thread, id, now) = (c.thread.clone(), c.id.clone(), c.created_at);
                query(
                    "INSERT INTO push_configs (thread_id, id, url, token, auth_scheme, auth_credentials, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (thread_id, id) DO UPDATE SET url = excluded.url, \
                     token = excluded.token, auth_scheme = excluded.auth_scheme, \
                     auth_credentials = excluded.auth_credentials",
                )
                .bind(c.thread.as_str().to_owned())
                .bind(c.id)
                .bind(c.url)
                .bind(c.token)
                .bind(c.auth_scheme)
                .bind(c.auth_credentials)
                .bind(c.created_at.0)
                .execute(&mut *tx)
                .await?;
                if !known {
                    enqueue::replay_push(tx, &thread, &id, now).await?;
                }
                Ok(())
            })
        })
        .await?;
        Ok(())
    }

    pub async fn push_configs(&self, thread: &ThreadId) -> Result<Vec<PushConfigRecord>> {
        let rows = query(
            "SELECT thread_id, id, url, token, auth_scheme, auth_credentials, created_at FROM push_configs \
             WHERE thread_id = $1 ORDER BY created_at, id",
        )
        .bind(thread.as_str().to_owned())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(push_config).collect()
    }

    /// Deletes a push config; false when there was none.
    pub async fn delete_push_config(&self, thread: ThreadId, id: String) -> Result<bool> {
        self.write(move |tx| {
            Box::pin(async move {
                let done = query("DELETE FROM push_configs WHERE thread_id = $1 AND id = $2")
                    .bind(thread.as_str().to_owned())
                    .bind(id)
                    .execute(tx)
                    .await?;
                Ok(done.rows_affected() > 0)
            })
        })
        .await
    }
}

/// Parties: external persons not removed, with their settings (a `WHERE` clause to extend).
const PARTIES: &str = "SELECT p.id, p.kind, p.display_name, p.created_at, x.default_skill, x.jwt_subject \
     FROM persons p LEFT JOIN parties x ON x.person_id = p.id \
     WHERE p.kind = 'external' AND p.removed_at IS NULL";
