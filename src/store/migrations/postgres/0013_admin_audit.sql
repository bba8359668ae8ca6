-- Every admin change in the audit log (issue 26), written in the transaction of the change: an
-- admin change has no approval, thread or fingerprint; it names what it changed (`subject`) and
-- what it was before and after (JSON, secrets never included).
ALTER TABLE audit_log ALTER COLUMN approval_id DROP NOT NULL;
ALTER TABLE audit_log ALTER COLUMN thread_id DROP NOT NULL;
ALTER TABLE audit_log ALTER COLUMN fingerprint DROP NOT NULL;
ALTER TABLE audit_log ADD COLUMN subject TEXT;
ALTER TABLE audit_log ADD COLUMN before_json TEXT;
ALTER TABLE audit_log ADD COLUMN after_json TEXT;
CREATE INDEX audit_log_subject ON audit_log (subject);

-- A login link may grant an admin console session; the session records it.
ALTER TABLE login_links ADD COLUMN admin BIGINT NOT NULL DEFAULT 0;
ALTER TABLE console_sessions ADD COLUMN admin BIGINT NOT NULL DEFAULT 0;
