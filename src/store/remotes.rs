//! Remote A2A agents (SPEC §8b): the `remotes` rows beside their `persons` row (kind `remote`).
//! A remote is live while neither its row nor its person is removed. Fetching, verifying and
//! sealing are the service's business; this only persists. An operation file (`impl Store` only):
//! no building block (`tx/`) and no other operation file may depend on it.

use super::Store;
use super::db::query;
use super::error::Result;
use super::model::input::{AdminChange, RemoteUpdate};
use super::model::records::remotes::{COLUMNS, RemoteRecord, remote};
use super::tx::audit::append_change;
use crate::domain::{ChannelName, PersonId, Rights, Timestamp};

const LIVE: &str = "remotes r JOIN persons p ON p.id = r.person_id \
     WHERE r.removed_at IS NULL AND p.removed_at IS NULL";

impl Store {
    /// Creates the remote's person and row and puts it in `channels` with `rights`, at once. A
    /// person id already taken (even by a removed person) is a conflict.
    pub async fn insert_remote(
        &self,
        r: RemoteRecord,
        channels: Vec<ChannelName>,
        rights: Rights,
        audit: AdminChange,
    ) -> Result<()> {
        self.write_directory(move |tx| {
            Box::pin(async move {
                let id = r.person.id.as_str().to_owned();
                query(
                    "INSERT INTO persons (id, kind, display_name, created_at) VALUES ($1, $2, $3, $4)",
                )
                .bind(id.clone())
                .bind(r.person.kind.as_str())
                .bind(r.person.display_name)
                .bind(r.person.created_at.0)
                .execute(&mut *tx)
                .await?;
                query(
                    "INSERT INTO remotes (person_id, card_url, card, jwks, unsigned, binding, \
                     binding_forced, url, tenant, streaming, push, sealed_credentials, \
                     credentials_summary, created_at, refreshed_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
                )
                .bind(id.clone())
                .bind(r.card_url)
                .bind(r.card)
                .bind(r.jwks)
                .bind(i64::from(r.unsigned))
                .bind(r.binding)
                .bind(i64::from(r.binding_forced))
                .bind(r.url)
                .bind(r.tenant)
                .bind(i64::from(r.streaming))
                .bind(i64::from(r.push))
                .bind(r.sealed_credentials)
                .bind(r.credentials_summary)
                .bind(r.created_at.0)
                .bind(r.refreshed_at.0)
                .execute(&mut *tx)
                .await?;
                for channel in channels {
                    query(
                        "INSERT INTO channel_members (channel, person_id, rights) VALUES ($1, $2, $3)",
                    )
                    .bind(channel.as_str().to_owned())
                    .bind(id.clone())
                    .bind(rights.to_string())
                    .execute(&mut *tx)
                    .await?;
                }
                append_change(tx, &audit).await?;
                Ok(())
            })
        })
        .await
    }

    /// A live remote.
    pub async fn remote(&self, id: &PersonId) -> Result<Option<RemoteRecord>> {
        let row = query(format!("SELECT {COLUMNS} FROM {LIVE} AND r.person_id = $1"))
            .bind(id.as_str().to_owned())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(remote).transpose()
    }

    /// Every live remote, by name.
    pub async fn remotes(&self) -> Result<Vec<RemoteRecord>> {
        let rows = query(format!("SELECT {COLUMNS} FROM {LIVE} ORDER BY p.id"))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(remote).collect()
    }

    /// The live remotes that share a channel with `person`, each with those channels.
    pub async fn remotes_visible_to(
        &self,
        person: &PersonId,
    ) -> Result<Vec<(RemoteRecord, Vec<ChannelName>)>> {
        let rows = query(format!(
            "SELECT {COLUMNS}, rm.channel AS shared_channel FROM remotes r \
             JOIN persons p ON p.id = r.person_id \
             JOIN channel_members rm ON rm.person_id = r.person_id \
             JOIN channel_members me ON me.channel = rm.channel AND me.person_id = $1 \
             WHERE r.removed_at IS NULL AND p.removed_at IS NULL \
             ORDER BY p.id, rm.channel"
        ))
        .bind(person.as_str().to_owned())
        .fetch_all(&self.pool)
        .await?;
        let mut out: Vec<(RemoteRecord, Vec<ChannelName>)> = Vec::new();
        for row in &rows {
            let channel = ChannelName::parse(row.try_get::<String, _>("shared_channel")?)?;
            let id: String = row.try_get("id")?;
            match out.last_mut() {
                Some((last, channels)) if last.person.id.as_str() == id => channels.push(channel),
                _ => out.push((remote(row)?, vec![channel])),
            }
        }
        Ok(out)
    }

    /// Replaces what a refresh fetched; false when the remote is not live.
    pub async fn update_remote(
        &self,
        id: PersonId,
        u: RemoteUpdate,
        audit: AdminChange,
    ) -> Result<bool> {
        self.write(move |tx| {
            Box::pin(async move {
                let done = query(
                    "UPDATE remotes SET card = $1, jwks = $2, unsigned = $3, binding = $4, \
                     binding_forced = $5, url = $6, tenant = $7, streaming = $8, push = $9, \
                     refreshed_at = $10 WHERE person_id = $11 AND removed_at IS NULL",
                )
                .bind(u.card)
                .bind(u.jwks)
                .bind(i64::from(u.unsigned))
                .bind(u.binding)
                .bind(i64::from(u.binding_forced))
                .bind(u.url)
                .bind(u.tenant)
                .bind(i64::from(u.streaming))
                .bind(i64::from(u.push))
                .bind(u.refreshed_at.0)
                .bind(id.as_str().to_owned())
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() == 0 {
                    return Ok(false);
                }
                if let Some((sealed, summary)) = u.credentials {
                    query(
                        "UPDATE remotes SET sealed_credentials = $1, credentials_summary = $2 \
                         WHERE person_id = $3",
                    )
                    .bind(sealed)
                    .bind(summary)
                    .bind(id.as_str().to_owned())
                    .execute(&mut *tx)
                    .await?;
                }
                append_change(tx, &audit).await?;
                Ok(true)
            })
        })
        .await
    }

    /// Removes a remote: it leaves every channel and can no longer be addressed; its person row
    /// stays (marked removed: its messages keep their author, and the name is never reused).
    /// False when there was no such live remote.
    pub async fn remove_remote(
        &self,
        id: PersonId,
        now: Timestamp,
        audit: AdminChange,
    ) -> Result<bool> {
        self.write_directory(move |tx| {
            Box::pin(async move {
                let id = id.as_str().to_owned();
                let done = query(
                    "UPDATE remotes SET removed_at = $1 WHERE person_id = $2 AND removed_at IS NULL \
                     AND EXISTS (SELECT 1 FROM persons p WHERE p.id = $2 AND p.removed_at IS NULL)",
                )
                .bind(now.0)
                .bind(id.clone())
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() == 0 {
                    return Ok(false);
                }
                query("UPDATE persons SET removed_at = $1 WHERE id = $2")
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
}
