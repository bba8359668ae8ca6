//! `GET /metrics`: reads the live gauges (through the service) and renders the process's
//! registry ([`crate::metrics`]) in the OpenMetrics text format, behind the `[metrics]` token
//! when one is configured. Also where the MCP front registers its session managers, whose
//! sessions a scrape counts.

use std::sync::{Arc, Mutex, Weak};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::domain::secret::same;
use crate::metrics::{Live, LiveApprovals, LiveInbox, LiveOutbox};
use crate::service::Service;

/// The route of the scrape.
pub const PATH: &str = "/metrics";

/// The media type of the OpenMetrics text format.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The MCP session managers of the apps in this process, counted at scrape.
static SESSION_MANAGERS: Mutex<Vec<Weak<LocalSessionManager>>> = Mutex::new(Vec::new());

/// Counts the sessions of `manager` at each scrape while it lives.
pub fn watch_mcp_sessions(manager: Weak<LocalSessionManager>) {
    let mut managers = SESSION_MANAGERS.lock().unwrap_or_else(|e| e.into_inner());
    managers.retain(|m| m.strong_count() > 0);
    managers.push(manager);
}

#[derive(Clone)]
struct Scrape {
    service: Service,
    /// The bearer token a scrape must send; none: open.
    token: Option<Arc<str>>,
}

/// `GET /metrics`, behind `token` when one is configured.
pub fn router(service: Service, token: Option<String>) -> Router {
    Router::new()
        .route(PATH, routing::get(scrape))
        .with_state(Scrape {
            service,
            token: token.map(Into::into),
        })
}

async fn scrape(State(s): State<Scrape>, headers: HeaderMap) -> Response {
    if let Some(expected) = &s.token {
        let sent = super::bearer(&headers).unwrap_or("");
        if !same(sent, expected) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "send Authorization: Bearer <the [metrics] token>\n",
            )
                .into_response();
        }
    }
    let body = crate::metrics::get().render(&live(&s.service).await);
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response()
}

/// The live gauges as they are now.
async fn live(service: &Service) -> Live {
    let (inbox_waiters, a2a_streams) = service.waiting();
    let managers: Vec<_> = SESSION_MANAGERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    let mut mcp_sessions = 0;
    for m in managers {
        mcp_sessions += m.sessions.read().await.len();
    }
    let approvals = match service.approval_figures().await {
        Ok(a) => Some(LiveApprovals {
            pending: a.pending,
            oldest_age_s: a.oldest_age_ms / 1000,
            expiring_soon: a.expiring_soon,
        }),
        Err(e) => {
            tracing::warn!(error = %e, "Could not read pending approvals for /metrics.");
            None
        }
    };
    let outbox = match service.outbox_figures().await {
        Ok(o) => Some(LiveOutbox {
            pending: o.pending,
            dead: o.dead,
            oldest_due_age_s: o.oldest_due_age_ms / 1000,
        }),
        Err(e) => {
            tracing::warn!(error = %e, "Could not read the outbox for /metrics.");
            None
        }
    };
    let inbox = match service.inbox_figures().await {
        Ok(i) => Some(LiveInbox {
            depth: i.unacknowledged,
            depth_max: i.deepest,
        }),
        Err(e) => {
            tracing::warn!(error = %e, "Could not read the inboxes' depth for /metrics.");
            None
        }
    };
    let (pool_open, pool_idle) = service.pool_usage();
    Live {
        inbox_waiters,
        a2a_streams,
        mcp_sessions,
        approvals,
        outbox,
        inbox,
        pool_open,
        pool_idle,
        writes_failing: service.writes_failing_since().is_some(),
    }
}
