-- Retention (issue 28): the sweep finds what is old enough to purge through these, oldest first,
-- without reading every row ever written. Ended threads (closed, or their task terminal) by last
-- change; a thread's deliveries (whether one is still due, and the finished ones purged with it);
-- finished deliveries by when they finished; task events by when they were logged.
CREATE INDEX threads_ended ON threads (updated_at)
    WHERE state = 'closed' OR task_state IN ('completed', 'failed', 'canceled', 'rejected');
CREATE INDEX deliveries_thread ON deliveries (thread_id);
CREATE INDEX deliveries_finished ON deliveries (finished_at) WHERE state <> 'pending';
CREATE INDEX task_events_at ON task_events (created_at);
