//! Persons, tokens and channels. An operation file (`impl Store` only): no building block (`tx/`)
//! and no other operation file may depend on it.

use super::Store;
use super::db::query;
use super::error::{Result, StoreError};
use super::model::input::AdminChange;
use super::model::records::directory::{
    ChannelRecord, MemberRecord, PersonRecord, TOKEN_COLUMNS, TokenRecord, channel, person, token,
};
use super::tx::audit::append_change;
use super::tx::members::{live_channel, upsert_member};
use crate::domain::{
    ApprovalPolicy, ChannelName, ConnectionRights, ConnectionSlug, PersonId, PolicyChange, Right,
    Rights, Timestamp,
};

impl Store {
    pub async fn insert_person(&self, p: PersonRecord, audit: AdminChange) -> Result<()> {
        self.write_directory(move |tx| {
            Box::pin(async move {
                query("INSERT INTO persons (id, kind, display_name, created_at) VALUES ($1, $2, $3, $4)")
                    .bind(p.id.as_str().to_owned())
                    .bind(p.kind.as_str())
                    .bind(p.display_name)
                    .bind(p.created_at.0)
                    .execute(&mut *tx)
                    .await?;
                append_change(tx, &audit).await?;
                Ok(())
            })
        })
        .await
    }

    /// A person who has not been removed.
    pub async fn person(&self, id: &PersonId) -> Result<Option<PersonRecord>> {
        if let Some(p) = self.directory.person(id) {
            return Ok(Some(p));
        }
        let since = self.directory.epoch();
        let row = query(
            "SELECT id, kind, display_name, created_at FROM persons WHERE id = $1 AND removed_at IS NULL",
        )
        .bind(id.as_str().to_owned())
        .fetch_optional(&self.pool)
        .await?;
        let found = row.as_ref().map(person).transpose()?;
        if let Some(p) = &found {
            self.directory.put_person(since, p);
        }
        Ok(found)
    }

    pub async fn persons(&self) -> Result<Vec<PersonRecord>> {
        let rows = query(
            "SELECT id, kind, display_name, created_at FROM persons WHERE removed_at IS NULL ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(person).collect()
    }

    /// Marks a person removed, revokes their tokens and takes them out of every channel. Their
    /// messages stay; the id is never reused. Returns false when there was no such person.
    pub async fn remove_person(
        &self,
        id: PersonId,
        now: Timestamp,
        audit: AdminChange,
    ) -> Result<bool> {
        self.write_directory(move |tx| {
            Box::pin(async move {
                let id = id.as_str().to_owned();
                let done = query(
                    "UPDATE persons SET removed_at = $1 WHERE id = $2 AND removed_at IS NULL",
                )
                .bind(now.0)
                .bind(id.clone())
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() == 0 {
                    return Ok(false);
                }
                query(
                    "UPDATE tokens SET revoked_at = $1 WHERE person_id = $2 AND revoked_at IS NULL",
                )
                .bind(now.0)
                .bind(id.clone())
                .execute(&mut *tx)
                .await?;
                query("DELETE FROM channel_members WHERE person_id = $1")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                append_change(tx, &audit).await?;
                Ok(true)
            })
        })
        .await
    }

    pub async fn insert_token(
        &self,
        t: TokenRecord,
        secret_hash: String,
        audit: AdminChange,
    ) -> Result<()> {
        self.write_directory(move |tx| {
            Box::pin(async move {
                let rights = t
                    .rights
                    .map(|r| serde_json::to_string(&r))
                    .transpose()
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                query(
                    "INSERT INTO tokens (id, person_id, secret_hash, scopes, description, created_at, expires_at, \
                     connection, rights) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(t.id)
                .bind(t.person.as_str().to_owned())
                .bind(secret_hash)
                .bind(t.scopes.to_string())
                .bind(t.description)
                .bind(t.created_at.0)
                .bind(t.expires_at.map(|e| e.0))
                .bind(t.connection.map(String::from))
                .bind(rights)
                .execute(&mut *tx)
                .await
                .map_err(connection_taken)?;
                append_change(tx, &audit).await?;
                Ok(())
            })
        })
        .await
    }

    /// The token with this secret hash, whatever its state (the service decides).
    pub async fn token_by_hash(&self, secret_hash: &str) -> Result<Option<TokenRecord>> {
        if let Some(t) = self.directory.token(secret_hash) {
            return Ok(Some(t));
        }
        let since = self.directory.epoch();
        let sql = format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE secret_hash = $1");
        let row = query(sql)
            .bind(secret_hash.to_owned())
            .fetch_optional(&self.pool)
            .await?;
        let found = row.as_ref().map(token).transpose()?;
        if let Some(t) = &found {
            self.directory.put_token(since, secret_hash, t);
        }
        Ok(found)
    }

    pub async fn tokens(&self, person: Option<&PersonId>) -> Result<Vec<TokenRecord>> {
        let sql = format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE ($1 IS NULL OR person_id = $1) ORDER BY created_at, id"
        );
        let rows = query(sql)
            .bind(person.map(|p| p.as_str().to_owned()))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(token).collect()
    }

    /// The token with this id, whatever its state (read from the database, not the cache: a
    /// revocation on another replica shows at once).
    pub async fn token_by_id(&self, id: &str) -> Result<Option<TokenRecord>> {
        let sql = format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE id = $1");
        let row = query(sql)
            .bind(id.to_owned())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(token).transpose()
    }

    /// Records that the token was used at `now` (the service calls it at most once a minute per
    /// token). Not a directory change: the cache keeps serving the token.
    pub async fn touch_token(&self, id: String, now: Timestamp) -> Result<()> {
        self.write(move |tx| {
            Box::pin(async move {
                query("UPDATE tokens SET last_used_at = $1 WHERE id = $2")
                    .bind(now.0)
                    .bind(id)
                    .execute(tx)
                    .await?;
                Ok(())
            })
        })
        .await
    }

    /// Revokes a token now; false when unknown or already revoked.
    pub async fn revoke_token(
        &self,
        id: String,
        now: Timestamp,
        audit: AdminChange,
    ) -> Result<bool> {
        self.write_directory(move |tx| {
            Box::pin(async move {
                let done =
                    query("UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
                        .bind(now.0)
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                if done.rows_affected() == 0 {
                    return Ok(false);
                }
                append_change(tx, &audit).await?;
                Ok(true)
            })
        })
        .await
    }

    /// Renames a live connection, or sets its rights (`None` leaves that part); refuses a name
    /// another live connection of the same person holds (`Conflict`), and answers false when the
    /// token is not a live connection of `person`.
    pub async fn update_connection(
        &self,
        person: PersonId,
        id: String,
        name: Option<ConnectionSlug>,
        rights: Option<ConnectionRights>,
        audit: AdminChange,
    ) -> Result<bool> {
        let rights = rights
            .map(|r| serde_json::to_string(&r))
            .transpose()
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        self.write_directory(move |tx| {
            Box::pin(async move {
                let done = query(
                    "UPDATE tokens SET connection = COALESCE($1, connection), rights = COALESCE($2, rights) \
                     WHERE id = $3 AND person_id = $4 AND connection IS NOT NULL AND revoked_at IS NULL",
                )
                .bind(name.map(String::from))
                .bind(rights)
                .bind(id)
                .bind(person.as_str().to_owned())
                .execute(&mut *tx)
                .await
                .map_err(connection_taken)?;
                if done.rows_affected() == 0 {
                    return Ok(false);
                }
                append_change(tx, &audit).await?;
                Ok(true)
            })
        })
        .await
    }

    pub async fn insert_channel(&self, c: ChannelRecord, audit: AdminChange) -> Result<()> {
        self.write_directory(move |tx| {
            Box::pin(async move {
                let policy = serde_json::to_string(&c.policy).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                query("INSERT INTO channels (name, description, policy, created_at) VALUES ($1, $2, $3, $4)")
                    .bind(c.name.as_str().to_owned())
                    .bind(c.description)
                    .bind(policy)
                    .bind(c.created_at.0)
                    .execute(&mut *tx)
                    .await?;
                for m in c.members {
                    upsert_member(tx, &c.name, &m).await?;
                }
                append_change(tx, &audit).await?;
                Ok(())
            })
        })
        .await
    }

    /// Adds or updates members and removes others, in one transaction. False when the channel is
    /// unknown or removed.
    pub async fn change_members(
        &self,
        channel: ChannelName,
        upsert: Vec<MemberRecord>,
        remove: Vec<PersonId>,
        audit: AdminChange,
    ) -> Result<bool> {
        self.write_directory(move |tx| {
            Box::pin(async move {
                if !live_channel(tx, &channel).await? {
                    return Ok(false);
                }
                for m in &upsert {
                    upsert_member(tx, &channel, m).await?;
                }
                for p in remove {
                    query("DELETE FROM channel_members WHERE channel = $1 AND person_id = $2")
                        .bind(channel.as_str().to_owned())
                        .bind(p.as_str().to_owned())
                        .execute(&mut *tx)
                        .await?;
                }
                append_change(tx, &audit).await?;
                Ok(true)
            })
        })
        .await
    }

    /// Replaces a channel's policy; false when the channel is unknown or removed.
    pub async fn set_policy(
        &self,
        channel: ChannelName,
        policy: ApprovalPolicy,
        audit: AdminChange,
    ) -> Result<bool> {
        self.write_directory(move |tx| {
            Box::pin(async move {
                let policy = serde_json::to_string(&policy)
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                let done =
                    query("UPDATE channels SET policy = $1 WHERE name = $2 AND removed_at IS NULL")
                        .bind(policy)
                        .bind(channel.as_str().to_owned())
                        .execute(&mut *tx)
                        .await?;
                if done.rows_affected() == 0 {
                    return Ok(false);
                }
                append_change(tx, &audit).await?;
                Ok(true)
            })
        })
        .await
    }

    /// Changes the named fields of a channel's policy, reading and writing it in one transaction
    /// (the row locked on PostgreSQL), so two changes of different fields both stay. The new
    /// policy, or none when the channel is unknown or removed.
    pub async fn change_policy(
        &self,
        channel: ChannelName,
        change: PolicyChange,
        mut audit: AdminChange,
    ) -> Result<Option<ApprovalPolicy>> {
        let select = format!(
            "SELECT policy FROM channels WHERE name = $1 AND removed_at IS NULL{}",
            self.for_update()
        );
        self.write_directory(move |tx| {
            Box::pin(async move {
                let name = channel.as_str().to_owned();
                let row = query(select)
                    .bind(name.clone())
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some(row) = row else { return Ok(None) };
                let policy: ApprovalPolicy =
                    serde_json::from_str(&row.try_get::<String, _>("policy")?)
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                let before = policy;
                let policy = change.apply(policy);
                let text = serde_json::to_string(&policy)
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                query("UPDATE channels SET policy = $1 WHERE name = $2")
                    .bind(text)
                    .bind(name)
                    .execute(&mut *tx)
                    .await?;
                // The exact policy under the row's lock, whatever the service read before.
                audit.before = Some(serde_json::json!({ "policy": before }));
                audit.after = Some(serde_json::json!({ "policy": policy }));
                append_change(tx, &audit).await?;
                Ok(Some(policy))
            })
        })
        .await
    }

    /// Marks a channel removed and leaves its members only `read`: threads and messages stay
    /// readable, nothing new can be posted, requested or approved. False when the channel is
    /// unknown or already removed.
    pub async fn remove_channel(
        &self,
        channel: ChannelName,
        now: Timestamp,
        audit: AdminChange,
    ) -> Result<bool> {
        self.write_directory(move |tx| {
            Box::pin(async move {
                let name = channel.as_str().to_owned();
                let done = query(
                    "UPDATE channels SET removed_at = $1 WHERE name = $2 AND removed_at IS NULL",
                )
                .bind(now.0)
                .bind(name.clone())
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() == 0 {
                    return Ok(false);
                }
                let read = Rights::default().with(Right::Read).to_string();
                query("UPDATE channel_members SET rights = $1 WHERE channel = $2")
                    .bind(read)
                    .bind(name)
                    .execute(&mut *tx)
                    .await?;
                append_change(tx, &audit).await?;
                Ok(true)
            })
        })
        .await
    }

    pub async fn channel(&self, name: &ChannelName) -> Result<Option<ChannelRecord>> {
        if let Some(c) = self.directory.channel(name) {
            return Ok(Some(c));
        }
        let since = self.directory.epoch();
        let row = query(
            "SELECT name, description, policy, created_at, removed_at FROM channels WHERE name = $1",
        )
        .bind(name.as_str().to_owned())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let members = self.members(name).await?;
        let found = channel(&row, members)?;
        self.directory.put_channel(since, &found);
        Ok(Some(found))
    }

    /// Every channel, or those `person` is a member of; with members, ordered by name.
    pub async fn channels(&self, person: Option<&PersonId>) -> Result<Vec<ChannelRecord>> {
        let rows = query(
            "SELECT name, description, policy, created_at, removed_at FROM channels c WHERE $1 IS NULL OR EXISTS \
             (SELECT 1 FROM channel_members m WHERE m.channel = c.name AND m.person_id = $1) ORDER BY name",
        )
        .bind(person.map(|p| p.as_str().to_owned()))
        .fetch_all(&self.pool)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let name = ChannelName::parse(row.try_get::<String, _>("name")?)?;
            let members = self.members(&name).await?;
            out.push(channel(row, members)?);
        }
        Ok(out)
    }

    async fn members(&self, channel: &ChannelName) -> Result<Vec<MemberRecord>> {
        let rows = query(
            "SELECT person_id, rights FROM channel_members WHERE channel = $1 ORDER BY person_id",
        )
        .bind(channel.as_str().to_owned())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(MemberRecord {
                    person: PersonId::parse(r.try_get::<String, _>("person_id")?)?,
                    rights: Rights::parse(&r.try_get::<String, _>("rights")?)?,
                })
            })
            .collect()
    }
}

/// The unique index on a person's live connection names, as the error the service explains.
fn connection_taken(e: StoreError) -> StoreError {
    match e {
        StoreError::Conflict(c) if c.contains("connection") => {
            StoreError::Conflict("connection name taken".into())
        }
        other => other,
    }
}
