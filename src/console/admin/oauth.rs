//! OAuth clients (SPEC §7): the clients registered with liaison's authorization server or known
//! by their metadata document, with what they declared about themselves (marked so), their live
//! grants and last use; remove one (asked first), which revokes its grants and ends their
//! sessions. The rules are `Service::oauth_clients` and `remove_oauth_client`, as for
//! `/admin/v1/oauth/clients` and `liaison oauth clients`.

use axum::Router;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use minijinja::value::Serde;
use serde::{Deserialize, Serialize};

use super::people::post_only;
use super::{Admin, Outcome, admin, admin_form, admin_frame, csrf_field, done, fail, rendered};
use crate::console::{Console, status_of};
use crate::service::ServiceError;

pub(super) fn routes() -> Router<Console> {
    Router::new()
        .route("/console/admin/oauth", get(page))
        .route("/console/admin/oauth/remove", post_only(remove))
}

#[derive(Serialize)]
struct ClientRow {
    id: String,
    /// `DCR` (registered, RFC 7591) or `CIMD` (a Client ID Metadata Document).
    kind: &'static str,
    name: String,
    redirect_uris: Vec<String>,
    registered_from: Option<String>,
    created_at: String,
    live_grants: i64,
    last_used_at: Option<String>,
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
    let clients: Vec<ClientRow> = c
        .service
        .oauth_clients(&a.caller)
        .await
        .map_err(fail(c))?
        .into_iter()
        .map(|v| ClientRow {
            kind: if v.client.kind == "registered" {
                "DCR"
            } else {
                "CIMD"
            },
            id: v.client.id,
            name: v.client.name,
            redirect_uris: v.client.redirect_uris,
            registered_from: v.client.registered_from,
            created_at: v.client.created_at.to_string(),
            live_grants: v.live_grants,
            last_used_at: v.last_used_at.map(|t| t.to_string()),
        })
        .collect();
    let settings = c.service.oauth_settings();
    rendered(
        c,
        "admin/oauth.html",
        minijinja::context! {
            clients => Serde(&clients),
            enabled => settings.enabled,
            per_hour => settings.registrations_per_hour,
            max_clients => settings.max_registered_clients,
            outcome => Serde(&outcome),
            ..Serde(admin_frame(a, "oauth"))
        },
        status,
    )
    .await
}

#[derive(Deserialize)]
struct RemoveForm {
    csrf: Option<String>,
    /// The client id: `ocl_…`, or a metadata document's URL (hence a field, not a path).
    id: Option<String>,
}

csrf_field!(RemoveForm);

/// `POST /console/admin/oauth/remove`: removes the client; its grants end at once.
async fn remove(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Result<Form<RemoveForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let id = f.id.unwrap_or_default();
    match c.service.remove_oauth_client(&a.caller, &id).await {
        Ok(()) => done("/console/admin/oauth").await,
        Err(e) => {
            let outcome = Outcome::refused("row", &e, &[]);
            refused(&c, &a, outcome, &e).await
        }
    }
}

async fn refused(
    c: &Console,
    a: &Admin,
    outcome: Outcome,
    e: &ServiceError,
) -> Result<Response, Response> {
    render(c, a, outcome, status_of(e)).await
}
