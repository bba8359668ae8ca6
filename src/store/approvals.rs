//! Approvals and the audit log. An approval is written in the same transaction as the request it
//! guards (see `messages::post_in`); a decision, an expiry or the consuming claim moves it with the
//! pure state machine of `domain::approval` under the row's lock, and appends its audit entry in
//! the same transaction, so the log never misses or invents a step.

use super::Store;
use super::db::{Conn, query};
use super::error::{Result, StoreError};
use super::messages::{append_entry, post_in};
use super::model::input::{AuditEntry, NewApproval, NewMessage, Settlement};
use super::model::records::approvals::{
    APPROVAL_COLUMNS, ApprovalRecord, AuditRecord, Settled, approval, audit,
};
use super::model::records::inbox::EntryContent;
use crate::domain::{
    AgentIdentity, ApprovalEvent, ApprovalId, ApprovalKind, ApprovalState, MessageId, PersonId,
    ThreadId, Timestamp,
};

pub(super) async fn append_audit(tx: &mut Conn, e: AuditEntry<'_>) -> Result<()> {
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
pub(super) async fn latest_in(
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

/// Marks an approved approval consumed by the claim of `session`, with its audit entry.
pub(super) async fn consume(
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
async fn consume_by_send(tx: &mut Conn, a: &mut ApprovalRecord, now: Timestamp) -> Result<()> {
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

impl Store {
    pub async fn approval(&self, id: &ApprovalId) -> Result<Option<ApprovalRecord>> {
        let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = $1");
        let row = query(sql)
            .bind(id.as_str().to_owned())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(approval).transpose()
    }

    /// The approval of one request message, if it needed one.
    pub async fn approval_of_message(&self, id: &MessageId) -> Result<Option<ApprovalRecord>> {
        let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE message_id = $1");
        let row = query(sql)
            .bind(id.as_str().to_owned())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(approval).transpose()
    }

    /// Every approval of a thread, oldest first.
    pub async fn thread_approvals(&self, thread: &ThreadId) -> Result<Vec<ApprovalRecord>> {
        let sql = format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE thread_id = $1 ORDER BY created_at, id"
        );
        let rows = query(sql)
            .bind(thread.as_str().to_owned())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(approval).collect()
    }

    /// Approvals `approver` may decide, newest first, created before `before` (a page cursor),
    /// only pending ones when asked.
    pub async fn approvals_for(
        &self,
        approver: &PersonId,
        pending_only: bool,
        before: Option<&ApprovalId>,
        limit: i64,
    ) -> Result<Vec<ApprovalRecord>> {
        // Person ids are slugs, so the quoted id matches exactly one element of the JSON array.
        // Ids are UUIDv7: "before" in id order is "created earlier".
        let state = if pending_only {
            " AND state = 'pending'"
        } else {
            ""
        };
        let sql = format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE approvers LIKE $1 AND id < $2{state} \
             ORDER BY id DESC LIMIT $3"
        );
        let rows = query(sql)
            .bind(format!("%\"{}\"%", approver.as_str()))
            .bind(before.map_or_else(|| "apr_g".to_owned(), |b| b.as_str().to_owned()))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(approval).collect()
    }

    /// Pending approvals whose deadline has passed, oldest deadline first.
    pub async fn due_approvals(&self, now: Timestamp, limit: i64) -> Result<Vec<ApprovalRecord>> {
        let sql = format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE state = 'pending' AND expires_at <= $1 \
             ORDER BY expires_at LIMIT $2"
        );
        let rows = query(sql)
            .bind(now.0)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(approval).collect()
    }

    /// Applies a decision or an expiry to an approval, atomically with its effects: the audit
    /// entry, on allow the recipients' notices (and a task event, so A2A streams see the new
    /// status), on reject or expiry the server's close of the thread.
    pub async fn settle_approval(&self, s: Settlement) -> Result<Settled> {
        let lock = self.for_update();
        let cache = self.webhooks.clone();
        self.write(move |tx| {
            Box::pin(async move {
                let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = $1{lock}");
                let row = query(sql)
                    .bind(s.approval.as_str().to_owned())
                    .fetch_optional(&mut *tx)
                    .await?
                    .ok_or(StoreError::NotFound("approval"))?;
                let mut record = approval(&row)?;
                let Ok(next) = record.state.apply(s.event) else {
                    return Ok(Settled::Refused(record));
                };
                let decision = match s.event {
                    ApprovalEvent::Decided(d) => Some(d),
                    _ => None,
                };
                query(
                    "UPDATE approvals SET state = $1, reason = $2, decided_by = $3, decided_via = $4, \
                     decided_at = $5 WHERE id = $6",
                )
                .bind(next.as_str())
                .bind(s.reason.clone())
                .bind(s.actor.as_ref().map(|p| p.as_str().to_owned()))
                .bind(s.via.map(|v| v.as_str()))
                .bind(s.now.0)
                .bind(record.id.as_str().to_owned())
                .execute(&mut *tx)
                .await?;
                append_audit(
                    tx,
                    AuditEntry {
                        event: if decision.is_some() { "decided" } else { "expired" },
                        approval: &record.id,
                        thread: &record.thread,
                        fingerprint: &record.fingerprint,
                        actor: s.actor.as_ref(),
                        via: s.via,
                        decision,
                        session: None,
                        detail: s.reason.as_deref(),
                        at: s.now,
                    },
                )
                .await?;
                record.state = next;
                record.reason = s.reason;
                record.decided_by = s.actor;
                record.decided_via = s.via;
                record.decided_at = Some(s.now);
                super::outbox::on_approval_decided(tx, &cache, &record, s.now).await?;
                if next == ApprovalState::Approved && record.kind == ApprovalKind::Outbound {
                    let hop = s.send.as_ref().ok_or(StoreError::NotFound("the held send"))?;
                    consume_by_send(tx, &mut record, s.now).await?;
                    super::remote_tasks::enqueue(tx, &record.thread, &record.message, hop, s.now)
                        .await?;
                } else if next == ApprovalState::Approved {
                    let notice = serde_json::json!({
                        "type": "approval_decided",
                        "approval": record.id,
                        "thread": record.thread,
                        "message": record.message,
                        "decision": "allow",
                        "decided_by": record.decided_by,
                    });
                    let mut notify = s.notify.clone();
                    notify.sort();
                    notify.dedup();
                    for person in &notify {
                        append_entry(
                            tx,
                            person,
                            &EntryContent::Notice {
                                notice: notice.clone(),
                            },
                            s.now,
                        )
                        .await?;
                    }
                    super::tasks::on_approval(tx, &cache, &record.thread, s.now).await?;
                }
                if let Some(close) = s.close {
                    post_in(tx, close, lock, &cache).await?;
                }
                Ok(Settled::Done(record))
            })
        })
        .await
        .inspect(|settled| {
            if matches!(settled, Settled::Done(_)) {
                self.outbox_enqueued();
            }
        })
    }

    /// The audit log after `after` (a sequence number), from `since` on, oldest first.
    pub async fn audit_log(
        &self,
        after: i64,
        since: Option<Timestamp>,
        limit: i64,
    ) -> Result<Vec<AuditRecord>> {
        let rows = query(
            "SELECT seq, at, event, approval_id, thread_id, fingerprint, actor, via, decision, session, \
             detail FROM audit_log WHERE seq > $1 AND at >= $2 ORDER BY seq LIMIT $3",
        )
        .bind(after)
        .bind(since.map_or(i64::MIN, |t| t.0))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(audit).collect()
    }
}
