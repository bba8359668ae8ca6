//! `/admin/v1/webhooks`, `/admin/v1/deliveries` and `/admin/v1/endpoints`: register Standard
//! Webhooks endpoints, rotate their secret (with an overlap), disable and enable them, see what
//! the outbox sent, failed to send, or gave up on, per delivery or per endpoint, and send dead
//! deliveries again (one, or every one of an endpoint). Decode, call the service
//! (`service/delivery.rs` holds the rules), encode.

use axum::extract::{Path, Query, State};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, Authed, Body};
use crate::domain::{ChannelName, PersonId};
use crate::service::{Service, ServiceError, WebhookSpec};
use crate::store::{DeliveryFilter, DeliveryState};

type ApiResult = Result<Json<Value>, ApiError>;

pub(super) fn router() -> Router<Service> {
    Router::new()
        .route("/admin/v1/webhooks", get(list_webhooks).post(add_webhook))
        .route("/admin/v1/webhooks/{id}", delete(remove_webhook))
        .route("/admin/v1/webhooks/{id}/test", post(test_webhook))
        .route("/admin/v1/webhooks/{id}/rotate-secret", post(rotate_secret))
        .route("/admin/v1/webhooks/{id}/disable", post(disable_webhook))
        .route("/admin/v1/webhooks/{id}/enable", post(enable_webhook))
        .route("/admin/v1/deliveries", get(list_deliveries))
        .route("/admin/v1/deliveries/retry", post(retry_endpoint))
        .route("/admin/v1/deliveries/{id}", get(show_delivery))
        .route("/admin/v1/deliveries/{id}/retry", post(retry_delivery))
        .route("/admin/v1/endpoints", get(list_endpoints))
}

/// An optional JSON body: none (or only whitespace) is `T::default()`.
fn optional_body<T: serde::de::DeserializeOwned + Default>(
    body: &[u8],
    what: &str,
) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError(ServiceError::invalid(format!(
            "invalid {what} request: {e}"
        )))
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewWebhook {
    url: String,
    events: Vec<String>,
    person: Option<PersonId>,
    channel: Option<ChannelName>,
}

async fn add_webhook(
    State(s): State<Service>,
    Authed(c): Authed,
    body: Body<NewWebhook>,
) -> ApiResult {
    let b = body.0;
    let spec = WebhookSpec {
        url: b.url,
        events: b.events,
        person: b.person,
        channel: b.channel,
    };
    let (webhook, secret) = s.add_webhook(&c, spec).await?;
    Ok(Json(json!({ "webhook": webhook, "secret": secret })))
}

async fn list_webhooks(State(s): State<Service>, Authed(c): Authed) -> ApiResult {
    Ok(Json(json!({ "webhooks": s.webhooks(&c).await? })))
}

async fn remove_webhook(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
) -> ApiResult {
    s.remove_webhook(&c, &id).await?;
    Ok(Json(json!({ "removed": id })))
}

async fn test_webhook(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
) -> ApiResult {
    let delivery = s.test_webhook(&c, &id).await?;
    Ok(Json(json!({ "delivery": delivery })))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RotateSecret {
    /// How long the replaced secret keeps co-signing, in seconds (default 24 h).
    overlap_s: Option<i64>,
}

async fn rotate_secret(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    let request: RotateSecret = optional_body(&body, "rotate-secret")?;
    let (secret, previous_until) = s.rotate_webhook_secret(&c, &id, request.overlap_s).await?;
    Ok(Json(
        json!({ "webhook": id, "secret": secret, "previous_until": previous_until }),
    ))
}

async fn disable_webhook(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
) -> ApiResult {
    Ok(Json(
        json!({ "webhook": s.set_webhook_enabled(&c, &id, false).await? }),
    ))
}

async fn enable_webhook(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
) -> ApiResult {
    Ok(Json(
        json!({ "webhook": s.set_webhook_enabled(&c, &id, true).await? }),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeliveryQuery {
    /// pending, delivered or dead.
    state: Option<String>,
    /// Only pending deliveries that failed at least once (retrying).
    #[serde(default)]
    failed: bool,
    endpoint: Option<String>,
    /// Ids below this one (the last id of the previous page).
    before: Option<i64>,
    limit: Option<i64>,
}

async fn list_deliveries(
    State(s): State<Service>,
    Authed(c): Authed,
    q: Result<Query<DeliveryQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(q) = q.map_err(|e| ApiError(ServiceError::invalid(e.body_text())))?;
    let filter = DeliveryFilter {
        state: q
            .state
            .as_deref()
            .map(DeliveryState::from_name)
            .transpose()?,
        failed: q.failed,
        endpoint: q.endpoint,
        before: q.before,
        limit: q.limit.unwrap_or(100),
    };
    let deliveries = s.deliveries(&c, filter).await?;
    let next = deliveries.last().map(|d| d.id);
    Ok(Json(
        json!({ "deliveries": deliveries, "next_before": next }),
    ))
}

fn delivery_id(id: &str) -> Result<i64, ServiceError> {
    id.parse()
        .map_err(|_| ServiceError::not_found("delivery", id))
}

async fn show_delivery(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
) -> ApiResult {
    Ok(Json(
        json!({ "delivery": s.delivery(&c, delivery_id(&id)?).await? }),
    ))
}

async fn retry_delivery(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
) -> ApiResult {
    Ok(Json(
        json!({ "delivery": s.retry_delivery(&c, delivery_id(&id)?).await? }),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryEndpoint {
    /// `webhook:<id>`, `push:<task>/<config>` (or a remote agent's).
    endpoint: String,
}

async fn retry_endpoint(
    State(s): State<Service>,
    Authed(c): Authed,
    body: Body<RetryEndpoint>,
) -> ApiResult {
    let endpoint = body.0.endpoint;
    let retried = s.retry_endpoint(&c, &endpoint).await?;
    Ok(Json(json!({ "endpoint": endpoint, "retried": retried })))
}

async fn list_endpoints(State(s): State<Service>, Authed(c): Authed) -> ApiResult {
    Ok(Json(json!({ "endpoints": s.endpoints(&c).await? })))
}
