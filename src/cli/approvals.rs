//! Approval commands for humans (`LIAISON_TOKEN`, a token with scope `human`), and the audit log
//! for admins. Thin clients of `/api/v1/approvals` and `/admin/v1/audit`.

use clap::Subcommand;
use serde_json::{Value, json};

use super::ServerArgs;
use super::admin::{admin_token, call_as, encode, member_token, request_json};
use super::table::{self, Format, col};
use crate::domain::duration::{self, Seconds};
use crate::domain::text;

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
    /// One approval (apr_…): the exact request, who asked, who may decide, and the fingerprint;
    /// or one confirmation of your agent's tool call (tcf_…): the call, its impact, fingerprint.
    Show {
        id: String,
        #[command(flatten)]
        format: Format,
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
        ApprovalsCommand::Show { id, format, server } => {
            let token = member_token("approvals need scope human")?;
            let path = format!("/api/v1/approvals/{}", encode(&id));
            let answer = request_json(&server, &token, None, "GET", &path, None).await?;
            if format.json {
                println!("{}", serde_json::to_string_pretty(&answer)?);
            } else if answer["confirmation"].is_object() {
                println!("{}", confirmation_text(&answer["confirmation"]));
            } else {
                println!("{}", approval_text(&answer["approval"]));
            }
            Ok(())
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

/// A value of the answer as one line of text (`-` when absent).
fn field(v: &Value) -> String {
    match v {
        Value::String(s) => text::one_line(s),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    }
}

/// `approvals show apr_…`: what is decided (the request exactly as it will be acted on), who
/// asked, who may decide, until when, and the fingerprint the decision is bound to. The body is
/// the requester's agent's text: shown indented behind `| `, each line with its invisible
/// characters escaped, so it cannot pass for this command's own lines.
fn approval_text(a: &Value) -> String {
    let r = &a["request"];
    let person = |name: &Value, id: &Value| format!("{} ({})", field(name), field(id));
    let approvers: Vec<String> = a["approvers"]
        .as_array()
        .into_iter()
        .flatten()
        .zip(a["approver_names"].as_array().into_iter().flatten())
        .map(|(id, name)| person(name, id))
        .collect();
    let mut out = vec![
        format!(
            "Approval {}: {} {}",
            field(&a["id"]),
            field(&a["state"]),
            if a["kind"] == "outbound" {
                "(a message leaving the team)".to_owned()
            } else {
                format!("(a request with impact {})", field(&a["impact"]))
            }
        ),
        format!(
            "Requested by:  {}",
            person(&a["requested_by_name"], &a["requested_by"])
        ),
        format!("Approvers:     {}", approvers.join(", ")),
        format!(
            "Thread:        {} in channel {}, subject {}",
            field(&a["thread"]),
            field(&a["channel"]),
            text::quote(a["subject"].as_str().unwrap_or_default())
        ),
    ];
    if let Some(d) = a["destination"].as_str() {
        out.push(format!(
            "Destination:   the remote agent {}",
            text::quote(d)
        ));
    }
    out.push(format!("Created:       {}", field(&a["created_at"])));
    match a["state"].as_str() {
        Some("pending") => out.push(format!("Decide before: {}", field(&a["expires_at"]))),
        _ => {
            out.push(format!(
                "Decided:       by {} via {} at {}{}",
                field(&a["decided_by"]),
                field(&a["decided_via"]),
                field(&a["decided_at"]),
                a["reason"]
                    .as_str()
                    .map(|r| format!(", reason {}", text::quote(r)))
                    .unwrap_or_default()
            ));
        }
    }
    out.push(format!(
        "Fingerprint:   {} (the decision holds for exactly this request)",
        field(&a["fingerprint"])
    ));
    out.push(format!(
        "\nThe request {} ({}{}), exactly as it will be acted on:",
        field(&r["id"]),
        field(&r["kind"]),
        r["impact"]
            .as_str()
            .map(|i| format!(", impact {i}"))
            .unwrap_or_default()
    ));
    if let Some(s) = r["subject"].as_str() {
        out.push(format!("  subject: {}", text::quote(s)));
    }
    for line in r["body"].as_str().unwrap_or_default().lines() {
        out.push(format!("  | {}", text::one_line(line)));
    }
    for part in r["attachments"].as_array().into_iter().flatten() {
        let name = |k: &str| text::quote(part[k].as_str().unwrap_or("?"));
        out.push(match part["type"].as_str() {
            Some("inline") => format!(
                "  attachment: file {} ({}, {} bytes)",
                name("filename"),
                field(&part["media_type"]),
                part["data_base64"].as_str().map_or(0, |b| b.len() / 4 * 3)
            ),
            Some("url") => format!("  attachment: link {}", name("url")),
            _ => format!(
                "  attachment: data {}",
                text::one_line(&part["data"].to_string())
            ),
        });
    }
    out.join("\n")
}

/// `approvals show tcf_…`: one confirmation of an agent's own tool call (SPEC §5b).
fn confirmation_text(c: &Value) -> String {
    let summary = &c["summary"];
    let mut out = vec![
        format!(
            "Confirmation {}: {} (a tool call of your agent, impact {} by rule {})",
            field(&c["id"]),
            field(&c["state"]),
            field(&c["impact"]),
            text::quote(c["rule"].as_str().unwrap_or_default())
        ),
        format!(
            "Agent:         {}/{} (self-declared session {})",
            field(&c["person"]),
            field(&c["connection"]),
            text::quote(c["agent"].as_str().unwrap_or_default())
        ),
        format!(
            "Tool:          {}",
            text::quote(c["tool"].as_str().unwrap_or("?"))
        ),
    ];
    if let Some(t) = summary["target"].as_str() {
        out.push(format!("Target:        {}", text::quote(t)));
    }
    if let Some(cmd) = summary["command"].as_str() {
        out.push(format!(
            "Command:       {}{}",
            text::quote(cmd),
            if summary["truncated"] == true {
                " (cut)"
            } else {
                ""
            }
        ));
    }
    if let Some(t) = c["thread"].as_str() {
        out.push(format!("For command:   thread {t}"));
    }
    out.push(format!("Created:       {}", field(&c["created_at"])));
    match c["state"].as_str() {
        Some("pending") => out.push(format!("Decide before: {}", field(&c["expires_at"]))),
        _ => out.push(format!(
            "Decided:       by {} via {} at {}{}",
            field(&c["decided_by"]),
            field(&c["decided_via"]),
            field(&c["decided_at"]),
            c["reason"]
                .as_str()
                .map(|r| format!(", reason {}", text::quote(r)))
                .unwrap_or_default()
        )),
    }
    out.push(format!(
        "Fingerprint:   {} (an \"allow once\" holds for exactly this call)",
        field(&c["fingerprint"])
    ));
    out.join("\n")
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
