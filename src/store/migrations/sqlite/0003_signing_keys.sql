-- The Agent Card's signing keys, sealed under the master key, shared by every replica: one row
-- holding the JSON array of sealed records (the key ring), so the first replica to start creates it
-- and every other one adopts it (INSERT … ON CONFLICT DO NOTHING, then read).
CREATE TABLE signing_keys (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    records    TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);
