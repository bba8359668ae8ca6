//! Channels: create, remove, members and their rights, and the approval policy (per impact,
//! `outbound`, the approval deadline, the elicitation switch). Every change is shown first, as
//! the service would make it (before → after) or with the service's refusal and its reason
//! (`Service::preview_channel`, `preview_members`, `preview_policy`), and applied only by a
//! second POST (`step=apply`) that the preview's own button sends.

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
    Admin, admin, admin_form, admin_frame, done, fail, field, person_choices, pretty, rendered,
};
use crate::console::{Console, status_of};
use crate::domain::{ChannelName, PersonId, PolicyChange, PolicyDecision, Right, Rights};
use crate::service::{ChannelSpec, MemberChange, ServiceError};
use crate::store::ChannelRecord;

pub(super) fn routes() -> Router<Console> {
    Router::new()
        .route("/console/admin/channels", get(list).post(add))
        .route("/console/admin/channels/{name}", get(show))
        .route("/console/admin/channels/{name}/members", post_only(members))
        .route("/console/admin/channels/{name}/policy", post_only(policy))
        .route("/console/admin/channels/{name}/remove", post_only(remove))
}

/// A change shown before it is applied: what it changes, or why the service refuses it; and
/// the form that applies it (the same fields, with `step=apply`).
#[derive(Default, Serialize)]
struct Preview {
    title: String,
    before: Option<String>,
    after: Option<String>,
    error: Option<String>,
    action: String,
    /// Where Cancel goes: the page the change was started from.
    cancel: String,
    fields: Vec<(String, String)>,
}

#[derive(Serialize)]
struct ChannelRow {
    name: String,
    description: String,
    members: usize,
    approvers: usize,
    needs_approval: Vec<&'static str>,
    removed: bool,
}

fn row(c: &ChannelRecord) -> ChannelRow {
    ChannelRow {
        name: c.name.to_string(),
        description: c.description.clone(),
        members: c.members.len(),
        approvers: c
            .members
            .iter()
            .filter(|m| m.rights.contains(Right::Approve))
            .count(),
        needs_approval: c.policy.needing_approval(),
        removed: c.removed_at.is_some(),
    }
}

fn checked(v: &Option<String>) -> bool {
    v.is_some()
}

async fn list(State(c): State<Console>, headers: HeaderMap) -> Result<Response, Response> {
    let a = admin(&c, &headers).await?;
    render_list(&c, &a, None, StatusCode::OK).await
}

async fn render_list(
    c: &Console,
    a: &Admin,
    preview: Option<Preview>,
    status: StatusCode,
) -> Result<Response, Response> {
    let channels: Vec<ChannelRow> = c
        .service
        .list_all_channels(&a.caller)
        .await
        .map_err(fail(c))?
        .iter()
        .map(row)
        .collect();
    let people = person_choices(c, a).await?;
    rendered(
        c,
        "admin/channels.html",
        minijinja::context! {
            channels => Serde(&channels), people => Serde(&people), preview => Serde(&preview),
            ..Serde(admin_frame(a, "channels"))
        },
        status,
    )
    .await
}

#[derive(Deserialize)]
struct AddForm {
    csrf: Option<String>,
    step: Option<String>,
    name: Option<String>,
    description: Option<String>,
    /// Comma-separated ids (the preview's apply form), or one field per checked person.
    members: Option<String>,
    #[serde(flatten)]
    checked: std::collections::HashMap<String, String>,
}

fn ids(list: &str) -> Result<Vec<PersonId>, ServiceError> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            PersonId::parse(s.to_owned()).map_err(|_| {
                ServiceError::invalid(format!(
                    "{} is not a person id",
                    crate::domain::text::quote(s)
                ))
            })
        })
        .collect()
}

/// `POST /console/admin/channels`: shows the channel to be created, then creates it.
async fn add(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Result<Form<AddForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let mut members: Vec<String> = f
        .checked
        .keys()
        .filter_map(|k| k.strip_prefix("member-").map(str::to_owned))
        .collect();
    members.sort();
    let members = match &f.members {
        Some(list) => list.clone(),
        None => members.join(","),
    };
    let name = field(&f.name).unwrap_or_default();
    let spec = ChannelName::parse(name.clone())
        .map_err(|_| {
            ServiceError::invalid(format!(
                "the name must be a slug: lowercase letters, digits and -, e.g. ops (got {})",
                crate::domain::text::quote(&name)
            ))
        })
        .and_then(|n| {
            Ok(ChannelSpec {
                name: n,
                description: f.description.clone().unwrap_or_default(),
                members: ids(&members)?,
                rights: None,
                policy: None,
            })
        });
    let apply = f.step.as_deref() == Some("apply");
    let mut preview = Preview {
        title: format!("Create channel {name}"),
        action: "/console/admin/channels".into(),
        cancel: "/console/admin/channels".into(),
        fields: vec![
            ("name".into(), name.clone()),
            (
                "description".into(),
                f.description.clone().unwrap_or_default(),
            ),
            ("members".into(), members),
        ],
        ..Preview::default()
    };
    let outcome = match spec {
        Ok(spec) if apply => c.service.add_channel(&a.caller, spec).await,
        Ok(spec) => c.service.preview_channel(&a.caller, spec).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(channel) if apply => done(&format!("/console/admin/channels/{}", channel.name)).await,
        Ok(channel) => {
            preview.after = serde_json::to_value(&channel).ok().map(|v| pretty(&v));
            render_list(&c, &a, Some(preview), StatusCode::OK).await
        }
        Err(e) => {
            let status = status_of(&e);
            preview.error = Some(e.message);
            render_list(&c, &a, Some(preview), status).await
        }
    }
}

async fn channel_name(c: &Console, name: &str) -> Result<ChannelName, Response> {
    ChannelName::parse(name.to_owned())
        .map_err(|_| fail(c)(ServiceError::not_found("channel", "?")))
}

async fn show(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, Response> {
    let a = admin(&c, &headers).await?;
    let name = channel_name(&c, &name).await?;
    render_channel(&c, &a, &name, None, StatusCode::OK).await
}

#[derive(Serialize)]
struct MemberRow {
    person: String,
    name: String,
    rights: Vec<&'static str>,
}

async fn render_channel(
    c: &Console,
    a: &Admin,
    name: &ChannelName,
    preview: Option<Preview>,
    status: StatusCode,
) -> Result<Response, Response> {
    let channel = c
        .service
        .list_all_channels(&a.caller)
        .await
        .map_err(fail(c))?
        .into_iter()
        .find(|ch| &ch.name == name)
        .ok_or_else(|| fail(c)(ServiceError::not_found("channel", name)))?;
    let ids: Vec<PersonId> = channel.members.iter().map(|m| m.person.clone()).collect();
    let names = c.service.display_names(&ids).await.map_err(fail(c))?;
    let display = |id: &PersonId| names.get(id).cloned().unwrap_or_else(|| id.to_string());
    let members: Vec<MemberRow> = channel
        .members
        .iter()
        .map(|m| MemberRow {
            person: m.person.to_string(),
            name: display(&m.person),
            rights: [Right::Read, Right::Post, Right::Request, Right::Approve]
                .into_iter()
                .filter(|r| m.rights.contains(*r))
                .map(|r| r.as_str())
                .collect(),
        })
        .collect();
    let mut others = person_choices(c, a).await?;
    others
        .people
        .retain(|p| !channel.members.iter().any(|m| m.person.as_str() == p.id));
    let (ttl, ttl_unit) = ttl_shown(channel.policy.approval_ttl_s);
    rendered(
        c,
        "admin/channel.html",
        minijinja::context! {
            ttl => ttl, ttl_unit => ttl_unit, ttl_units => TTL_UNITS.map(|(u, _)| u).to_vec(),
            channel => Serde(&channel), removed => channel.removed_at.is_some(),
            members => Serde(&members), others => Serde(&others), preview => Serde(&preview),
            decisions => ["auto", "approve", "deny"],
            ..Serde(admin_frame(a, "channels"))
        },
        status,
    )
    .await
}

/// The channel's page again, its preview showing the service's refusal `e`.
async fn refused(
    c: &Console,
    a: &Admin,
    name: &ChannelName,
    mut preview: Preview,
    e: ServiceError,
) -> Result<Response, Response> {
    let status = status_of(&e);
    preview.error = Some(e.message);
    render_channel(c, a, name, Some(preview), status).await
}

#[derive(Deserialize)]
struct MembersForm {
    csrf: Option<String>,
    step: Option<String>,
    add: Option<String>,
    remove: Option<String>,
    read: Option<String>,
    post: Option<String>,
    request: Option<String>,
    approve: Option<String>,
}

/// `POST /console/admin/channels/{name}/members`: add (with rights) or remove, shown first.
async fn members(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(name): Path<String>,
    f: Result<Form<MembersForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let name = channel_name(&c, &name).await?;
    let mut rights = Rights::default();
    let mut fields = vec![
        ("add".to_owned(), field(&f.add).unwrap_or_default()),
        ("remove".to_owned(), field(&f.remove).unwrap_or_default()),
    ];
    for (on, right) in [
        (&f.read, Right::Read),
        (&f.post, Right::Post),
        (&f.request, Right::Request),
        (&f.approve, Right::Approve),
    ] {
        if checked(on) {
            rights = rights.with(right);
            fields.push((right.as_str().to_owned(), "on".to_owned()));
        }
    }
    let change = ids(&field(&f.add).unwrap_or_default()).and_then(|add| {
        let remove = ids(&field(&f.remove).unwrap_or_default())?;
        if add.is_empty() && remove.is_empty() {
            return Err(ServiceError::invalid("choose a person to add or to remove"));
        }
        Ok(MemberChange {
            rights: (!add.is_empty()).then_some(rights),
            add,
            remove,
        })
    });
    let mut preview = Preview {
        title: format!("Change the members of {name}"),
        action: format!("/console/admin/channels/{name}/members"),
        cancel: format!("/console/admin/channels/{name}"),
        fields,
        ..Preview::default()
    };
    if f.step.as_deref() == Some("apply") {
        let applied = match change {
            Ok(change) => c.service.change_members(&a.caller, &name, change).await,
            Err(e) => Err(e),
        };
        return match applied {
            Ok(_) => done(&format!("/console/admin/channels/{name}")).await,
            Err(e) => refused(&c, &a, &name, preview, e).await,
        };
    }
    let plan = match change {
        Ok(change) => c.service.preview_members(&a.caller, &name, &change).await,
        Err(e) => Err(e),
    };
    match plan {
        Ok(plan) => {
            preview.before = serde_json::to_value(&plan.before.members)
                .ok()
                .map(|v| pretty(&v));
            preview.after = serde_json::to_value(&plan.after).ok().map(|v| pretty(&v));
            render_channel(&c, &a, &name, Some(preview), StatusCode::OK).await
        }
        Err(e) => refused(&c, &a, &name, preview, e).await,
    }
}

#[derive(Deserialize)]
struct PolicyForm {
    csrf: Option<String>,
    step: Option<String>,
    none: Option<String>,
    code: Option<String>,
    database: Option<String>,
    production: Option<String>,
    outbound: Option<String>,
    /// The approval deadline, in `approval_ttl_unit`s.
    approval_ttl: Option<String>,
    approval_ttl_unit: Option<String>,
    approval_via_elicitation: Option<String>,
}

/// The units the approval deadline is entered in, with their seconds.
const TTL_UNITS: [(&str, u64); 3] = [("minutes", 60), ("hours", 3_600), ("days", 86_400)];

/// A deadline in seconds as the form shows it: in the largest unit it is a whole number of
/// (minutes when none: a policy set in seconds elsewhere shows them rounded up).
fn ttl_shown(seconds: u64) -> (u64, &'static str) {
    TTL_UNITS
        .iter()
        .rev()
        .find(|(_, s)| seconds >= *s && seconds.is_multiple_of(*s))
        .map_or((seconds.div_ceil(60), "minutes"), |(u, s)| {
            (seconds / s, *u)
        })
}

/// The deadline the form sent, in seconds: a whole number of minutes, hours or days.
fn ttl_sent(f: &PolicyForm) -> Result<Option<u64>, ServiceError> {
    let Some(n) = field(&f.approval_ttl) else {
        return Ok(None);
    };
    let unit = field(&f.approval_ttl_unit).unwrap_or_else(|| "minutes".into());
    let Some((_, seconds)) = TTL_UNITS.iter().find(|(u, _)| *u == unit) else {
        return Err(ServiceError::invalid(format!(
            "the approval deadline's unit must be minutes, hours or days (got {})",
            crate::domain::text::quote(&unit)
        )));
    };
    let n: u64 = n.parse().map_err(|_| {
        ServiceError::invalid(format!(
            "the approval deadline must be a whole number of {unit} (got {})",
            crate::domain::text::quote(&n)
        ))
    })?;
    Ok(Some(n.saturating_mul(*seconds)))
}

fn policy_change(f: &PolicyForm) -> Result<PolicyChange, ServiceError> {
    let decision =
        |name: &str, v: &Option<String>| -> Result<Option<PolicyDecision>, ServiceError> {
            field(v)
                .map(|s| {
                    s.parse::<PolicyDecision>().map_err(|_| {
                        ServiceError::invalid(format!(
                            "{name} must be auto, approve or deny (got {})",
                            crate::domain::text::quote(&s)
                        ))
                    })
                })
                .transpose()
        };
    let ttl = ttl_sent(f)?;
    Ok(PolicyChange {
        none: decision("none", &f.none)?,
        code: decision("code", &f.code)?,
        database: decision("database", &f.database)?,
        production: decision("production", &f.production)?,
        outbound: decision("outbound", &f.outbound)?,
        approval_ttl_s: ttl,
        approval_via_elicitation: Some(checked(&f.approval_via_elicitation)),
    })
}

/// `POST /console/admin/channels/{name}/policy`: the new policy, shown first.
async fn policy(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(name): Path<String>,
    f: Result<Form<PolicyForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let name = channel_name(&c, &name).await?;
    let mut fields: Vec<(String, String)> = [
        ("none", &f.none),
        ("code", &f.code),
        ("database", &f.database),
        ("production", &f.production),
        ("outbound", &f.outbound),
        ("approval_ttl", &f.approval_ttl),
        ("approval_ttl_unit", &f.approval_ttl_unit),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), field(v).unwrap_or_default()))
    .collect();
    if checked(&f.approval_via_elicitation) {
        fields.push(("approval_via_elicitation".into(), "on".into()));
    }
    let mut preview = Preview {
        title: format!("Change the approval policy of {name}"),
        action: format!("/console/admin/channels/{name}/policy"),
        cancel: format!("/console/admin/channels/{name}"),
        fields,
        ..Preview::default()
    };
    let change = policy_change(&f);
    if f.step.as_deref() == Some("apply") {
        let applied = match change {
            Ok(change) => c.service.change_policy(&a.caller, &name, change).await,
            Err(e) => Err(e),
        };
        return match applied {
            Ok(_) => done(&format!("/console/admin/channels/{name}")).await,
            Err(e) => refused(&c, &a, &name, preview, e).await,
        };
    }
    let previewed = match change {
        Ok(change) => c.service.preview_policy(&a.caller, &name, &change).await,
        Err(e) => Err(e),
    };
    match previewed {
        Ok((before, after)) => {
            preview.before = serde_json::to_value(before.policy).ok().map(|v| pretty(&v));
            preview.after = serde_json::to_value(after).ok().map(|v| pretty(&v));
            render_channel(&c, &a, &name, Some(preview), StatusCode::OK).await
        }
        Err(e) => refused(&c, &a, &name, preview, e).await,
    }
}

#[derive(Deserialize)]
struct RemoveForm {
    csrf: Option<String>,
    step: Option<String>,
}

/// `POST /console/admin/channels/{name}/remove`: what removal means, then the removal.
async fn remove(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(name): Path<String>,
    f: Result<Form<RemoveForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let name = channel_name(&c, &name).await?;
    let preview = Preview {
        title: format!("Remove channel {name}"),
        action: format!("/console/admin/channels/{name}/remove"),
        cancel: format!("/console/admin/channels/{name}"),
        before: Some("members with their rights; new posts and requests accepted".into()),
        after: Some(
            "removed: its threads and messages stay readable by its members (read only); \
             nothing new can be posted or requested; the name is never reused"
                .into(),
        ),
        ..Preview::default()
    };
    if f.step.as_deref() == Some("apply") {
        return match c.service.remove_channel(&a.caller, &name).await {
            Ok(()) => done("/console/admin/channels").await,
            Err(e) => refused(&c, &a, &name, preview, e).await,
        };
    }
    render_channel(&c, &a, &name, Some(preview), StatusCode::OK).await
}

super::csrf_field!(AddForm, MembersForm, PolicyForm, RemoveForm);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_approval_deadline_is_read_and_shown_in_human_units() {
        assert_eq!(ttl_shown(86_400), (1, "days"));
        assert_eq!(ttl_shown(7_200), (2, "hours"));
        assert_eq!(ttl_shown(5_400), (90, "minutes"));
        assert_eq!(ttl_shown(90), (2, "minutes"));
        let form = |n: &str, unit: &str| PolicyForm {
            csrf: None,
            step: None,
            none: None,
            code: None,
            database: None,
            production: None,
            outbound: None,
            approval_ttl: Some(n.into()),
            approval_ttl_unit: Some(unit.into()),
            approval_via_elicitation: None,
        };
        assert_eq!(ttl_sent(&form("3", "hours")).unwrap(), Some(10_800));
        assert_eq!(ttl_sent(&form("", "hours")).unwrap(), None);
        assert!(ttl_sent(&form("1.5", "hours")).is_err());
        assert!(ttl_sent(&form("2", "weeks")).is_err());
    }
}
