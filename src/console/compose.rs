//! Writing from the console (SPEC §11): a member opens a thread in a channel she belongs to — a
//! question, a request with its impact, a handoff or an announce — to some or all of its other
//! members, with a Markdown body, files and, optionally, context (a link, a selection of text)
//! that the agent receives as a JSON data attachment, marked as data like everything else.
//!
//! It is posted as her, through the same service call agents use (`Service::post`): the same
//! rights, policies, approvals, limits and checks. Her post is labelled as written by her in
//! person (`WrittenBy::Human`), never by her agent. A refused post re-shows the form with her
//! values and the reason next to the field it concerns; nothing is posted. Each form carries a
//! fresh idempotency key, so sending it twice (a double click, a resent request) posts once.

use axum::extract::multipart::{Multipart, MultipartRejection};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::value::Serde;
use serde::{Deserialize, Serialize};

use super::session::{Session, frame, session, signed_in};
use super::upload::{self, Fields};
use super::{Console, Page};
use crate::domain::{Attachment, ChannelName, Impact, Kind, MessageId, PersonId, Right, text};
use crate::service::{ErrorCode, PostRequest, ServiceError};

/// The kinds a human opens a thread with.
const KINDS: [(Kind, &str); 4] = [
    (Kind::Question, "Question: you expect an answer"),
    (Kind::Request, "Request: something should be done"),
    (Kind::Handoff, "Handoff: they take the work over"),
    (Kind::Announce, "Announce: for information"),
];

/// Longest context selection, in characters.
const MAX_CONTEXT_CHARS: usize = 20_000;

/// A refused form: the message, the field it concerns (none: the form as a whole) and the
/// values to show again.
#[derive(Debug, Default, Serialize)]
pub(super) struct FormError {
    pub(super) message: String,
    pub(super) field: Option<&'static str>,
    pub(super) values: std::collections::HashMap<String, String>,
    pub(super) to: Vec<String>,
}

impl FormError {
    pub(super) fn from_service(e: &ServiceError, fields: &Fields) -> Self {
        let mut values = std::collections::HashMap::new();
        for name in [
            "kind",
            "impact",
            "subject",
            "body",
            "outcome",
            "context_url",
            "context_text",
            "refers_to",
        ] {
            if let Some(v) = fields.get(name) {
                values.insert(name.to_owned(), v.to_owned());
            }
        }
        FormError {
            message: e.message.clone(),
            field: field_of(e),
            values,
            to: fields.all("to").to_vec(),
        }
    }
}

/// The field a service refusal is about, from the words it starts with.
fn field_of(e: &ServiceError) -> Option<&'static str> {
    // The storable check names the field as `post.body`, `post.attachments[0]…` (the service's)
    // or `form.body` (as the form is read).
    let m = e
        .message
        .strip_prefix("post.")
        .or_else(|| e.message.strip_prefix("form."))
        .unwrap_or(&e.message);
    let starts = |w: &str| m.starts_with(w);
    Some(match () {
        _ if starts("body") || starts("a body") => "body",
        _ if starts("subject") => "subject",
        _ if starts("attachment") || starts("at most") || starts("the form is larger") => "files",
        _ if starts("impact") || starts("a request needs an impact") => "impact",
        _ if starts("outcome") || starts("unknown outcome") => "outcome",
        _ if starts("context") => "context",
        _ if starts("unknown kind") || starts("kind") => "kind",
        _ if m.contains("recipient") || starts("to ") || m.contains("not a member") => "to",
        _ if e.code == ErrorCode::DeniedByPolicy => "impact",
        _ => return None,
    })
}

/// A fresh idempotency key for one form.
pub(super) fn new_form_key() -> String {
    format!(
        "console-{}",
        crate::domain::hex(&crate::domain::secret::random::<16>())
    )
}

#[derive(Deserialize, Default)]
pub(super) struct ComposeQuery {
    channel: Option<String>,
    to: Option<String>,
    /// A message the new thread refers to (a closed thread's "new thread referring to this one").
    refers_to: Option<String>,
}

#[derive(Serialize)]
struct Recipient {
    id: String,
    name: String,
    checked: bool,
}

/// `GET /console/compose?channel=…&to=…`: the form, for a channel (default: the first she may
/// post in), with `to` ticked when given.
pub(super) async fn page(
    State(c): State<Console>,
    headers: HeaderMap,
    q: Result<Query<ComposeQuery>, QueryRejection>,
) -> Result<Response, Response> {
    let s = signed_in(&c, &headers).await?;
    let q = q.map(|q| q.0).unwrap_or_default();
    let refused = FormError {
        to: q.to.into_iter().collect(),
        values: q
            .refers_to
            .map(|r| ("refers_to".to_owned(), r))
            .into_iter()
            .collect(),
        ..FormError::default()
    };
    render(&c, &s, q.channel.as_deref(), refused, false, StatusCode::OK).await
}

async fn render(
    c: &Console,
    s: &Session,
    chosen: Option<&str>,
    form: FormError,
    refused: bool,
    status: StatusCode,
) -> Result<Response, Response> {
    let fail = |e: ServiceError| Page::from(e).with(c, true).into_response();
    let me = s.caller.id();
    let channels: Vec<_> = c
        .service
        .channels(&s.caller)
        .await
        .map_err(fail)?
        .into_iter()
        // Her personal channel is written to from Sessions, where commands get their timeline.
        .filter(|ch| {
            ch.removed_at.is_none()
                && ch.name.personal_owner().is_none()
                && ch
                    .member(me)
                    .is_some_and(|m| m.rights.contains(Right::Post))
        })
        .collect();
    let channel = match chosen {
        Some(name) => Some(
            channels
                .iter()
                .find(|ch| ch.name.as_str() == name)
                .ok_or_else(|| fail(ServiceError::not_found("channel", name)))?,
        ),
        None => channels.first(),
    };
    let mut recipients = Vec::new();
    let mut may_request = false;
    if let Some(ch) = channel {
        may_request = ch
            .member(me)
            .is_some_and(|m| m.rights.contains(Right::Request));
        let others: Vec<PersonId> = ch
            .members
            .iter()
            .filter(|m| &m.person != me && m.rights.contains(Right::Read))
            .map(|m| m.person.clone())
            .collect();
        let names = c.service.display_names(&others).await.map_err(fail)?;
        for p in others {
            recipients.push(Recipient {
                name: names.get(&p).cloned().unwrap_or_else(|| p.to_string()),
                checked: form.to.iter().any(|t| t == p.as_str()),
                id: p.to_string(),
            });
        }
        // Her own agents (SPEC §4b): all of them, or one connection; what she writes to them
        // in person is her command.
        let mine: Vec<String> = c
            .service
            .own_tokens(&s.caller)
            .await
            .map_err(fail)?
            .into_iter()
            .filter(|t| t.live)
            .filter_map(|t| t.token.connection.map(|n| n.to_string()))
            .collect();
        if !mine.is_empty() {
            let all = me.to_string();
            recipients.push(Recipient {
                name: "Any of my agents".into(),
                checked: form.to.iter().any(|t| t == &all),
                id: all,
            });
            for name in mine {
                let id = format!("{me}/{name}");
                recipients.push(Recipient {
                    name: format!("My agent {name}"),
                    checked: form.to.iter().any(|t| t == &id),
                    id,
                });
            }
        }
    }
    // The message the new thread refers to: one she can read, shown with its thread.
    let refers = match form.values.get("refers_to").map(|r| r.trim()) {
        Some(r) if !r.is_empty() => {
            let id =
                MessageId::parse(r).map_err(|_| fail(ServiceError::not_found("message", r)))?;
            let slice = c
                .service
                .read_message(&s.caller, &id, None, Some(1))
                .await
                .map_err(fail)?;
            let thread = c
                .service
                .thread(&s.caller, &slice.thread, None, Some(1))
                .await
                .map_err(fail)?;
            Some(minijinja::context! {
                message => id.as_str(), thread => slice.thread.as_str(),
                subject => super::session::subject(&thread.thread.subject),
            })
        }
        _ => None,
    };
    let kinds: Vec<_> = KINDS
        .iter()
        .map(|(k, text)| minijinja::context! { value => k.as_str(), text => *text })
        .collect();
    let impacts: Vec<_> = Impact::ALL
        .iter()
        .filter(|i| may_request || **i == Impact::None)
        .map(|i| i.as_str())
        .collect();
    c.render(
        "compose.html",
        minijinja::context! {
        channels => channels.iter().map(|ch| ch.name.to_string()).collect::<Vec<_>>(),
        channel => channel.map(|ch| ch.name.to_string()),
        recipients => Serde(recipients), kinds => kinds, impacts => impacts,
        may_request => may_request, form => Serde(&form), refused => refused, refers => refers,
        form_key => new_form_key(), ..Serde(frame(s, "compose")) },
    )
    .map(|html| (status, html).into_response())
    .map_err(IntoResponse::into_response)
}

/// `POST /console/compose`: posts the new thread as her, then shows it.
pub(super) async fn post(
    State(c): State<Console>,
    headers: HeaderMap,
    form: Result<Multipart, MultipartRejection>,
) -> Result<Response, Response> {
    let s = session(&c, &headers)
        .await
        .map_err(|e| Page::from(e).with(&c, true).into_response())?;
    // A form refused as it was read comes back as the same channel's form, with what was read.
    let (fields, unread) = match upload::read(form).await {
        Ok(f) => (f, None),
        Err(u) => (u.fields, Some(u.error)),
    };
    let sent = fields.sent();
    let channel = fields.filled("channel").map(str::to_owned);
    let refuse = async |e: ServiceError, status: StatusCode| {
        let refused = FormError::from_service(&e, &fields);
        let mut response = render(&c, &s, channel.as_deref(), refused, true, status)
            .await
            .unwrap_or_else(|r| r);
        response.extensions_mut().insert(sent.clone());
        Ok(response)
    };
    if let Some(e) = unread {
        // The CSRF token may sit after the file that stopped the reading: nothing is posted,
        // and the form (with this page's own token) is shown again.
        return refuse(e, StatusCode::BAD_REQUEST).await;
    }
    c.service
        .check_console_csrf(&s.secret, fields.get("csrf"))
        .map_err(|e| Page::from(e).with(&c, true).into_response())?;
    let posted = match request(&fields) {
        Ok(req) => c.service.post(&s.caller, req).await,
        Err(e) => Err(e),
    };
    match posted {
        Ok(receipt) => {
            Ok(Redirect::to(&format!("/console/threads/{}", receipt.thread)).into_response())
        }
        Err(e) => {
            let status = super::status_of(&e);
            refuse(e, status).await
        }
    }
}

/// The post a compose form asks for; the service checks the rest.
fn request(f: &Fields) -> Result<PostRequest, ServiceError> {
    let kind: Kind = f
        .filled("kind")
        .ok_or_else(|| {
            ServiceError::invalid("kind is required: question, request, handoff or announce")
        })?
        .parse()?;
    if !KINDS.iter().any(|(k, _)| *k == kind) {
        return Err(ServiceError::invalid(format!(
            "kind {kind} does not open a thread here: question, request, handoff or announce"
        )));
    }
    let channel = f
        .filled("channel")
        .ok_or_else(|| ServiceError::invalid("channel is required"))?;
    let channel =
        ChannelName::parse(channel).map_err(|_| ServiceError::not_found("channel", channel))?;
    let to = f
        .all("to")
        .iter()
        .map(|p| {
            crate::domain::Address::parse(p.as_str())
                .map_err(|_| ServiceError::not_found("recipient", p))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let impact = match (kind, f.filled("impact")) {
        (Kind::Request, Some(i)) => Some(i.parse::<Impact>()?),
        (Kind::Request, None) => None,
        _ => None,
    };
    let mut attachments = f.files.clone();
    if let Some(context) = context(f)? {
        attachments.push(context);
    }
    Ok(PostRequest {
        kind: Some(kind),
        channel: Some(channel),
        to: (!to.is_empty()).then_some(to),
        subject: f.filled("subject").map(str::to_owned),
        body: f.get("body").unwrap_or_default().to_owned(),
        impact,
        attachments,
        idempotency_key: f.filled("form_key").map(str::to_owned),
        refers_to: f
            .filled("refers_to")
            .map(|r| MessageId::parse(r).map_err(|_| ServiceError::not_found("message", r)))
            .transpose()?,
        ..Default::default()
    })
}

/// The context the form carries (a link, a selection of text), as one JSON data attachment:
/// `{"context": {"url": …, "selection": …}}`.
fn context(f: &Fields) -> Result<Option<Attachment>, ServiceError> {
    let url = f.filled("context_url");
    let selection = f.filled("context_text");
    if url.is_none() && selection.is_none() {
        return Ok(None);
    }
    if let Some(u) = url
        && (!(u.starts_with("https://") || u.starts_with("http://"))
            || u.len() > 8192
            || u.chars().any(|c| c.is_whitespace() || c.is_control()))
    {
        return Err(ServiceError::invalid(
            "context link must be an http(s) URL of at most 8192 bytes",
        ));
    }
    if selection.is_some_and(|t| t.chars().count() > MAX_CONTEXT_CHARS) {
        return Err(ServiceError::invalid(format!(
            "context selection is longer than {MAX_CONTEXT_CHARS} characters"
        )));
    }
    let mut context = serde_json::Map::new();
    if let Some(u) = url {
        context.insert("url".into(), u.into());
    }
    if let Some(t) = selection {
        context.insert(
            "selection".into(),
            text::normalize_line_breaks(t).into_owned().into(),
        );
    }
    Ok(Some(Attachment::Data {
        data: serde_json::json!({ "context": context }),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_land_next_to_their_field() {
        let e = |m: &str| ServiceError::invalid(m);
        assert_eq!(
            field_of(&e("body is 2000000 bytes; the limit is")),
            Some("body")
        );
        assert_eq!(field_of(&e("body is empty: say something")), Some("body"));
        assert_eq!(field_of(&e("subject must be one line")), Some("subject"));
        assert_eq!(field_of(&e("attachment 0: \"a\" is larger")), Some("files"));
        assert_eq!(field_of(&e("a request needs an impact")), Some("impact"));
        assert_eq!(field_of(&e("context link must be")), Some("context"));
        assert_eq!(
            field_of(&e("post.body holds U+0000 at character 1")),
            Some("body")
        );
        assert_eq!(field_of(&e("the thread is closed")), None);
    }
}
