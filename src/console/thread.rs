//! One thread as its members watch it (SPEC §11): one timeline (see `timeline`) of its messages
//! (each with its label, who wrote it — the person herself or her agent, by connection name —,
//! its Markdown body, a reply's structured result, per recipient the receipts), its approvals
//! (who decided), the claim and the progress notes of the claim holders' tools; the derived
//! state and the linked A2A task; and the forms that answer in it (reply, close with an
//! outcome). Live: the page's `#live` part is fetched again whenever the person's event stream
//! says something changed in the thread, whoever changed it.

use axum::extract::multipart::{Multipart, MultipartRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::value::Serde;

use super::compose::{FormError, new_form_key};
use super::session::{Session, frame, session, signed_in, subject};
use super::upload;
use super::{Console, Page, timeline};
use crate::domain::{Kind, Outcome, ThreadId};
use crate::service::{ErrorCode, PostRequest, ServiceError};

/// `GET /console/threads/{id}`.
pub(super) async fn page(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, Response> {
    let s = signed_in(&c, &headers).await?;
    render(&c, &s, &id, None, StatusCode::OK).await
}

/// The page, with a form's error and values when an answer was refused.
async fn render(
    c: &Console,
    s: &Session,
    id: &str,
    refused: Option<(&'static str, FormError)>,
    status: StatusCode,
) -> Result<Response, Response> {
    let fail = |e: ServiceError| Page::from(e).with(c, true).into_response();
    let id = ThreadId::parse(id).map_err(|_| fail(ServiceError::not_found("thread", id)))?;
    let view = c
        .service
        .thread(&s.caller, &id, None, Some(100))
        .await
        .map_err(fail)?;
    let names = c
        .service
        .display_names(&timeline::people(&view))
        .await
        .map_err(fail)?;
    let entries = timeline::entries(&view, s.caller.id(), &names);
    let remote = view.remote.as_ref().map(|r| {
        minijinja::context! { remote => r.remote.as_str(), state => r.state.map(|s| s.as_str()),
        last_error => r.last_error.clone() }
    });
    let closed = matches!(view.thread.state, crate::domain::ThreadState::Closed { .. });
    // What a new thread continuing this one refers to: its last message.
    let last = view
        .messages
        .last()
        .map(|m| m.message.message.id.to_string());
    let (form, error) = match refused {
        Some((form, e)) => (Some(form), Some(e)),
        None => (None, None),
    };
    c.render(
        "thread.html",
        minijinja::context! { id => view.thread.id.as_str(), subject => subject(&view.thread.subject),
            channel => view.thread.channel.as_str(),
            state => view.thread.state.name(), closed => closed,
            task => view.thread.task.as_ref().map(|t| t.state.as_str()),
            remote => remote, timeline => Serde(entries),
            outcomes => Outcome::ALL.iter().map(|o| o.as_str()).collect::<Vec<_>>(),
            form => form, error => Serde(error), form_key => new_form_key(), last => last,
            ..Serde(frame(s, "threads")) },
    )
    .map(|html| (status, html).into_response())
    .map_err(IntoResponse::into_response)
}

/// `POST /console/threads/{id}/reply`: a reply as the signed-in person herself.
pub(super) async fn reply(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    form: Result<Multipart, MultipartRejection>,
) -> Result<Response, Response> {
    answer(c, headers, id, Kind::Reply, form).await
}

/// `POST /console/threads/{id}/close`: closes the thread with an outcome and an optional note.
pub(super) async fn close(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    form: Result<Multipart, MultipartRejection>,
) -> Result<Response, Response> {
    answer(c, headers, id, Kind::Close, form).await
}

async fn answer(
    c: Console,
    headers: HeaderMap,
    id: String,
    kind: Kind,
    form: Result<Multipart, MultipartRejection>,
) -> Result<Response, Response> {
    let s = session(&c, &headers)
        .await
        .map_err(|e| Page::from(e).with(&c, true).into_response())?;
    let which = if kind == Kind::Close {
        "close"
    } else {
        "reply"
    };
    let (fields, unread) = match upload::read(form).await {
        Ok(f) => (f, None),
        Err(u) => (u.fields, Some(u.error)),
    };
    let refuse = async |e: ServiceError, status: StatusCode| {
        let refused = FormError::from_service(&e, &fields);
        let mut response = render(&c, &s, &id, Some((which, refused)), status)
            .await
            .unwrap_or_else(|r| r);
        response.extensions_mut().insert(fields.sent());
        Ok(response)
    };
    if let Some(e) = unread {
        return refuse(e, StatusCode::BAD_REQUEST).await;
    }
    c.service
        .check_console_csrf(&s.secret, fields.get("csrf"))
        .map_err(|e| Page::from(e).with(&c, true).into_response())?;
    let posted = async {
        let thread = ThreadId::parse(&id).map_err(|_| ServiceError::not_found("thread", &id))?;
        let outcome = match (kind, fields.filled("outcome")) {
            (Kind::Close, Some(o)) => Some(o.parse::<Outcome>()?),
            _ => None,
        };
        let req = PostRequest {
            kind: Some(kind),
            thread: Some(thread),
            body: fields.get("body").unwrap_or_default().to_owned(),
            outcome,
            attachments: fields.files.clone(),
            idempotency_key: fields.filled("form_key").map(str::to_owned),
            ..Default::default()
        };
        c.service.post(&s.caller, req).await
    }
    .await;
    match posted {
        Ok(receipt) => Ok(Redirect::to(&format!(
            "/console/threads/{}#message-{}",
            receipt.thread, receipt.message
        ))
        .into_response()),
        Err(e) => {
            let status = super::status_of(&e);
            if status == StatusCode::NOT_FOUND {
                return Err(Page::from(e).with(&c, true).into_response());
            }
            let e = if e.code == ErrorCode::ThreadClosed {
                ServiceError::new(
                    ErrorCode::ThreadClosed,
                    "This thread was closed before your answer was sent, so nothing was posted. \
                     Your text is kept below: send it as a new thread that refers to this one.",
                )
            } else {
                e
            };
            refuse(e, status).await
        }
    }
}
