//! Prometheus metrics at `/metrics`, in the OpenMetrics text format (`prometheus-client`, chosen
//! for its weight: three small crates, no HTTP server of its own, against `metrics` +
//! `metrics-exporter-prometheus`, which bring `metrics-util`, `quanta`, sketches and more).
//!
//! One registry per process ([`get`]): request counters and latency histograms (recorded by
//! [`access`]), and the group-commit figures (recorded by the store's writer). Gauges of live
//! things (inbox waiters, open A2A streams, MCP sessions, pending approvals, database
//! connections) are read at scrape time. Labels are low-cardinality by construction: the front,
//! the HTTP method, the route *template* (never the path), the outcome class. Depends on
//! `service` (for the scrape-time gauges) and on nothing of the fronts.

pub mod access;

use std::sync::{Mutex, OnceLock, Weak};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::service::Service;

/// The route of the scrape.
pub const PATH: &str = "/metrics";

/// The media type of the OpenMetrics text format.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Request latency buckets in seconds, up to the longest inbox long-poll.
const LATENCY_BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Jobs per group commit (the writer takes at most 256).
const BATCH_BUCKETS: [f64; 9] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// Commit latency buckets in seconds.
const COMMIT_BUCKETS: [f64; 11] = [
    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// One request: which front, method and route template, and how it ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub front: &'static str,
    pub method: String,
    pub route: String,
    /// `ok` (1xx-3xx), `client_error` (4xx) or `server_error` (5xx); gRPC by its status.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub front: &'static str,
    pub method: String,
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Every metric of the process.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: HistogramFamily<RouteLabels>,
    commits: Family<OutcomeLabels, Counter>,
    batch_size: Histogram,
    commit_latency: Histogram,
    inbox_waiters: Gauge,
    a2a_streams: Gauge,
    mcp_sessions: Gauge,
    pending_approvals: Gauge,
    pool_open: Gauge,
    pool_idle: Gauge,
    /// The MCP session managers of the apps in this process, counted at scrape.
    session_managers: Mutex<Vec<Weak<LocalSessionManager>>>,
}

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// The process's metrics.
pub fn get() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("liaison");
        let requests = Family::<RequestLabels, Counter>::default();
        let latency: HistogramFamily<RouteLabels> = Family::new_with_constructor(latency_histogram);
        let commits = Family::<OutcomeLabels, Counter>::default();
        let batch_size = Histogram::new(BATCH_BUCKETS);
        let commit_latency = Histogram::new(COMMIT_BUCKETS);
        let gauges: [Gauge; 6] = Default::default();
        registry.register(
            "http_requests",
            "Requests by front, method, route template and outcome",
            requests.clone(),
        );
        registry.register_with_unit(
            "http_request_duration",
            "Time to the response head (a stream's length is not counted)",
            Unit::Seconds,
            latency.clone(),
        );
        registry.register(
            "store_group_commits",
            "Group commits by outcome",
            commits.clone(),
        );
        registry.register(
            "store_group_commit_jobs",
            "Writes committed together in one group commit",
            batch_size.clone(),
        );
        registry.register_with_unit(
            "store_group_commit_duration",
            "Time the COMMIT of a group commit took",
            Unit::Seconds,
            commit_latency.clone(),
        );
        let named = [
            ("inbox_waiters", "Inbox long-polls waiting now"),
            ("a2a_open_streams", "A2A streams open now"),
            ("mcp_sessions", "Legacy MCP sessions open now"),
            (
                "approvals_pending",
                "Approvals waiting for a human's decision",
            ),
            ("db_pool_connections", "Open connections of the read pool"),
            (
                "db_pool_idle_connections",
                "Idle connections of the read pool",
            ),
        ];
        for ((name, help), gauge) in named.into_iter().zip(gauges.iter()) {
            registry.register(name, help, gauge.clone());
        }
        let [
            inbox_waiters,
            a2a_streams,
            mcp_sessions,
            pending_approvals,
            pool_open,
            pool_idle,
        ] = gauges;
        Self {
            registry,
            requests,
            latency,
            commits,
            batch_size,
            commit_latency,
            inbox_waiters,
            a2a_streams,
            mcp_sessions,
            pending_approvals,
            pool_open,
            pool_idle,
            session_managers: Mutex::default(),
        }
    }

    /// Records one request.
    pub fn request(&self, labels: RequestLabels, elapsed: Duration) {
        let route = RouteLabels {
            front: labels.front,
            method: labels.method.clone(),
            route: labels.route.clone(),
        };
        self.requests.get_or_create(&labels).inc();
        self.latency
            .get_or_create(&route)
            .observe(elapsed.as_secs_f64());
    }

    /// Records one group commit of `jobs` writes.
    pub fn group_commit(&self, jobs: usize, elapsed: Duration, ok: bool) {
        let outcome = if ok { "ok" } else { "error" };
        self.commits.get_or_create(&OutcomeLabels { outcome }).inc();
        self.batch_size.observe(jobs as f64);
        self.commit_latency.observe(elapsed.as_secs_f64());
    }

    /// Counts the sessions of `manager` at each scrape while it lives.
    pub fn watch_mcp_sessions(&self, manager: Weak<LocalSessionManager>) {
        let mut managers = self
            .session_managers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        managers.retain(|m| m.strong_count() > 0);
        managers.push(manager);
    }

    /// Reads the live gauges, then renders everything.
    async fn scrape(&self, service: &Service) -> String {
        let (waiters, streams) = service.waiting();
        self.inbox_waiters.set(waiters as i64);
        self.a2a_streams.set(streams as i64);
        let managers: Vec<_> = self
            .session_managers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let mut sessions = 0;
        for m in managers {
            sessions += m.sessions.read().await.len();
        }
        self.mcp_sessions.set(sessions as i64);
        match service.store().pending_approvals().await {
            Ok(n) => {
                self.pending_approvals.set(n);
            }
            Err(e) => tracing::warn!(error = %e, "Could not count pending approvals for /metrics."),
        }
        let (open, idle) = service.store().pool_usage();
        self.pool_open.set(i64::from(open));
        self.pool_idle.set(idle as i64);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

#[derive(Clone)]
struct Scrape {
    service: Service,
    /// The bearer token a scrape must send; none: open.
    token: Option<std::sync::Arc<str>>,
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
        let sent = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !same(sent.trim(), expected) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "send Authorization: Bearer <the [metrics] token>\n",
            )
                .into_response();
        }
    }
    let body = get().scrape(&s.service).await;
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response()
}

/// Equality that takes as long whatever the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}
