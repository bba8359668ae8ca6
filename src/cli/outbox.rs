//! `liaison webhook …` and `liaison deliveries …`: thin clients of `/admin/v1/webhooks`,
//! `/admin/v1/deliveries` and `/admin/v1/endpoints`.

use clap::Subcommand;
use serde_json::json;

use super::ServerArgs;
use super::admin::{call, encode, fetch};
use super::table::{self, Format, col};
use crate::domain::duration::{self, Seconds};

#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Register a webhook (Standard Webhooks); prints its `whsec_` secret once.
    Add {
        url: String,
        /// Comma-separated events to receive.
        #[arg(long, value_delimiter = ',', required = true, value_parser = crate::service::WEBHOOK_EVENTS)]
        events: Vec<String>,
        /// Only events concerning this person (author, recipient, approver, party).
        #[arg(long)]
        person: Option<String>,
        /// Only events in this channel.
        #[arg(long)]
        channel: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List webhooks (never their secrets).
    List {
        #[command(flatten)]
        format: Format,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Remove a webhook; its pending deliveries are dropped.
    Remove {
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Send a `webhook.test` event to it.
    Test {
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// A new secret (printed once); the old one keeps co-signing every request for the overlap,
    /// so receivers can roll. Rotating again during an overlap keeps only the secret just replaced.
    RotateSecret {
        id: String,
        /// How long the old secret keeps co-signing: seconds or 30s, 10m, 24h, 7d (default 24h,
        /// at most 7d; 0: it stops at once).
        #[arg(long, value_parser = duration::parse)]
        overlap: Option<Seconds>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Stop sending to a webhook: no new deliveries, its pending ones die (retry them by hand).
    Disable {
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Send to a disabled webhook again (new events; dead deliveries stay dead until retried).
    Enable {
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum DeliveriesCommand {
    /// Deliveries, newest first.
    List {
        /// Only pending deliveries that failed at least once (being retried).
        #[arg(long, conflicts_with = "dead")]
        failed: bool,
        /// Only dead deliveries (failed for good).
        #[arg(long)]
        dead: bool,
        /// Only this endpoint (`push:<task>/<config>` or `webhook:<id>`).
        #[arg(long)]
        endpoint: Option<String>,
        /// Ids below this one (`next_before` of the previous page).
        #[arg(long)]
        before: Option<i64>,
        #[arg(long)]
        limit: Option<i64>,
        #[command(flatten)]
        format: Format,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// A delivery and every attempt (status, latency, error class).
    Show {
        id: i64,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Send a dead delivery again, or with --endpoint every dead one of an endpoint (and
    /// re-enable the endpoint).
    Retry {
        #[arg(required_unless_present = "endpoint", conflicts_with = "endpoint")]
        id: Option<i64>,
        /// Every dead delivery of this endpoint (`webhook:<id>` or `push:<task>/<config>`).
        #[arg(long)]
        endpoint: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Endpoints with deliveries (the 500 most recently used): counts by state, disabled or not.
    Endpoints {
        #[command(flatten)]
        format: Format,
        #[command(flatten)]
        server: ServerArgs,
    },
}

pub(super) async fn webhook(c: WebhookCommand) -> anyhow::Result<()> {
    match c {
        WebhookCommand::Add {
            url,
            events,
            person,
            channel,
            server,
        } => {
            let body =
                json!({ "url": url, "events": events, "person": person, "channel": channel });
            call(&server, "POST", "/admin/v1/webhooks", Some(body)).await
        }
        WebhookCommand::List { format, server } => {
            let answer = fetch(&server, "GET", "/admin/v1/webhooks", None).await?;
            let columns = [
                col!("ID", "id"),
                col!("URL", "url"),
                col!("EVENTS", "events"),
                col!("PERSON", "person"),
                col!("CHANNEL", "channel"),
                col!("CREATED", "created_at"),
                col!("DISABLED", "disabled_at"),
                col!("WHY", "disabled_reason"),
                col!("OLD SECRET UNTIL", "previous_until"),
            ];
            table::print(format, &answer, "webhooks", &columns, None)
        }
        WebhookCommand::Remove { id, server } => {
            let path = format!("/admin/v1/webhooks/{}", encode(&id));
            call(&server, "DELETE", &path, None).await
        }
        WebhookCommand::Test { id, server } => {
            call(
                &server,
                "POST",
                &format!("/admin/v1/webhooks/{id}/test"),
                None,
            )
            .await
        }
        WebhookCommand::RotateSecret {
            id,
            overlap,
            server,
        } => {
            let path = format!("/admin/v1/webhooks/{}/rotate-secret", encode(&id));
            let body = overlap.map(|o| json!({ "overlap_s": o.0 }));
            call(&server, "POST", &path, body).await
        }
        WebhookCommand::Disable { id, server } => {
            let path = format!("/admin/v1/webhooks/{}/disable", encode(&id));
            call(&server, "POST", &path, None).await
        }
        WebhookCommand::Enable { id, server } => {
            let path = format!("/admin/v1/webhooks/{}/enable", encode(&id));
            call(&server, "POST", &path, None).await
        }
    }
}

pub(super) async fn deliveries(c: DeliveriesCommand) -> anyhow::Result<()> {
    match c {
        DeliveriesCommand::List {
            failed,
            dead,
            endpoint,
            before,
            limit,
            format,
            server,
        } => {
            let mut query = vec![];
            if failed {
                query.push("failed=true".to_owned());
            }
            if dead {
                query.push("state=dead".to_owned());
            }
            if let Some(e) = endpoint {
                query.push(format!("endpoint={}", encode(&e)));
            }
            if let Some(b) = before {
                query.push(format!("before={b}"));
            }
            if let Some(l) = limit {
                query.push(format!("limit={l}"));
            }
            let path = if query.is_empty() {
                "/admin/v1/deliveries".to_owned()
            } else {
                format!("/admin/v1/deliveries?{}", query.join("&"))
            };
            let answer = fetch(&server, "GET", &path, None).await?;
            let columns = [
                col!("ID", "id"),
                col!("STATE", "state"),
                col!("EVENT", "event_type"),
                col!("ENDPOINT", "endpoint"),
                col!("ATTEMPTS", "attempts"),
                col!("LAST STATUS", "last_status"),
                col!("NEXT ATTEMPT", "next_attempt_at"),
            ];
            table::print(
                format,
                &answer,
                "deliveries",
                &columns,
                Some(("next_before", "--before")),
            )
        }
        DeliveriesCommand::Show { id, server } => {
            call(&server, "GET", &format!("/admin/v1/deliveries/{id}"), None).await
        }
        DeliveriesCommand::Retry {
            id,
            endpoint,
            server,
        } => match (id, endpoint) {
            (_, Some(endpoint)) => {
                let body = json!({ "endpoint": endpoint });
                call(&server, "POST", "/admin/v1/deliveries/retry", Some(body)).await
            }
            (Some(id), None) => {
                let path = format!("/admin/v1/deliveries/{id}/retry");
                call(&server, "POST", &path, None).await
            }
            (None, None) => anyhow::bail!("name a delivery id or --endpoint"),
        },
        DeliveriesCommand::Endpoints { format, server } => {
            let answer = fetch(&server, "GET", "/admin/v1/endpoints", None).await?;
            let columns = [
                col!("ENDPOINT", "endpoint"),
                col!("PENDING", "pending"),
                col!("FAILED", "failed"),
                col!("DEAD", "dead"),
                col!("DELIVERED", "delivered"),
                col!("DISABLED", "disabled_at"),
                col!("WHY", "disabled_reason"),
                col!("URL", "webhook_url"),
            ];
            table::print(format, &answer, "endpoints", &columns, None)
        }
    }
}
