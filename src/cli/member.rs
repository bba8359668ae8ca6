//! Member commands with a person's own token (`LIAISON_TOKEN`, scope `agent`): `inbox`, `thread`,
//! `post`, `claim`, and `activity` (its table in [`super::activity`]). Thin clients of the member
//! routes of `/api/v1` (the MCP tools' service calls), rendered for a terminal with the MCP
//! tools' text (labels and body fences as an agent sees them), or with `--json` as the API's JSON
//! for scripts.

use std::io::Read as _;

use anyhow::Context as _;
use clap::Args;
use serde_json::{Value, json};

use super::ServerArgs;
use super::admin::{encode, member_token, request_json};
use crate::domain::duration::Seconds;
use crate::mcp::render;

/// What every member command needs: where the server is, who the agent is, how to print.
#[derive(Debug, Clone, Args)]
pub struct MemberArgs {
    /// Your agent identity, agent_id@host:session (self-declared; claims are held by it)
    /// [default: liaison-cli@<host>:<user>]
    #[arg(long, env = "LIAISON_AGENT")]
    pub agent: Option<String>,
    /// Print the API's JSON instead of the text rendering.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Debug, Args)]
pub struct InboxArgs {
    /// Consumer name: each consumer has its own server-held cursor.
    #[arg(long, env = "LIAISON_CONSUMER", default_value = "cli")]
    pub consumer: String,
    /// How long to wait for the next entry when none is there (e.g. 30s; at most the server's
    /// max_wait_s).
    #[arg(long, value_parser = crate::domain::duration::parse)]
    pub wait: Option<Seconds>,
    /// The cursor of the previous inbox: acknowledges everything up to it.
    #[arg(long)]
    pub after: Option<i64>,
    /// Entries at most, 1-100.
    #[arg(long)]
    pub limit: Option<i64>,
    #[command(flatten)]
    pub member: MemberArgs,
}

#[derive(Debug, Args)]
pub struct ThreadArgs {
    /// The thread id (thr_…).
    pub id: String,
    /// `next_cursor` of the previous page.
    #[arg(long)]
    pub cursor: Option<i64>,
    /// Messages per page, 1-100.
    #[arg(long)]
    pub limit: Option<i64>,
    #[command(flatten)]
    pub member: MemberArgs,
}

#[derive(Debug, Args)]
pub struct PostArgs {
    /// What the recipients are expected to do.
    #[arg(long, value_parser = ["announce", "question", "request", "handoff", "reply", "close"])]
    pub kind: String,
    /// Channel to open a new thread in.
    #[arg(long)]
    pub channel: Option<String>,
    /// Thread to post in (required for reply and close).
    #[arg(long)]
    pub thread: Option<String>,
    /// Persons and connections to address, comma-separated (`bob`, `bob/codex`, your own
    /// `alice/claude-laptop`); default: the thread's participants, or every other member.
    #[arg(long, value_delimiter = ',')]
    pub to: Vec<String>,
    /// The effect a request asks for (required for a request).
    #[arg(long, value_parser = ["none", "code", "database", "production"])]
    pub impact: Option<String>,
    /// How a close ends the thread (default done).
    #[arg(long, value_parser = ["done", "failed", "rejected", "canceled"])]
    pub outcome: Option<String>,
    /// One-line subject of a new thread (default: the body's first line).
    #[arg(long, allow_hyphen_values = true)]
    pub subject: Option<String>,
    /// Message id this one refers to.
    #[arg(long)]
    pub refers_to: Option<String>,
    /// Repeating a post with the same key creates nothing new.
    #[arg(long)]
    pub idempotency_key: Option<String>,
    /// For a question, request or handoff to a remote agent: the skill to ask for.
    #[arg(long)]
    pub skill: Option<String>,
    /// In a thread your session claimed: the fencing token the claim returned; the post is
    /// refused (stale_claim) if another session claimed the thread since.
    #[arg(long)]
    pub fencing_token: Option<i64>,
    /// Markdown text; `-` reads it from standard input. A text that begins with `-` (a list
    /// item, a negative number) is taken as the text.
    #[arg(allow_hyphen_values = true)]
    pub body: String,
    #[command(flatten)]
    pub member: MemberArgs,
}

#[derive(Debug, Args)]
pub struct ClaimArgs {
    /// The thread (thr_…), or `next` for the oldest open unclaimed request or handoff addressed to you.
    pub id: String,
    /// Give the claim up instead.
    #[arg(long)]
    pub release: bool,
    /// Lease length (e.g. 10m; default the server's).
    #[arg(long, value_parser = crate::domain::duration::parse)]
    pub lease: Option<Seconds>,
    /// Renew carrying the fencing token your claim returned: refused (stale_claim) if another
    /// session claimed the thread since.
    #[arg(long)]
    pub fencing_token: Option<i64>,
    #[command(flatten)]
    pub member: MemberArgs,
}

pub(super) async fn inbox(a: InboxArgs) -> anyhow::Result<()> {
    let mut query = vec![format!("consumer={}", encode(&a.consumer))];
    if let Some(after) = a.after {
        query.push(format!("after={after}"));
    }
    if let Some(limit) = a.limit {
        query.push(format!("limit={limit}"));
    }
    if let Some(wait) = a.wait {
        query.push(format!("wait_s={}", wait.0));
    }
    let path = format!("/api/v1/inbox?{}", query.join("&"));
    let page = request(&a.member, "GET", &path, None).await?;
    show(&a.member, &page, render::inbox(&page))
}

pub(super) async fn thread(a: ThreadArgs) -> anyhow::Result<()> {
    let mut query = Vec::new();
    if let Some(cursor) = a.cursor {
        query.push(format!("cursor={cursor}"));
    }
    if let Some(limit) = a.limit {
        query.push(format!("limit={limit}"));
    }
    let path = format!("/api/v1/threads/{}?{}", encode(&a.id), query.join("&"));
    let view = request(&a.member, "GET", &path, None).await?;
    show(&a.member, &view, render::thread(&view))
}

pub(super) async fn post(a: PostArgs) -> anyhow::Result<()> {
    let body = if a.body == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("Could not read the body from standard input")?;
        text
    } else {
        a.body
    };
    let mut args = json!({ "kind": a.kind, "body": body });
    let optional = [
        ("channel", a.channel),
        ("thread", a.thread),
        ("impact", a.impact),
        ("outcome", a.outcome),
        ("subject", a.subject),
        ("refers_to", a.refers_to),
        ("idempotency_key", a.idempotency_key),
        ("skill", a.skill),
    ];
    for (key, value) in optional {
        if let Some(v) = value {
            args[key] = json!(v);
        }
    }
    if !a.to.is_empty() {
        args["to"] = json!(a.to);
    }
    if let Some(token) = a.fencing_token {
        args["fencing_token"] = json!(token);
    }
    let receipt = request(&a.member, "POST", "/api/v1/messages", Some(args)).await?;
    show(&a.member, &receipt, vec![render::posted(&receipt)])
}

pub(super) async fn claim(a: ClaimArgs) -> anyhow::Result<()> {
    let action = if a.release { "release" } else { "claim" };
    let mut body = json!({ "thread": a.id, "action": action });
    if let Some(lease) = a.lease {
        body["lease_s"] = json!(lease.0);
    }
    if let Some(token) = a.fencing_token {
        body["fencing_token"] = json!(token);
    }
    let answer = request(&a.member, "POST", "/api/v1/claims", Some(body)).await?;
    show(&a.member, &answer, vec![render::claimed(&answer["claim"])])
}

/// Prints the JSON (`--json`) or the text blocks, a blank line between blocks.
fn show(member: &MemberArgs, value: &Value, blocks: Vec<String>) -> anyhow::Result<()> {
    if member.json {
        println!("{}", serde_json::to_string_pretty(value)?);
    } else {
        println!("{}", blocks.join("\n\n"));
    }
    Ok(())
}

/// The agent identity the CLI declares unless told: stable per machine and user, so that a claim
/// taken by one command can be renewed or released by the next.
fn default_agent() -> String {
    let clean = |s: String| -> String {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .take(60)
            .collect()
    };
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(clean)
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    let user = std::env::var("USER")
        .ok()
        .map(clean)
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "user".to_owned());
    format!("liaison-cli@{host}:{user}")
}

/// Calls a member route with `LIAISON_TOKEN`; an error answer ends with its code and message.
pub(super) async fn request(
    member: &MemberArgs,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<Value> {
    let token = member_token("scope agent")?;
    let agent = member.agent.clone().unwrap_or_else(default_agent);
    request_json(&member.server, &token, Some(&agent), method, path, body).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
        assert_eq!(encode("thr_01-x.y~"), "thr_01-x.y~");
    }

    #[test]
    fn the_default_agent_identity_is_a_valid_one() {
        crate::domain::AgentIdentity::parse(default_agent()).unwrap();
    }
}
