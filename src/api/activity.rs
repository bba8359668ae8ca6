//! `GET /api/v1/activity`: the activity figures of one channel (`?channel=NAME`) or of every
//! channel the caller can read (no `channel`), per week and in total since a date
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
    weeks: Option<u32>,
    since: Option<String>,
}

pub(super) async fn activity(
    State(s): State<Service>,
    Authed(c): Authed,
    Params(q): Params<ActivityQuery>,
) -> ApiResult<Value> {
    let scope = match q.channel {
        // A malformed name is as unknown as a channel she cannot read.
        Some(name) => ActivityScope::Channel {
            channel: ChannelName::parse(name.as_str())
                .map_err(|_| ServiceError::not_found("channel", &name))?,
        },
        None => ActivityScope::AllChannels,
    };
    let request = ActivityRequest {
        scope,
        weeks: q.weeks,
        since: q.since,
    };
    let activity = s.activity(&c, request).await?;
    Ok(Json(serde_json::to_value(activity).unwrap_or_default()))
}
