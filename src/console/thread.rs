//! One thread as its members watch it (SPEC §11): each message with its label and who wrote it
//! (the person herself or her agent), a reply's structured result, per recipient the receipts
//! (delivered, read by which consumer, acknowledged), the claim (which self-declared agent
//! session holds it, since when, until when), the approvals, the derived state and the linked A2A
//! task, the progress notes of the claim holders' tools; and the forms that answer in it (reply, close with an outcome). Live: the page's
//! `#live` part is fetched again whenever the person's event stream says something changed.

use axum::extract::multipart::{Multipart, MultipartRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::value::Serde;
use serde::Serialize;

use super::compose::{FormError, new_form_key};
use super::session::{Session, frame, session, signed_in, subject};
use super::upload;
use super::{Console, LabelPart, Page, label_parts};
use crate::domain::{Attachment, Kind, Outcome, ThreadId, WrittenBy};
use crate::service::{ErrorCode, PostRequest, RecipientReceipt, ServiceError};

#[derive(Serialize)]
struct MessageRow {
    id: String,
    kind: String,
    impact: Option<String>,
    outcome: Option<String>,
    author: String,
    author_id: String,
    by_human: bool,
    agent: Option<String>,
    created_at: String,
    label: Vec<LabelPart>,
    body: String,
    truncated: bool,
    chars: usize,
    attachments: Vec<AttachmentRow>,
    result: Option<crate::domain::ReplyResult>,
    receipts: Vec<ReceiptRow>,
}

#[derive(Serialize)]
struct AttachmentRow {
    name: String,
    /// A download link for stored bytes; none for a link.
    href: Option<String>,
    /// A link the attachment points at (shown, never fetched by liaison).
    url: Option<String>,
}

#[derive(Serialize)]
struct ReceiptRow {
    name: String,
    person: String,
    delivered_at: String,
    /// "delivered", "read" or "acknowledged": the furthest any consumer got.
    state: &'static str,
    consumers: Vec<String>,
}

fn receipt_row(r: &RecipientReceipt) -> ReceiptRow {
    let state = if r.acknowledged() {
        "acknowledged"
    } else if r.read() {
        "read"
    } else {
        "delivered"
    };
    ReceiptRow {
        name: r.name.clone(),
        person: r.person.to_string(),
        delivered_at: r.delivered_at.to_string(),
        state,
        consumers: r
            .consumers
            .iter()
            .map(|c| match (&c.read_at, &c.acked_at) {
                (_, Some(at)) => format!("“{}” acknowledged {at}", c.consumer),
                (Some(at), None) => format!("“{}” read {at}", c.consumer),
                (None, None) => format!("“{}”", c.consumer),
            })
            .collect(),
    }
}

fn attachment_rows(message: &str, list: &[Attachment]) -> Vec<AttachmentRow> {
    list.iter()
        .enumerate()
        .map(|(i, a)| match a {
            Attachment::Inline { filename, .. } => AttachmentRow {
                name: crate::domain::text::one_line(filename),
                href: Some(format!("/console/messages/{message}/attachments/{i}")),
                url: None,
            },
            Attachment::Url { url, filename, .. } => AttachmentRow {
                name: filename
                    .as_deref()
                    .map_or_else(|| "link".to_owned(), crate::domain::text::one_line),
                href: None,
                url: Some(url.clone()),
            },
            Attachment::Data { .. } => AttachmentRow {
                name: "data (JSON)".to_owned(),
                href: Some(format!("/console/messages/{message}/attachments/{i}")),
                url: None,
            },
        })
        .collect()
}

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
    let mut people: Vec<_> = view
        .messages
        .iter()
        .map(|m| m.message.message.author.clone())
        .collect();
    people.extend(view.claim.iter().map(|cl| cl.person.clone()));
    let names = c.service.display_names(&people).await.map_err(fail)?;
    let name = |p: &crate::domain::PersonId| names.get(p).cloned().unwrap_or_else(|| p.to_string());
    let messages: Vec<MessageRow> = view
        .messages
        .iter()
        .map(|m| {
            let d = &m.message;
            let id = d.message.id.to_string();
            MessageRow {
                attachments: attachment_rows(&id, &d.message.attachments),
                id,
                kind: d.message.kind.to_string(),
                impact: d.message.impact.map(|i| i.to_string()),
                outcome: d.message.outcome.map(|o| o.to_string()),
                author: d.label.author.clone(),
                author_id: d.message.author.to_string(),
                by_human: d.message.written_by == WrittenBy::Human,
                agent: d.message.agent.as_ref().map(|a| a.as_str().to_owned()),
                created_at: d.message.created_at.to_string(),
                label: label_parts(&d.label),
                body: d.message.body.clone(),
                truncated: m.body.body_truncated,
                chars: m.body.body_chars,
                result: d.message.result.clone(),
                receipts: m.receipts.iter().map(receipt_row).collect(),
            }
        })
        .collect();
    let approvals: Vec<_> = view
        .approvals
        .iter()
        .map(|a| {
            minijinja::context! { id => a.id.to_string(), state => a.state.as_str(),
                impact => a.impact.as_str(), fingerprint => a.fingerprint.as_str(), reason => a.reason.clone() }
        })
        .collect();
    let claim = view.claim.as_ref().map(|cl| {
        minijinja::context! { name => name(&cl.person), person => cl.person.as_str(),
        session => cl.session.as_str(), since => cl.claimed_at.to_string(),
        until => cl.expires_at.to_string() }
    });
    let remote = view.remote.as_ref().map(|r| {
        minijinja::context! { remote => r.remote.as_str(), state => r.state.map(|s| s.as_str()),
        last_error => r.last_error.clone() }
    });
    let progress: Vec<_> = view
        .progress
        .iter()
        .map(|n| {
            minijinja::context! { text => n.text(), outcome => n.outcome.clone(),
            session => n.session.as_str(), at => n.updated_at.to_string() }
        })
        .collect();
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
            claim => claim, remote => remote, progress => progress,
            approvals => approvals, messages => Serde(messages),
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
