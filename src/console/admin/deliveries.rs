//! Deliveries: the outbox, live. Each endpoint with its pending, failed, dead and delivered
//! counts and, when disabled, since when and why; the deliveries by state and endpoint; one
//! delivery with its attempts (status, error class, duration); retry a dead one, or every dead
//! one of an endpoint (which enables it again). The rules are `Service::endpoints`,
//! `deliveries`, `delivery`, `retry_delivery` and `retry_endpoint`.

use axum::Router;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use minijinja::value::Serde;
use serde::{Deserialize, Serialize};

use super::people::post_only;
use super::{Admin, admin, admin_form, admin_frame, done, fail, field, rendered};
use crate::console::{Console, status_of};
use crate::service::ServiceError;
use crate::store::{DeliveryFilter, DeliveryState};

/// Deliveries a page lists.
const PAGE: i64 = 100;

pub(super) fn routes() -> Router<Console> {
    Router::new()
        .route("/console/admin/deliveries", get(page))
        .route("/console/admin/deliveries/{id}", get(show))
        .route("/console/admin/deliveries/{id}/retry", post_only(retry))
        .route(
            "/console/admin/deliveries/retry-endpoint",
            post_only(retry_endpoint),
        )
}

/// An endpoint's row, with the address of its deliveries.
#[derive(Serialize)]
struct EndpointRow {
    #[serde(flatten)]
    e: crate::store::EndpointRecord,
    href: String,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Filter {
    /// pending, failed, dead or delivered.
    state: Option<String>,
    endpoint: Option<String>,
}

fn filter(f: &Filter) -> Result<DeliveryFilter, ServiceError> {
    let (state, failed) = match field(&f.state).as_deref() {
        None => (None, false),
        Some("failed") => (Some(DeliveryState::Pending), true),
        Some(s) => (Some(DeliveryState::from_name(s)?), false),
    };
    Ok(DeliveryFilter {
        state,
        failed,
        endpoint: field(&f.endpoint),
        before: None,
        limit: PAGE,
    })
}

async fn page(
    State(c): State<Console>,
    headers: HeaderMap,
    q: Result<Query<Filter>, QueryRejection>,
) -> Result<Response, Response> {
    let a = admin(&c, &headers).await?;
    let q = q.map(|Query(q)| q).unwrap_or_default();
    render(&c, &a, &q, None, StatusCode::OK).await
}

async fn render(
    c: &Console,
    a: &Admin,
    q: &Filter,
    error: Option<String>,
    status: StatusCode,
) -> Result<Response, Response> {
    let endpoints: Vec<EndpointRow> = c
        .service
        .endpoints(&a.caller)
        .await
        .map_err(fail(c))?
        .into_iter()
        .map(|e| EndpointRow {
            href: format!(
                "/console/admin/deliveries?endpoint={}",
                crate::domain::text::percent_encode(&e.endpoint)
            ),
            e,
        })
        .collect();
    // Endpoints nothing is sent to any more: their deliveries offer no retry.
    let removed: Vec<String> = endpoints
        .iter()
        .filter(|e| e.e.webhook_removed_at.is_some())
        .map(|e| e.e.endpoint.clone())
        .collect();
    let (deliveries, error, status) = match filter(q) {
        Ok(f) => match c.service.deliveries(&a.caller, f).await {
            Ok(d) => (d, error, status),
            Err(e) => (Vec::new(), Some(e.message.clone()), status_of(&e)),
        },
        Err(e) => (Vec::new(), Some(e.message.clone()), status_of(&e)),
    };
    rendered(
        c,
        "admin/deliveries.html",
        minijinja::context! {
            endpoints => Serde(&endpoints), deliveries => Serde(&deliveries), q => Serde(q),
            error => error, states => ["pending", "failed", "dead", "delivered"],
            removed => removed,
            ..Serde(admin_frame(a, "deliveries").live_from("/console/admin/events"))
        },
        status,
    )
    .await
}

async fn show(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, Response> {
    let a = admin(&c, &headers).await?;
    let id: i64 = id
        .parse()
        .map_err(|_| fail(&c)(ServiceError::not_found("delivery", "?")))?;
    let view = c.service.delivery(&a.caller, id).await.map_err(fail(&c))?;
    rendered(
        &c,
        "admin/delivery.html",
        minijinja::context! {
            d => Serde(&view),
            ..Serde(admin_frame(&a, "deliveries").live_from("/console/admin/events"))
        },
        StatusCode::OK,
    )
    .await
}

#[derive(Deserialize)]
struct RetryForm {
    csrf: Option<String>,
    endpoint: Option<String>,
}

/// `POST /console/admin/deliveries/{id}/retry`: a dead delivery, sent again.
async fn retry(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: Result<Form<RetryForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, _) = admin_form(&c, &headers, f).await?;
    let id: i64 = id
        .parse()
        .map_err(|_| fail(&c)(ServiceError::not_found("delivery", "?")))?;
    match c.service.retry_delivery(&a.caller, id).await {
        Ok(_) => done(&format!("/console/admin/deliveries/{id}")).await,
        Err(e) => {
            let status = status_of(&e);
            render(&c, &a, &Filter::default(), Some(e.message), status).await
        }
    }
}

/// `POST /console/admin/deliveries/retry-endpoint`: every dead delivery of an endpoint.
async fn retry_endpoint(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Result<Form<RetryForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let endpoint = field(&f.endpoint).unwrap_or_default();
    match c.service.retry_endpoint(&a.caller, &endpoint).await {
        Ok(_) => done("/console/admin/deliveries").await,
        Err(e) => {
            let status = status_of(&e);
            render(&c, &a, &Filter::default(), Some(e.message), status).await
        }
    }
}

super::csrf_field!(RetryForm);
