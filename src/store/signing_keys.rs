//! The key ring of the Agent Card's signatures, shared by every replica. The store keeps the
//! sealed records as an opaque JSON text (sealing is the A2A front's business); it only makes sure
//! that every replica ends up with the same ring. An operation file (`impl Store` only): no
//! building block (`tx/`) and no other operation file may depend on it.

use super::db::query;
use super::model::input::AdminChange;
use super::tx::audit::append_change;
use super::{Result, Store};
use crate::domain::Timestamp;

impl Store {
    /// The stored key ring, or `candidate` stored as the ring when there is none yet. Replicas
    /// starting together race on one row: exactly one candidate wins and every caller gets it.
    pub async fn signing_keys_or_init(&self, candidate: String, now: Timestamp) -> Result<String> {
        self.write(move |tx| {
            Box::pin(async move {
                query(
                    "INSERT INTO signing_keys (id, records, updated_at) VALUES (1, $1, $2) \
                     ON CONFLICT (id) DO NOTHING",
                )
                .bind(candidate)
                .bind(now.0)
                .execute(&mut *tx)
                .await?;
                let row = query("SELECT records FROM signing_keys WHERE id = 1")
                    .fetch_one(&mut *tx)
                    .await?;
                row.try_get::<String, _>("records")
            })
        })
        .await
    }

    /// The stored key ring (none before the first start).
    pub async fn signing_keys(&self) -> Result<Option<String>> {
        let row = query("SELECT records FROM signing_keys WHERE id = 1")
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| r.try_get::<String, _>("records")).transpose()
    }

    /// Replaces the ring with `new` if it is still `old` (compare-and-swap: two replicas rotating
    /// at once cannot both win); false when it changed meanwhile.
    pub async fn replace_signing_keys(
        &self,
        old: String,
        new: String,
        now: Timestamp,
        audit: AdminChange,
    ) -> Result<bool> {
        self.write(move |tx| {
            Box::pin(async move {
                let done = query(
                    "UPDATE signing_keys SET records = $1, updated_at = $2 WHERE id = 1 AND records = $3",
                )
                .bind(new)
                .bind(now.0)
                .bind(old)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() != 1 {
                    return Ok(false);
                }
                append_change(tx, &audit).await?;
                Ok(true)
            })
        })
        .await
    }
}
