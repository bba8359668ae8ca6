//! OAuth 2.1 for MCP clients (SPEC §7): clients (registered, or known by their metadata
//! document), grants (written with their connection's `tokens` row and first code in one
//! transaction), single-use codes and rotating refresh tokens, each spent by one conditional
//! write so that two replicas presenting the same one cannot both succeed. An operation file
//! (`impl Store` only): no building block (`tx/`) and no other operation file may depend on it.

use super::Store;
use super::db::query;
use super::error::{Result, StoreError};
use super::model::input::AdminChange;
use super::model::records::directory::TokenRecord;
use super::model::records::oauth::{
    CLIENT_COLUMNS, CodeUse, GRANT_COLUMNS, OAuthClientRecord, OAuthCodeRecord, OAuthGrantRecord,
    OAuthRefreshRecord, Rotation, client, grant,
};
use super::tx::audit::append_change;
use crate::domain::Timestamp;

/// How long a spent refresh token is kept to recognise its reuse (one day); older spent ones are
/// deleted at the grant's next rotation, and presenting one is then refused as unknown.
const SPENT_KEPT_MS: i64 = 86_400_000;

/// Most clients one listing returns (newest first).
pub(super) const CLIENTS_LISTED: i64 = 500;

/// What became of a client to insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientInsert {
    Inserted,
    /// `max` clients of its kind exist already.
    Full,
    /// Its address registered its share within the window; the oldest of those, which leaves
    /// the window first.
    AddressLimit {
        oldest: Timestamp,
    },
}

/// The registrations one address may make within a window (counted in the database, so the
/// limit holds across replicas).
#[derive(Debug, Clone, Copy)]
pub struct AddressLimit {
    pub per_window: i64,
    /// Registrations created after this count.
    pub since: Timestamp,
}

fn json(v: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(v).map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl Store {
    /// Inserts a client unless `max` clients of its kind exist already, or (with `limit`) its
    /// `registered_from` address made its share of registrations since `limit.since`. Checked
    /// and written in one transaction; on PostgreSQL, inserts are serialised by an advisory lock
    /// so that replicas registering at once cannot each see room for one more.
    pub async fn insert_oauth_client(
        &self,
        c: OAuthClientRecord,
        max: i64,
        limit: Option<AddressLimit>,
    ) -> Result<ClientInsert> {
        let uris = json(&c.redirect_uris)?;
        let metadata = json(&c.metadata)?;
        let postgres = self.backend() == super::Backend::Postgres;
        self.write(move |tx| {
            Box::pin(async move {
                if postgres {
                    query("SELECT pg_advisory_xact_lock(hashtext($1))::text AS locked")
                        .bind("oauth_clients.insert")
                        .fetch_one(&mut *tx)
                        .await?;
                }
                if let (Some(limit), Some(from)) = (limit, &c.registered_from) {
                    let row = query(
                        "SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM oauth_clients \
                         WHERE kind = $1 AND registered_from = $2 AND created_at > $3",
                    )
                    .bind(c.kind.clone())
                    .bind(from.clone())
                    .bind(limit.since.0)
                    .fetch_one(&mut *tx)
                    .await?;
                    let n: i64 = row.try_get("n")?;
                    if n >= limit.per_window {
                        let oldest: Option<i64> = row.try_get("oldest")?;
                        return Ok(ClientInsert::AddressLimit {
                            oldest: Timestamp(oldest.unwrap_or(limit.since.0)),
                        });
                    }
                }
                let n: i64 = query(
                    "SELECT COUNT(*) AS n FROM oauth_clients WHERE kind = $1",
                )
                .bind(c.kind.clone())
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
                if n >= max {
                    return Ok(ClientInsert::Full);
                }
                query(
                    "INSERT INTO oauth_clients (id, kind, name, redirect_uris, metadata, registered_from, \
                     created_at, fetched_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                )
                .bind(c.id)
                .bind(c.kind)
                .bind(c.name)
                .bind(uris)
                .bind(metadata)
                .bind(c.registered_from)
                .bind(c.created_at.0)
                .bind(c.fetched_at.0)
                .execute(&mut *tx)
                .await?;
                Ok(ClientInsert::Inserted)
            })
        })
        .await
    }

    /// Records (or refreshes) a client known by its metadata document.
    pub async fn upsert_document_client(&self, c: OAuthClientRecord) -> Result<()> {
        let uris = json(&c.redirect_uris)?;
        let metadata = json(&c.metadata)?;
        self.write(move |tx| {
            Box::pin(async move {
                query(
                    "INSERT INTO oauth_clients (id, kind, name, redirect_uris, metadata, registered_from, \
                     created_at, fetched_at) VALUES ($1, $2, $3, $4, $5, NULL, $6, $7) \
                     ON CONFLICT (id) DO UPDATE SET name = $3, redirect_uris = $4, metadata = $5, fetched_at = $7",
                )
                .bind(c.id)
                .bind(c.kind)
                .bind(c.name)
                .bind(uris)
                .bind(metadata)
                .bind(c.created_at.0)
                .bind(c.fetched_at.0)
                .execute(&mut *tx)
                .await?;
                Ok(())
            })
        })
        .await
    }

    pub async fn oauth_client(&self, id: &str) -> Result<Option<OAuthClientRecord>> {
        let row = query(format!(
            "SELECT {CLIENT_COLUMNS} FROM oauth_clients WHERE id = $1"
        ))
        .bind(id.to_owned())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(client).transpose()
    }

    /// The clients, newest first (at most [`CLIENTS_LISTED`]).
    pub async fn oauth_clients(&self) -> Result<Vec<OAuthClientRecord>> {
        let rows = query(format!(
            "SELECT {CLIENT_COLUMNS} FROM oauth_clients ORDER BY created_at DESC, id DESC LIMIT $1"
        ))
        .bind(CLIENTS_LISTED)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(client).collect()
    }

    /// Per client: its live grants (connections neither revoked nor expired at `now`) and the
    /// last use of any of its grants.
    pub async fn oauth_client_usage(
        &self,
        now: Timestamp,
    ) -> Result<std::collections::HashMap<String, (i64, Option<Timestamp>)>> {
        let rows = query(
            "SELECT g.client_id, \
             SUM(CASE WHEN t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > $1) \
             THEN 1 ELSE 0 END) AS live, MAX(t.last_used_at) AS last_used_at \
             FROM oauth_grants g JOIN tokens t ON t.id = g.token_id GROUP BY g.client_id",
        )
        .bind(now.0)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get::<String, _>("client_id")?,
                    (
                        row.try_get::<i64, _>("live")?,
                        row.try_get::<Option<i64>, _>("last_used_at")?
                            .map(Timestamp),
                    ),
                ))
            })
            .collect()
    }

    /// Removes a client and revokes every grant it holds, at `now`; false when unknown.
    pub async fn remove_oauth_client(
        &self,
        id: String,
        now: Timestamp,
        audit: AdminChange,
    ) -> Result<bool> {
        self.write_directory(move |tx| {
            Box::pin(async move {
                query(
                    "UPDATE tokens SET revoked_at = $1 WHERE revoked_at IS NULL AND id IN \
                     (SELECT token_id FROM oauth_grants WHERE client_id = $2)",
                )
                .bind(now.0)
                .bind(id.clone())
                .execute(&mut *tx)
                .await?;
                let done = query("DELETE FROM oauth_clients WHERE id = $1")
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

    /// A grant: its connection's token row (whose secret hash is never handed out), the grant,
    /// and its first code, in one transaction; a connection name another live connection of the
    /// person holds is a `Conflict`.
    pub async fn insert_grant(
        &self,
        t: TokenRecord,
        unusable_hash: String,
        g: OAuthGrantRecord,
        code_hash: String,
        code: OAuthCodeRecord,
        audit: AdminChange,
    ) -> Result<()> {
        let rights = t.rights.map(|r| json(&r)).transpose()?;
        self.write_directory(move |tx| {
            Box::pin(async move {
                query(
                    "INSERT INTO tokens (id, person_id, secret_hash, scopes, description, created_at, expires_at, \
                     connection, rights) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(t.id)
                .bind(t.person.as_str().to_owned())
                .bind(unusable_hash)
                .bind(t.scopes.to_string())
                .bind(t.description)
                .bind(t.created_at.0)
                .bind(t.expires_at.map(|e| e.0))
                .bind(t.connection.map(String::from))
                .bind(rights)
                .execute(&mut *tx)
                .await
                .map_err(|e| match e {
                    StoreError::Conflict(c) if c.contains("connection") => {
                        StoreError::Conflict("connection name taken".into())
                    }
                    other => other,
                })?;
                query(
                    "INSERT INTO oauth_grants (token_id, client_id, resource, created_at) VALUES ($1, $2, $3, $4)",
                )
                .bind(g.token_id.clone())
                .bind(g.client_id)
                .bind(g.resource)
                .bind(g.created_at.0)
                .execute(&mut *tx)
                .await?;
                query(
                    "INSERT INTO oauth_codes (code_hash, token_id, redirect_uri, code_challenge, expires_at) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(code_hash)
                .bind(code.token_id)
                .bind(code.redirect_uri)
                .bind(code.code_challenge)
                .bind(code.expires_at.0)
                .execute(&mut *tx)
                .await?;
                append_change(tx, &audit).await?;
                Ok(())
            })
        })
        .await
    }

    /// Spends the code with this hash: the first presentation gets it and its grant, every later
    /// one learns it was spent.
    pub async fn spend_code(&self, code_hash: String, now: Timestamp) -> Result<CodeUse> {
        self.write(move |tx| {
            Box::pin(async move {
                let row = query(
                    "SELECT token_id, redirect_uri, code_challenge, expires_at FROM oauth_codes \
                     WHERE code_hash = $1",
                )
                .bind(code_hash.clone())
                .fetch_optional(&mut *tx)
                .await?;
                let Some(row) = row else {
                    return Ok(CodeUse::Unknown);
                };
                let code = OAuthCodeRecord {
                    token_id: row.try_get("token_id")?,
                    redirect_uri: row.try_get("redirect_uri")?,
                    code_challenge: row.try_get("code_challenge")?,
                    expires_at: Timestamp(row.try_get("expires_at")?),
                };
                let spent = query(
                    "UPDATE oauth_codes SET used_at = $1 WHERE code_hash = $2 AND used_at IS NULL",
                )
                .bind(now.0)
                .bind(code_hash)
                .execute(&mut *tx)
                .await?;
                if spent.rows_affected() == 0 {
                    return Ok(CodeUse::Spent(code));
                }
                let row = query(format!(
                    "SELECT {GRANT_COLUMNS} FROM oauth_grants WHERE token_id = $1"
                ))
                .bind(code.token_id.clone())
                .fetch_one(&mut *tx)
                .await?;
                Ok(CodeUse::Fresh(code, grant(&row)?))
            })
        })
        .await
    }

    /// The grant of a connection (none: the connection is not a grant).
    pub async fn oauth_grant(&self, token_id: &str) -> Result<Option<OAuthGrantRecord>> {
        let row = query(format!(
            "SELECT {GRANT_COLUMNS} FROM oauth_grants WHERE token_id = $1"
        ))
        .bind(token_id.to_owned())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(grant).transpose()
    }

    /// The grants of these connections (for Connect's listing).
    pub async fn oauth_grants_of(
        &self,
        person: &crate::domain::PersonId,
    ) -> Result<Vec<OAuthGrantRecord>> {
        let rows = query(
            "SELECT g.token_id, g.client_id, g.resource, g.created_at FROM oauth_grants g \
             JOIN tokens t ON t.id = g.token_id WHERE t.person_id = $1",
        )
        .bind(person.as_str().to_owned())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(grant).collect()
    }

    /// Stores a refresh token of a grant.
    pub async fn insert_refresh_token(
        &self,
        token_hash: String,
        token_id: String,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<()> {
        self.write(move |tx| {
            Box::pin(async move {
                query(
                    "INSERT INTO oauth_refresh_tokens (token_hash, token_id, created_at, expires_at) \
                     VALUES ($1, $2, $3, $4)",
                )
                .bind(token_hash)
                .bind(token_id)
                .bind(now.0)
                .bind(expires_at.0)
                .execute(&mut *tx)
                .await?;
                Ok(())
            })
        })
        .await
    }

    /// The refresh token with this hash and its grant, whatever its state.
    pub async fn refresh_token(&self, token_hash: &str) -> Result<Option<OAuthRefreshRecord>> {
        let row = query(
            "SELECT g.token_id, g.client_id, g.resource, g.created_at, r.expires_at, r.used_at \
             FROM oauth_refresh_tokens r JOIN oauth_grants g ON g.token_id = r.token_id \
             WHERE r.token_hash = $1",
        )
        .bind(token_hash.to_owned())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(OAuthRefreshRecord {
            grant: grant(&row)?,
            expires_at: Timestamp(row.try_get("expires_at")?),
            used_at: row.try_get::<Option<i64>, _>("used_at")?.map(Timestamp),
        }))
    }

    /// Spends refresh token `old` and stores its successor `new`, in one transaction; a token
    /// spent before is [`Rotation::Reused`].
    pub async fn rotate_refresh_token(
        &self,
        old: String,
        new: String,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<Rotation> {
        self.write(move |tx| {
            Box::pin(async move {
                let row = query("SELECT token_id FROM oauth_refresh_tokens WHERE token_hash = $1")
                    .bind(old.clone())
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some(row) = row else {
                    return Ok(Rotation::Unknown);
                };
                let token_id: String = row.try_get("token_id")?;
                let spent = query(
                    "UPDATE oauth_refresh_tokens SET used_at = $1 WHERE token_hash = $2 AND used_at IS NULL",
                )
                .bind(now.0)
                .bind(old)
                .execute(&mut *tx)
                .await?;
                if spent.rows_affected() == 0 {
                    return Ok(Rotation::Reused);
                }
                query(
                    "INSERT INTO oauth_refresh_tokens (token_hash, token_id, created_at, expires_at) \
                     VALUES ($1, $2, $3, $4)",
                )
                .bind(new)
                .bind(token_id.clone())
                .bind(now.0)
                .bind(expires_at.0)
                .execute(&mut *tx)
                .await?;
                // Spent tokens are kept [`SPENT_KEPT_MS`] for reuse detection, then forgotten (a
                // forgotten one is refused as unknown): a grant holds a bounded number of rows.
                query(
                    "DELETE FROM oauth_refresh_tokens WHERE token_id = $1 AND used_at IS NOT NULL AND used_at < $2",
                )
                .bind(token_id)
                .bind(now.0 - SPENT_KEPT_MS)
                .execute(&mut *tx)
                .await?;
                Ok(Rotation::Rotated)
            })
        })
        .await
    }
}
