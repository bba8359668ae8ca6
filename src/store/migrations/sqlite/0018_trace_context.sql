-- W3C trace context kept for OpenTelemetry traces (written only while tracing is on): the context
-- of the request that opened a thread, which the later work on it (an agent's claim and reply, the
-- remote follower's calls) continues, and the context of the operation that queued a delivery,
-- which its attempts continue. Both are the two header values as sent on the wire.
CREATE TABLE thread_traces (
    thread_id    TEXT PRIMARY KEY,
    traceparent  TEXT NOT NULL,
    tracestate   TEXT
);
ALTER TABLE deliveries ADD COLUMN traceparent TEXT;
ALTER TABLE deliveries ADD COLUMN tracestate TEXT;
