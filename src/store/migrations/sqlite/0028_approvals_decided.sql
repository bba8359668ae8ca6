-- The activity page counts the approvals settled in a window, per channel: without this index
-- every view of it read every approval ever made (found by the debug builds' plan check,
-- `store/db/scans.rs`).
CREATE INDEX approvals_decided ON approvals (channel, decided_at);
