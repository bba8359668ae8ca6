//! Webhooks: register one (its events, a channel or person filter; the `whsec_` secret shown
//! once), send a test, rotate the secret with an overlap during which both secrets sign (so a
//! receiver rolls without losing an event; the new secret shown once), change its events (the
//! secret stays), disable and enable, remove; each webhook's deliveries one link away. The rules
//! are `Service::add_webhook`, `test_webhook`, `rotate_webhook_secret`, `set_webhook_events`,
//! `set_webhook_enabled` and `remove_webhook`.

use axum::Router;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use minijinja::value::Serde;
use serde::{Deserialize, Serialize};

use super::people::post_only;
use super::{Admin, admin, admin_form, admin_frame, done, fail, field, person_choices, rendered};
use crate::console::{Console, status_of};
use crate::domain::{ChannelName, PersonId};
use crate::service::{ServiceError, WEBHOOK_EVENTS, WebhookSpec};

/// The overlaps the rotation form offers, in hours (0: the old secret stops at once).
const OVERLAPS_H: [u64; 5] = [0, 1, 24, 72, 168];

pub(super) fn routes() -> Router<Console> {
    Router::new()
        .route("/console/admin/webhooks", get(page).post(add))
        .route("/console/admin/webhooks/{id}/test", post_only(test))
        .route("/console/admin/webhooks/{id}/rotate", post_only(rotate))
        .route("/console/admin/webhooks/{id}/events", post_only(events))
        .route("/console/admin/webhooks/{id}/disable", post_only(disable))
        .route("/console/admin/webhooks/{id}/enable", post_only(enable))
        .route("/console/admin/webhooks/{id}/remove", post_only(remove))
}

#[derive(Default, Serialize)]
struct Outcome {
    shown: Option<super::Secret>,
    notice: Option<String>,
    /// `add` (the form), `row` (a row's button) or `events` (a row's events).
    form: Option<&'static str>,
    /// The webhook whose events were refused.
    webhook: Option<String>,
    error: Option<String>,
    url: Option<String>,
    events: Vec<String>,
    channel: Option<String>,
    person: Option<String>,
}

async fn page(State(c): State<Console>, headers: HeaderMap) -> Result<Response, Response> {
    let a = admin(&c, &headers).await?;
    render(&c, &a, Outcome::default(), StatusCode::OK).await
}

async fn render(
    c: &Console,
    a: &Admin,
    outcome: Outcome,
    status: StatusCode,
) -> Result<Response, Response> {
    let fail = fail(c);
    let webhooks: Vec<WebhookRow> = c
        .service
        .webhooks(&a.caller)
        .await
        .map_err(fail)?
        .into_iter()
        .map(|w| WebhookRow {
            deliveries: format!(
                "/console/admin/deliveries?endpoint={}",
                crate::domain::text::percent_encode(&crate::store::webhook_endpoint(&w.id))
            ),
            w,
        })
        .collect();
    let channels: Vec<String> = c
        .service
        .list_all_channels(&a.caller)
        .await
        .map_err(fail)?
        .into_iter()
        .filter(|ch| ch.removed_at.is_none())
        .map(|ch| ch.name.to_string())
        .collect();
    let persons = person_choices(c, a).await?;
    rendered(
        c,
        "admin/webhooks.html",
        minijinja::context! {
            webhooks => Serde(&webhooks), channels => channels, persons => Serde(&persons),
            all_events => WEBHOOK_EVENTS.to_vec(), overlaps => OVERLAPS_H.to_vec(),
            outcome => Serde(&outcome),
            ..Serde(admin_frame(a, "webhooks"))
        },
        status,
    )
    .await
}

/// A webhook's row, with the address of its deliveries.
#[derive(Serialize)]
struct WebhookRow {
    #[serde(flatten)]
    w: crate::store::WebhookRecord,
    deliveries: String,
}

/// The events ticked on a form (`event-<name>` check boxes), sorted.
fn ticked(checked: &std::collections::HashMap<String, String>) -> Vec<String> {
    let mut events: Vec<String> = checked
        .keys()
        .filter_map(|k| k.strip_prefix("event-").map(str::to_owned))
        .collect();
    events.sort();
    events
}

#[derive(Deserialize)]
struct EventsForm {
    csrf: Option<String>,
    #[serde(flatten)]
    checked: std::collections::HashMap<String, String>,
}

/// `POST /console/admin/webhooks/{id}/events`: the events it is sent from now on, its secret
/// kept.
async fn events(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: Result<Form<EventsForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let events = ticked(&f.checked);
    match c.service.set_webhook_events(&a.caller, &id, &events).await {
        Ok(_) => done("/console/admin/webhooks").await,
        Err(e) => {
            let status = status_of(&e);
            let outcome = Outcome {
                form: Some("events"),
                webhook: Some(id),
                error: Some(e.message),
                ..Outcome::default()
            };
            render(&c, &a, outcome, status).await
        }
    }
}

#[derive(Deserialize)]
struct AddForm {
    csrf: Option<String>,
    url: Option<String>,
    channel: Option<String>,
    person: Option<String>,
    #[serde(flatten)]
    checked: std::collections::HashMap<String, String>,
}

fn spec(f: &AddForm, events: Vec<String>) -> Result<WebhookSpec, ServiceError> {
    let channel = field(&f.channel)
        .map(|c| {
            ChannelName::parse(c.clone())
                .map_err(|_| ServiceError::not_found("channel", crate::domain::text::quote(&c)))
        })
        .transpose()?;
    let person = field(&f.person)
        .map(|p| {
            PersonId::parse(p.clone())
                .map_err(|_| ServiceError::not_found("person", crate::domain::text::quote(&p)))
        })
        .transpose()?;
    Ok(WebhookSpec {
        url: field(&f.url).unwrap_or_default(),
        events,
        person,
        channel,
    })
}

/// `POST /console/admin/webhooks`: registers it and shows its secret this once.
async fn add(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Result<Form<AddForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let events = ticked(&f.checked);
    let added = match spec(&f, events.clone()) {
        Ok(spec) => c.service.add_webhook(&a.caller, spec).await,
        Err(e) => Err(e),
    };
    match added {
        Ok((webhook, secret)) => {
            let outcome = Outcome {
                shown: Some(super::Secret {
                    what: format!("Webhook {} to {}", webhook.id, webhook.url),
                    secret,
                }),
                ..Outcome::default()
            };
            render(&c, &a, outcome, StatusCode::OK).await
        }
        Err(e) => {
            let status = status_of(&e);
            let outcome = Outcome {
                form: Some("add"),
                error: Some(e.message),
                url: f.url,
                events,
                channel: f.channel,
                person: f.person,
                ..Outcome::default()
            };
            render(&c, &a, outcome, status).await
        }
    }
}

#[derive(Deserialize)]
struct RowForm {
    csrf: Option<String>,
    overlap_h: Option<String>,
}

/// A row's refusal, shown above the list.
async fn row_refused(c: &Console, a: &Admin, e: ServiceError) -> Result<Response, Response> {
    let status = status_of(&e);
    let outcome = Outcome {
        form: Some("row"),
        error: Some(e.message),
        ..Outcome::default()
    };
    render(c, a, outcome, status).await
}

async fn test(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: Result<Form<RowForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, _) = admin_form(&c, &headers, f).await?;
    match c.service.test_webhook(&a.caller, &id).await {
        Ok(delivery) => {
            let outcome = Outcome {
                notice: Some(format!(
                    "A webhook.test event is on its way to {id}: delivery {delivery}."
                )),
                ..Outcome::default()
            };
            render(&c, &a, outcome, StatusCode::OK).await
        }
        Err(e) => row_refused(&c, &a, e).await,
    }
}

async fn rotate(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: Result<Form<RowForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let overlap = field(&f.overlap_h)
        .map(|h| {
            h.parse::<i64>()
                .map(|h| h.saturating_mul(3_600))
                .map_err(|_| ServiceError::invalid("the overlap must be a number of hours"))
        })
        .transpose();
    let rotated = match overlap {
        Ok(overlap) => {
            c.service
                .rotate_webhook_secret(&a.caller, &id, overlap)
                .await
        }
        Err(e) => Err(e),
    };
    match rotated {
        Ok((secret, until)) => {
            let what = match until {
                Some(until) => {
                    format!("New secret of {id}: the old one keeps signing too until {until}")
                }
                None => format!("New secret of {id}: the old one no longer signs"),
            };
            let outcome = Outcome {
                shown: Some(super::Secret { what, secret }),
                ..Outcome::default()
            };
            render(&c, &a, outcome, StatusCode::OK).await
        }
        Err(e) => row_refused(&c, &a, e).await,
    }
}

async fn switch(
    c: Console,
    headers: HeaderMap,
    id: String,
    f: Result<Form<RowForm>, FormRejection>,
    enabled: bool,
) -> Result<Response, Response> {
    let (a, _) = admin_form(&c, &headers, f).await?;
    match c.service.set_webhook_enabled(&a.caller, &id, enabled).await {
        Ok(_) => done("/console/admin/webhooks").await,
        Err(e) => row_refused(&c, &a, e).await,
    }
}

async fn disable(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: Result<Form<RowForm>, FormRejection>,
) -> Result<Response, Response> {
    switch(c, headers, id, f, false).await
}

async fn enable(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: Result<Form<RowForm>, FormRejection>,
) -> Result<Response, Response> {
    switch(c, headers, id, f, true).await
}

async fn remove(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: Result<Form<RowForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, _) = admin_form(&c, &headers, f).await?;
    match c.service.remove_webhook(&a.caller, &id).await {
        Ok(()) => done("/console/admin/webhooks").await,
        Err(e) => row_refused(&c, &a, e).await,
    }
}

super::csrf_field!(AddForm, EventsForm, RowForm);
