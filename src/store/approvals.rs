//! Approvals and the audit log. An approval is written in the same transaction as the request it
//! guards (see `tx::post::post_in`); a decision, an expiry or the consuming claim moves it with the
//! pure state machine of `domain::approval` under the row's lock, and appends its audit entry in
//! the same transaction (`tx::approvals`), so the log never misses or invents a step. An operation
//! file (`impl Store` only): no building block (`tx/`) and no other operation file may depend on
//! it.

use super::Store;
use super::db::query;
use super::error::{Result, StoreError};
use super::model::input::{AuditEntry, AuditFilter, OnAllow, Settlement};
use super::model::records::approvals::{
    APPROVAL_COLUMNS, ApprovalRecord, AuditRecord, Settled, approval, audit,
};
use super::model::records::inbox::EntryContent;
use super::tx::approvals::{append_audit, consume_by_send};
use super::tx::inbox::append_entry;
use super::tx::post::post_in;
use super::tx::{enqueue, remote_hops, task_events};
use crate::domain::{
    ApprovalEvent, ApprovalId, ApprovalState, MessageId, PersonId, ThreadId, Timestamp,
};

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
                if !lock.is_empty() {
                    // The thread's row first, as every write to a thread takes it (a post, a
                    // claim): then the approval's. A close on another replica, which withdraws
                    // the pending approvals of its thread, commits before or waits.
                    query(format!(
                        "SELECT id FROM threads WHERE id = \
                         (SELECT thread_id FROM approvals WHERE id = $1){lock}"
                    ))
                    .bind(s.approval.as_str().to_owned())
                    .fetch_optional(&mut *tx)
                    .await?;
                }
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
                enqueue::on_approval_decided(tx, &cache, &record, s.now).await?;
                match s.on_allow.filter(|_| next == ApprovalState::Approved) {
                    None => {}
                    Some(OnAllow::Send(hop)) => {
                        consume_by_send(tx, &mut record, s.now).await?;
                        remote_hops::enqueue(tx, &record.thread, &record.message, &hop, s.now)
                            .await?;
                    }
                    Some(OnAllow::Notify(mut notify)) => {
                        let notice = serde_json::json!({
                            "type": "approval_decided",
                            "approval": record.id,
                            "thread": record.thread,
                            "message": record.message,
                            "decision": "allow",
                            "decided_by": record.decided_by,
                        });
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
                        task_events::on_approval(tx, &cache, &record.thread, s.now).await?;
                    }
                }
                if let Some(close) = s.close {
                    post_in(tx, close, lock, &cache).await?;
                }
                Ok(Settled::Done(record))
            })
        })
        .await
    }

    /// The audit entries `filter` selects, oldest first.
    pub async fn audit_log(&self, filter: AuditFilter) -> Result<Vec<AuditRecord>> {
        let order = if filter.newest_first { "DESC" } else { "ASC" };
        let rows = query(format!(
            "SELECT seq, at, event, approval_id, thread_id, fingerprint, actor, via, decision, session, \
             detail, subject, before_json, after_json FROM audit_log WHERE seq > $1 AND seq < $7 AND at >= $2 \
             AND ($3 IS NULL OR substr(event, 1, length($3)) = $3) AND ($4 IS NULL OR actor = $4) \
             AND ($5 IS NULL OR subject = $5 OR approval_id = $5 OR thread_id = $5) \
             ORDER BY seq {order} LIMIT $6",
        ))
        .bind(filter.after)
        .bind(filter.since.map_or(i64::MIN, |t| t.0))
        .bind(filter.event)
        .bind(filter.actor.map(|p| p.as_str().to_owned()))
        .bind(filter.subject)
        .bind(filter.limit)
        .bind(filter.before.unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(audit).collect()
    }
}
