-- Approvals whose request's thread was closed before anyone decided are `withdrawn` (SPEC §5):
-- they leave the approvers' queue, can no longer be decided and no longer hold the thread back
-- from retention. Since this version a close withdraws them as it is posted; this withdraws the
-- ones an earlier version left pending in closed threads, each with its audit entry.
INSERT INTO audit_log (at, event, approval_id, thread_id, fingerprint, actor, via, decision, session, detail)
    SELECT t.updated_at, 'withdrawn', a.id, a.thread_id, a.fingerprint, NULL, NULL, NULL, NULL,
           'the thread was closed before anyone decided (withdrawn when liaison was upgraded)'
    FROM approvals a JOIN threads t ON t.id = a.thread_id
    WHERE a.state = 'pending' AND t.state = 'closed'
    ORDER BY a.created_at, a.id;
UPDATE approvals SET state = 'withdrawn',
    decided_at = (SELECT t.updated_at FROM threads t WHERE t.id = approvals.thread_id)
    WHERE state = 'pending'
      AND thread_id IN (SELECT id FROM threads WHERE state = 'closed');
