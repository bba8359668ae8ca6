-- The channel core: people, tokens, channels, threads, messages, inboxes, claims, presence, leases.
-- Times are milliseconds since the Unix epoch; lists and attachments are JSON text.

CREATE TABLE persons (
    id            TEXT PRIMARY KEY,
    kind          TEXT NOT NULL,
    display_name  TEXT NOT NULL,
    -- Last inbox sequence number handed out; incremented under the row's lock, so sequence order
    -- is commit order for one person.
    inbox_seq     BIGINT NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL,
    removed_at    BIGINT
);

CREATE TABLE tokens (
    id           TEXT PRIMARY KEY,
    person_id    TEXT NOT NULL REFERENCES persons (id),
    secret_hash  TEXT NOT NULL,
    scopes       TEXT NOT NULL,
    description  TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT,
    revoked_at   BIGINT,
    CONSTRAINT tokens_secret_hash_key UNIQUE (secret_hash)
);
CREATE INDEX tokens_person ON tokens (person_id);

CREATE TABLE channels (
    name         TEXT PRIMARY KEY,
    description  TEXT NOT NULL DEFAULT '',
    policy       TEXT NOT NULL,
    created_at   BIGINT NOT NULL
);

CREATE TABLE channel_members (
    channel    TEXT NOT NULL REFERENCES channels (name),
    person_id  TEXT NOT NULL REFERENCES persons (id),
    rights     TEXT NOT NULL,
    PRIMARY KEY (channel, person_id)
);
CREATE INDEX channel_members_person ON channel_members (person_id);

CREATE TABLE threads (
    id             TEXT PRIMARY KEY,
    channel        TEXT NOT NULL REFERENCES channels (name),
    subject        TEXT NOT NULL,
    opener_kind    TEXT NOT NULL,
    opened_by      TEXT NOT NULL,
    state          TEXT NOT NULL,
    asker          TEXT,
    outcome        TEXT,
    message_count  BIGINT NOT NULL,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL
);
CREATE INDEX threads_channel ON threads (channel, updated_at);

CREATE TABLE messages (
    id               TEXT PRIMARY KEY,
    thread_id        TEXT NOT NULL REFERENCES threads (id),
    channel          TEXT NOT NULL,
    position         BIGINT NOT NULL,
    kind             TEXT NOT NULL,
    author           TEXT NOT NULL,
    agent            TEXT,
    recipients       TEXT NOT NULL,
    subject          TEXT,
    body             TEXT NOT NULL,
    attachments      TEXT NOT NULL,
    impact           TEXT,
    outcome          TEXT,
    refers_to        TEXT,
    idempotency_key  TEXT,
    request_hash     TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    CONSTRAINT messages_thread_position_key UNIQUE (thread_id, position)
);
CREATE UNIQUE INDEX messages_idempotency_key ON messages (author, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE inbox_entries (
    person_id   TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    entry_kind  TEXT NOT NULL,
    message_id  TEXT,
    thread_id   TEXT,
    channel     TEXT,
    notice      TEXT,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (person_id, seq)
);

CREATE TABLE consumers (
    person_id   TEXT NOT NULL,
    name        TEXT NOT NULL,
    acked       BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (person_id, name)
);

CREATE TABLE claims (
    thread_id   TEXT PRIMARY KEY,
    person_id   TEXT NOT NULL,
    session     TEXT NOT NULL,
    claimed_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);

CREATE TABLE presence (
    person_id   TEXT NOT NULL,
    agent       TEXT NOT NULL,
    transition  TEXT NOT NULL,
    task        TEXT,
    updated_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    PRIMARY KEY (person_id, agent)
);

CREATE TABLE leases (
    resource     TEXT NOT NULL,
    person_id    TEXT NOT NULL,
    agent        TEXT NOT NULL,
    mode         TEXT NOT NULL,
    acquired_at  BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    PRIMARY KEY (resource, person_id, agent)
);
