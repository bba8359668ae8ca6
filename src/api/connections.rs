//! `/api/v1/connections`: a member's own agent connections, for a token with scope `human` — what
//! the console's Connect page does, for `liaison connect` and scripts. The rules (a human caller,
//! an expiry, at most `MAX_OWN_AGENT_TOKENS` live, names unique among her live connections) are
//! the service's (`Service::issue_own_token`, `Service::own_tokens`).
//!
//! | route | does |
//! |---|---|
//! | `GET /api/v1/connections` | her agent tokens, newest first, with their connection, rights, last use, `live` |
//! | `POST /api/v1/connections` (`{"name", "expires_in_days", "connection", "rights"}`) | issues one; its `secret` is in this answer only |

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::ApiResult;
use crate::http::{Authed, Body};
use crate::service::{OwnTokenSpec, Service};

pub(super) async fn list(State(s): State<Service>, Authed(c): Authed) -> ApiResult<Value> {
    Ok(Json(json!({ "connections": s.own_tokens(&c).await? })))
}

pub(super) async fn issue(
    State(s): State<Service>,
    Authed(c): Authed,
    body: Body<OwnTokenSpec>,
) -> ApiResult<Value> {
    Ok(Json(
        json!({ "token": s.issue_own_token(&c, body.0).await? }),
    ))
}
