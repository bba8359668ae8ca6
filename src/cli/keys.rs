//! `liaison keys list|rotate|retire`: thin client of `/admin/v1/keys`.

use clap::Subcommand;
use serde_json::json;

use super::ServerArgs;
use super::admin::call;

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// The signing keys: the one that signs, and those still co-signing the card.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// A new key signs from now on; the previous one stays in the JWKS and co-signs the card for
    /// the overlap. Every replica re-signs its card at once.
    Rotate {
        /// Days the previous key keeps co-signing (default 7).
        #[arg(long, default_value_t = 7)]
        overlap_days: i64,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Removes a key before its overlap ends (never the signing key: rotate first).
    Retire {
        kid: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

pub async fn keys(c: KeysCommand) -> anyhow::Result<()> {
    match c {
        KeysCommand::List { server } => call(&server, "GET", "/admin/v1/keys", None).await,
        KeysCommand::Rotate {
            overlap_days,
            server,
        } => {
            let body = json!({ "overlap_s": overlap_days.saturating_mul(86_400) });
            call(&server, "POST", "/admin/v1/keys/rotate", Some(body)).await
        }
        KeysCommand::Retire { kid, server } => {
            let path = format!("/admin/v1/keys/{kid}/retire");
            call(&server, "POST", &path, None).await
        }
    }
}
