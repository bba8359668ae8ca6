-- The durable outbox (SPEC §9): every outbound delivery (A2A push, admin webhook) is a row written
-- in the transaction of the event that causes it, claimed by lease (never a transaction held
-- across the HTTP call), retried on a schedule, dead-lettered after the last attempt.

-- Admin webhooks (Standard Webhooks): events they want, optional person / channel filter, and the
-- signing secret sealed under the master key.
CREATE TABLE webhooks (
    id             TEXT PRIMARY KEY,
    url            TEXT NOT NULL,
    -- JSON array of event types.
    events         TEXT NOT NULL,
    person         TEXT,
    channel        TEXT,
    sealed_secret  TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    removed_at     BIGINT
);

-- One row per endpoint that ever failed for good: `push:<task>/<config>` or `webhook:<id>`.
-- `dead_streak` counts consecutive dead deliveries; at the configured limit it is disabled.
CREATE TABLE outbox_endpoints (
    endpoint     TEXT PRIMARY KEY,
    dead_streak  BIGINT NOT NULL DEFAULT 0,
    disabled_at  BIGINT
);

CREATE TABLE deliveries (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    endpoint         TEXT NOT NULL,
    -- Deliveries with one key go out in id order: one endpoint, one task (or thread).
    order_key        TEXT NOT NULL,
    url              TEXT NOT NULL,
    event_type       TEXT NOT NULL,
    -- Stable across attempts: receivers deduplicate on it.
    event_id         TEXT NOT NULL,
    thread_id        TEXT,
    event_seq        BIGINT,
    -- The body of a webhook; NULL for an A2A push, rendered from the task event when sent.
    payload          TEXT,
    -- pending (incl. in flight and retrying), delivered, dead.
    state            TEXT NOT NULL,
    attempts         BIGINT NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT NOT NULL,
    lease_owner      TEXT,
    lease_until      BIGINT,
    last_status      BIGINT,
    last_error       TEXT,
    created_at       BIGINT NOT NULL,
    finished_at      BIGINT
);
CREATE INDEX deliveries_due ON deliveries (state, next_attempt_at);
CREATE INDEX deliveries_order ON deliveries (order_key, state, id);
CREATE INDEX deliveries_endpoint ON deliveries (endpoint, id);

-- Every attempt: who made it, how long it took, what came back.
CREATE TABLE delivery_attempts (
    delivery_id  BIGINT NOT NULL REFERENCES deliveries (id),
    attempt      BIGINT NOT NULL,
    worker       TEXT NOT NULL,
    started_at   BIGINT NOT NULL,
    latency_ms   BIGINT NOT NULL,
    status       BIGINT,
    -- success, status, timeout, connect, refused_address, invalid_url, request
    error_class  TEXT NOT NULL,
    error        TEXT,
    PRIMARY KEY (delivery_id, attempt)
);
