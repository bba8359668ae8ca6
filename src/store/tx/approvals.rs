//! The approvals' building blocks: storing the approval a new request needs, finding the one that
//! governs a thread, consuming it, and appending each step's audit entry in the same transaction,
//! so the log never misses or invents a step. They call no other block and must not depend on any
//! operation (`impl Store`).

use crate::domain::{AgentIdentity, ApprovalEvent, PersonId, ThreadId, Timestamp};
use crate::store::db::{Conn, query};
use crate::store::error::{Result, StoreError};
use crate::store::model::input::{AuditEntry, NewApproval, NewMessage};
use crate::store::model::records::approvals::{APPROVAL_COLUMNS, ApprovalRecord, approval};

pub(in crate::store) async fn append_audit(tx: &mut Conn, e: AuditEntry<'_>) -> Result<()> {
    query(
        "INSERT INTO audit_log (at, event, approval_id, thread_id, fingerprint, actor, via, decision, \
         session, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(e.at.0)
    .bind(e.event.to_owned())
    .bind(e.approval.as_str().to_owned())
    .bind(e.thread.as_str().to_owned())
    .bind(e.fingerprint.to_owned())
    .bind(e.actor.map(|p| p.as_str().to_owned()))
    .bind(e.via.map(|v| v.as_str()))
    .bind(e.decision.map(|d| d.as_str()))
    .bind(e.session.map(|s| s.as_str().to_owned()))
    .bind(e.detail.map(str::to_owned))
    .execute(tx)
    .await?;
    Ok(())
}

/// Stores the approval a new request needs, with its `created` audit entry.
pub(super) async fn insert(tx: &mut Conn, a: &NewApproval, m: &NewMessage) -> Result<()> {
    let approvers =
        serde_json::to_string(&a.approvers).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    query(
        "INSERT INTO approvals (id, thread_id, message_id, channel, impact, fingerprint, requested_by, \
         approvers, state, created_at, expires_at, kind) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10, $11)",
    )
    .bind(a.id.as_str().to_owned())
    .bind(m.thread.as_str().to_owned())
    .bind(m.id.as_str().to_owned())
    .bind(m.channel.as_str().to_owned())
    .bind(a.impact.as_str())
    .bind(a.fingerprint.clone())
    .bind(m.author.as_str().to_owned())
    .bind(approvers)
    .bind(m.created_at.0)
    .bind(a.expires_at.0)
    .bind(a.kind.as_str())
    .execute(&mut *tx)
    .await?;
    append_audit(
        tx,
        AuditEntry {
            event: "created",
            approval: &a.id,
            thread: &m.thread,
            fingerprint: &a.fingerprint,
            actor: Some(&m.author),
            via: None,
            decision: None,
            session: m.agent.as_ref(),
            detail: None,
            at: m.created_at,
        },
    )
    .await
}

/// The approval that governs work on `thread` now: the newest request approval (outbound ones
/// govern sends, not claims). `lock` makes it `FOR UPDATE`.
pub(in crate::store) async fn latest_in(
    tx: &mut Conn,
    thread: &ThreadId,
    lock: &str,
) -> Result<Option<ApprovalRecord>> {
    let sql = format!(
        "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE thread_id = $1 AND kind = 'request' \
         ORDER BY created_at DESC, id DESC LIMIT 1{lock}"
    );
    let row = query(sql)
        .bind(thread.as_str().to_owned())
        .fetch_optional(&mut *tx)
        .await?;
    row.as_ref().map(approval).transpose()
}

/// Withdraws every approval still pending in `thread`, which `closer` has just closed: nothing is
/// left to allow, so each leaves its approvers' queue, can no longer be decided, and no longer
/// holds the thread back from retention. Each gets its audit entry; answers them as they now are.
pub(in crate::store) async fn withdraw_pending(
    tx: &mut Conn,
    thread: &ThreadId,
    closer: &PersonId,
    now: Timestamp,
) -> Result<Vec<ApprovalRecord>> {
    let sql = format!(
        "UPDATE approvals SET state = 'withdrawn', decided_at = $1 \
         WHERE thread_id = $2 AND state = 'pending' RETURNING {APPROVAL_COLUMNS}"
    );
    let rows = query(sql)
        .bind(now.0)
        .bind(thread.as_str().to_owned())
        .fetch_all(&mut *tx)
        .await?;
    let withdrawn = rows.iter().map(approval).collect::<Result<Vec<_>>>()?;
    for a in &withdrawn {
        append_audit(
            tx,
            AuditEntry {
                event: "withdrawn",
                approval: &a.id,
                thread: &a.thread,
                fingerprint: &a.fingerprint,
                actor: Some(closer),
                via: None,
                decision: None,
                session: None,
                detail: Some("the thread was closed before anyone decided"),
                at: now,
            },
        )
        .await?;
    }
    Ok(withdrawn)
}

/// Marks an approved approval consumed by the claim of `session`, with its audit entry.
pub(in crate::store) async fn consume(
    tx: &mut Conn,
    a: &ApprovalRecord,
    person: &PersonId,
    session: &AgentIdentity,
    now: Timestamp,
) -> Result<()> {
    a.state
        .apply(ApprovalEvent::Consumed)
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    query(
        "UPDATE approvals SET state = 'consumed', consumed_by = $1, consumed_session = $2, consumed_at = $3 \
         WHERE id = $4 AND state = 'approved'",
    )
    .bind(person.as_str().to_owned())
    .bind(session.as_str().to_owned())
    .bind(now.0)
    .bind(a.id.as_str().to_owned())
    .execute(&mut *tx)
    .await?;
    append_audit(
        tx,
        AuditEntry {
            event: "consumed",
            approval: &a.id,
            thread: &a.thread,
            fingerprint: &a.fingerprint,
            actor: Some(person),
            via: None,
            decision: None,
            session: Some(session),
            detail: None,
            at: now,
        },
    )
    .await
}

/// Marks an outbound approval consumed by the send its allow enqueued, with its audit entry.
pub(in crate::store) async fn consume_by_send(
    tx: &mut Conn,
    a: &mut ApprovalRecord,
    now: Timestamp,
) -> Result<()> {
    a.state = a
        .state
        .apply(ApprovalEvent::Consumed)
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    query(
        "UPDATE approvals SET state = 'consumed', consumed_by = decided_by, consumed_at = $1 \
         WHERE id = $2 AND state = 'approved'",
    )
    .bind(now.0)
    .bind(a.id.as_str().to_owned())
    .execute(&mut *tx)
    .await?;
    a.consumed_by = a.decided_by.clone();
    a.consumed_at = Some(now);
    append_audit(
        tx,
        AuditEntry {
            event: "consumed",
            approval: &a.id,
            thread: &a.thread,
            fingerprint: &a.fingerprint,
            actor: a.decided_by.as_ref(),
            via: None,
            decision: None,
            session: None,
            detail: Some("the message was handed to the outbox for the remote agent"),
            at: now,
        },
    )
    .await
}
