//! The signing keys: the ring (each key's id, algorithm, creation, when it retires, which one
//! signs), the keys retired lately (when, how, and until when they are listed), a rotation with the overlap during which the previous keys keep co-signing, retiring a
//! key that no longer signs; and the card's signatures and the key set exactly as clients get them
//! (`Service::keys`, `retired_keys`, `rotate_keys`, `retire_key`, `published_card`).

use axum::Router;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use minijinja::value::Serde;
use serde::{Deserialize, Serialize};

use super::people::post_only;
use super::{
    Admin, CsrfOnly, HasCsrf, admin, admin_form, admin_frame, done, fail, field, pretty, rendered,
};
use crate::console::{Console, status_of};
use crate::service::{ErrorCode, ServiceError};

/// The overlaps the rotation form offers, in days (the key manager allows up to 90).
const OVERLAPS: [i64; 4] = [1, 7, 30, 90];
/// The overlap selected by default (the service's default, 7 days).
const DEFAULT_OVERLAP: i64 = 7;

pub(super) fn routes() -> Router<Console> {
    Router::new()
        .route("/console/admin/keys", get(page))
        .route("/console/admin/keys/rotate", post_only(rotate))
        .route("/console/admin/keys/{kid}/retire", post_only(retire))
}

/// One signature of the served card, for the page.
#[derive(Serialize)]
struct SignatureRow {
    kid: String,
    alg: String,
    header: String,
}

/// A refusal shown next to its form (`rotate`, `row`).
#[derive(Default, Serialize)]
struct Outcome {
    form: Option<&'static str>,
    error: Option<String>,
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
    // A process without a key ring (never the server's) shows why there is nothing here.
    let (keys, missing) = match c.service.keys(&a.caller).await {
        Ok(keys) => (keys, None),
        Err(e) if e.code == ErrorCode::Unavailable => (Vec::new(), Some(e.message)),
        Err(e) => return Err(fail(c)(e)),
    };
    let retired = if missing.is_none() {
        c.service.retired_keys(&a.caller).await.map_err(fail(c))?
    } else {
        Vec::new()
    };
    let published = if missing.is_none() {
        c.service.published_card(&a.caller).map_err(fail(c))?
    } else {
        None
    };
    let signatures: Vec<SignatureRow> = published
        .iter()
        .flat_map(|p| &p.signatures)
        .map(|s| SignatureRow {
            kid: s.kid.clone().unwrap_or_default(),
            alg: s.alg.clone().unwrap_or_default(),
            header: pretty(&s.header),
        })
        .collect();
    // The key set as served, indented for reading (the link gives the bytes).
    let jwks = published.as_ref().map(|p| {
        serde_json::from_str::<serde_json::Value>(&p.jwks)
            .map_or_else(|_| p.jwks.clone(), |v| pretty(&v))
    });
    rendered(
        c,
        "admin/keys.html",
        minijinja::context! {
            keys => Serde(&keys), retired => Serde(&retired), missing => missing,
            published => Serde(&published), listed_days => crate::keys::ring::RETIRED_LISTED.num_days(),
            signatures => Serde(&signatures), jwks => jwks,
            overlaps => OVERLAPS.to_vec(), default_overlap => DEFAULT_OVERLAP,
            outcome => Serde(&outcome),
            ..Serde(admin_frame(a, "keys"))
        },
        status,
    )
    .await
}

async fn refused(
    c: &Console,
    a: &Admin,
    form: &'static str,
    e: ServiceError,
) -> Result<Response, Response> {
    let status = status_of(&e);
    let outcome = Outcome {
        form: Some(form),
        error: Some(e.message),
    };
    render(c, a, outcome, status).await
}

#[derive(Deserialize)]
struct RotateForm {
    csrf: Option<String>,
    overlap_days: Option<String>,
}

impl HasCsrf for RotateForm {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

fn overlap_s(f: &RotateForm) -> Result<Option<i64>, ServiceError> {
    field(&f.overlap_days)
        .map(|d| {
            d.parse::<i64>()
                .map(|d| d.saturating_mul(86_400))
                .map_err(|_| ServiceError::invalid("the overlap must be a number of days"))
        })
        .transpose()
}

/// `POST /console/admin/keys/rotate`: a new key signs from now on.
async fn rotate(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Result<Form<RotateForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let rotated = match overlap_s(&f) {
        Ok(overlap) => c.service.rotate_keys(&a.caller, overlap).await,
        Err(e) => Err(e),
    };
    match rotated {
        Ok(_) => done("/console/admin/keys").await,
        Err(e) => refused(&c, &a, "rotate", e).await,
    }
}

/// `POST /console/admin/keys/{kid}/retire`: the key leaves the key set and stops co-signing.
async fn retire(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(kid): Path<String>,
    f: Result<Form<CsrfOnly>, FormRejection>,
) -> Result<Response, Response> {
    let (a, _) = admin_form(&c, &headers, f).await?;
    match c.service.retire_key(&a.caller, &kid).await {
        Ok(()) => done("/console/admin/keys").await,
        Err(e) => refused(&c, &a, "row", e).await,
    }
}
