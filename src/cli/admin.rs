//! Admin commands: thin clients of `/admin/v1`. List commands print a table (`--json`: the API's
//! JSON); the others print the API's JSON answer, pretty-printed.

use anyhow::Context as _;
use clap::Subcommand;
use serde_json::{Value, json};

use super::ServerArgs;
use super::table::{self, Format, col};
use crate::app::ADMIN_TOKEN_FILE;
use crate::domain::duration::{self, Seconds};

/// The scopes a token may carry.
const SCOPES: [&str; 3] = ["agent", "human", "admin"];
/// The rights a channel member may have.
const RIGHTS: [&str; 4] = ["read", "post", "request", "approve"];
/// What a channel's policy may say for an impact.
const DECISIONS: [&str; 3] = ["auto", "approve", "deny"];

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
    /// List people: everyone, or with a search, a page of 50 at a time.
    List {
        #[command(flatten)]
        search: Search,
        /// Only people of this kind: member, external or remote.
        #[arg(long)]
        kind: Option<String>,
        #[command(flatten)]
        format: Format,
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
        /// A channel the party joins, with every right (repeat for several). A party in no
        /// channel is refused everything until an admin adds it to one.
        #[arg(long = "channel", value_name = "CHANNEL")]
        channels: Vec<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List external parties and their settings.
    List {
        #[command(flatten)]
        format: Format,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Remove an external party: its tokens are revoked (JWTs of its subject are refused too), it
    /// leaves every channel; its tasks and threads stay as history. The id is never reused.
    Remove {
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Issue a token; its secret is printed once.
    Issue {
        person: String,
        /// Comma-separated scopes.
        #[arg(long, value_delimiter = ',', default_value = "agent", value_parser = SCOPES)]
        scopes: Vec<String>,
        /// Lifetime: seconds or 30s, 10m, 24h, 7d (default: no expiry).
        #[arg(long, value_parser = duration::parse)]
        expires_in: Option<Seconds>,
        #[arg(long, default_value = "", allow_hyphen_values = true)]
        description: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List tokens (never their secrets): all, one person's, or with a search, a page of 50 at a
    /// time, newest first.
    List {
        /// Every token of this person.
        #[arg(long, conflicts_with_all = ["search", "page", "state"])]
        person: Option<String>,
        #[command(flatten)]
        search: Search,
        /// Only tokens in this state: live, expired or revoked.
        #[arg(long)]
        state: Option<String>,
        #[command(flatten)]
        format: Format,
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
        #[arg(long, value_delimiter = ',', required = true)]
        members: Vec<String>,
        /// Comma-separated rights for the members (default: all).
        #[arg(long, value_delimiter = ',', value_parser = RIGHTS)]
        rights: Vec<String>,
        #[arg(long, default_value = "", allow_hyphen_values = true)]
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
        /// Comma-separated rights for the added members (default: all).
        #[arg(long, value_delimiter = ',', value_parser = RIGHTS)]
        rights: Vec<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Change the approval policy: only what you name changes, the rest stays as it is.
    Policy {
        name: String,
        /// Requests with impact none (new channels: auto).
        #[arg(long, value_parser = DECISIONS)]
        none: Option<String>,
        /// Requests with impact code (new channels: approve).
        #[arg(long, value_parser = DECISIONS)]
        code: Option<String>,
        /// Requests with impact database (new channels: approve).
        #[arg(long, value_parser = DECISIONS)]
        database: Option<String>,
        /// Requests with impact production (new channels: approve).
        #[arg(long, value_parser = DECISIONS)]
        production: Option<String>,
        /// Messages to remote agents, i.e. data leaving the team (new channels: approve).
        #[arg(long, value_parser = DECISIONS)]
        outbound: Option<String>,
        /// How long an approval waits for a decision: 1m to 30d, e.g. 24h (new channels: 24h).
        #[arg(long, value_parser = duration::parse)]
        approval_ttl: Option<Seconds>,
        /// Whether an approver's MCP client may ask its human by elicitation (new channels: off).
        #[arg(long, value_parser = ["on", "off"])]
        elicitation: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List channels with members and policies.
    List {
        #[command(flatten)]
        format: Format,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Remove a channel: its threads and messages stay readable by its members, nothing new can
    /// be posted or requested in it, and its name is never reused.
    Remove {
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

pub(super) async fn person(c: PersonCommand) -> anyhow::Result<()> {
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
        PersonCommand::List {
            search,
            kind,
            format,
            server,
        } => {
            let path = search.path("/admin/v1/persons", "kind", kind.as_deref());
            let answer = fetch(&server, "GET", &path, None).await?;
            let columns = [
                col!("ID", "id"),
                col!("KIND", "kind"),
                col!("NAME", "display_name"),
                col!("CREATED", "created_at"),
            ];
            table::print(format, &answer, "persons", &columns, NEXT_PAGE)
        }
        PersonCommand::Remove { id, server } => {
            let path = format!("/admin/v1/persons/{}", encode(&id));
            call(&server, "DELETE", &path, None).await
        }
    }
}

pub(super) async fn party(c: PartyCommand) -> anyhow::Result<()> {
    match c {
        PartyCommand::Add {
            id,
            name,
            default_skill,
            jwt_subject,
            no_token,
            channels,
            server,
        } => {
            let body = json!({
                "id": id, "display_name": name, "default_skill": default_skill,
                "jwt_subject": jwt_subject, "issue_token": !no_token, "channels": channels,
            });
            let answer = fetch(&server, "POST", "/admin/v1/parties", Some(body)).await?;
            if let Some(warning) = answer["warning"].as_str() {
                eprintln!("warning: {warning}");
            }
            println!("{}", serde_json::to_string_pretty(&answer)?);
            Ok(())
        }
        PartyCommand::List { format, server } => {
            let answer = fetch(&server, "GET", "/admin/v1/parties", None).await?;
            let columns = [
                col!("ID", |p| table::cell(&p["person"]["id"])),
                col!("NAME", |p| table::cell(&p["person"]["display_name"])),
                col!("DEFAULT SKILL", "default_skill"),
                col!("JWT SUBJECT", "jwt_subject"),
                col!("CREATED", |p| table::cell(&p["person"]["created_at"])),
            ];
            table::print(format, &answer, "parties", &columns, None)
        }
        PartyCommand::Remove { id, server } => {
            let path = format!("/admin/v1/parties/{}", encode(&id));
            call(&server, "DELETE", &path, None).await
        }
    }
}

pub(super) async fn token(c: TokenCommand) -> anyhow::Result<()> {
    match c {
        TokenCommand::Issue {
            person,
            scopes,
            expires_in,
            description,
            server,
        } => {
            let body = json!({ "person": person, "scopes": scopes, "expires_in_s": expires_in.map(|s| s.0), "description": description });
            call(&server, "POST", "/admin/v1/tokens", Some(body)).await
        }
        TokenCommand::List {
            person,
            search,
            state,
            format,
            server,
        } => {
            let path = match person {
                Some(p) => format!("/admin/v1/tokens?person={}", encode(&p)),
                None => search.path("/admin/v1/tokens", "state", state.as_deref()),
            };
            let answer = fetch(&server, "GET", &path, None).await?;
            let columns = [
                col!("ID", "id"),
                col!("PERSON", "person"),
                col!("SCOPES", "scopes"),
                col!("CREATED", "created_at"),
                col!("EXPIRES", "expires_at"),
                col!("REVOKED", "revoked_at"),
                col!("DESCRIPTION", "description"),
            ];
            table::print(format, &answer, "tokens", &columns, NEXT_PAGE)
        }
        TokenCommand::Revoke { id, server } => {
            let path = format!("/admin/v1/tokens/{}", encode(&id));
            call(&server, "DELETE", &path, None).await
        }
    }
}

pub(super) async fn channel(c: ChannelCommand) -> anyhow::Result<()> {
    match c {
        ChannelCommand::Add {
            name,
            members,
            rights,
            description,
            server,
        } => {
            let rights = (!rights.is_empty()).then_some(rights);
            let body = json!({ "name": name, "members": members, "rights": rights, "description": description });
            call(&server, "POST", "/admin/v1/channels", Some(body)).await
        }
        ChannelCommand::Members {
            name,
            add,
            remove,
            rights,
            server,
        } => {
            let rights = (!rights.is_empty()).then_some(rights);
            let body = json!({ "add": add, "remove": remove, "rights": rights });
            let path = format!("/admin/v1/channels/{}/members", encode(&name));
            call(&server, "POST", &path, Some(body)).await
        }
        ChannelCommand::Policy {
            name,
            none,
            code,
            database,
            production,
            outbound,
            approval_ttl,
            elicitation,
            server,
        } => {
            let mut body = json!({});
            for (key, value) in [
                ("none", none),
                ("code", code),
                ("database", database),
                ("production", production),
                ("outbound", outbound),
            ] {
                if let Some(v) = value {
                    body[key] = json!(v);
                }
            }
            if let Some(ttl) = approval_ttl {
                body["approval_ttl_s"] = json!(ttl.0);
            }
            if let Some(e) = elicitation {
                body["approval_via_elicitation"] = json!(e == "on");
            }
            anyhow::ensure!(
                body.as_object().is_some_and(|o| !o.is_empty()),
                "Name what to change: --none, --code, --database, --production, --outbound (auto, approve or deny), --approval-ttl or --elicitation"
            );
            let path = format!("/admin/v1/channels/{}/policy", encode(&name));
            call(&server, "PATCH", &path, Some(body)).await
        }
        ChannelCommand::List { format, server } => {
            let answer = fetch(&server, "GET", "/admin/v1/channels", None).await?;
            let columns = [
                col!("NAME", "name"),
                col!("MEMBERS", |c| members_cell(&c["members"])),
                col!("POLICY", |c| policy_cell(&c["policy"])),
                col!("REMOVED", "removed_at"),
                col!("DESCRIPTION", "description"),
            ];
            table::print(format, &answer, "channels", &columns, None)
        }
        ChannelCommand::Remove { name, server } => {
            let path = format!("/admin/v1/channels/{}", encode(&name));
            call(&server, "DELETE", &path, None).await
        }
    }
}

/// `alice, bob (read)`: each member, with their rights when not all of them.
fn members_cell(members: &Value) -> String {
    let all = RIGHTS.join(",");
    let list: Vec<String> = members
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .map(|m| {
            let person = table::cell(&m["person"]);
            let rights = table::cell(&m["rights"]);
            if rights == all {
                person
            } else {
                format!("{person} ({rights})")
            }
        })
        .collect();
    if list.is_empty() {
        "-".to_owned()
    } else {
        list.join(", ")
    }
}

/// `none=auto code=approve database=approve production=deny ttl=24h`.
fn policy_cell(policy: &Value) -> String {
    let mut parts: Vec<String> = ["none", "code", "database", "production", "outbound"]
        .iter()
        .map(|k| format!("{k}={}", table::cell(&policy[*k])))
        .collect();
    if let Some(ttl) = policy["approval_ttl_s"].as_u64() {
        parts.push(format!("ttl={}", duration::format(Seconds(ttl))));
    }
    if policy["approval_via_elicitation"].as_bool() == Some(true) {
        parts.push("elicitation".to_owned());
    }
    parts.join(" ")
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

/// Calls `path` with the admin token and returns the JSON answer.
pub(super) async fn fetch(
    server: &ServerArgs,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<Value> {
    request_json(server, &admin_token(server)?, None, method, path, body).await
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
        .bearer_auth(token)
        .header(crate::http::CLIENT_HEADER, "cli");
    if let Some(agent) = agent {
        request = request.header(crate::http::AGENT_HEADER, agent);
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

/// Percent-encodes a path segment or query value.
/// `--search` and `--page` of a list command: without either (or a filter), the whole list.
#[derive(Debug, Clone, clap::Args)]
pub struct Search {
    /// Only rows holding this text (any case) in their id or name, or a token's person or
    /// description; 50 a page.
    #[arg(long)]
    search: Option<String>,
    /// Which page of the search (from 1); the table ends with the next page's flag while more
    /// follow.
    #[arg(long)]
    page: Option<u32>,
}

/// Where a paged list says its next page is, and the flag that asks for it.
const NEXT_PAGE: Option<(&str, &str)> = Some(("next_page", "--page"));

impl Search {
    /// The list's address with this search and `filter` (`name=value`) in its query.
    fn path(&self, base: &str, name: &str, filter: Option<&str>) -> String {
        let mut query = Vec::new();
        if let Some(text) = &self.search {
            query.push(format!("q={}", encode(text)));
        }
        if let Some(value) = filter {
            query.push(format!("{name}={}", encode(value)));
        }
        if let Some(page) = self.page {
            query.push(format!("page={page}"));
        }
        if query.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", query.join("&"))
        }
    }
}

pub(super) fn encode(s: &str) -> String {
    crate::domain::text::percent_encode(s)
}
