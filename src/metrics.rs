//! The process's metrics registry, in the OpenMetrics text format (`prometheus-client`, chosen
//! for its weight: three small crates, no HTTP server of its own, against `metrics` +
//! `metrics-exporter-prometheus`, which bring `metrics-util`, `quanta`, sketches and more).
//!
//! One registry per process ([`get`]): request counters and latency histograms (recorded by the
//! HTTP front's access log), and the group-commit figures (recorded by the store's writer).
//! Delivery attempts by outcome (recorded by the outbox worker), rate-limit refusals by reason
//! (recorded by the service's limits), and the traffic itself — messages posted by kind, threads
//! opened and closed, approvals settled by outcome (recorded by the service after each commit) —
//! are counted as they happen. Gauges of live things (inbox
//! waiters and depth, open A2A streams, MCP sessions, pending approvals, the outbox's backlog,
//! database connections) are set from a [`Live`] reading at scrape time by `GET /metrics`
//! (`crate::http::metrics`). Labels are low-cardinality by construction: the front, the HTTP
//! method, the route *template* (never the path), the outcome class.
//!
//! Also the access log's one piece of request state: who the request's caller is
//! ([`identified`]), noted by the service when it authenticates and read by the access log.
//!
//! A leaf: it depends on `prometheus-client` and tokio's task-locals only, so the store, the
//! service and every front may record into it.

use std::cell::RefCell;
use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

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
struct ReasonLabels {
    reason: &'static str,
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
    refused: Family<ReasonLabels, Counter>,
    batch_size: Histogram,
    commit_latency: Histogram,
    inbox_waiters: Gauge,
    a2a_streams: Gauge,
    mcp_sessions: Gauge,
    pending_approvals: Gauge,
    pool_open: Gauge,
    pool_idle: Gauge,
    writes_failing: Gauge,
    deliveries: Family<OutcomeLabels, Counter>,
    rate_limited: Family<ReasonLabels, Counter>,
    outbox_pending: Gauge,
    outbox_dead: Gauge,
    outbox_oldest_due_age: Gauge,
    approvals_oldest_age: Gauge,
    approvals_expiring_soon: Gauge,
    inbox_depth: Gauge,
    inbox_depth_max: Gauge,
    /// Records removed by the retention sweep, by kind.
    retention_purged: Family<KindLabels, Counter>,
    messages_posted: Family<KindLabels, Counter>,
    threads_opened: Counter,
    threads_closed: Family<OutcomeLabels, Counter>,
    approval_decisions: Family<OutcomeLabels, Counter>,
}

/// One kind of record the retention sweep purges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

/// The outcomes of a delivery attempt (`liaison_outbox_deliveries_total`).
pub const DELIVERY_OUTCOMES: [&str; 3] = ["delivered", "retried", "dead"];

/// The reasons of a rate-limit refusal (`liaison_rate_limited_total`): the caller's class, whose
/// per-token bucket ran dry, `auth_failures` for a credential refused after it failed to
/// authenticate too often, or `auth_failures_address` for an address refused after failures with
/// many distinct credentials (the backstop).
pub const RATE_LIMIT_REASONS: [&str; 6] = [
    "agent",
    "human",
    "admin",
    "external",
    "auth_failures",
    "auth_failures_address",
];

/// The kinds of a message (`liaison_messages_posted_total`).
pub const MESSAGE_KINDS: [&str; 6] = [
    "announce", "question", "request", "handoff", "reply", "close",
];

/// How a thread ended (`liaison_threads_closed_total`).
pub const THREAD_OUTCOMES: [&str; 4] = ["done", "failed", "rejected", "canceled"];

/// How an approval was settled (`liaison_approval_decisions_total`): a human allowed or rejected
/// it, or nobody decided before its deadline.
pub const DECISION_OUTCOMES: [&str; 3] = ["allowed", "rejected", "expired"];

/// The reasons of `liaison_connections_refused_total`.
const CONNECTION_REFUSALS: [&str; 2] = ["per_address", "reserve"];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// The process's metrics.
pub fn get() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry of its own. The process records into one ([`get`]); the generated metrics
    /// reference renders a fresh one.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("liaison");
        let requests = Family::<RequestLabels, Counter>::default();
        let latency: HistogramFamily<RouteLabels> = Family::new_with_constructor(latency_histogram);
        let commits = Family::<OutcomeLabels, Counter>::default();
        let refused = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "connections_refused",
            "Connections closed at once by the cap, by reason: per_address (the address held its share) or reserve (only the reserve for new addresses was left)",
            refused.clone(),
        );
        let batch_size = Histogram::new(BATCH_BUCKETS);
        let commit_latency = Histogram::new(COMMIT_BUCKETS);
        let gauges: [Gauge; 14] = Default::default();
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
            (
                "store_writes_failing",
                "1 while the writer's writes fail (readiness is then 503), else 0",
            ),
        ];
        let retention_purged = Family::<KindLabels, Counter>::default();
        registry.register(
            "retention_purged",
            "Records the retention sweep removed, by kind (threads, messages, task_events, \
             deliveries, delivery_attempts, audit)",
            retention_purged.clone(),
        );
        let messages_posted = Family::<KindLabels, Counter>::default();
        registry.register(
            "messages_posted",
            "Messages posted, by kind (announce, question, request, handoff, reply, close), the \
             server's own closes included; a replayed idempotent post is not counted again",
            messages_posted.clone(),
        );
        let threads_opened = Counter::default();
        registry.register(
            "threads_opened",
            "Threads opened (by a post or an external agent's task)",
            threads_opened.clone(),
        );
        let threads_closed = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "threads_closed",
            "Threads closed, by outcome (done, failed, rejected, canceled)",
            threads_closed.clone(),
        );
        let approval_decisions = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "approval_decisions",
            "Approvals settled, by outcome: allowed or rejected by a human, or expired",
            approval_decisions.clone(),
        );
        let deliveries = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "outbox_deliveries",
            "Delivery attempts by outcome: delivered, retried (failed, due again) or dead",
            deliveries.clone(),
        );
        let rate_limited = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "rate_limited",
            "Requests refused as rate_limited, by reason (the caller's class, auth_failures or auth_failures_address)",
            rate_limited.clone(),
        );
        let store_named = [
            (
                "outbox_pending",
                "Deliveries not yet delivered nor dead (retrying included)",
            ),
            ("outbox_dead", "Dead deliveries still kept"),
            (
                "outbox_oldest_due_age_seconds",
                "How long the oldest due pending delivery has been due (0: none is due)",
            ),
            (
                "approvals_oldest_pending_age_seconds",
                "How long the oldest pending approval has waited (0: none is pending)",
            ),
            (
                "approvals_expiring_soon",
                "Pending approvals that expire within the next 15 minutes (or are past their deadline)",
            ),
            (
                "inbox_depth",
                "Inbox entries not yet acknowledged, summed over every consumer seen",
            ),
            (
                "inbox_depth_max",
                "The most inbox entries one consumer has yet to acknowledge",
            ),
        ];
        // One list, one loop: the process gauges, then those a scrape reads from the store.
        for ((name, help), gauge) in named.into_iter().chain(store_named).zip(gauges.iter()) {
            registry.register(name, help, gauge.clone());
        }
        let [
            inbox_waiters,
            a2a_streams,
            mcp_sessions,
            pending_approvals,
            pool_open,
            pool_idle,
            writes_failing,
            outbox_pending,
            outbox_dead,
            outbox_oldest_due_age,
            approvals_oldest_age,
            approvals_expiring_soon,
            inbox_depth,
            inbox_depth_max,
        ] = gauges;
        // Every known label set exists from the start, so a fresh server exposes each series a
        // dashboard panel or an alert rule names.
        for outcome in DELIVERY_OUTCOMES {
            let _ = deliveries.get_or_create(&OutcomeLabels { outcome });
        }
        for reason in RATE_LIMIT_REASONS {
            let _ = rate_limited.get_or_create(&ReasonLabels { reason });
        }
        for reason in CONNECTION_REFUSALS {
            let _ = refused.get_or_create(&ReasonLabels { reason });
        }
        for outcome in ["ok", "error"] {
            let _ = commits.get_or_create(&OutcomeLabels { outcome });
        }
        for kind in MESSAGE_KINDS {
            let _ = messages_posted.get_or_create(&KindLabels { kind });
        }
        for outcome in THREAD_OUTCOMES {
            let _ = threads_closed.get_or_create(&OutcomeLabels { outcome });
        }
        for outcome in DECISION_OUTCOMES {
            let _ = approval_decisions.get_or_create(&OutcomeLabels { outcome });
        }
        Self {
            registry,
            requests,
            latency,
            commits,
            refused,
            batch_size,
            commit_latency,
            inbox_waiters,
            a2a_streams,
            mcp_sessions,
            pending_approvals,
            pool_open,
            pool_idle,
            writes_failing,
            deliveries,
            rate_limited,
            outbox_pending,
            outbox_dead,
            outbox_oldest_due_age,
            approvals_oldest_age,
            approvals_expiring_soon,
            inbox_depth,
            inbox_depth_max,
            retention_purged,
            messages_posted,
            threads_opened,
            threads_closed,
            approval_decisions,
        }
    }

    /// Counts one message of `kind` (one of [`MESSAGE_KINDS`]) posted.
    pub fn message_posted(&self, kind: &'static str) {
        self.messages_posted
            .get_or_create(&KindLabels { kind })
            .inc();
    }

    /// Counts one thread opened.
    pub fn thread_opened(&self) {
        self.threads_opened.inc();
    }

    /// Counts one thread closed with `outcome`, one of [`THREAD_OUTCOMES`].
    pub fn thread_closed(&self, outcome: &'static str) {
        self.threads_closed
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// Counts one approval settled with `outcome`, one of [`DECISION_OUTCOMES`].
    pub fn approval_decided(&self, outcome: &'static str) {
        self.approval_decisions
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// Counts `n` records of `kind` removed by the retention sweep.
    pub fn retention_purged(&self, kind: &'static str, n: u64) {
        // Every kind appears from the first sweep on, at 0 until something is purged.
        self.retention_purged
            .get_or_create(&KindLabels { kind })
            .inc_by(n);
    }

    /// Counts one delivery attempt that ended in `outcome`, one of [`DELIVERY_OUTCOMES`].
    pub fn delivery(&self, outcome: &'static str) {
        self.deliveries
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// Counts one request refused as rate-limited for `reason`, one of [`RATE_LIMIT_REASONS`].
    pub fn rate_limited(&self, reason: &'static str) {
        self.rate_limited
            .get_or_create(&ReasonLabels { reason })
            .inc();
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

    /// Counts a connection closed at once for `reason` (`per_address`, `reserve`).
    pub fn connection_refused(&self, reason: &'static str) {
        self.refused.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Records one group commit of `jobs` writes.
    pub fn group_commit(&self, jobs: usize, elapsed: Duration, ok: bool) {
        let outcome = if ok { "ok" } else { "error" };
        self.commits.get_or_create(&OutcomeLabels { outcome }).inc();
        self.batch_size.observe(jobs as f64);
        self.commit_latency.observe(elapsed.as_secs_f64());
    }

    /// Sets the live gauges from `live`, then renders every metric.
    pub fn render(&self, live: &Live) -> String {
        self.inbox_waiters.set(live.inbox_waiters as i64);
        self.a2a_streams.set(live.a2a_streams as i64);
        self.mcp_sessions.set(live.mcp_sessions as i64);
        if let Some(a) = live.approvals {
            self.pending_approvals.set(a.pending);
            self.approvals_oldest_age.set(a.oldest_age_s);
            self.approvals_expiring_soon.set(a.expiring_soon);
        }
        if let Some(o) = live.outbox {
            self.outbox_pending.set(o.pending);
            self.outbox_dead.set(o.dead);
            self.outbox_oldest_due_age.set(o.oldest_due_age_s);
        }
        if let Some(i) = live.inbox {
            self.inbox_depth.set(i.depth);
            self.inbox_depth_max.set(i.depth_max);
        }
        self.pool_open.set(i64::from(live.pool_open));
        self.pool_idle.set(live.pool_idle as i64);
        self.writes_failing.set(i64::from(live.writes_failing));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

/// The live things a scrape reads, as they are now.
#[derive(Debug, Clone, Copy, Default)]
pub struct Live {
    pub inbox_waiters: usize,
    pub a2a_streams: usize,
    pub mcp_sessions: usize,
    /// `None` when they could not be read (the gauges keep their last values).
    pub approvals: Option<LiveApprovals>,
    /// `None` when it could not be read (the gauges keep their last values).
    pub outbox: Option<LiveOutbox>,
    /// `None` when they could not be read (the gauges keep their last values).
    pub inbox: Option<LiveInbox>,
    pub pool_open: u32,
    pub pool_idle: usize,
    /// Whether the writer's writes fail now.
    pub writes_failing: bool,
}

/// Pending approvals, as a scrape reads them from the store.
#[derive(Debug, Clone, Copy, Default)]
pub struct LiveApprovals {
    pub pending: i64,
    pub oldest_age_s: i64,
    pub expiring_soon: i64,
}

/// The outbox, as a scrape reads it from the store.
#[derive(Debug, Clone, Copy, Default)]
pub struct LiveOutbox {
    pub pending: i64,
    pub dead: i64,
    pub oldest_due_age_s: i64,
}

/// The inboxes' depth, as a scrape reads it from the store.
#[derive(Debug, Clone, Copy, Default)]
pub struct LiveInbox {
    pub depth: i64,
    pub depth_max: i64,
}

tokio::task_local! {
    /// The person the service authenticated during this request.
    static CALLER: RefCell<Option<String>>;
}

/// Notes who is calling, for the access log of the request being served (if any).
pub fn identified(person: &str) {
    let _ = CALLER.try_with(|c| *c.borrow_mut() = Some(person.to_owned()));
}

/// Runs `request` with room for [`identified`] to note its caller; answers its output and the
/// caller noted, if any.
pub async fn with_caller<T>(request: impl Future<Output = T>) -> (T, Option<String>) {
    CALLER
        .scope(RefCell::new(None), async move {
            let out = request.await;
            let caller = CALLER.with(|c| c.borrow_mut().take());
            (out, caller)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every metric family of a scrape, with its help text.
    fn families(text: &str) -> Vec<(String, String)> {
        text.lines()
            .filter_map(|l| l.strip_prefix("# HELP "))
            .map(|l| {
                let (name, help) = l.split_once(' ').unwrap_or((l, ""));
                (name.to_owned(), help.to_owned())
            })
            .collect()
    }

    #[test]
    fn every_metric_has_a_help_text_and_a_type() {
        let text = get().render(&Live::default());
        let typed = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
        let helped = families(&text);
        assert_eq!(helped.len(), typed, "{text}");
        for (name, help) in &helped {
            assert!(name.starts_with("liaison_"), "{name}");
            assert!(help.len() > 10, "{name} has no help text worth the name");
        }
    }

    #[test]
    fn a_fresh_registry_exposes_every_labelled_series_the_dashboards_name() {
        let text = Metrics::new().render(&Live::default());
        for outcome in DELIVERY_OUTCOMES {
            let series = format!("liaison_outbox_deliveries_total{{outcome=\"{outcome}\"}} 0");
            assert!(text.contains(&series), "{series} missing:\n{text}");
        }
        for reason in RATE_LIMIT_REASONS {
            let series = format!("liaison_rate_limited_total{{reason=\"{reason}\"}} 0");
            assert!(text.contains(&series), "{series} missing:\n{text}");
        }
        for reason in CONNECTION_REFUSALS {
            let series = format!("liaison_connections_refused_total{{reason=\"{reason}\"}} 0");
            assert!(text.contains(&series), "{series} missing:\n{text}");
        }
        assert!(text.contains("liaison_store_group_commits_total{outcome=\"error\"} 0"));
        for kind in MESSAGE_KINDS {
            let series = format!("liaison_messages_posted_total{{kind=\"{kind}\"}} 0");
            assert!(text.contains(&series), "{series} missing:\n{text}");
        }
        for outcome in THREAD_OUTCOMES {
            let series = format!("liaison_threads_closed_total{{outcome=\"{outcome}\"}} 0");
            assert!(text.contains(&series), "{series} missing:\n{text}");
        }
        for outcome in DECISION_OUTCOMES {
            let series = format!("liaison_approval_decisions_total{{outcome=\"{outcome}\"}} 0");
            assert!(text.contains(&series), "{series} missing:\n{text}");
        }
        assert!(text.contains("liaison_threads_opened_total 0"), "{text}");
    }

    #[test]
    fn the_traffic_counters_count_what_they_are_told() {
        let metrics = Metrics::new();
        metrics.message_posted("question");
        metrics.message_posted("question");
        metrics.message_posted("close");
        metrics.thread_opened();
        metrics.thread_closed("rejected");
        metrics.approval_decided("expired");
        let text = metrics.render(&Live::default());
        for line in [
            "liaison_messages_posted_total{kind=\"question\"} 2",
            "liaison_messages_posted_total{kind=\"close\"} 1",
            "liaison_messages_posted_total{kind=\"reply\"} 0",
            "liaison_threads_opened_total 1",
            "liaison_threads_closed_total{outcome=\"rejected\"} 1",
            "liaison_threads_closed_total{outcome=\"done\"} 0",
            "liaison_approval_decisions_total{outcome=\"expired\"} 1",
            "liaison_approval_decisions_total{outcome=\"allowed\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
    }

    #[test]
    fn the_live_gauges_take_the_scrapes_readings_and_keep_them_when_one_fails() {
        let metrics = Metrics::new();
        let live = Live {
            approvals: Some(LiveApprovals {
                pending: 3,
                oldest_age_s: 120,
                expiring_soon: 1,
            }),
            outbox: Some(LiveOutbox {
                pending: 5,
                dead: 2,
                oldest_due_age_s: 9,
            }),
            inbox: Some(LiveInbox {
                depth: 11,
                depth_max: 7,
            }),
            ..Live::default()
        };
        let expected = [
            "liaison_approvals_pending 3",
            "liaison_approvals_oldest_pending_age_seconds 120",
            "liaison_approvals_expiring_soon 1",
            "liaison_outbox_pending 5",
            "liaison_outbox_dead 2",
            "liaison_outbox_oldest_due_age_seconds 9",
            "liaison_inbox_depth 11",
            "liaison_inbox_depth_max 7",
        ];
        let text = metrics.render(&live);
        for line in expected {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
        // A reading that failed (None) leaves the last values.
        let text = metrics.render(&Live::default());
        for line in expected {
            assert!(text.lines().any(|l| l == line), "{line} lost:\n{text}");
        }
    }
}
