//! The approval card: an approval as the console shows it, on the signed-in page and on the
//! single-use link's confirmation page, with the buttons that decide it through either.

use serde::Serialize;

use super::{Console, LabelPart, label_parts};
use crate::domain::{ApprovalState, Label, WrittenBy};
use crate::service::ApprovalView;

/// A form a card's button submits: where, and its hidden fields.
#[derive(Serialize)]
pub(super) struct FormSpec {
    action: String,
    hidden: Vec<(&'static str, String)>,
}

/// How a card's buttons decide: through the session, or through a single-use link.
pub(super) enum Via<'a> {
    Session { csrf: &'a str },
    Link { secret: &'a str, csrf: &'a str },
}

/// An approval as the approval card shows it.
#[derive(Serialize)]
pub(super) struct Card {
    id: String,
    subject: String,
    requester: String,
    channel: String,
    impact: String,
    thread: String,
    thread_href: Option<String>,
    approvers: String,
    expires_at: String,
    fingerprint: String,
    /// For a message leaving the team: the remote agent it would go to.
    destination: Option<String>,
    label: Vec<LabelPart>,
    body: String,
    attachments: usize,
    allow: Option<FormSpec>,
    reject: Option<FormSpec>,
}

pub(super) fn card(c: &Console, view: &ApprovalView, via: Via<'_>) -> Card {
    let a = &view.approval;
    let language = c.service.settings().label_language;
    let label = match view.request.written_by {
        WrittenBy::Human => Label::human(&view.requested_by_name, Some(a.impact), language),
        WrittenBy::Agent => Label::new(&view.requested_by_name, Some(a.impact), language),
    };
    let (allow, reject) = match (a.state, &via) {
        (ApprovalState::Pending, Via::Session { csrf }) => {
            let form = |verb: &str| FormSpec {
                action: format!("/console/approvals/{}/{verb}", a.id),
                hidden: vec![("csrf", (*csrf).to_owned())],
            };
            (Some(form("allow")), Some(form("reject")))
        }
        (ApprovalState::Pending, Via::Link { secret, csrf }) => {
            let form = |decision: &str| FormSpec {
                action: format!("/console/approvals/{}/link", a.id),
                hidden: vec![
                    ("link", (*secret).to_owned()),
                    ("csrf", (*csrf).to_owned()),
                    ("decision", decision.to_owned()),
                ],
            };
            (Some(form("allow")), Some(form("reject")))
        }
        _ => (None, None),
    };
    Card {
        id: a.id.to_string(),
        subject: if view.subject.trim().is_empty() {
            "(no subject)".to_owned()
        } else {
            crate::domain::text::one_line(&view.subject)
        },
        requester: view.requested_by_name.clone(),
        channel: format!("#{}", a.channel),
        impact: a.impact.to_string(),
        thread: a.thread.to_string(),
        thread_href: matches!(via, Via::Session { .. })
            .then(|| format!("/console/threads/{}", a.thread)),
        approvers: view.approver_names.join(", "),
        expires_at: a.expires_at.to_string(),
        fingerprint: a.fingerprint.clone(),
        destination: view.destination.clone(),
        label: label_parts(&label),
        body: view.request.body.clone(),
        attachments: view.request.attachments.len(),
        allow,
        reject,
    }
}
