//! An A2A push as HTTP requests: a task event rendered as the `StreamResponse`s a push
//! notification carries (ProtoJSON, as the HTTP+JSON binding writes them), each with its
//! authentication: the push config's own credentials when it has them, else a push JWT signed
//! with the current key ring (`keys::push_jwt`), bound to the body.
//!
//! The delivery worker (`crate::workers::outbox`) sends what this renders; the service gives it
//! the parts ([`PushParts`]).

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};

use crate::domain::delivery::SendFailure;
use crate::keys::push_jwt::{PushDelivery, push_jwt};
use crate::keys::ring::KeyRing;
use crate::service::PushParts;

/// Where a push goes and whom it is from.
pub struct PushTarget<'a> {
    /// The push config's URL (the JWT's `aud`).
    pub url: &'a str,
    /// Our public URL (the JWT's `iss`).
    pub issuer: &'a str,
    /// The delivery's event id (`X-Liaison-Event-Id`).
    pub event_id: &'a str,
    /// Seconds since the epoch (the JWT's `iat`).
    pub now_s: i64,
}

/// The POSTs of one push: a reply's artifact, then its status, may be two. `common` holds the
/// headers every POST of the delivery carries. Each POST has its own `X-Liaison-Event-Id`, the
/// same at every attempt: the delivery's event id when it is one POST, else that id and `.n`
/// for the n-th (`thr_…:3.1`, `thr_…:3.2`), so a receiver deduplicating on it keeps them all.
pub fn requests(
    parts: &PushParts,
    keys: &KeyRing,
    to: &PushTarget<'_>,
    mut common: HeaderMap,
) -> Result<Vec<(HeaderMap, Vec<u8>)>, SendFailure> {
    if let Some(token) = &parts.config.token {
        common.extend(header("x-a2a-notification-token", token));
    }
    let task_id = parts.view.thread.id.as_str();
    let responses = super::convert::event(
        &parts.event,
        &parts.view.thread,
        parts.cause.as_ref(),
        parts.view.approval.as_ref(),
    );
    let several = responses.len() > 1;
    let mut out = Vec::new();
    for (n, response) in responses.into_iter().enumerate() {
        let body = serde_json::to_vec(&crate::wire::protojson::render(&response))
            .map_err(|e| SendFailure::Request(e.to_string()))?;
        let mut headers = common.clone();
        let event_id = if several {
            format!("{}.{}", to.event_id, n + 1)
        } else {
            to.event_id.to_owned()
        };
        headers.extend(header("x-liaison-event-id", &event_id));
        let authorization = match (&parts.config.auth_scheme, &parts.config.auth_credentials) {
            (Some(scheme), Some(credentials)) => format!("{scheme} {credentials}"),
            _ => {
                let delivery = PushDelivery {
                    issuer: to.issuer,
                    audience: to.url,
                    task_id: Some(task_id),
                    body: &body,
                    now: to.now_s,
                };
                let jwt =
                    push_jwt(keys, &delivery).map_err(|e| SendFailure::Request(e.to_string()))?;
                format!("Bearer {jwt}")
            }
        };
        let value = HeaderValue::from_str(&authorization).map_err(|_| {
            SendFailure::Gone("the push config's authentication is not a valid header".into())
        })?;
        headers.insert(AUTHORIZATION, value);
        out.push((headers, body));
    }
    Ok(out)
}

/// A header, when `value` can be one.
pub fn header(name: &'static str, value: &str) -> Option<(HeaderName, HeaderValue)> {
    Some((
        HeaderName::from_static(name),
        HeaderValue::from_str(value).ok()?,
    ))
}
