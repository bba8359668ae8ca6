//! `liaison keys list|rotate|retire`: thin client of `/admin/v1/keys`.

use clap::Subcommand;
use serde_json::json;

use super::ServerArgs;
use super::admin::{call, encode, fetch};
use super::table::{self, Format, col};
use crate::domain::duration::{self, Seconds};

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// The signing keys: the one that signs, those still co-signing the card, and those retired
    /// lately (listed for 30 days after they left the key set).
    List {
        #[command(flatten)]
        format: Format,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// A new key signs from now on; the previous one stays in the JWKS and co-signs the card for
    /// the overlap. Every replica re-signs its card at once.
    Rotate {
        /// How long the previous key keeps co-signing: seconds or 30s, 10m, 24h, 7d.
        #[arg(long, value_parser = duration::parse, default_value = "7d")]
        overlap: Seconds,
        /// The overlap in whole days, e.g. 7 (the same as --overlap 7d).
        #[arg(long, conflicts_with = "overlap")]
        overlap_days: Option<u64>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Removes a key before its overlap ends (never the signing key: rotate first).
    Retire {
        /// The key's id as `keys list` shows it (an RFC 7638 thumbprint in base64url, which may
        /// begin with `-`).
        #[arg(allow_hyphen_values = true)]
        kid: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

pub(super) async fn keys(c: KeysCommand) -> anyhow::Result<()> {
    match c {
        KeysCommand::List { format, server } => {
            let answer = fetch(&server, "GET", "/admin/v1/keys", None).await?;
            let columns = [
                col!("KID", "kid"),
                col!("ALG", "alg"),
                col!("SIGNING", "signing"),
                col!("CREATED", "created_at"),
                col!("RETIRE AFTER", "retire_after"),
            ];
            table::print(format, &answer, "keys", &columns, None)?;
            let retired = answer["retired"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            if !format.json && !retired.is_empty() {
                let columns = [
                    col!("RETIRED KID", "kid"),
                    col!("ALG", "alg"),
                    col!("RETIRED", "retired_at"),
                    col!("HOW", |row| {
                        if row["early"].as_bool() == Some(true) {
                            "by an admin".to_owned()
                        } else {
                            "overlap ended".to_owned()
                        }
                    }),
                    col!("LISTED UNTIL", "listed_until"),
                ];
                println!();
                println!("{}", table::render(retired, &columns));
            }
            Ok(())
        }
        KeysCommand::Rotate {
            overlap,
            overlap_days,
            server,
        } => {
            let overlap_s = overlap_days.map_or(overlap.0, |d| d.saturating_mul(86_400));
            let body = json!({ "overlap_s": overlap_s });
            call(&server, "POST", "/admin/v1/keys/rotate", Some(body)).await
        }
        KeysCommand::Retire { kid, server } => {
            let path = format!("/admin/v1/keys/{}/retire", encode(&kid));
            call(&server, "POST", &path, None).await
        }
    }
}
