-- A2A tasks: threads opened by external parties carry a derived task state, a context scoped to
-- the party, and an append-only event log that streams and subscriptions replay in order.

ALTER TABLE threads ADD COLUMN task_state TEXT;
ALTER TABLE threads ADD COLUMN context_id TEXT;
ALTER TABLE threads ADD COLUMN skill TEXT;
ALTER TABLE threads ADD COLUMN reference_task_ids TEXT;
ALTER TABLE threads ADD COLUMN task_event_seq BIGINT NOT NULL DEFAULT 0;
CREATE INDEX threads_opened_by ON threads (opened_by, updated_at);

CREATE TABLE task_events (
    thread_id   TEXT NOT NULL REFERENCES threads (id),
    seq         BIGINT NOT NULL,
    state       TEXT NOT NULL,
    -- 'message' (a message was posted) or 'claim'.
    cause       TEXT NOT NULL,
    message_id  TEXT,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (thread_id, seq)
);

CREATE TABLE parties (
    person_id      TEXT PRIMARY KEY REFERENCES persons (id),
    default_skill  TEXT,
    -- The `sub` claim of JWTs from the configured issuer that authenticate as this party.
    jwt_subject    TEXT,
    CONSTRAINT parties_jwt_subject_key UNIQUE (jwt_subject)
);

CREATE TABLE push_configs (
    thread_id         TEXT NOT NULL REFERENCES threads (id),
    id                TEXT NOT NULL,
    url               TEXT NOT NULL,
    token             TEXT,
    auth_scheme       TEXT,
    auth_credentials  TEXT,
    created_at        BIGINT NOT NULL,
    PRIMARY KEY (thread_id, id)
);
