//! External parties: list them (display name, default skill, JWT subject, the channels each is a
//! member of), add one (with an `agent` bearer token whose secret is shown once, unless the admin
//! says not to issue one), remove one. The rules are `Service::add_party` and `remove_party`.

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
    Admin, CsrfOnly, HasCsrf, Outcome, admin, admin_form, admin_frame, done, fail, field, rendered,
};
use crate::console::{Console, status_of};
use crate::domain::{ChannelName, PersonId};
use crate::service::{PartySpec, ServiceError};

pub(super) fn routes() -> Router<Console> {
    Router::new()
        .route("/console/admin/parties", get(page).post(add))
        .route("/console/admin/parties/{id}/remove", post_only(remove))
}

#[derive(Serialize)]
struct PartyRow {
    id: String,
    name: String,
    default_skill: Option<String>,
    jwt_subject: Option<String>,
    channels: Vec<String>,
    created_at: String,
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
    let channels = c
        .service
        .list_all_channels(&a.caller)
        .await
        .map_err(fail(c))?;
    let parties: Vec<PartyRow> = c
        .service
        .list_parties(&a.caller)
        .await
        .map_err(fail(c))?
        .into_iter()
        .map(|p| PartyRow {
            channels: channels
                .iter()
                .filter(|ch| {
                    ch.removed_at.is_none() && ch.members.iter().any(|m| m.person == p.person.id)
                })
                .map(|ch| ch.name.to_string())
                .collect(),
            id: p.person.id.to_string(),
            name: p.person.display_name,
            default_skill: p.default_skill,
            jwt_subject: p.jwt_subject,
            created_at: p.person.created_at.to_string(),
        })
        .collect();
    let live: Vec<String> = channels
        .iter()
        .filter(|ch| ch.removed_at.is_none())
        .map(|ch| ch.name.to_string())
        .collect();
    // The channels a refused form had checked, checked again.
    let kept_channels: Vec<String> = outcome
        .values
        .get("channels")
        .map(|c| {
            c.split(',')
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let settings = c.service.settings();
    let skills: Vec<String> = settings.skills.iter().map(|s| s.id.clone()).collect();
    rendered(
        c,
        "admin/parties.html",
        minijinja::context! {
            parties => Serde(&parties), skills => skills, channels => live,
            kept_channels => kept_channels,
            server_skill => settings.default_skill.clone(),
            outcome => Serde(&outcome),
            ..Serde(admin_frame(a, "parties"))
        },
        status,
    )
    .await
}

/// The page again with `form`'s refusal next to it and the values sent.
async fn refused(
    c: &Console,
    a: &Admin,
    form: &'static str,
    e: ServiceError,
    values: &[(&'static str, Option<String>)],
) -> Result<Response, Response> {
    let outcome = Outcome::refused(form, &e, values);
    render(c, a, outcome, status_of(&e)).await
}

#[derive(Deserialize)]
struct AddForm {
    csrf: Option<String>,
    id: Option<String>,
    display_name: Option<String>,
    /// Empty: the server's default skill.
    default_skill: Option<String>,
    jwt_subject: Option<String>,
    /// A checkbox: present when checked.
    issue_token: Option<String>,
    /// One `channel-NAME` field per checked channel.
    #[serde(flatten)]
    checked: std::collections::HashMap<String, String>,
}

impl AddForm {
    /// The checked channels, sorted.
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

impl HasCsrf for AddForm {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

fn spec(f: &AddForm) -> Result<PartySpec, ServiceError> {
    let raw = field(&f.id).unwrap_or_default();
    let id = PersonId::parse(raw.clone()).map_err(|_| {
        ServiceError::invalid(format!(
            "id must be a slug: lowercase letters, digits and -, e.g. acme (got {})",
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
    Ok(PartySpec {
        id,
        display_name: f.display_name.clone().unwrap_or_default(),
        default_skill: field(&f.default_skill),
        jwt_subject: field(&f.jwt_subject),
        issue_token: f.issue_token.is_some(),
        channels,
    })
}

/// `POST /console/admin/parties`: adds the party; its token's secret is shown this once.
async fn add(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Result<Form<AddForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let added = match spec(&f) {
        Ok(spec) => c.service.add_party(&a.caller, spec).await,
        Err(e) => Err(e),
    };
    match added {
        Ok(added) => {
            let notice = added.warning.clone();
            let Some(token) = added.token else {
                let outcome = Outcome {
                    notice,
                    ..Outcome::default()
                };
                return match outcome.notice {
                    Some(_) => render(&c, &a, outcome, StatusCode::OK).await,
                    None => done("/console/admin/parties").await,
                };
            };
            let mut outcome = Outcome::secret(
                format!(
                    "Token {} of party {} ({})",
                    token.token.id, added.party.person.id, token.token.scopes
                ),
                token.secret,
            );
            outcome.notice = notice;
            render(&c, &a, outcome, StatusCode::OK).await
        }
        Err(e) => {
            let channels = f.channels().join(",");
            let values = [
                ("id", f.id),
                ("display_name", f.display_name),
                ("default_skill", f.default_skill),
                ("jwt_subject", f.jwt_subject),
                ("issue_token", f.issue_token),
                ("channels", Some(channels)),
            ];
            refused(&c, &a, "party", e, &values).await
        }
    }
}

/// `POST /console/admin/parties/{id}/remove`.
async fn remove(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: Result<Form<CsrfOnly>, FormRejection>,
) -> Result<Response, Response> {
    let (a, _) = admin_form(&c, &headers, f).await?;
    let id = PersonId::parse(id).map_err(|_| fail(&c)(ServiceError::not_found("party", "?")))?;
    match c.service.remove_party(&a.caller, &id).await {
        Ok(()) => done("/console/admin/parties").await,
        Err(e) => refused(&c, &a, "row", e, &[]).await,
    }
}
