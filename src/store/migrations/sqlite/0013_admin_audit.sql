-- Every admin change in the audit log (issue 26), written in the transaction of the change: the
-- log is no longer only the approvals'. An admin change has no approval, thread or fingerprint;
-- it names what it changed (`subject`) and what it was before and after (JSON, secrets never
-- included). SQLite cannot drop NOT NULL in place, so the table is rebuilt with its rows and
-- sequence numbers.
CREATE TABLE audit_log_new (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    at           BIGINT NOT NULL,
    -- created, decided, consumed, expired (approvals); person.added, token.revoked, … (admin).
    event        TEXT NOT NULL,
    approval_id  TEXT,
    thread_id    TEXT,
    fingerprint  TEXT,
    -- The person who acted; none when the server did (expiry, bootstrap).
    actor        TEXT,
    -- How it arrived: cli, api, link, console, elicitation.
    via          TEXT,
    decision     TEXT,
    -- The self-declared agent session that consumed the approval.
    session      TEXT,
    detail       TEXT,
    -- What an admin change changed: its id (a person, token, channel, webhook, kid, …).
    subject      TEXT,
    before_json  TEXT,
    after_json   TEXT
);
INSERT INTO audit_log_new (seq, at, event, approval_id, thread_id, fingerprint, actor, via,
                           decision, session, detail)
    SELECT seq, at, event, approval_id, thread_id, fingerprint, actor, via, decision, session, detail
    FROM audit_log;
DROP TABLE audit_log;
ALTER TABLE audit_log_new RENAME TO audit_log;
CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX audit_log_subject ON audit_log (subject);

-- A login link may grant an admin console session; the session records it.
ALTER TABLE login_links ADD COLUMN admin BIGINT NOT NULL DEFAULT 0;
ALTER TABLE console_sessions ADD COLUMN admin BIGINT NOT NULL DEFAULT 0;
