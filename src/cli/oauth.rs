//! `liaison oauth clients list|remove`: the clients of liaison's authorization server (SPEC §7),
//! thin clients of `/admin/v1/oauth/clients` like the other admin commands.

use clap::Subcommand;
use serde_json::Value;

use super::ServerArgs;
use super::admin::{call, encode, fetch};
use super::table::{self, Format, col};

#[derive(Debug, Subcommand)]
pub enum OauthCommand {
    /// The clients that registered (DCR) or named a metadata document (CIMD).
    #[command(subcommand)]
    Clients(ClientsCommand),
}

#[derive(Debug, Subcommand)]
pub enum ClientsCommand {
    /// List the clients, newest first: kind, self-declared name and redirect URIs, live grants,
    /// last use.
    List {
        #[command(flatten)]
        format: Format,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Remove a client (an `ocl_…` id or a metadata document URL): every grant it holds is
    /// revoked and their sessions end at once. It may register again.
    Remove {
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// `DCR` or `CIMD`, as the console shows the kind.
fn kind(c: &Value) -> String {
    match c["kind"].as_str() {
        Some("registered") => "DCR".into(),
        Some("metadata_document") => "CIMD".into(),
        other => other.unwrap_or_default().into(),
    }
}

pub(super) async fn oauth(c: OauthCommand) -> anyhow::Result<()> {
    let OauthCommand::Clients(c) = c;
    match c {
        ClientsCommand::List { format, server } => {
            let answer = fetch(&server, "GET", "/admin/v1/oauth/clients", None).await?;
            let columns = [
                col!("ID", "id"),
                col!("KIND", kind),
                col!("NAME (SELF-DECLARED)", "name"),
                col!("REDIRECT URIS (SELF-DECLARED)", "redirect_uris"),
                col!("GRANTS", "live_grants"),
                col!("LAST USED", "last_used_at"),
                col!("CREATED", "created_at"),
            ];
            table::print(format, &answer, "clients", &columns, None)
        }
        ClientsCommand::Remove { id, server } => {
            let path = format!("/admin/v1/oauth/clients/{}", encode(&id));
            call(&server, "DELETE", &path, None).await
        }
    }
}
