//! `GET /api/v1/activity`: the activity figures of one channel (`?channel=NAME`), of one of her
//! sessions with her own agents (`?session=ID`), or of every channel the caller can read, per week and in total since a date
//! (`since=YYYY-MM-DD` or an RFC 3339 time, at most 366 days back; `weeks=1-26`), for a person's
//! own token (scope `agent` or `human`). What `liaison activity` prints; the rules and the JSON's
//! fields are `service::activity`'s.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::Value;

use super::ApiResult;
use super::member::Params;
use crate::domain::ChannelName;
use crate::http::Authed;
use crate::service::{ActivityRequest, ActivityScope, Service, ServiceError};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ActivityQuery {
    channel: Option<String>,
    session: Option<String>,
    weeks: Option<u32>,
    since: Option<String>,
}

pub(super) async fn activity(
    State(s): State<Service>,
    Authed(c): Authed,
    Params(q): Params<ActivityQuery>,
) -> ApiResult<Value> {
    let scope = match (q.channel, q.session) {
        (Some(_), Some(_)) => {
            return Err(ServiceError::invalid("give channel or session, not both").into());
        }
        // A malformed name is as unknown as a channel she cannot read.
        (Some(name), None) => ActivityScope::Channel {
            channel: ChannelName::parse(name.as_str())
                .map_err(|_| ServiceError::not_found("channel", &name))?,
        },
        (None, Some(id)) => ActivityScope::Session {
            session: crate::domain::personal::SessionId::parse(id.as_str())
                .map_err(|_| ServiceError::not_found("session", &id))?,
        },
        (None, None) => ActivityScope::AllChannels,
    };
    let request = ActivityRequest {
        scope,
        weeks: q.weeks,
        since: q.since,
    };
    let activity = s.activity(&c, request).await?;
    Ok(Json(serde_json::to_value(activity).unwrap_or_default()))
}
