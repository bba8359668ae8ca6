-- The web console (SPEC §11): single-use login links, console sessions, and single-use approval
-- links. Secrets are stored as SHA-256 hashes only. A link is used at most once: the use is an
-- `UPDATE … WHERE used_at IS NULL AND expires_at > now RETURNING`. `csrf_hash` is the hash of the
-- CSRF token of the last confirmation page shown for the link; the deciding POST must carry it.

CREATE TABLE login_links (
    id           TEXT PRIMARY KEY,
    secret_hash  TEXT NOT NULL UNIQUE,
    person       TEXT NOT NULL REFERENCES persons (id),
    created_by   TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    csrf_hash    TEXT,
    used_at      BIGINT
);

CREATE TABLE approval_links (
    id           TEXT PRIMARY KEY,
    secret_hash  TEXT NOT NULL UNIQUE,
    person       TEXT NOT NULL REFERENCES persons (id),
    approval_id  TEXT NOT NULL REFERENCES approvals (id),
    created_by   TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    csrf_hash    TEXT,
    used_at      BIGINT
);
CREATE INDEX approval_links_approval ON approval_links (approval_id);

CREATE TABLE console_sessions (
    id           TEXT PRIMARY KEY,
    secret_hash  TEXT NOT NULL UNIQUE,
    person       TEXT NOT NULL REFERENCES persons (id),
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    -- Set by logout; an ended session is never valid again.
    ended_at     BIGINT
);
