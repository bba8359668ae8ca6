//! `liaison remote add|list|show|refresh|remove`: thin client of `/admin/v1/remotes`.
//!
//! Secrets never appear on the command line: `--auth bearer:VAR` and the OAuth2 client secret
//! name environment variables of this process, read here and sent to the server, which stores
//! them sealed; `--header 'Name: env:VAR'` does the same for a header value.

use std::io::IsTerminal as _;

use anyhow::Context as _;
use clap::Subcommand;
use serde_json::{Value, json};

use super::ServerArgs;
use super::admin::{admin_token, call, encode, request_json};

#[derive(Debug, Subcommand)]
pub enum RemoteCommand {
    /// Register a remote A2A agent from its Agent Card (fetched and verified now).
    Add {
        /// The name internal agents address it by (a person id, never reused).
        name: String,
        /// URL of its Agent Card, e.g. https://agent.example/.well-known/agent-card.json
        #[arg(long)]
        card: String,
        /// Credentials: `bearer:ENV_VAR` (the token is read from ENV_VAR), or
        /// `oauth2:TOKEN_URL,CLIENT_ID,SECRET_ENV_VAR[,SCOPE…]` (client-credentials grant).
        #[arg(long)]
        auth: Option<String>,
        /// An extra header on every call, `Name: value` or `Name: env:VAR`; repeatable.
        #[arg(long = "header")]
        headers: Vec<String>,
        /// A channel it joins (rights read, post); repeatable.
        #[arg(long = "channel")]
        channels: Vec<String>,
        /// Accept a card without signatures (only if every network path to it is trusted).
        #[arg(long)]
        allow_unsigned: bool,
        /// The binding to call: grpc, jsonrpc or http-json (default: the first of those the card
        /// offers, in that order).
        #[arg(long)]
        binding: Option<String>,
        /// Shown in labels (default: the card's name).
        #[arg(long)]
        display_name: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Registered remote agents: interface, skills, pinned keys, the kind of credentials.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// One remote agent.
    Show {
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Fetch its card again and show what changed. New signing keys are refused unless accepted
    /// (asked on a terminal, or --accept-new-keys).
    Refresh {
        name: String,
        #[arg(long)]
        accept_new_keys: bool,
        /// New credentials (as for `add`); the old ones are replaced.
        #[arg(long)]
        auth: Option<String>,
        /// New extra headers (as for `add`); given, they replace the old ones.
        #[arg(long = "header")]
        headers: Vec<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Remove it: it leaves its channels and can no longer be addressed (its messages stay).
    Remove {
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

pub(super) async fn remote(c: RemoteCommand) -> anyhow::Result<()> {
    match c {
        RemoteCommand::Add {
            name,
            card,
            auth,
            headers,
            channels,
            allow_unsigned,
            binding,
            display_name,
            server,
        } => {
            let body = json!({
                "name": name,
                "card_url": card,
                "display_name": display_name,
                "channels": channels,
                "allow_unsigned": allow_unsigned,
                "binding": binding,
                "credentials": credentials(auth.as_deref(), &headers, env_var)?,
            });
            call(&server, "POST", "/admin/v1/remotes", Some(body)).await
        }
        RemoteCommand::List { server } => call(&server, "GET", "/admin/v1/remotes", None).await,
        RemoteCommand::Show { name, server } => {
            let path = format!("/admin/v1/remotes/{}", encode(&name));
            call(&server, "GET", &path, None).await
        }
        RemoteCommand::Refresh {
            name,
            accept_new_keys,
            auth,
            headers,
            server,
        } => refresh(&name, accept_new_keys, auth.as_deref(), &headers, &server).await,
        RemoteCommand::Remove { name, server } => {
            let path = format!("/admin/v1/remotes/{}", encode(&name));
            call(&server, "DELETE", &path, None).await
        }
    }
}

async fn refresh(
    name: &str,
    accept: bool,
    auth: Option<&str>,
    headers: &[String],
    server: &ServerArgs,
) -> anyhow::Result<()> {
    let path = format!("/admin/v1/remotes/{}/refresh", encode(name));
    let mut body = json!({ "accept_new_keys": accept });
    if auth.is_some() || !headers.is_empty() {
        body["credentials"] = credentials(auth, headers, env_var)?;
    }
    let token = admin_token(server)?;
    let answer = match request_json(server, &token, None, "POST", &path, Some(body.clone())).await {
        Ok(answer) => answer,
        Err(e) if !accept && e.to_string().starts_with("keys_changed:") => {
            if !std::io::stdin().is_terminal() {
                return Err(e);
            }
            eprintln!("{e}");
            eprint!("Accept the new signing keys of {name}? [y/N] ");
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)?;
            if !matches!(line.trim(), "y" | "Y" | "yes") {
                anyhow::bail!("Nothing changed: the pinned keys stay.");
            }
            body["accept_new_keys"] = json!(true);
            request_json(server, &token, None, "POST", &path, Some(body)).await?
        }
        Err(e) => return Err(e),
    };
    println!("{}", serde_json::to_string_pretty(&answer)?);
    Ok(())
}

fn env_var(name: &str) -> anyhow::Result<String> {
    let value = std::env::var(name)
        .with_context(|| format!("The environment variable {name} is not set"))?;
    if value.trim().is_empty() {
        anyhow::bail!("The environment variable {name} is empty");
    }
    Ok(value.trim().to_owned())
}

/// The credentials of `--auth` and `--header`, secrets read through `read` (the environment).
fn credentials(
    auth: Option<&str>,
    headers: &[String],
    read: impl Fn(&str) -> anyhow::Result<String>,
) -> anyhow::Result<Value> {
    let auth = match auth {
        None => Value::Null,
        Some(spec) => match spec.split_once(':') {
            Some(("bearer", var)) => json!({ "kind": "bearer", "token": read(var.trim())? }),
            Some(("oauth2", rest)) => {
                let parts: Vec<&str> = rest.split(',').map(str::trim).collect();
                let [token_url, client_id, secret_var, scopes @ ..] = parts.as_slice() else {
                    anyhow::bail!(
                        "--auth oauth2:TOKEN_URL,CLIENT_ID,SECRET_ENV_VAR[,SCOPE…] needs at least three parts"
                    );
                };
                json!({
                    "kind": "oauth2",
                    "token_url": token_url,
                    "client_id": client_id,
                    "client_secret": read(secret_var)?,
                    "scopes": scopes,
                })
            }
            _ => anyhow::bail!(
                "--auth is bearer:ENV_VAR or oauth2:TOKEN_URL,CLIENT_ID,SECRET_ENV_VAR[,SCOPE…]"
            ),
        },
    };
    let mut list = Vec::new();
    for h in headers {
        let (name, value) = h.split_once(':').with_context(|| {
            format!("--header {h:?}: expected 'Name: value' or 'Name: env:VAR'")
        })?;
        let value = value.trim();
        let value = match value.strip_prefix("env:") {
            Some(var) => read(var.trim())?,
            None => value.to_owned(),
        };
        list.push(json!({ "name": name.trim(), "value": value }));
    }
    Ok(json!({ "auth": auth, "headers": list }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(name: &str) -> anyhow::Result<String> {
        match name {
            "TOKEN" => Ok("t0k".into()),
            "SECRET" => Ok("s3cret".into()),
            _ => anyhow::bail!("{name} is not set"),
        }
    }

    #[test]
    fn auth_and_headers_read_secrets_from_the_environment() {
        let c = credentials(
            Some("bearer:TOKEN"),
            &["X-Key: env:SECRET".into(), "X-Plain: a b".into()],
            fake,
        )
        .unwrap();
        assert_eq!(c["auth"], json!({"kind": "bearer", "token": "t0k"}));
        assert_eq!(c["headers"][0], json!({"name": "X-Key", "value": "s3cret"}));
        assert_eq!(c["headers"][1], json!({"name": "X-Plain", "value": "a b"}));
        let c = credentials(
            Some("oauth2:https://idp/token,client,SECRET,a2a,read"),
            &[],
            fake,
        )
        .unwrap();
        assert_eq!(c["auth"]["client_secret"], "s3cret");
        assert_eq!(c["auth"]["scopes"], json!(["a2a", "read"]));
        assert!(credentials(Some("bearer:MISSING"), &[], fake).is_err());
        assert!(credentials(Some("oauth2:https://idp/token"), &[], fake).is_err());
        assert!(credentials(Some("basic:x"), &[], fake).is_err());
        assert!(credentials(None, &["no colon".into()], fake).is_err());
    }
}
