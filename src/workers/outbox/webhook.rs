//! A webhook delivery's request: its stored body (an `approval.pending` body gains its
//! delivery's single-use approval link, the same at every attempt, whose secret is derived from
//! the master key and never stored: see `Service::webhook_decision_link`),
//! signed by Standard Webhooks ([`super::signature`]), with both secrets during a rotation's
//! overlap.

use reqwest::header::HeaderMap;

use super::signature;
use crate::a2a::push::header;
use crate::domain::delivery::SendFailure;
use crate::domain::{PersonId, Timestamp};
use crate::service::Service;

/// `body` signed with each of `secrets` (newest first): the headers `webhook-id`,
/// `webhook-timestamp` and `webhook-signature`, whose space-separated signatures a receiver
/// holding any one of the secrets verifies (a rotation's overlap).
pub(super) fn signed(
    mut headers: HeaderMap,
    secrets: &[String],
    event_id: &str,
    now: Timestamp,
    body: Vec<u8>,
) -> Result<Vec<(HeaderMap, Vec<u8>)>, SendFailure> {
    let timestamp = now.0 / 1000;
    let signatures = secrets
        .iter()
        .map(|secret| signature::sign(secret, event_id, timestamp, &body))
        .collect::<Option<Vec<_>>>()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| SendFailure::Gone("the webhook secret is malformed".into()))?;
    headers.extend(header("webhook-id", event_id));
    headers.extend(header("webhook-timestamp", &timestamp.to_string()));
    headers.extend(header("webhook-signature", &signatures.join(" ")));
    Ok(vec![(headers, body)])
}

/// An `approval.pending` body with its delivery's single-use link: for an approval, for the
/// webhook's person when they are an approver, else the first approver; for a tool confirmation
/// (`tcf_…`), for the person whose agent asked. Without one (decided before the first attempt,
/// or no console), `approval_link` is null.
pub(super) async fn with_approval_link(
    service: &Service,
    public_url: &str,
    delivery: i64,
    body: &[u8],
    person: Option<&PersonId>,
) -> Vec<u8> {
    let Ok(mut event) = serde_json::from_slice::<serde_json::Value>(body) else {
        return body.to_vec();
    };
    let approvers: Vec<PersonId> =
        serde_json::from_value(event["data"]["approvers"].clone()).unwrap_or_default();
    let person = person.filter(|p| approvers.contains(p));
    let subject = event["data"]["approval_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let link = service
        .webhook_decision_link(delivery, &subject, person)
        .await
        .map(|issued| {
            serde_json::json!({
                "url": crate::console::approval_link_url(public_url, &subject, &issued.secret),
                "for": issued.link.person,
                "expires_at": issued.link.expires_at,
            })
        });
    event["data"]["approval_link"] = link.unwrap_or(serde_json::Value::Null);
    serde_json::to_vec(&event).unwrap_or_else(|_| body.to_vec())
}
