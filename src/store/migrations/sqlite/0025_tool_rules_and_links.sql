-- Her own tool rules (SPEC §5b): the rules a person adds in her settings, read with the configured
-- ones for every call of her connections. A rule only makes a call stricter. One row per person
-- who has any; `rules` is their JSON array, in her order.
CREATE TABLE person_tool_rules (
    person_id   TEXT PRIMARY KEY REFERENCES persons (id),
    rules       TEXT NOT NULL,
    updated_at  BIGINT NOT NULL
);

-- Single-use links deciding one tool confirmation as its person (the link of an
-- `approval.pending` webhook about a tool call), as `approval_links` are for approvals.
CREATE TABLE confirmation_links (
    id               TEXT PRIMARY KEY,
    secret_hash      TEXT NOT NULL UNIQUE,
    person           TEXT NOT NULL REFERENCES persons (id),
    confirmation_id  TEXT NOT NULL REFERENCES tool_confirmations (id),
    created_by       TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    expires_at       BIGINT NOT NULL,
    csrf_hash        TEXT,
    used_at          BIGINT
);
CREATE INDEX confirmation_links_confirmation ON confirmation_links (confirmation_id);

-- Settled confirmations made outside any claimed command, for the retention purge.
CREATE INDEX tool_confirmations_settled ON tool_confirmations (thread_id, decided_at);
