//! Approval commands for humans (`LIAISON_TOKEN`, a token with scope `human`), and the audit log
//! for admins. Thin clients of `/api/v1/approvals` and `/admin/v1/audit`.

use clap::Subcommand;
use serde_json::json;

use super::ServerArgs;
use super::admin::{admin_token, call_as, member_token};

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// Approvals you may decide, newest first.
    List {
        /// Only those still waiting for a decision.
        #[arg(long)]
        pending: bool,
        /// The next page: approvals older than this id.
        #[arg(long)]
        before: Option<String>,
        #[arg(long)]
        limit: Option<i64>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// One approval: the exact request, who asked, who may decide, and the fingerprint.
    Show {
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Allow the request once: the first claim after this starts the work.
    Allow {
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Reject the request: its thread is closed with your reason.
    Reject {
        id: String,
        /// Why; the requester is told.
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// A single-use link deciding the approval (admins, LIAISON_ADMIN_TOKEN); prints its URL.
    Link {
        id: String,
        /// The approver the link decides as (default: the approval's first approver).
        #[arg(long = "for")]
        person: Option<String>,
        /// Seconds until the link expires (default 3600, at most 7 days).
        #[arg(long)]
        expires_in: Option<u64>,
        #[command(flatten)]
        server: ServerArgs,
    },
}

pub async fn approvals(c: ApprovalsCommand) -> anyhow::Result<()> {
    match c {
        ApprovalsCommand::Link {
            id,
            person,
            expires_in,
            server,
        } => {
            let body = json!({ "for": person, "expires_in_s": expires_in });
            let path = format!("/admin/v1/approvals/{id}/link");
            call_as(&server, &admin_token(&server)?, "POST", &path, Some(body)).await
        }
        ApprovalsCommand::List {
            pending,
            before,
            limit,
            server,
        } => {
            let mut path = format!("/api/v1/approvals?pending={pending}");
            if let Some(b) = before {
                path.push_str(&format!("&before={b}"));
            }
            if let Some(l) = limit {
                path.push_str(&format!("&limit={l}"));
            }
            call_as(
                &server,
                &member_token("approvals need scope human")?,
                "GET",
                &path,
                None,
            )
            .await
        }
        ApprovalsCommand::Show { id, server } => {
            call_as(
                &server,
                &member_token("approvals need scope human")?,
                "GET",
                &format!("/api/v1/approvals/{id}"),
                None,
            )
            .await
        }
        ApprovalsCommand::Allow { id, server } => {
            let path = format!("/api/v1/approvals/{id}/allow");
            call_as(
                &server,
                &member_token("approvals need scope human")?,
                "POST",
                &path,
                Some(json!({ "via": "cli" })),
            )
            .await
        }
        ApprovalsCommand::Reject { id, reason, server } => {
            let path = format!("/api/v1/approvals/{id}/reject");
            let body = json!({ "via": "cli", "reason": reason });
            call_as(
                &server,
                &member_token("approvals need scope human")?,
                "POST",
                &path,
                Some(body),
            )
            .await
        }
    }
}

/// A single-use console login link (admins).
pub async fn login_link(
    person: String,
    expires_in: Option<u64>,
    server: ServerArgs,
) -> anyhow::Result<()> {
    let body = json!({ "person": person, "expires_in_s": expires_in });
    call_as(
        &server,
        &admin_token(&server)?,
        "POST",
        "/admin/v1/login-links",
        Some(body),
    )
    .await
}

/// The audit log (admins): every approval event, oldest first.
pub async fn audit(
    since: Option<String>,
    after: Option<i64>,
    limit: Option<i64>,
    server: ServerArgs,
) -> anyhow::Result<()> {
    let mut query = Vec::new();
    if let Some(s) = since {
        query.push(format!("since={s}"));
    }
    if let Some(a) = after {
        query.push(format!("after={a}"));
    }
    if let Some(l) = limit {
        query.push(format!("limit={l}"));
    }
    let path = format!("/admin/v1/audit?{}", query.join("&"));
    call_as(&server, &admin_token(&server)?, "GET", &path, None).await
}
