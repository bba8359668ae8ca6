-- The outbound bridge (SPEC §8b): threads delegated to remote agents, and outbound approvals.
--
-- An approval now says what it guards: a `request` with an effect (SPEC §5) or an `outbound`
-- message leaving the team for a remote agent. Only request approvals govern claims.
ALTER TABLE approvals ADD COLUMN kind TEXT NOT NULL DEFAULT 'request';

-- One row per thread delegated to a remote agent: the remote task that stands for it now (a new
-- round after a terminal state starts a new remote task in the same context), how liaison follows
-- it, and who follows it (a lease, so that one replica follows each task).
CREATE TABLE remote_tasks (
    thread_id        TEXT PRIMARY KEY REFERENCES threads (id),
    remote           TEXT NOT NULL REFERENCES persons (id),
    -- The A2A contextId sent with every message of the thread.
    context_id       TEXT NOT NULL,
    -- The skill asked for (message metadata `skill`), if any.
    skill            TEXT,
    -- The remote's task id, once its first answer is recorded; none before.
    task_id          TEXT,
    -- Task ids of earlier rounds (JSON array), sent as referenceTaskIds of a new round.
    earlier_tasks    TEXT NOT NULL DEFAULT '[]',
    -- The last TaskState seen (proto name without prefix, e.g. working), none before the first.
    state            TEXT,
    -- stream, push or poll.
    follow           TEXT NOT NULL,
    -- The X-A2A-Notification-Token liaison gives the remote for pushes, sealed under the master key.
    sealed_push_token TEXT,
    -- When the follower looks next without being woken, and its current backoff.
    next_check_at    BIGINT NOT NULL,
    backoff_ms       BIGINT NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_until      BIGINT,
    last_error       TEXT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX remote_tasks_due ON remote_tasks (next_check_at);
