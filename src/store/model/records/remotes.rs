//! A registered remote A2A agent as stored (SPEC §8b), with the column list and parser of its
//! row. It must not depend on any file of the store but `db` (rows), `error` and the directory's
//! records.

use super::directory::PersonRecord;
use crate::domain::{PersonId, Timestamp};
use crate::store::db::Row;
use crate::store::error::Result;

/// A registered remote agent, as stored.
#[derive(Debug, Clone)]
pub struct RemoteRecord {
    pub person: PersonRecord,
    pub card_url: String,
    /// The card JSON as fetched.
    pub card: String,
    /// The pinned keys (JWKS JSON).
    pub jwks: String,
    pub unsigned: bool,
    /// `GRPC`, `JSONRPC` or `HTTP+JSON`.
    pub binding: String,
    /// The admin chose the binding.
    pub binding_forced: bool,
    pub url: String,
    pub tenant: Option<String>,
    pub streaming: bool,
    pub push: bool,
    /// Sealed under the master key; never leaves the service.
    pub sealed_credentials: Option<String>,
    /// JSON without secrets.
    pub credentials_summary: String,
    pub created_at: Timestamp,
    pub refreshed_at: Timestamp,
}

pub(in crate::store) const COLUMNS: &str = "p.id, p.kind, p.display_name, p.created_at AS person_created_at, \
     r.card_url, r.card, r.jwks, r.unsigned, r.binding, r.binding_forced, r.url, r.tenant, \
     r.streaming, r.push, r.sealed_credentials, r.credentials_summary, r.created_at, r.refreshed_at";

pub(in crate::store) fn remote(row: &Row) -> Result<RemoteRecord> {
    Ok(RemoteRecord {
        person: PersonRecord {
            id: PersonId::parse(row.try_get::<String, _>("id")?)?,
            kind: row.try_get::<String, _>("kind")?.parse()?,
            display_name: row.try_get("display_name")?,
            created_at: Timestamp(row.try_get("person_created_at")?),
        },
        card_url: row.try_get("card_url")?,
        card: row.try_get("card")?,
        jwks: row.try_get("jwks")?,
        unsigned: row.try_get::<i64, _>("unsigned")? != 0,
        binding: row.try_get("binding")?,
        binding_forced: row.try_get::<i64, _>("binding_forced")? != 0,
        url: row.try_get("url")?,
        tenant: row.try_get("tenant")?,
        streaming: row.try_get::<i64, _>("streaming")? != 0,
        push: row.try_get::<i64, _>("push")? != 0,
        sealed_credentials: row.try_get("sealed_credentials")?,
        credentials_summary: row.try_get("credentials_summary")?,
        created_at: Timestamp(row.try_get("created_at")?),
        refreshed_at: Timestamp(row.try_get("refreshed_at")?),
    })
}
