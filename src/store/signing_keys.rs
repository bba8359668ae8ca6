//! The key ring of the Agent Card's signatures, shared by every replica. The store keeps the
//! sealed records as an opaque JSON text (sealing is the A2A front's business); it only makes sure
//! that every replica ends up with the same ring.

use sqlx::Row as _;

use super::{Result, Store};
use crate::domain::Timestamp;

impl Store {
    /// The stored key ring, or `candidate` stored as the ring when there is none yet. Replicas
    /// starting together race on one row: exactly one candidate wins and every caller gets it.
    pub async fn signing_keys_or_init(&self, candidate: String, now: Timestamp) -> Result<String> {
        self.write(move |tx| {
            Box::pin(async move {
                sqlx::query(
                    "INSERT INTO signing_keys (id, records, updated_at) VALUES (1, $1, $2) \
                     ON CONFLICT (id) DO NOTHING",
                )
                .bind(candidate)
                .bind(now.0)
                .execute(&mut *tx)
                .await?;
                let row = sqlx::query("SELECT records FROM signing_keys WHERE id = 1")
                    .fetch_one(&mut *tx)
                    .await?;
                Ok(row.try_get::<String, _>("records")?)
            })
        })
        .await
    }
}
