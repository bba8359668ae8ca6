//! One remote agent's page: its card (pinned keys, the interface calls go to, credentials as kinds
//! and header names, never values), the interfaces and skills its card offers, and the remote
//! tasks of the threads delegated to it; refresh and remove. A refresh that finds other signing
//! keys than the pinned ones (or a card no longer signed) is refused by the service with the diff;
//! the page shows it and applies it only by a second, explicit POST ("Accept new keys"). The rules
//! are `Service::show_remote`, `remote_tasks`, `refresh_remote` and `remove_remote`.

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
    Admin, CsrfOnly, HasCsrf, admin, admin_form, admin_frame, done, fail, pretty, rendered,
};
use crate::console::{Console, status_of};
use crate::domain::PersonId;
use crate::service::{ErrorCode, RefreshSpec, RemoteView, ServiceError};

pub(super) fn routes() -> Router<Console> {
    Router::new()
        .route("/console/admin/remotes/{name}", get(show))
        .route("/console/admin/remotes/{name}/refresh", post_only(refresh))
        .route("/console/admin/remotes/{name}/remove", post_only(remove))
}

/// A change shown before it is applied (the keys a refresh found), as `admin/preview.html`
/// renders it.
#[derive(Default, Serialize)]
struct Preview {
    title: String,
    lead: Option<String>,
    before: Option<String>,
    after: Option<String>,
    error: Option<String>,
    action: String,
    fields: Vec<(String, String)>,
    /// The apply button's label.
    apply: Option<&'static str>,
    /// Where Cancel goes (the page itself).
    cancel: Option<String>,
}

/// What a remote's page shows above its facts.
#[derive(Default, Serialize)]
struct Shown {
    notice: Option<String>,
    /// What a refresh changed (JSON).
    changes: Option<String>,
    error: Option<String>,
}

#[derive(Serialize)]
struct TaskRow {
    thread: String,
    task_id: Option<String>,
    state: String,
    follow: String,
    skill: Option<String>,
    last_error: Option<String>,
    next_check_at: String,
    updated_at: String,
}

async fn remote_name(c: &Console, name: &str) -> Result<PersonId, Response> {
    PersonId::parse(name.to_owned())
        .map_err(|_| fail(c)(ServiceError::not_found("remote agent", "?")))
}

async fn show(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, Response> {
    let a = admin(&c, &headers).await?;
    let name = remote_name(&c, &name).await?;
    render_remote(&c, &a, &name, Shown::default(), None, StatusCode::OK).await
}

/// The page of a remote just added: what its card offers.
pub(super) async fn added(
    c: &Console,
    a: &Admin,
    remote: &RemoteView,
) -> Result<Response, Response> {
    let shown = Shown {
        notice: Some(format!(
            "Added {}: its card offers the skills and interfaces below; calls go over {}.",
            remote.name,
            remote.binding.as_str()
        )),
        ..Shown::default()
    };
    render_remote(c, a, &remote.name, shown, None, StatusCode::OK).await
}

/// The page of remote `name` with `shown` above its facts and `preview` (if any) first.
async fn render_remote(
    c: &Console,
    a: &Admin,
    name: &PersonId,
    shown: Shown,
    preview: Option<Preview>,
    status: StatusCode,
) -> Result<Response, Response> {
    let remote = c
        .service
        .show_remote(&a.caller, name)
        .await
        .map_err(fail(c))?;
    let tasks: Vec<TaskRow> = c
        .service
        .remote_tasks(&a.caller, name)
        .await
        .map_err(fail(c))?
        .into_iter()
        .map(|t| TaskRow {
            thread: t.thread.to_string(),
            task_id: t.task_id,
            state: t
                .state
                .map_or_else(|| "not started".into(), |s| s.to_string()),
            follow: t.follow.to_string(),
            skill: t.skill,
            last_error: t.last_error,
            next_check_at: t.next_check_at.to_string(),
            updated_at: t.updated_at.to_string(),
        })
        .collect();
    rendered(
        c,
        "admin/remote.html",
        minijinja::context! {
            remote => Serde(&remote), tasks => Serde(&tasks),
            credentials => pretty(&remote.credentials),
            shown => Serde(&shown), preview => Serde(&preview),
            tasks_shown => crate::service::REMOTE_TASKS_SHOWN,
            ..Serde(admin_frame(a, "remotes"))
        },
        status,
    )
    .await
}

/// The keys a refused refresh found, before → after, with the button that accepts them.
fn keys_preview(remote: &RemoteView, details: &serde_json::Value) -> Preview {
    let kids = |k: &str| -> Vec<String> {
        details[k]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (added, removed) = (kids("keys_added"), kids("keys_removed"));
    let signed_after = details["signed"][1].as_bool().unwrap_or(remote.signed);
    let mut after: Vec<String> = remote
        .keys
        .iter()
        .filter(|k| !removed.contains(k))
        .cloned()
        .collect();
    after.extend(added.iter().cloned());
    let mut what = Vec::new();
    if !added.is_empty() {
        what.push(format!("new keys {}", added.join(", ")));
    }
    if !removed.is_empty() {
        what.push(format!("keys gone {}", removed.join(", ")));
    }
    if signed_after != remote.signed {
        what.push(if signed_after {
            "the card is signed now".to_owned()
        } else {
            "the card is no longer signed".to_owned()
        });
    }
    let shown = |signed: bool, keys: &[String]| {
        pretty(&serde_json::json!({ "signed": signed, "keys": keys }))
    };
    Preview {
        title: format!("The signing keys of {} changed", remote.name),
        lead: Some(format!(
            "Its card is no longer signed by the keys pinned when it was added or last accepted \
             ({}). Nothing was updated. Check with the remote's operator that they rotated \
             their keys before accepting: a card signed by someone else looks just like this.",
            what.join("; ")
        )),
        before: Some(shown(remote.signed, &remote.keys)),
        after: Some(shown(signed_after, &after)),
        action: format!("/console/admin/remotes/{}/refresh", remote.name),
        fields: vec![("accept_new_keys".into(), "on".into())],
        apply: Some("Accept new keys"),
        cancel: Some(format!("/console/admin/remotes/{}", remote.name)),
        ..Preview::default()
    }
}

#[derive(Deserialize)]
struct RefreshForm {
    csrf: Option<String>,
    accept_new_keys: Option<String>,
}

impl HasCsrf for RefreshForm {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

/// `POST /console/admin/remotes/{name}/refresh`: fetches the card again; new keys are shown
/// first and pinned only with `accept_new_keys`.
async fn refresh(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(name): Path<String>,
    f: Result<Form<RefreshForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let name = remote_name(&c, &name).await?;
    let spec = RefreshSpec {
        accept_new_keys: f.accept_new_keys.is_some(),
        credentials: None,
    };
    let (shown, preview, status) = match c.service.refresh_remote(&a.caller, &name, spec).await {
        Ok(report) => {
            let shown = Shown {
                notice: Some(if report.changed {
                    format!("Refreshed {name}: its card changed as below.")
                } else {
                    format!("Refreshed {name}: nothing changed.")
                }),
                changes: (!report.changes.is_empty())
                    .then(|| serde_json::to_value(&report.changes).ok())
                    .flatten()
                    .map(|v| pretty(&v)),
                ..Shown::default()
            };
            (shown, None, StatusCode::OK)
        }
        Err(e) if e.code == ErrorCode::KeysChanged && e.details.is_some() => {
            let status = status_of(&e);
            let remote = c
                .service
                .show_remote(&a.caller, &name)
                .await
                .map_err(fail(&c))?;
            let details = e.details.unwrap_or_default();
            let preview = keys_preview(&remote, &details);
            (Shown::default(), Some(preview), status)
        }
        Err(e) => {
            let status = status_of(&e);
            let shown = Shown {
                error: Some(e.message),
                ..Shown::default()
            };
            (shown, None, status)
        }
    };
    render_remote(&c, &a, &name, shown, preview, status).await
}

/// `POST /console/admin/remotes/{name}/remove`: it leaves its channels and can no longer be
/// addressed; the name is never reused.
async fn remove(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(name): Path<String>,
    f: Result<Form<CsrfOnly>, FormRejection>,
) -> Result<Response, Response> {
    let (a, _) = admin_form(&c, &headers, f).await?;
    let name = remote_name(&c, &name).await?;
    match c.service.remove_remote(&a.caller, &name).await {
        Ok(()) => done("/console/admin/remotes").await,
        Err(e) => {
            let status = status_of(&e);
            let shown = Shown {
                error: Some(e.message),
                ..Shown::default()
            };
            render_remote(&c, &a, &name, shown, None, status).await
        }
    }
}
