//! OAuth 2.1 for MCP clients as stored (SPEC §7): clients, grants (each a connection, a row of
//! `tokens`), authorization codes and refresh tokens (never their secrets, only hashes); with the
//! parsers of their rows. It must not depend on any file of the store but `db` (rows) and `error`.

use serde::Serialize;

use crate::domain::Timestamp;
use crate::store::db::Row;
use crate::store::error::{Result, StoreError};

/// A client of liaison's authorization server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OAuthClientRecord {
    /// `ocl_…` for a registered client; the metadata document's URL for the other kind.
    pub id: String,
    /// `registered` (RFC 7591) or `metadata_document` (a Client ID Metadata Document).
    pub kind: String,
    /// The name it gave itself: self-declared, shown as such.
    pub name: String,
    pub redirect_uris: Vec<String>,
    /// The registration as answered, or the document as read.
    pub metadata: serde_json::Value,
    /// The address that registered it (registered clients).
    pub registered_from: Option<String>,
    pub created_at: Timestamp,
    /// When its metadata document was last read (registered: when it registered).
    pub fetched_at: Timestamp,
}

pub(in crate::store) const CLIENT_COLUMNS: &str =
    "id, kind, name, redirect_uris, metadata, registered_from, created_at, fetched_at";

pub(in crate::store) fn client(row: &Row) -> Result<OAuthClientRecord> {
    let json = |col: &str| -> Result<serde_json::Value> {
        serde_json::from_str(&row.try_get::<String, _>(col)?)
            .map_err(|e| StoreError::Corrupt(format!("oauth_clients.{col}: {e}")))
    };
    let uris = json("redirect_uris")?;
    Ok(OAuthClientRecord {
        id: row.try_get("id")?,
        kind: row.try_get("kind")?,
        name: row.try_get("name")?,
        redirect_uris: serde_json::from_value(uris)
            .map_err(|e| StoreError::Corrupt(format!("oauth_clients.redirect_uris: {e}")))?,
        metadata: json("metadata")?,
        registered_from: row.try_get("registered_from")?,
        created_at: Timestamp(row.try_get("created_at")?),
        fetched_at: Timestamp(row.try_get("fetched_at")?),
    })
}

/// A grant: the connection (token id) a member consented to, for one client and resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OAuthGrantRecord {
    pub token_id: String,
    pub client_id: String,
    pub resource: String,
    pub created_at: Timestamp,
}

pub(in crate::store) const GRANT_COLUMNS: &str = "token_id, client_id, resource, created_at";

pub(in crate::store) fn grant(row: &Row) -> Result<OAuthGrantRecord> {
    Ok(OAuthGrantRecord {
        token_id: row.try_get("token_id")?,
        client_id: row.try_get("client_id")?,
        resource: row.try_get("resource")?,
        created_at: Timestamp(row.try_get("created_at")?),
    })
}

/// An authorization code (its hash is the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthCodeRecord {
    /// The grant it is bound to.
    pub token_id: String,
    pub redirect_uri: String,
    /// The S256 challenge the authorization request carried.
    pub code_challenge: String,
    pub expires_at: Timestamp,
}

/// What presenting a code did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodeUse {
    /// First use: it is spent now.
    Fresh(OAuthCodeRecord, OAuthGrantRecord),
    /// It was spent before (reuse).
    Spent(OAuthCodeRecord),
    Unknown,
}

/// A refresh token (its hash is the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthRefreshRecord {
    pub grant: OAuthGrantRecord,
    pub expires_at: Timestamp,
    /// When it was rotated (spent).
    pub used_at: Option<Timestamp>,
}

/// What rotating a refresh token did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rotation {
    /// Spent, and its successor stored.
    Rotated,
    /// It was spent before: reuse.
    Reused,
    Unknown,
}
