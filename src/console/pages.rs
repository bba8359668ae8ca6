//! The signed-in console: pending approvals (allow once, reject with a reason), threads by
//! channel, one thread with its labelled messages, fleet, leases, logout, and the event stream
//! that tells open pages to refresh. Every page acts as the session's person with scope `human`.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Router, body::Body};
use futures::Stream;
use minijinja::value::Serde;
use serde::{Deserialize, Serialize};

use super::links::{LinkQuery, link_page};
use super::session::{channel_names, form, frame, session, signed_in, subject};
use super::view::{Via, card};
use super::{Console, Page, SESSION_COOKIE, cookie, no_get_decision};
use crate::domain::{ApprovalId, ApprovalState, ChannelName, Decision, DecisionPath};
use crate::service::{ServiceError, ThreadFilter};

pub(super) fn routes() -> Router<Console> {
    Router::new()
        .route("/console", get(landing))
        .route("/console/", get(landing))
        .route("/console/approvals", get(approvals))
        .route("/console/approvals/{id}", get(approval_page))
        .route(
            "/console/approvals/{id}/allow",
            post(allow).get(no_get_decision),
        )
        .route(
            "/console/approvals/{id}/reject",
            post(reject).get(no_get_decision),
        )
        .route("/console/threads", get(threads))
        .route("/console/fleet", get(fleet))
        .route("/console/leases", get(leases))
        .route("/console/logout", post(logout))
        .route("/console/events", get(events))
        .route("/console/static/console.css", get(stylesheet))
        .route("/console/static/console.js", get(script))
}

#[derive(Deserialize, Default)]
struct Notice {
    allowed: Option<String>,
    rejected: Option<String>,
}

impl Notice {
    /// A fixed sentence about a decision just made; the id must be an approval id, so no
    /// arbitrary text from the address reaches the page.
    fn text(&self) -> Option<String> {
        let id = |s: &Option<String>| s.as_deref().and_then(|s| ApprovalId::parse(s).ok());
        if let Some(id) = id(&self.allowed) {
            return Some(format!(
                "Allowed {id} once: the first claim by an agent starts the work."
            ));
        }
        id(&self.rejected).map(|id| {
            format!("Rejected {id}: the thread is closed and the requester is told your reason.")
        })
    }
}

/// `GET /console/approvals/{id}`: with `?link=…` the link's confirmation page, else the
/// approval for a signed-in approver.
pub(super) async fn approval_page(
    State(c): State<Console>,
    Path(id): Path<String>,
    headers: HeaderMap,
    q: Result<Query<LinkQuery>, QueryRejection>,
) -> Response {
    match q.ok().and_then(|q| q.0.link) {
        Some(secret) => match link_page(&c, &id, &secret).await {
            Ok(r) => r,
            Err(e) => Page::from(e).with(&c, false).into_response(),
        },
        None => single(c, id, headers).await,
    }
}

/// `GET /console`, where signing in and the brand link lead: where her work is. Something waiting
/// for her decision (an approval, or one of her agents' tool calls) comes first; then her open
/// sessions with her own agents; otherwise the threads she reads.
async fn landing(State(c): State<Console>, headers: HeaderMap) -> Result<Response, Response> {
    let s = signed_in(&c, &headers).await?;
    let deciding = c
        .service
        .approvals(&s.caller, true, None, Some(1))
        .await
        .is_ok_and(|page| !page.approvals.is_empty())
        || c.service
            .pending_tool_confirmations(&s.caller)
            .await
            .is_ok_and(|list| !list.is_empty());
    let to = if deciding {
        "/console/approvals"
    } else if c
        .service
        .sessions(&s.caller)
        .await
        .is_ok_and(|list| list.iter().any(|x| x.state == "open"))
    {
        "/console/sessions"
    } else {
        "/console/threads"
    };
    Ok(Redirect::to(to).into_response())
}

async fn approvals(
    State(c): State<Console>,
    headers: HeaderMap,
    notice: Result<Query<Notice>, QueryRejection>,
) -> Result<Response, Response> {
    let s = signed_in(&c, &headers).await?;
    let fail = |e: ServiceError| Page::from(e).with(&c, true).into_response();
    let page = c
        .service
        .approvals(&s.caller, true, None, Some(100))
        .await
        .map_err(fail)?;
    let mut cards = Vec::with_capacity(page.approvals.len());
    for a in &page.approvals {
        let view = c.service.approval(&s.caller, &a.id).await.map_err(fail)?;
        cards.push(card(&c, &view, Via::Session { csrf: &s.csrf }));
    }
    // Her agents' own tool calls waiting for her (SPEC §5b); none for a party or an admin.
    let confirmations = match c.service.pending_tool_confirmations(&s.caller).await {
        Ok(list) => list,
        Err(e) if e.code == crate::service::ErrorCode::Forbidden => Vec::new(),
        Err(e) => return Err(fail(e)),
    };
    let notice = notice.ok().and_then(|q| q.0.text());
    let html = c
        .render(
            "approvals.html",
            minijinja::context! { approvals => Serde(cards), confirmations => Serde(confirmations), notice => notice, ..Serde(frame(&s, "approvals")) },
        )
        .map_err(IntoResponse::into_response)?;
    Ok(html.into_response())
}

/// One approval for a signed-in approver (e.g. from a notification), decided or not.
pub(super) async fn single(c: Console, id: String, headers: HeaderMap) -> Response {
    let s = match signed_in(&c, &headers).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let result = async {
        let id = ApprovalId::parse(&id).map_err(|_| ServiceError::not_found("approval", &id))?;
        c.service.approval(&s.caller, &id).await
    }
    .await;
    let view = match result {
        Ok(v) => v,
        Err(e) => return Page::from(e).with(&c, true).into_response(),
    };
    let state = view.approval.state;
    let cards = vec![card(&c, &view, Via::Session { csrf: &s.csrf })];
    let notice = (state != ApprovalState::Pending).then(|| format!("This approval is {state}."));
    match c.render(
        "approvals.html",
        minijinja::context! { approvals => Serde(cards), notice => notice, single => true, ..Serde(frame(&s, "approvals")) },
    ) {
        Ok(html) => html.into_response(),
        Err(p) => p.into_response(),
    }
}

#[derive(Deserialize)]
struct DecisionForm {
    csrf: Option<String>,
    reason: Option<String>,
}

async fn decide(
    c: &Console,
    headers: &HeaderMap,
    id: &str,
    decision: Decision,
    f: Result<Form<DecisionForm>, FormRejection>,
) -> Result<Response, Page> {
    let back = |e: ServiceError| Page::from(e).with(c, true);
    let s = session(c, headers).await.map_err(back)?;
    let f = form(f).map_err(back)?;
    c.service
        .check_console_csrf(&s.secret, f.csrf.as_deref())
        .map_err(back)?;
    let id = ApprovalId::parse(id).map_err(|_| back(ServiceError::not_found("approval", id)))?;
    c.service
        .decide(&s.caller, &id, decision, f.reason, DecisionPath::Console)
        .await
        .map_err(back)?;
    let key = match decision {
        Decision::Allow => "allowed",
        Decision::Reject => "rejected",
    };
    Ok(Redirect::to(&format!("/console/approvals?{key}={id}")).into_response())
}

async fn allow(
    State(c): State<Console>,
    Path(id): Path<String>,
    headers: HeaderMap,
    f: Result<Form<DecisionForm>, FormRejection>,
) -> Result<Response, Page> {
    decide(&c, &headers, &id, Decision::Allow, f).await
}

async fn reject(
    State(c): State<Console>,
    Path(id): Path<String>,
    headers: HeaderMap,
    f: Result<Form<DecisionForm>, FormRejection>,
) -> Result<Response, Page> {
    decide(&c, &headers, &id, Decision::Reject, f).await
}

#[derive(Deserialize)]
struct LogoutForm {
    csrf: Option<String>,
}

async fn logout(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Result<Form<LogoutForm>, FormRejection>,
) -> Result<Response, Page> {
    let f = form(f).map_err(|e| Page::from(e).with(&c, true))?;
    let secret = cookie(&headers, SESSION_COOKIE).unwrap_or_default();
    c.service
        .console_logout(secret, f.csrf.as_deref())
        .await
        .map_err(|e| Page::from(e).with(&c, true))?;
    let mut response = Redirect::to("/console/login?signed_out=1").into_response();
    response.headers_mut().append(
        header::SET_COOKIE,
        c.cookie(SESSION_COOKIE, "", "/console", 0),
    );
    Ok(response)
}

#[derive(Deserialize)]
struct ChannelQuery {
    channel: Option<String>,
    state: Option<String>,
    /// `1` or `on` (a checkbox): only what waits for me.
    mine: Option<String>,
    q: Option<String>,
}

#[derive(Serialize)]
struct ThreadRow {
    id: String,
    subject: String,
    state: &'static str,
    task: Option<&'static str>,
    kind: String,
    opened_by: String,
    opened_by_id: String,
    messages: i64,
    updated_at: String,
}

async fn threads(
    State(c): State<Console>,
    headers: HeaderMap,
    q: Result<Query<ChannelQuery>, QueryRejection>,
) -> Result<Response, Response> {
    let s = signed_in(&c, &headers).await?;
    let fail = |e: ServiceError| Page::from(e).with(&c, true).into_response();
    let channels = channel_names(&c, &s).await?;
    let q = q.map(|q| q.0).unwrap_or(ChannelQuery {
        channel: None,
        state: None,
        mine: None,
        q: None,
    });
    let chosen = q.channel.clone().or_else(|| channels.first().cloned());
    let filter = ThreadFilter {
        state: q.state.clone().filter(|s| !s.is_empty()),
        waiting_for_me: q.mine.as_deref().is_some_and(|m| m == "1" || m == "on"),
        search: q.q.clone(),
    };
    let mut rows = Vec::new();
    if let Some(name) = &chosen {
        let name = ChannelName::parse(name.as_str())
            .map_err(|_| fail(ServiceError::not_found("channel", name)))?;
        let threads = c
            .service
            .channel_threads(&s.caller, &name, &filter)
            .await
            .map_err(fail)?;
        let openers: Vec<_> = threads.iter().map(|t| t.opened_by.clone()).collect();
        let names = c.service.display_names(&openers).await.map_err(fail)?;
        for t in threads {
            rows.push(ThreadRow {
                id: t.id.to_string(),
                subject: subject(&t.subject),
                state: t.state.name(),
                task: t.task.as_ref().map(|task| task.state.as_str()),
                kind: t.opener_kind.to_string(),
                opened_by: names
                    .get(&t.opened_by)
                    .cloned()
                    .unwrap_or_else(|| t.opened_by.to_string()),
                opened_by_id: t.opened_by.to_string(),
                messages: t.message_count,
                updated_at: t.updated_at.to_string(),
            });
        }
    }
    c.render(
        "threads.html",
        minijinja::context! { channels => channels, channel => chosen, threads => Serde(rows),
        state => filter.state, mine => filter.waiting_for_me, q => q.q,
        ..Serde(frame(&s, "threads")) },
    )
    .map(IntoResponse::into_response)
    .map_err(IntoResponse::into_response)
}

async fn fleet(State(c): State<Console>, headers: HeaderMap) -> Result<Response, Response> {
    let s = signed_in(&c, &headers).await?;
    let fleet = c
        .service
        .fleet(&s.caller)
        .await
        .map_err(|e| Page::from(e).with(&c, true).into_response())?;
    let people: Vec<_> = fleet.iter().map(|p| p.person.clone()).collect();
    let names = c
        .service
        .display_names(&people)
        .await
        .map_err(|e| Page::from(e).with(&c, true).into_response())?;
    let rows: Vec<_> = fleet
        .iter()
        .map(|p| {
            minijinja::context! { person => p.person.as_str(),
                name => names.get(&p.person).cloned().unwrap_or_else(|| p.person.to_string()),
                agent => p.agent.as_str(),
                transition => p.transition.as_str(), task => p.task.as_deref().map(crate::domain::text::one_line),
                updated_at => p.updated_at.to_string(), expires_at => p.expires_at.to_string() }
        })
        .collect();
    c.render(
        "fleet.html",
        minijinja::context! { fleet => rows, ..Serde(frame(&s, "fleet")) },
    )
    .map(IntoResponse::into_response)
    .map_err(IntoResponse::into_response)
}

async fn leases(State(c): State<Console>, headers: HeaderMap) -> Result<Response, Response> {
    let s = signed_in(&c, &headers).await?;
    let leases = c
        .service
        .leases(&s.caller)
        .await
        .map_err(|e| Page::from(e).with(&c, true).into_response())?;
    let people: Vec<_> = leases.iter().map(|l| l.person.clone()).collect();
    let names = c
        .service
        .display_names(&people)
        .await
        .map_err(|e| Page::from(e).with(&c, true).into_response())?;
    let rows: Vec<_> = leases
        .iter()
        .map(|l| {
            minijinja::context! { resource => l.resource.as_str(), person => l.person.as_str(),
            name => names.get(&l.person).cloned().unwrap_or_else(|| l.person.to_string()),
            agent => l.agent.as_str(), mode => l.mode.as_str(),
            acquired_at => l.acquired_at.to_string(), expires_at => l.expires_at.to_string() }
        })
        .collect();
    c.render(
        "leases.html",
        minijinja::context! { leases => rows, ..Serde(frame(&s, "leases")) },
    )
    .map(IntoResponse::into_response)
    .map_err(IntoResponse::into_response)
}

/// How often the event stream says "change" even when nothing woke it: presence and leases
/// expire by time, and no event marks that.
const TICK: Duration = Duration::from_secs(30);

/// Server-sent events: `change` whenever something she may read changed (her inbox, her receipts,
/// any thread of a channel she reads, her channels themselves: see `service::live`), and every
/// [`TICK`].
/// Ends at shutdown, and as soon as the session ends (sign-out, expiry, its person removed).
async fn events(
    State(c): State<Console>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Page> {
    let s = session(&c, &headers)
        .await
        .map_err(|e| Page::from(e).with(&c, false))?;
    let hold = c
        .service
        .hold_credential(&s.caller)
        .await
        .map_err(|e| Page::from(e).with(&c, false))?;
    let changes = c
        .service
        .console_changes(&s.caller)
        .await
        .map_err(|e| Page::from(e).with(&c, false))?;
    let stream = futures::stream::unfold(
        (c, s.secret, changes),
        |(c, secret, mut changes)| async move {
            tokio::select! {
                () = changes.woken() => {}
                () = tokio::time::sleep(TICK) => {}
                () = c.service.stopping() => return None,
            }
            // A session that ended (logout, expiry) stops receiving.
            c.service.console_caller(&secret).await.ok()?;
            let event = Event::default().event("change").data("changed");
            Some((Ok(event), (c, secret, changes)))
        },
    );
    Ok(Sse::new(hold.bound(stream, |_| None))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = Body::from(body).into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    response
}

async fn stylesheet() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("static/console.css"),
    )
}

async fn script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("static/console.js"),
    )
}
