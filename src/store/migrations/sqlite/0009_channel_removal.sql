-- A removed channel keeps its row, threads and messages (its members may still read them) and its
-- name is never reused; nothing new may be posted in it (its members keep only `read`).
ALTER TABLE channels ADD COLUMN removed_at BIGINT;
