-- Confirmations of an agent's own tool calls (SPEC §5b): one row per call a person's rights say
-- she confirms; bound to the call's fingerprint, decided once by her, consumed once by the hook
-- that waited for it. The call's input is never stored: only its digest and a masked summary.
CREATE TABLE tool_confirmations (
    id              TEXT PRIMARY KEY,
    person_id       TEXT NOT NULL,
    -- The connection (token id) whose agent made the call; the caller's token when it has none.
    credential      TEXT NOT NULL,
    connection_name TEXT,
    agent           TEXT,
    -- The claimed command (or thread) the call was made for, if any.
    thread_id       TEXT,
    tool            TEXT NOT NULL,
    input_digest    TEXT NOT NULL,
    summary         TEXT NOT NULL,
    impact          TEXT NOT NULL,
    rule            TEXT NOT NULL,
    fingerprint     TEXT NOT NULL,
    state           TEXT NOT NULL,
    reason          TEXT,
    decided_by      TEXT,
    decided_via     TEXT,
    decided_at      BIGINT,
    consumed_at     BIGINT,
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL
);
CREATE INDEX tool_confirmations_person ON tool_confirmations (person_id, state, created_at);
CREATE INDEX tool_confirmations_credential ON tool_confirmations (credential, state);
CREATE INDEX tool_confirmations_fingerprint ON tool_confirmations (fingerprint, state);
CREATE INDEX tool_confirmations_due ON tool_confirmations (state, expires_at);
