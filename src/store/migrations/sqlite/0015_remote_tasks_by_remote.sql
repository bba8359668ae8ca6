-- The admins' view of a remote agent lists its threads' remote tasks, newest first (a bounded
-- page), without reading every thread ever delegated.
CREATE INDEX remote_tasks_by_remote ON remote_tasks (remote, created_at);
