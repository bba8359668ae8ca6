-- The console as the humans' workspace (SPEC §3, §4, §11).
-- Who wrote a message: NULL is an agent (every message before this migration), 'human' the
-- person herself (the console, a `human` token). The label says which.
ALTER TABLE messages ADD COLUMN written_by TEXT;
-- A reply's structured result (JSON), when it carries one.
ALTER TABLE messages ADD COLUMN result TEXT;

-- Read receipts: when a consumer's inbox call returned a message entry, and when its cursor
-- passed it. "Delivered" is the inbox entry itself.
CREATE TABLE receipts (
    person_id   TEXT NOT NULL,
    consumer    TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    message_id  TEXT NOT NULL,
    thread_id   TEXT NOT NULL,
    read_at     BIGINT,
    acked_at    BIGINT,
    PRIMARY KEY (person_id, consumer, seq)
);
CREATE INDEX receipts_thread ON receipts (thread_id);

-- When a token was last used, to the minute (written at most once a minute per token).
ALTER TABLE tokens ADD COLUMN last_used_at BIGINT;

