//! The web console's credentials as stored (never their secrets): single-use links of each kind,
//! with the table each kind lives in, and console sessions; with the parsers of their rows. It
//! must not depend on any file of the store but `db` (rows) and `error`.

use crate::domain::tool_check::ConfirmationId;
use crate::domain::{ApprovalId, PersonId, Timestamp};
use crate::store::db::Row;
use crate::store::error::Result;

/// Which single-use link: each kind has its own table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// Opens a console session for its person.
    Login,
    /// Decides one approval as its person.
    Approval,
    /// Decides one tool confirmation as its person (SPEC §5b).
    Confirmation,
}

impl LinkKind {
    pub(in crate::store) fn table(self) -> &'static str {
        match self {
            LinkKind::Login => "login_links",
            LinkKind::Approval => "approval_links",
            LinkKind::Confirmation => "confirmation_links",
        }
    }

    pub(in crate::store) fn columns(self) -> &'static str {
        match self {
            LinkKind::Login => "id, person, admin, created_at, expires_at, used_at",
            LinkKind::Approval => "id, person, approval_id, created_at, expires_at, used_at",
            LinkKind::Confirmation => {
                "id, person, confirmation_id, created_at, expires_at, used_at"
            }
        }
    }
}

/// A link as stored (never its secret).
#[derive(Debug, Clone, serde::Serialize)]
pub struct LinkRecord {
    pub id: String,
    pub person: PersonId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<ConfirmationId>,
    /// A login link that opens an admin console session (never an approval link).
    pub admin: bool,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_at: Option<Timestamp>,
}

impl LinkRecord {
    /// The id of what the link decides (an approval or a confirmation); none for a login link.
    pub fn subject(&self) -> Option<&str> {
        match (&self.approval, &self.confirmation) {
            (Some(a), _) => Some(a.as_str()),
            (None, Some(c)) => Some(c.as_str()),
            (None, None) => None,
        }
    }
}

/// A console session as stored (never its secret).
#[derive(Debug, Clone, serde::Serialize)]
pub struct SessionRecord {
    pub id: String,
    pub person: PersonId,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
    /// Opened by an admin login link: the admin pages are open to it while its person still
    /// holds a live `admin` token.
    pub admin: bool,
}

pub(in crate::store) fn link(kind: LinkKind, row: &Row) -> Result<LinkRecord> {
    Ok(LinkRecord {
        id: row.try_get("id")?,
        person: PersonId::parse(row.try_get::<String, _>("person")?)?,
        approval: match kind {
            LinkKind::Approval => {
                Some(ApprovalId::parse(row.try_get::<String, _>("approval_id")?)?)
            }
            LinkKind::Login | LinkKind::Confirmation => None,
        },
        confirmation: match kind {
            LinkKind::Confirmation => Some(ConfirmationId::parse(
                row.try_get::<String, _>("confirmation_id")?,
            )?),
            LinkKind::Login | LinkKind::Approval => None,
        },
        admin: match kind {
            LinkKind::Login => row.try_get::<i64, _>("admin")? != 0,
            LinkKind::Approval | LinkKind::Confirmation => false,
        },
        created_at: Timestamp(row.try_get("created_at")?),
        expires_at: Timestamp(row.try_get("expires_at")?),
        used_at: row.try_get::<Option<i64>, _>("used_at")?.map(Timestamp),
    })
}

pub(in crate::store) const SESSION_COLUMNS: &str =
    "id, person, created_at, expires_at, ended_at, admin";

pub(in crate::store) fn session(row: &Row) -> Result<SessionRecord> {
    Ok(SessionRecord {
        id: row.try_get("id")?,
        person: PersonId::parse(row.try_get::<String, _>("person")?)?,
        created_at: Timestamp(row.try_get("created_at")?),
        expires_at: Timestamp(row.try_get("expires_at")?),
        ended_at: row.try_get::<Option<i64>, _>("ended_at")?.map(Timestamp),
        admin: row.try_get::<i64, _>("admin")? != 0,
    })
}
