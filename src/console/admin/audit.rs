//! The audit log: every approval step and every admin change, newest first, filtered by event,
//! actor, subject and time, a page at a time (the filter and the page kept in the address), with
//! each change's subject before and after; exported as JSON lines, oldest first, with the same
//! filter (`Service::audit_newest`; the export as `/admin/v1/audit` and `liaison audit`).

use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use minijinja::value::Serde;
use serde::{Deserialize, Serialize};

use super::{admin, admin_frame, fail, pretty, rendered};
use crate::console::{Console, status_of};
use crate::service::{AuditQuery, ServiceError};

/// Entries per page.
const PAGE: i64 = 50;

pub(super) fn routes() -> Router<Console> {
    Router::new()
        .route("/console/admin/audit", get(page))
        .route("/console/admin/audit/export", get(export))
}

#[derive(Serialize)]
struct EntryRow {
    seq: i64,
    at: String,
    event: String,
    actor: String,
    via: String,
    subject: String,
    before: Option<String>,
    after: Option<String>,
    detail: Option<String>,
}

/// The page's address: the export's filter, and `before`, the entry the page starts before.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct PageQuery {
    event: Option<String>,
    actor: Option<String>,
    subject: Option<String>,
    since: Option<String>,
    before: Option<String>,
}

impl PageQuery {
    fn filter(&self) -> AuditQuery {
        AuditQuery {
            event: self.event.clone(),
            actor: self.actor.clone(),
            subject: self.subject.clone(),
            since: self.since.clone(),
            limit: Some(PAGE),
            ..AuditQuery::default()
        }
    }

    fn before(&self) -> Result<Option<i64>, ServiceError> {
        match super::field(&self.before) {
            None => Ok(None),
            Some(b) => b.parse().map(Some).map_err(|_| {
                ServiceError::invalid(format!(
                    "before must be an entry number, not {}",
                    crate::domain::text::quote(&b)
                ))
            }),
        }
    }
}

fn query(q: Result<Query<AuditQuery>, QueryRejection>) -> Result<AuditQuery, ServiceError> {
    q.map(|Query(q)| q).map_err(|e| {
        ServiceError::invalid(format!(
            "this filter is not one the page sends ({})",
            e.body_text()
        ))
    })
}

/// The filter as a query string (for the next page and the export).
fn encoded(q: &AuditQuery) -> String {
    let mut parts = Vec::new();
    for (k, v) in [
        ("event", &q.event),
        ("actor", &q.actor),
        ("subject", &q.subject),
        ("since", &q.since),
    ] {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            parts.push(format!("{k}={}", urlencoding(v)));
        }
    }
    parts.join("&")
}

fn urlencoding(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn page(
    State(c): State<Console>,
    headers: HeaderMap,
    q: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Response, Response> {
    let a = admin(&c, &headers).await?;
    let asked = q.map(|Query(q)| q).map_err(|e| {
        ServiceError::invalid(format!(
            "this filter is not one the page sends ({})",
            e.body_text()
        ))
    });
    let read = match &asked {
        Ok(q) => match q.before() {
            Ok(before) => c.service.audit_newest(&a.caller, &q.filter(), before).await,
            Err(e) => Err(e),
        },
        Err(e) => Err(e.clone()),
    };
    let q = asked.unwrap_or_default();
    let (entries, next, error, status) = match read {
        Ok(p) => (p.entries, p.next_after, None, StatusCode::OK),
        Err(e) => (Vec::new(), None, Some(e.message.clone()), status_of(&e)),
    };
    let rows: Vec<EntryRow> = entries
        .into_iter()
        .map(|e| EntryRow {
            seq: e.seq,
            at: e.at.to_string(),
            event: e.event,
            actor: e.actor.map_or_else(|| "(server)".into(), |p| p.to_string()),
            via: e.via.map_or_else(String::new, |v| v.to_string()),
            subject: e
                .subject
                .or_else(|| e.approval.map(|a| a.to_string()))
                .unwrap_or_default(),
            before: e.before.as_ref().map(pretty),
            after: e.after.as_ref().map(pretty),
            detail: e
                .decision
                .map(|d| d.to_string())
                .or(e.detail)
                .or_else(|| e.session.map(|s| s.to_string())),
        })
        .collect();
    let filter = encoded(&q.filter());
    let searched = !filter.is_empty();
    rendered(
        &c,
        "admin/audit.html",
        minijinja::context! {
            entries => Serde(&rows), q => Serde(&q), error => error, filter => filter,
            next => next, searched => searched, first => q.before.is_some(),
            ..Serde(admin_frame(&a, "audit"))
        },
        status,
    )
    .await
}

/// `GET /console/admin/audit/export`: the filtered log as JSON lines, a download.
async fn export(
    State(c): State<Console>,
    headers: HeaderMap,
    q: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Response, Response> {
    let a = admin(&c, &headers).await?;
    let fail = fail(&c);
    let q = query(q).map_err(fail)?;
    crate::http::audit_lines(c.service.clone(), a.caller, q)
        .await
        .map_err(fail)
}
