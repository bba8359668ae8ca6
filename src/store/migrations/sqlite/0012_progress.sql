-- Progress notes (SPEC §7, `liaison hook tool-use`): what an agent's own tools changed while its
-- session held the claim on a thread; a task's note is also an event of its log (A2A WORKING).
CREATE TABLE progress_notes (
    thread_id   TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    person_id   TEXT NOT NULL,
    session     TEXT NOT NULL,
    tool        TEXT NOT NULL,
    target      TEXT,
    outcome     TEXT NOT NULL,
    repeats     BIGINT NOT NULL DEFAULT 1,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
-- The text of a progress event's status message.
ALTER TABLE task_events ADD COLUMN note TEXT;
