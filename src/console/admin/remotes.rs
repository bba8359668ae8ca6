//! Remote agents: list them, and add one from its card URL in two steps: the service fetches and
//! verifies the card and the page shows it for review (its name, signature state, the interface
//! calls would go to, every interface and skill), storing nothing; "Add" then stores it only if
//! the card fetched again is the card reviewed. One remote's page is `remote.rs`. The rules are
//! `Service::review_remote` and `add_remote_reviewed`.

use axum::Router;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use minijinja::value::Serde;
use serde::{Deserialize, Serialize};

use super::{Admin, HasCsrf, admin, admin_form, admin_frame, fail, field, rendered};
use crate::console::{Console, status_of};
use crate::domain::{ChannelName, PersonId};
use crate::remote::{Credentials, ExtraHeader, RemoteAuth};
use crate::service::{RemoteSpec, RemoteView, ReviewedCard, ServiceError};

/// The bindings the add form offers: (value, label); empty means the preference order.
const BINDINGS: [(&str, &str); 4] = [
    ("", "the card's best (gRPC, JSON-RPC, HTTP+JSON)"),
    ("grpc", "gRPC"),
    ("jsonrpc", "JSON-RPC"),
    ("http-json", "HTTP+JSON"),
];

pub(super) fn routes() -> Router<Console> {
    Router::new().route("/console/admin/remotes", get(list).post(add))
}

/// The add form's refusal: why, and the values sent (never a secret).
#[derive(Default, Serialize)]
struct Outcome {
    error: Option<String>,
    values: std::collections::HashMap<&'static str, String>,
    channels: Vec<String>,
    review: Option<Review>,
}

/// A card fetched for review, not stored: the remote as it would be, and what the second step
/// hands back (the digest of what was shown, the credentials sealed: never in clear again),
/// with the credentials' kinds as the remote's page shows them.
#[derive(Serialize)]
struct Review {
    remote: RemoteView,
    reviewed: ReviewedCard,
    credentials: String,
}

async fn list(State(c): State<Console>, headers: HeaderMap) -> Result<Response, Response> {
    let a = admin(&c, &headers).await?;
    render_list(&c, &a, Outcome::default(), StatusCode::OK).await
}

async fn render_list(
    c: &Console,
    a: &Admin,
    outcome: Outcome,
    status: StatusCode,
) -> Result<Response, Response> {
    let remotes = c.service.list_remotes(&a.caller).await.map_err(fail(c))?;
    let channels: Vec<String> = c
        .service
        .list_all_channels(&a.caller)
        .await
        .map_err(fail(c))?
        .into_iter()
        .filter(|ch| ch.removed_at.is_none())
        .map(|ch| ch.name.to_string())
        .collect();
    rendered(
        c,
        "admin/remotes.html",
        minijinja::context! {
            remotes => Serde(&remotes), channels => channels, bindings => BINDINGS.to_vec(),
            outcome => Serde(&outcome),
            ..Serde(admin_frame(a, "remotes"))
        },
        status,
    )
    .await
}

#[derive(Deserialize)]
struct AddForm {
    csrf: Option<String>,
    name: Option<String>,
    display_name: Option<String>,
    card_url: Option<String>,
    binding: Option<String>,
    allow_unsigned: Option<String>,
    /// `none`, `bearer` or `oauth2`.
    auth: Option<String>,
    bearer_token: Option<String>,
    token_url: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    /// OAuth2 scopes, separated by spaces or commas.
    scopes: Option<String>,
    /// Extra headers, one `Name: value` a line.
    headers: Option<String>,
    /// `review` (fetch and show the card) or `add` (store the card reviewed).
    step: Option<String>,
    /// The digest of the card reviewed, and the credentials given then, sealed (the `add` step).
    reviewed: Option<String>,
    sealed_credentials: Option<String>,
    /// One `channel-NAME` field per checked channel.
    #[serde(flatten)]
    checked: std::collections::HashMap<String, String>,
}

impl HasCsrf for AddForm {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

impl AddForm {
    fn channels(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .checked
            .keys()
            .filter_map(|k| k.strip_prefix("channel-").map(str::to_owned))
            .collect();
        names.sort();
        names
    }
}

/// The credentials the form describes, as `RemoteSpec.credentials` takes them.
fn credentials(f: &AddForm) -> Result<Credentials, ServiceError> {
    let needed = |v: &Option<String>, what: &str| {
        field(v).ok_or_else(|| ServiceError::invalid(format!("give the {what}")))
    };
    let auth = match field(&f.auth).as_deref().unwrap_or("none") {
        "none" => None,
        "bearer" => Some(RemoteAuth::Bearer {
            token: needed(&f.bearer_token, "bearer token")?,
        }),
        "oauth2" => Some(RemoteAuth::Oauth2 {
            token_url: needed(&f.token_url, "OAuth2 token URL")?,
            client_id: needed(&f.client_id, "OAuth2 client id")?,
            client_secret: needed(&f.client_secret, "OAuth2 client secret")?,
            scopes: field(&f.scopes)
                .unwrap_or_default()
                .split([' ', ','])
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        }),
        other => {
            return Err(ServiceError::invalid(format!(
                "credentials must be none, bearer or oauth2 (got {})",
                crate::domain::text::quote(other)
            )));
        }
    };
    let headers = field(&f.headers)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| match l.split_once(':') {
            Some((name, value)) => Ok(ExtraHeader {
                name: name.trim().to_owned(),
                value: value.trim().to_owned(),
            }),
            None => Err(ServiceError::invalid(
                "write each extra header as Name: value, one a line",
            )),
        })
        .collect::<Result<_, _>>()?;
    Ok(Credentials { auth, headers })
}

fn spec(f: &AddForm) -> Result<RemoteSpec, ServiceError> {
    let raw = field(&f.name).unwrap_or_default();
    let name = PersonId::parse(raw.clone()).map_err(|_| {
        ServiceError::invalid(format!(
            "the name must be a slug: lowercase letters, digits and -, e.g. billing-agent (got {})",
            crate::domain::text::quote(&raw)
        ))
    })?;
    let channels = f
        .channels()
        .into_iter()
        .map(|n| {
            ChannelName::parse(n.clone()).map_err(|_| {
                ServiceError::invalid(format!(
                    "{} is not a channel",
                    crate::domain::text::quote(&n)
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(RemoteSpec {
        name,
        card_url: field(&f.card_url).unwrap_or_default(),
        display_name: field(&f.display_name),
        channels,
        allow_unsigned: f.allow_unsigned.is_some(),
        binding: field(&f.binding),
        credentials: credentials(f)?,
    })
}

/// `POST /console/admin/remotes`: step `review` fetches and verifies the card and shows it with
/// the form as sent; step `add` registers the remote (the card as reviewed) and shows its page.
async fn add(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Result<Form<AddForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let adding = field(&f.step).as_deref() == Some("add");
    let result = match spec(&f) {
        Ok(spec) if adding => {
            let reviewed = field(&f.reviewed)
                .map(|digest| ReviewedCard {
                    digest,
                    sealed_credentials: field(&f.sealed_credentials),
                })
                .ok_or_else(|| {
                    ServiceError::invalid("review the card before adding it; nothing was stored")
                });
            match reviewed {
                Ok(r) => c
                    .service
                    .add_remote_reviewed(&a.caller, spec, Some(&r))
                    .await
                    .map(Ok),
                Err(e) => Err(e),
            }
        }
        Ok(spec) => c.service.review_remote(&a.caller, &spec).await.map(Err),
        Err(e) => Err(e),
    };
    match result {
        Ok(Ok(view)) => super::remote::added(&c, &a, &view).await,
        Ok(Err((remote, reviewed))) => {
            let outcome = Outcome {
                review: Some(Review {
                    credentials: super::pretty(&remote.credentials),
                    remote,
                    reviewed,
                }),
                ..Outcome::default()
            };
            let mut page = render_list(&c, &a, outcome, StatusCode::OK).await?;
            page.extensions_mut()
                .insert(crate::console::refill::KeepValues);
            Ok(page)
        }
        Err(e) => {
            let status = status_of(&e);
            let outcome = Outcome {
                error: Some(e.message),
                // Secrets are not sent back to the page: they are typed again.
                values: [
                    ("name", &f.name),
                    ("display_name", &f.display_name),
                    ("card_url", &f.card_url),
                    ("binding", &f.binding),
                    ("allow_unsigned", &f.allow_unsigned),
                    ("auth", &f.auth),
                    ("token_url", &f.token_url),
                    ("client_id", &f.client_id),
                    ("scopes", &f.scopes),
                ]
                .into_iter()
                .filter_map(|(k, v)| v.clone().map(|v| (k, v)))
                .collect(),
                channels: f.channels(),
                review: None,
            };
            render_list(&c, &a, outcome, status).await
        }
    }
}
