//! The directory's records: persons and their tokens, channels with their members, and parties
//! (external persons with their A2A settings); with the column lists and parsers that turn their
//! rows into them. It must not depend on any file of the store but `db` (rows) and `error`.

use serde::Serialize;

use crate::domain::{
    ApprovalPolicy, ChannelName, ConnectionRights, ConnectionSlug, PersonId, PersonKind, Rights,
    Scopes, Timestamp,
};
use crate::store::db::Row;
use crate::store::error::{Result, StoreError};

#[derive(Debug, Clone, Serialize)]
pub struct PersonRecord {
    pub id: PersonId,
    pub kind: PersonKind,
    pub display_name: String,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, Serialize)]
pub struct TokenRecord {
    /// Public handle of the token (for listing and revoking); not the secret.
    pub id: String,
    pub person: PersonId,
    pub scopes: Scopes,
    pub description: String,
    pub created_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
    /// When a request last used it, to the minute; none when never used since it was recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<Timestamp>,
    /// For a member's agent token: the connection's name (SPEC §2), addressed as
    /// `person/connection`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection: Option<ConnectionSlug>,
    /// For a connection: the rights its person gave it; none is the defaults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rights: Option<ConnectionRights>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ChannelRecord {
    pub name: ChannelName,
    pub description: String,
    pub policy: ApprovalPolicy,
    pub created_at: Timestamp,
    pub members: Vec<MemberRecord>,
    /// When an admin removed it: its history stays readable, nothing new is posted in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed_at: Option<Timestamp>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MemberRecord {
    pub person: PersonId,
    pub rights: Rights,
}

impl ChannelRecord {
    pub fn member(&self, person: &PersonId) -> Option<&MemberRecord> {
        self.members.iter().find(|m| &m.person == person)
    }
}

/// An external party's A2A settings.
#[derive(Debug, Clone, Serialize)]
pub struct PartyRecord {
    pub person: PersonRecord,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_skill: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwt_subject: Option<String>,
}

pub(in crate::store) fn person(row: &Row) -> Result<PersonRecord> {
    Ok(PersonRecord {
        id: PersonId::parse(row.try_get::<String, _>("id")?)?,
        kind: row.try_get::<String, _>("kind")?.parse()?,
        display_name: row.try_get("display_name")?,
        created_at: Timestamp(row.try_get("created_at")?),
    })
}

pub(in crate::store) fn token(row: &Row) -> Result<TokenRecord> {
    Ok(TokenRecord {
        id: row.try_get("id")?,
        person: PersonId::parse(row.try_get::<String, _>("person_id")?)?,
        scopes: Scopes::parse(&row.try_get::<String, _>("scopes")?)?,
        description: row.try_get("description")?,
        created_at: Timestamp(row.try_get("created_at")?),
        expires_at: row.try_get::<Option<i64>, _>("expires_at")?.map(Timestamp),
        revoked_at: row.try_get::<Option<i64>, _>("revoked_at")?.map(Timestamp),
        last_used_at: row
            .try_get::<Option<i64>, _>("last_used_at")?
            .map(Timestamp),
        connection: row
            .try_get::<Option<String>, _>("connection")?
            .map(ConnectionSlug::parse)
            .transpose()?,
        rights: row
            .try_get::<Option<String>, _>("rights")?
            .map(|r| serde_json::from_str(&r))
            .transpose()
            .map_err(|e| StoreError::Corrupt(format!("connection rights: {e}")))?,
    })
}

pub(in crate::store) const TOKEN_COLUMNS: &str = "id, person_id, scopes, description, created_at, expires_at, revoked_at, last_used_at, connection, rights";

pub(in crate::store) fn channel(row: &Row, members: Vec<MemberRecord>) -> Result<ChannelRecord> {
    let policy: String = row.try_get("policy")?;
    Ok(ChannelRecord {
        name: ChannelName::parse(row.try_get::<String, _>("name")?)?,
        description: row.try_get("description")?,
        policy: serde_json::from_str(&policy).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        created_at: Timestamp(row.try_get("created_at")?),
        members,
        removed_at: row.try_get::<Option<i64>, _>("removed_at")?.map(Timestamp),
    })
}

pub(in crate::store) fn party(row: &Row) -> Result<PartyRecord> {
    Ok(PartyRecord {
        person: PersonRecord {
            id: PersonId::parse(row.try_get::<String, _>("id")?)?,
            kind: row.try_get::<String, _>("kind")?.parse()?,
            display_name: row.try_get("display_name")?,
            created_at: Timestamp(row.try_get("created_at")?),
        },
        default_skill: row.try_get("default_skill")?,
        jwt_subject: row.try_get("jwt_subject")?,
    })
}
