-- The activity page counts the approvals settled in a window, per channel: without this index
-- every view of it read every approval ever made (found by the debug builds' plan check,
-- `store/db/scans.rs`).
CREATE INDEX approvals_decided ON approvals (channel, decided_at);

-- An agent's hook polls the confirmations its credential had decided since its last look: without
-- this index each poll read every confirmation the credential ever had.
CREATE INDEX tool_confirmations_decided ON tool_confirmations (credential, decided_at)
    WHERE state <> 'pending';
-- The activity page's threads opened in a window, per channel.
CREATE INDEX threads_channel_created ON threads (channel, created_at);
