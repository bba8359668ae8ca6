//! Approval commands for humans (`LIAISON_TOKEN`, a token with scope `human`), and the audit log
//! for admins. Thin clients of `/api/v1/approvals` and `/admin/v1/audit`.

use clap::Subcommand;
use serde_json::json;

use super::ServerArgs;
use super::admin::{admin_token, call_as, encode, member_token, request_json};
use super::table::{self, Format, col};
use crate::domain::duration::{self, Seconds};

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// Approvals you may decide, newest first; the first page also lists your agents' tool
    /// calls waiting for your "allow once" (`tcf_…` ids, decided with allow/reject too).
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
        format: Format,
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
        #[arg(long, allow_hyphen_values = true)]
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
        /// How long the link stays valid: seconds or 30s, 10m, 24h, 7d (default 1h, at most 7d).
        #[arg(long, value_parser = duration::parse)]
        expires_in: Option<Seconds>,
        #[command(flatten)]
        server: ServerArgs,
    },
}

pub(super) async fn approvals(c: ApprovalsCommand) -> anyhow::Result<()> {
    match c {
        ApprovalsCommand::Link {
            id,
            person,
            expires_in,
            server,
        } => {
            let body = json!({ "for": person, "expires_in_s": expires_in.map(|s| s.0) });
            let path = format!("/admin/v1/approvals/{id}/link");
            call_as(&server, &admin_token(&server)?, "POST", &path, Some(body)).await
        }
        ApprovalsCommand::List {
            pending,
            before,
            limit,
            format,
            server,
        } => {
            let first_page = before.is_none();
            let mut path = format!("/api/v1/approvals?pending={pending}");
            if let Some(b) = before {
                path.push_str(&format!("&before={}", encode(&b)));
            }
            if let Some(l) = limit {
                path.push_str(&format!("&limit={l}"));
            }
            let token = member_token("approvals need scope human")?;
            let mut answer = request_json(&server, &token, None, "GET", &path, None).await?;
            // Her agents' tool calls waiting for her (SPEC §5b) are decided the same way
            // (`approvals allow|reject tcf_…`): the first page shows them too.
            if first_page {
                let waiting =
                    request_json(&server, &token, None, "GET", "/api/v1/confirmations", None)
                        .await?;
                answer["confirmations"] = waiting["confirmations"].clone();
            }
            if first_page && !format.json {
                let rows = answer["confirmations"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if !rows.is_empty() {
                    let columns = [
                        col!("ID", "id"),
                        col!("CONNECTION", "connection"),
                        col!("TOOL", "tool"),
                        col!("ACTION", |row| {
                            let s = &row["summary"];
                            table::cell(if s["command"].is_string() {
                                &s["command"]
                            } else {
                                &s["target"]
                            })
                        }),
                        col!("IMPACT", "impact"),
                        col!("EXPIRES", "expires_at"),
                    ];
                    println!("Tool calls of your agents waiting for you:");
                    println!("{}\n", table::render(&rows, &columns));
                    println!("Approvals:");
                }
            }
            let columns = [
                col!("ID", "id"),
                col!("STATE", "state"),
                col!("CHANNEL", "channel"),
                col!("IMPACT", "impact"),
                col!("REQUESTED BY", "requested_by"),
                col!("APPROVERS", "approvers"),
                col!("CREATED", "created_at"),
                col!("EXPIRES", "expires_at"),
            ];
            table::print(
                format,
                &answer,
                "approvals",
                &columns,
                Some(("next", "--before")),
            )
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

/// A single-use console login link (admins); `admin`: for an admin console session.
pub(super) async fn login_link(
    person: String,
    admin: bool,
    expires_in: Option<u64>,
    server: ServerArgs,
) -> anyhow::Result<()> {
    let body = json!({ "person": person, "admin": admin, "expires_in_s": expires_in });
    call_as(
        &server,
        &admin_token(&server)?,
        "POST",
        "/admin/v1/login-links",
        Some(body),
    )
    .await
}

/// The filter of `liaison audit`.
pub(super) struct AuditArgs {
    pub since: Option<String>,
    pub event: Option<String>,
    pub actor: Option<String>,
    pub subject: Option<String>,
    pub after: Option<i64>,
    pub limit: Option<i64>,
}

/// The audit log (admins): every approval step and admin change, oldest first.
pub(super) async fn audit(
    filter: AuditArgs,
    format: Format,
    server: ServerArgs,
) -> anyhow::Result<()> {
    let mut query = Vec::new();
    for (name, value) in [
        ("since", filter.since),
        ("event", filter.event),
        ("actor", filter.actor),
        ("subject", filter.subject),
    ] {
        if let Some(v) = value {
            query.push(format!("{name}={}", encode(&v)));
        }
    }
    if let Some(a) = filter.after {
        query.push(format!("after={a}"));
    }
    if let Some(l) = filter.limit {
        query.push(format!("limit={l}"));
    }
    let path = format!("/admin/v1/audit?{}", query.join("&"));
    let answer = request_json(&server, &admin_token(&server)?, None, "GET", &path, None).await?;
    let columns = [
        col!("SEQ", "seq"),
        col!("AT", "at"),
        col!("EVENT", "event"),
        col!("SUBJECT", "subject"),
        col!("APPROVAL", "approval"),
        col!("THREAD", "thread"),
        col!("ACTOR", "actor"),
        col!("VIA", "via"),
        col!("DECISION", "decision"),
    ];
    table::print(
        format,
        &answer,
        "entries",
        &columns,
        Some(("next_after", "--after")),
    )
}
