-- The human-approval envelope (SPEC §5): one approval per request with an effect, bound to the
-- action's fingerprint, and the append-only audit log of everything that happens to approvals.

CREATE TABLE approvals (
    id                TEXT PRIMARY KEY,
    thread_id         TEXT NOT NULL REFERENCES threads (id),
    message_id        TEXT NOT NULL REFERENCES messages (id),
    channel           TEXT NOT NULL,
    impact            TEXT NOT NULL,
    fingerprint       TEXT NOT NULL,
    requested_by      TEXT NOT NULL,
    -- JSON array of the persons who may decide.
    approvers         TEXT NOT NULL,
    state             TEXT NOT NULL,
    reason            TEXT,
    decided_by        TEXT,
    decided_via       TEXT,
    decided_at        BIGINT,
    consumed_by       TEXT,
    consumed_session  TEXT,
    consumed_at       BIGINT,
    created_at        BIGINT NOT NULL,
    expires_at        BIGINT NOT NULL
);
CREATE INDEX approvals_thread ON approvals (thread_id, created_at);
CREATE UNIQUE INDEX approvals_message ON approvals (message_id);
CREATE INDEX approvals_due ON approvals (state, expires_at);

CREATE TABLE audit_log (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at           BIGINT NOT NULL,
    -- created, decided, consumed, expired.
    event        TEXT NOT NULL,
    approval_id  TEXT NOT NULL,
    thread_id    TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    -- The person who acted; none when the server did (expiry).
    actor        TEXT,
    -- How a decision arrived (cli, api, link, console, elicitation); the decision itself.
    via          TEXT,
    decision     TEXT,
    -- The self-declared agent session that consumed the approval.
    session      TEXT,
    detail       TEXT
);
CREATE INDEX audit_log_at ON audit_log (at);

-- The server's own voice in threads (rejections, expiries): a person no admin can create.
INSERT INTO persons (id, kind, display_name, inbox_seq, created_at)
    VALUES ('liaison', 'member', 'liaison server', 0, 0)
    ON CONFLICT (id) DO NOTHING;
