-- `claim next` looks for open request, handoff and task threads in a person's inbox, oldest first.
-- Without these it scanned every thread ever opened, and each person's whole inbox per thread,
-- so its cost grew with the store's age.
CREATE INDEX threads_open ON threads (created_at, id) WHERE state = 'open';
CREATE INDEX inbox_entries_thread ON inbox_entries (thread_id, person_id);
