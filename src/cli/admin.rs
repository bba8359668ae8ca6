//! Admin commands: thin clients of `/admin/v1`. Output is the API's JSON, pretty-printed.

use anyhow::Context as _;
use clap::Subcommand;
use serde_json::{Value, json};

use super::ServerArgs;
use crate::app::ADMIN_TOKEN_FILE;

#[derive(Debug, Subcommand)]
pub enum PersonCommand {
    /// Add a member (or with --external, an external party).
    Add {
        /// Slug id, e.g. alice
        id: String,
        /// Display name shown in labels (set by admins only).
        #[arg(long)]
        name: String,
        /// An external A2A party rather than a member.
        #[arg(long)]
        external: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List people.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Remove a person: their tokens are revoked and they leave every channel.
    Remove {
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum PartyCommand {
    /// Add an external A2A party; prints its bearer token once (unless --no-token).
    Add {
        /// Slug id, e.g. partner
        id: String,
        /// Display name shown in labels.
        #[arg(long)]
        name: String,
        /// Skill used when the party's message names none (a skill id of agent-card/card.toml).
        #[arg(long)]
        default_skill: Option<String>,
        /// `sub` claim of JWTs from the configured issuer that authenticate as this party.
        #[arg(long)]
        jwt_subject: Option<String>,
        /// Do not issue a bearer token (the party authenticates with JWTs only).
        #[arg(long)]
        no_token: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List external parties and their settings.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Issue a token; its secret is printed once.
    Issue {
        person: String,
        /// Comma-separated scopes: agent, human, admin.
        #[arg(long, default_value = "agent")]
        scopes: String,
        /// Lifetime in seconds (default: no expiry).
        #[arg(long)]
        expires_in: Option<u64>,
        #[arg(long, default_value = "")]
        description: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List tokens (never their secrets).
    List {
        #[arg(long)]
        person: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Revoke a token at once.
    Revoke {
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum ChannelCommand {
    /// Create a channel.
    Add {
        name: String,
        /// Comma-separated person ids.
        #[arg(long)]
        members: String,
        /// Comma-separated rights for the members: read, post, request, approve (default: all).
        #[arg(long)]
        rights: Option<String>,
        #[arg(long, default_value = "")]
        description: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Add or remove members.
    Members {
        name: String,
        #[arg(long, value_delimiter = ',')]
        add: Vec<String>,
        #[arg(long, value_delimiter = ',')]
        remove: Vec<String>,
        /// Rights for the added members (default: all).
        #[arg(long)]
        rights: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Set the approval policy per impact: auto, approve or deny.
    Policy {
        name: String,
        #[arg(long, default_value = "auto")]
        none: String,
        #[arg(long, default_value = "approve")]
        code: String,
        #[arg(long, default_value = "approve")]
        database: String,
        #[arg(long, default_value = "approve")]
        production: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List channels with members and policies.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
}

fn list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

pub async fn person(c: PersonCommand) -> anyhow::Result<()> {
    match c {
        PersonCommand::Add {
            id,
            name,
            external,
            server,
        } => {
            let kind = if external { "external" } else { "member" };
            call(
                &server,
                "POST",
                "/admin/v1/persons",
                Some(json!({ "id": id, "kind": kind, "display_name": name })),
            )
            .await
        }
        PersonCommand::List { server } => call(&server, "GET", "/admin/v1/persons", None).await,
        PersonCommand::Remove { id, server } => {
            call(&server, "DELETE", &format!("/admin/v1/persons/{id}"), None).await
        }
    }
}

pub async fn party(c: PartyCommand) -> anyhow::Result<()> {
    match c {
        PartyCommand::Add {
            id,
            name,
            default_skill,
            jwt_subject,
            no_token,
            server,
        } => {
            let body = json!({
                "id": id, "display_name": name, "default_skill": default_skill,
                "jwt_subject": jwt_subject, "issue_token": !no_token,
            });
            call(&server, "POST", "/admin/v1/parties", Some(body)).await
        }
        PartyCommand::List { server } => call(&server, "GET", "/admin/v1/parties", None).await,
    }
}

pub async fn token(c: TokenCommand) -> anyhow::Result<()> {
    match c {
        TokenCommand::Issue {
            person,
            scopes,
            expires_in,
            description,
            server,
        } => {
            let body = json!({ "person": person, "scopes": list(&scopes), "expires_in_s": expires_in, "description": description });
            call(&server, "POST", "/admin/v1/tokens", Some(body)).await
        }
        TokenCommand::List { person, server } => {
            let path = match person {
                Some(p) => format!("/admin/v1/tokens?person={p}"),
                None => "/admin/v1/tokens".to_owned(),
            };
            call(&server, "GET", &path, None).await
        }
        TokenCommand::Revoke { id, server } => {
            call(&server, "DELETE", &format!("/admin/v1/tokens/{id}"), None).await
        }
    }
}

pub async fn channel(c: ChannelCommand) -> anyhow::Result<()> {
    match c {
        ChannelCommand::Add {
            name,
            members,
            rights,
            description,
            server,
        } => {
            let body = json!({ "name": name, "members": list(&members), "rights": rights.as_deref().map(list), "description": description });
            call(&server, "POST", "/admin/v1/channels", Some(body)).await
        }
        ChannelCommand::Members {
            name,
            add,
            remove,
            rights,
            server,
        } => {
            let body =
                json!({ "add": add, "remove": remove, "rights": rights.as_deref().map(list) });
            call(
                &server,
                "POST",
                &format!("/admin/v1/channels/{name}/members"),
                Some(body),
            )
            .await
        }
        ChannelCommand::Policy {
            name,
            none,
            code,
            database,
            production,
            server,
        } => {
            let body = json!({ "none": none, "code": code, "database": database, "production": production });
            call(
                &server,
                "PUT",
                &format!("/admin/v1/channels/{name}/policy"),
                Some(body),
            )
            .await
        }
        ChannelCommand::List { server } => call(&server, "GET", "/admin/v1/channels", None).await,
    }
}

/// The admin token: `LIAISON_ADMIN_TOKEN`, else the bootstrap file in the data directory.
pub(super) fn admin_token(server: &ServerArgs) -> anyhow::Result<String> {
    if let Ok(t) = std::env::var("LIAISON_ADMIN_TOKEN")
        && !t.trim().is_empty()
    {
        return Ok(t.trim().to_owned());
    }
    let path = server.data_dir.join(ADMIN_TOKEN_FILE);
    let token = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "Set LIAISON_ADMIN_TOKEN, or run on the server's machine where {} exists",
            path.display()
        )
    })?;
    Ok(token.trim().to_owned())
}

pub(super) async fn call(
    server: &ServerArgs,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<()> {
    call_as(server, &admin_token(server)?, method, path, body).await
}

/// Calls `path` with `token` and prints the JSON answer; an error answer ends with its message.
pub(super) async fn call_as(
    server: &ServerArgs,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<()> {
    let value = request_json(server, token, None, method, path, body).await?;
    println!("{}", serde_json::to_string_pretty(&value)?);
    Ok(())
}

/// Calls `path` on the server with `token` (and the declared `agent`, when given) and returns the
/// JSON answer; an error answer ends with its code and message. Every CLI command goes through it.
pub(super) async fn request_json(
    server: &ServerArgs,
    token: &str,
    agent: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<Value> {
    let url = format!("{}{path}", server.server.trim_end_matches('/'));
    let method = reqwest::Method::from_bytes(method.as_bytes())?;
    let mut request = reqwest::Client::new()
        .request(method, &url)
        .bearer_auth(token);
    if let Some(agent) = agent {
        request = request.header(crate::admin::AGENT_HEADER, agent);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("Could not reach {url}"))?;
    let status = response.status();
    let value: Value = response
        .json()
        .await
        .with_context(|| format!("{url} answered {status} without JSON"))?;
    if !status.is_success() {
        let code = value["error"]["code"].as_str().unwrap_or("error");
        let message = value["error"]["message"].as_str().unwrap_or("");
        anyhow::bail!("{code}: {message}");
    }
    Ok(value)
}

/// A person's own token, for member commands: `LIAISON_TOKEN`; `what` says which scope it needs.
pub(super) fn member_token(what: &str) -> anyhow::Result<String> {
    std::env::var("LIAISON_TOKEN")
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .with_context(|| format!("Set LIAISON_TOKEN to your own token ({what})"))
}

/// Percent-encodes a query value (RFC 3986 unreserved characters pass).
pub(super) fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
