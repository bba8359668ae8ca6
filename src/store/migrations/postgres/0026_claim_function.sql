-- A claim in one round trip (issue 49): the steps `Store::claim` runs one statement at a time on
-- SQLite (the thread's state, its command's pickup deadline, the fencing check, the approval gate,
-- the current claim, the fencing token, the claim row, the command's pickup, the task's state, its
-- event and the event's push deliveries), run by PostgreSQL itself in one call. Only the common
-- outcomes are decided here; whatever would refuse with an error or write more than these rows (a
-- command to withdraw, a fencing token to refuse, an approval to consume or still pending, a
-- finished task) answers 'slow' BEFORE writing anything, and the caller runs its statement-by-
-- statement path in the same transaction (the thread's row stays locked), so each rule keeps one
-- authority for everything but the path every claim of an unconditional task takes.
--
-- Answers one row: `outcome` ('claimed', 'held', 'closed', 'expired', 'slow'), for 'claimed' the
-- claim written and for 'held' the live claim of another session (the claim columns), and for
-- a claim that moved a task to working the event's number, the thread's channel and opener (the
-- `task.updated` webhooks are the caller's: the live webhooks are held in its memory) and whether
-- how many push deliveries were queued.
CREATE FUNCTION liaison_claim(
    p_thread      TEXT,
    p_person      TEXT,
    p_session     TEXT,
    p_connection  TEXT,
    p_now         BIGINT,
    p_expires     BIGINT,
    p_fence       BIGINT,
    p_traceparent TEXT,
    p_tracestate  TEXT
) RETURNS TABLE (
    outcome        TEXT,
    thread_id      TEXT,
    person_id      TEXT,
    session        TEXT,
    claimed_at     BIGINT,
    expires_at     BIGINT,
    fencing_token  BIGINT,
    connection     TEXT,
    event_seq      BIGINT,
    channel        TEXT,
    opened_by      TEXT,
    pushed         BIGINT
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    t        RECORD;
    cmd      RECORD;
    cur      RECORD;
    gate     TEXT;
    renewal  BOOLEAN;
    v_at     BIGINT;
    v_token  BIGINT;
    v_seq    BIGINT;
    v_pushed BIGINT;
    has_cmd  BOOLEAN;
BEGIN
    SELECT th.state, th.claim_fence, th.task_state, th.task_event_seq, th.channel AS ch, th.opened_by AS opener
      INTO t FROM threads th WHERE th.id = p_thread FOR UPDATE;
    IF NOT FOUND OR t.state = 'closed' THEN
        outcome := 'closed';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT sc.claimed_at AS taken, sc.expired_at AS gone, sc.pickup_by
      INTO cmd FROM session_commands sc WHERE sc.thread_id = p_thread;
    has_cmd := FOUND;
    IF has_cmd THEN
        IF cmd.gone IS NOT NULL THEN
            outcome := 'expired';
            RETURN NEXT;
            RETURN;
        END IF;
        IF cmd.taken IS NULL AND cmd.pickup_by <= p_now THEN
            outcome := 'slow';
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    SELECT c.person_id AS who, c.session AS sess, c.claimed_at AS at_, c.expires_at AS until_,
           c.fencing_token AS token, c.connection AS conn
      INTO cur FROM claims c WHERE c.thread_id = p_thread;
    IF p_fence IS NOT NULL AND (
        p_fence <> t.claim_fence
        OR (cur.who IS NOT NULL AND (cur.who <> p_person OR cur.sess <> p_session))
    ) THEN
        outcome := 'slow';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT a.state INTO gate FROM approvals a
     WHERE a.thread_id = p_thread AND a.kind = 'request'
     ORDER BY a.created_at DESC, a.id DESC LIMIT 1 FOR UPDATE;
    IF gate IS NOT NULL AND gate <> 'consumed' THEN
        outcome := 'slow';
        RETURN NEXT;
        RETURN;
    END IF;
    -- A finished task refuses the claim (`task_terminal`): the caller's path says so.
    IF t.task_state IN ('completed', 'failed', 'canceled', 'rejected') THEN
        outcome := 'slow';
        RETURN NEXT;
        RETURN;
    END IF;
    renewal := cur.who IS NOT NULL AND cur.who = p_person AND cur.sess = p_session
        AND cur.conn IS NOT DISTINCT FROM p_connection;
    IF cur.who IS NOT NULL AND NOT renewal AND cur.until_ > p_now THEN
        outcome := 'held';
        thread_id := p_thread;
        person_id := cur.who;
        session := cur.sess;
        claimed_at := cur.at_;
        expires_at := cur.until_;
        fencing_token := cur.token;
        connection := cur.conn;
        RETURN NEXT;
        RETURN;
    END IF;
    IF renewal THEN
        v_token := cur.token;
        v_at := CASE WHEN cur.until_ > p_now THEN cur.at_ ELSE p_now END;
    ELSE
        UPDATE threads SET claim_fence = claim_fence + 1 WHERE id = p_thread
        RETURNING claim_fence INTO v_token;
        v_at := p_now;
    END IF;
    INSERT INTO claims AS c (thread_id, person_id, session, claimed_at, expires_at, fencing_token, connection)
    VALUES (p_thread, p_person, p_session, v_at, p_expires, v_token, p_connection)
    ON CONFLICT ON CONSTRAINT claims_pkey DO UPDATE SET person_id = excluded.person_id,
        session = excluded.session, claimed_at = excluded.claimed_at,
        expires_at = excluded.expires_at, fencing_token = excluded.fencing_token,
        connection = excluded.connection;
    IF has_cmd AND cmd.taken IS NULL THEN
        UPDATE session_commands SET claimed_at = p_now, claimed_by = p_connection
         WHERE session_commands.thread_id = p_thread AND session_commands.claimed_at IS NULL;
    END IF;
    pushed := 0;
    IF t.task_state = 'submitted' THEN
        v_seq := t.task_event_seq + 1;
        UPDATE threads SET task_state = 'working', task_event_seq = v_seq, updated_at = p_now
         WHERE id = p_thread;
        INSERT INTO task_events (thread_id, seq, state, cause, message_id, created_at, note)
        VALUES (p_thread, v_seq, 'working', 'claim', NULL, p_now, NULL);
        INSERT INTO deliveries (endpoint, order_key, url, event_type, event_id, thread_id, event_seq,
            payload, state, attempts, next_attempt_at, created_at, traceparent, tracestate)
        SELECT 'push:' || p_thread || '/' || pc.id, 'push:' || p_thread || '/' || pc.id, pc.url,
               'task.event', p_thread || ':' || v_seq, p_thread, v_seq, NULL, 'pending', 0, p_now,
               p_now, p_traceparent, p_tracestate
          FROM push_configs pc LEFT JOIN outbox_endpoints e
            ON e.endpoint = 'push:' || pc.thread_id || '/' || pc.id
         WHERE pc.thread_id = p_thread AND e.disabled_at IS NULL
         ORDER BY pc.created_at, pc.id;
        GET DIAGNOSTICS v_pushed = ROW_COUNT;
        pushed := v_pushed;
        event_seq := v_seq;
        channel := t.ch;
        opened_by := t.opener;
    END IF;
    outcome := 'claimed';
    thread_id := p_thread;
    person_id := p_person;
    session := p_session;
    claimed_at := v_at;
    expires_at := p_expires;
    fencing_token := v_token;
    connection := p_connection;
    RETURN NEXT;
END
$$;
