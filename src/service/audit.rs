//! The audit log (SPEC §12): one append-only log of every approval step and every admin change.
//! An admin operation hands the store an [`AdminChange`] built here with the change itself, and
//! the store appends it in the change's transaction, so a change is never made unlogged (on both
//! backends). What an entry shows of its subject before and after is the record as the admin API
//! shows it: never a secret (token secrets, webhook secrets and remote credentials are stored
//! hashed or sealed, and the records leave them out).

use serde::{Deserialize, Serialize};

use super::{Caller, Result, Service, ServiceError};
use crate::domain::{PersonId, Scope, Timestamp};
use crate::store::{AdminChange, AuditFilter, AuditRecord};

/// Most entries one audit read returns.
pub const MAX_AUDIT_PAGE: i64 = 1000;

/// Which audit entries an admin asks for (`/admin/v1/audit`, the console's audit page).
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Entries after this sequence number (the last `seq` of the previous page).
    pub after: Option<i64>,
    /// RFC 3339: entries at or after this time.
    pub since: Option<String>,
    /// Entries whose event starts with this: `token.`, `channel.policy_changed`, `decided`.
    pub event: Option<String>,
    /// Entries made by this person.
    pub actor: Option<String>,
    /// Entries about this subject (a person, token, channel, webhook, delivery, key id), or this
    /// approval or thread.
    pub subject: Option<String>,
    /// 1 to 1000 (default 100).
    pub limit: Option<i64>,
}

/// A page of the audit log (`/admin/v1/audit`, `liaison audit`).
#[derive(Debug, Clone, Serialize)]
pub struct AuditPage {
    pub entries: Vec<AuditRecord>,
    /// Pass as `after` for the next page; none when this page reaches the end of what the
    /// filter selects, so a reader is never sent to an empty page.
    pub next_after: Option<i64>,
}

/// A record as an audit entry shows it (the admin API's own JSON of it).
pub(super) fn shown(record: &impl serde::Serialize) -> Option<serde_json::Value> {
    serde_json::to_value(record).ok()
}

fn filter_text(name: &str, value: Option<&str>) -> Result<Option<String>> {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) if v.chars().count() > 200 || v.chars().any(char::is_control) => Err(
            ServiceError::invalid(format!("{name} must be one line of at most 200 characters")),
        ),
        Some(v) => Ok(Some(v.to_owned())),
    }
}

impl Service {
    /// The entry of an admin change `caller` makes now.
    pub(super) fn change(
        &self,
        caller: &Caller,
        event: &'static str,
        subject: impl std::fmt::Display,
        before: Option<serde_json::Value>,
        after: Option<serde_json::Value>,
    ) -> AdminChange {
        AdminChange {
            at: self.now(),
            actor: Some(caller.id().clone()),
            via: Some(caller.via),
            event,
            subject: subject.to_string(),
            before,
            after,
        }
    }

    /// The entry of a change the server makes on its own (the bootstrap admin).
    pub(super) fn server_change(
        &self,
        event: &'static str,
        subject: impl std::fmt::Display,
        after: Option<serde_json::Value>,
    ) -> AdminChange {
        AdminChange {
            at: self.now(),
            actor: None,
            via: None,
            event,
            subject: subject.to_string(),
            before: None,
            after,
        }
    }

    /// The audit log, oldest first, for admins.
    pub async fn audit(&self, caller: &Caller, q: &AuditQuery) -> Result<Vec<AuditRecord>> {
        caller.require(Scope::Admin)?;
        let filter = audit_filter(q)?;
        Ok(self.inner.store.audit_log(filter).await?)
    }

    /// A page of the audit log, oldest first, for admins: one entry more than asked for is read,
    /// so `next_after` is set only when another entry follows.
    pub async fn audit_page(&self, caller: &Caller, q: &AuditQuery) -> Result<AuditPage> {
        caller.require(Scope::Admin)?;
        self.audit_page_of(audit_filter(q)?).await
    }

    /// One page of what `filter` selects: one entry more than asked for is read, so
    /// `next_after` is set only when another entry follows.
    async fn audit_page_of(&self, mut filter: AuditFilter) -> Result<AuditPage> {
        let limit = usize::try_from(filter.limit).unwrap_or(0);
        filter.limit += 1;
        let mut entries = self.inner.store.audit_log(filter).await?;
        let next_after = if entries.len() > limit {
            entries.truncate(limit);
            entries.last().map(|e| e.seq)
        } else {
            None
        };
        Ok(AuditPage {
            entries,
            next_after,
        })
    }
}

impl Service {
    /// A page of the audit log, newest first (the console's), older than the entry `before`
    /// when given: `next_after` is then where the next, older page starts (pass it as
    /// `before`), none at the oldest entry the filter selects.
    pub async fn audit_newest(
        &self,
        caller: &Caller,
        q: &AuditQuery,
        before: Option<i64>,
    ) -> Result<AuditPage> {
        caller.require(Scope::Admin)?;
        let mut filter = audit_filter(q)?;
        filter.newest_first = true;
        filter.before = before;
        self.audit_page_of(filter).await
    }
}

/// The store's filter of a query, or why the query is refused.
fn audit_filter(q: &AuditQuery) -> Result<AuditFilter> {
    let limit = match q.limit {
        None => 100,
        Some(l) if (1..=MAX_AUDIT_PAGE).contains(&l) => l,
        Some(l) => {
            return Err(ServiceError::invalid(format!(
                "limit {l} is out of range: use 1-{MAX_AUDIT_PAGE}"
            )));
        }
    };
    let since = match q.since.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        None => None,
        Some(t) => Some(Timestamp(
            chrono::DateTime::parse_from_rfc3339(t)
                .map_err(|_| {
                    ServiceError::invalid(format!(
                        "since {} is not an RFC 3339 time (e.g. 2026-12-01T09:00:00Z)",
                        crate::domain::text::quote(t)
                    ))
                })?
                .timestamp_millis(),
        )),
    };
    let actor = match filter_text("actor", q.actor.as_deref())? {
        None => None,
        Some(a) => Some(PersonId::parse(a.clone()).map_err(|_| {
            ServiceError::invalid(format!(
                "actor {} is not a person id",
                crate::domain::text::quote(&a)
            ))
        })?),
    };
    Ok(AuditFilter {
        after: q.after.unwrap_or(0).max(0),
        since,
        event: filter_text("event", q.event.as_deref())?,
        actor,
        subject: filter_text("subject", q.subject.as_deref())?,
        limit,
        before: None,
        newest_first: false,
    })
}
