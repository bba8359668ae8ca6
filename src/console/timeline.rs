//! One timeline per thread (SPEC §11): its messages, its approvals, the live claim and the
//! progress notes of the claim holders' tools, in the order they happened, each naming who it
//! is about (a person by display name, an agent by its connection's name).
//!
//! **Claims.** The timeline shows the claim a thread holds now, where it began. A claim is not
//! kept once it ends (the store drops it with the reply, a release or its lease's end): what the
//! claim holder did stays in the timeline as its reply, which names the connection that wrote it,
//! and as its progress notes, which name the holder's session. So a past claim shows through what
//! it produced, never as a row of its own; keeping every claim as history would be a table of
//! its own written on every claim, on the path the fleet benchmark measures.

use std::collections::HashMap;

use serde::Serialize;

use super::{LabelPart, label_parts, markdown};
use crate::domain::{ApprovalState, PersonId, Timestamp, WrittenBy};
use crate::service::{RecipientReceipt, ThreadView};

/// One entry of the timeline.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Entry {
    Message(Box<MessageRow>),
    Approval(ApprovalRow),
    Claim(ClaimRow),
    Note(NoteRow),
}

#[derive(Serialize)]
pub(super) struct MessageRow {
    id: String,
    kind: String,
    impact: Option<String>,
    outcome: Option<String>,
    author: String,
    author_id: String,
    /// Written by its author in person (not by an agent).
    by_human: bool,
    /// Written by the person looking at the page, in person: no label warns her of her own words.
    own: bool,
    /// The connection that wrote it, by name (server-known).
    connection: Option<String>,
    /// What the writing agent declared itself (never trusted; shown on hover).
    agent: Option<String>,
    created_at: String,
    label: Vec<LabelPart>,
    /// The body rendered from Markdown, safe to include as it is (see `markdown`).
    body_html: String,
    truncated: bool,
    chars: usize,
    attachments: Vec<AttachmentRow>,
    result: Option<crate::domain::ReplyResult>,
    receipts: Vec<ReceiptRow>,
}

#[derive(Serialize)]
pub(super) struct ApprovalRow {
    id: String,
    state: &'static str,
    impact: String,
    fingerprint: String,
    reason: Option<String>,
    /// Who may decide, by name (while it is pending).
    approvers: Vec<String>,
    /// Who decided, by name, and when.
    decided_by: Option<String>,
    decided_at: Option<String>,
    created_at: String,
}

#[derive(Serialize)]
pub(super) struct ClaimRow {
    name: String,
    person: String,
    connection: Option<String>,
    session: String,
    since: String,
    until: String,
}

#[derive(Serialize)]
pub(super) struct NoteRow {
    text: String,
    outcome: String,
    name: String,
    session: String,
    at: String,
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
    consumers: Vec<ConsumerRow>,
}

/// How far one of the recipient's consumers got with the message, and when.
#[derive(Serialize)]
struct ConsumerRow {
    consumer: String,
    /// "read", "acknowledged", or empty (delivered only).
    what: &'static str,
    at: Option<String>,
}

/// Everyone the timeline names, to look their display names up at once.
pub(super) fn people(view: &ThreadView) -> Vec<PersonId> {
    let mut people: Vec<PersonId> = view
        .messages
        .iter()
        .map(|m| m.message.message.author.clone())
        .collect();
    people.extend(view.claim.iter().map(|c| c.person.clone()));
    people.extend(view.progress.iter().map(|n| n.person.clone()));
    for a in &view.approvals {
        people.extend(a.approvers.iter().cloned());
        people.extend(a.decided_by.iter().cloned());
    }
    people.sort();
    people.dedup();
    people
}

/// The thread's entries in the order they happened (a message before what followed it at the
/// same millisecond).
pub(super) fn entries(
    view: &ThreadView,
    me: &PersonId,
    names: &HashMap<PersonId, String>,
) -> Vec<Entry> {
    let name = |p: &PersonId| names.get(p).cloned().unwrap_or_else(|| p.to_string());
    let mut timed: Vec<(Timestamp, u8, Entry)> = Vec::new();
    for m in &view.messages {
        let d = &m.message;
        let id = d.message.id.to_string();
        let by_human = d.message.written_by == WrittenBy::Human;
        let row = MessageRow {
            attachments: attachment_rows(&id, &d.message.attachments),
            id,
            kind: d.message.kind.to_string(),
            impact: d.message.impact.map(|i| i.to_string()),
            outcome: d.message.outcome.map(|o| o.to_string()),
            author: d.label.author.clone(),
            author_id: d.message.author.to_string(),
            by_human,
            own: by_human && &d.message.author == me,
            connection: d.author_connection.as_ref().map(ToString::to_string),
            agent: d.message.agent.as_ref().map(|a| a.as_str().to_owned()),
            created_at: d.message.created_at.to_string(),
            label: label_parts(&d.label),
            body_html: markdown::render(&d.message.body),
            truncated: m.body.body_truncated,
            chars: m.body.body_chars,
            result: d.message.result.clone(),
            receipts: m.receipts.iter().map(receipt_row).collect(),
        };
        timed.push((d.message.created_at, 0, Entry::Message(Box::new(row))));
    }
    for a in &view.approvals {
        let row = ApprovalRow {
            id: a.id.to_string(),
            state: a.state.as_str(),
            impact: a.impact.to_string(),
            fingerprint: a.fingerprint.clone(),
            reason: a.reason.clone(),
            approvers: if a.state == ApprovalState::Pending {
                a.approvers.iter().map(name).collect()
            } else {
                Vec::new()
            },
            decided_by: a.decided_by.as_ref().map(name),
            decided_at: a.decided_at.map(|t| t.to_string()),
            created_at: a.created_at.to_string(),
        };
        timed.push((a.created_at, 1, Entry::Approval(row)));
    }
    for n in &view.progress {
        let row = NoteRow {
            text: n.text(),
            outcome: n.outcome.clone(),
            name: name(&n.person),
            session: n.session.as_str().to_owned(),
            at: n.updated_at.to_string(),
        };
        timed.push((n.created_at, 3, Entry::Note(row)));
    }
    if let Some(c) = &view.claim {
        let row = ClaimRow {
            name: name(&c.person),
            person: c.person.to_string(),
            connection: view.claim_connection.as_ref().map(ToString::to_string),
            session: c.session.as_str().to_owned(),
            since: c.claimed_at.to_string(),
            until: c.expires_at.to_string(),
        };
        timed.push((c.claimed_at, 2, Entry::Claim(row)));
    }
    // Stable: entries of one kind keep the service's order.
    timed.sort_by_key(|(at, rank, _)| (*at, *rank));
    timed.into_iter().map(|(_, _, e)| e).collect()
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
            .map(|c| {
                let (what, at) = match (&c.read_at, &c.acked_at) {
                    (_, Some(at)) => ("acknowledged", Some(at.to_string())),
                    (Some(at), None) => ("read", Some(at.to_string())),
                    (None, None) => ("", None),
                };
                ConsumerRow {
                    consumer: c.consumer.clone(),
                    what,
                    at,
                }
            })
            .collect(),
    }
}

fn attachment_rows(message: &str, list: &[crate::domain::Attachment]) -> Vec<AttachmentRow> {
    use crate::domain::{Attachment, text};
    list.iter()
        .enumerate()
        .map(|(i, a)| match a {
            Attachment::Inline { filename, .. } => AttachmentRow {
                name: text::one_line(filename),
                href: Some(format!("/console/messages/{message}/attachments/{i}")),
                url: None,
            },
            Attachment::Url { url, filename, .. } => AttachmentRow {
                name: filename
                    .as_deref()
                    .map_or_else(|| "link".to_owned(), text::one_line),
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
