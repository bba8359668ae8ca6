//! The admin changes' building block: appending an [`AdminChange`] to the audit log inside the
//! transaction of the change it records, so a change is never made without its entry nor logged
//! without being made. Calls no other block.

use crate::store::db::{Conn, query};
use crate::store::error::{Result, StoreError};
use crate::store::model::input::AdminChange;

fn json_text(v: &Option<serde_json::Value>) -> Result<Option<String>> {
    v.as_ref()
        .map(|v| serde_json::to_string(v).map_err(|e| StoreError::Corrupt(e.to_string())))
        .transpose()
}

pub(in crate::store) async fn append_change(tx: &mut Conn, c: &AdminChange) -> Result<()> {
    query(
        "INSERT INTO audit_log (at, event, actor, via, subject, before_json, after_json) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(c.at.0)
    .bind(c.event.to_owned())
    .bind(c.actor.as_ref().map(|p| p.as_str().to_owned()))
    .bind(c.via.map(|v| v.as_str()))
    .bind(c.subject.clone())
    .bind(json_text(&c.before)?)
    .bind(json_text(&c.after)?)
    .execute(tx)
    .await?;
    Ok(())
}
