-- A person's sessions with her own agents (SPEC §4b): the room, its join code, the connections
-- that joined it, and its commands (threads of her personal channel `@person`).
CREATE TABLE personal_sessions (
    id               TEXT PRIMARY KEY,
    person_id        TEXT NOT NULL REFERENCES persons (id),
    -- The connection (token id) the session is with; NULL: any of her agents.
    connection       TEXT,
    title            TEXT NOT NULL,
    -- The hash of the live join code (single use: cleared when used or replaced), and its end.
    code_hash        TEXT,
    code_expires_at  BIGINT,
    created_at       BIGINT NOT NULL,
    ended_at         BIGINT
);
CREATE INDEX personal_sessions_person ON personal_sessions (person_id, created_at);
CREATE UNIQUE INDEX personal_sessions_code ON personal_sessions (code_hash) WHERE code_hash IS NOT NULL;

-- The connections bound to a session by `join`.
CREATE TABLE session_joins (
    session_id  TEXT NOT NULL REFERENCES personal_sessions (id),
    token_id    TEXT NOT NULL,
    joined_at   BIGINT NOT NULL,
    PRIMARY KEY (session_id, token_id)
);

-- A command: its thread, its session, the deadline to be picked up (claimed), when it was first
-- claimed and by which connection (it never expires after), and when it expired or was withdrawn unclaimed.
CREATE TABLE session_commands (
    thread_id   TEXT PRIMARY KEY REFERENCES threads (id),
    session_id  TEXT NOT NULL REFERENCES personal_sessions (id),
    pickup_by   BIGINT NOT NULL,
    claimed_at  BIGINT,
    -- The connection (token id) that claimed it first.
    claimed_by  TEXT,
    expired_at  BIGINT
);
CREATE INDEX session_commands_session ON session_commands (session_id, thread_id);
CREATE INDEX session_commands_due ON session_commands (pickup_by)
    WHERE claimed_at IS NULL AND expired_at IS NULL;
