//! Confirmations of an agent's own tool calls (SPEC §5b): asking (bounded per credential, one per
//! fingerprint at a time), deciding (one conditional write: only a pending one before its
//! deadline, only by its person), using up (only the credential that asked, once), expiring; and
//! the audit entry of every verdict. An operation file (`impl Store` only).

use super::Store;
use super::db::{Conn, query};
use super::error::{Result, StoreError};
use super::model::input::AdminChange;
use super::model::records::tool_checks::{
    CONFIRMATION_COLUMNS, ConfirmationAsked, ConfirmationDecided, ConfirmationRecord, confirmation,
};
use super::tx::audit::append_change;
use super::tx::enqueue;
use crate::domain::tool_check::{ConfirmationId, ConfirmationState, ToolRule};
use crate::domain::{Decision, DecisionPath, PersonId, Timestamp};

/// Most confirmations one listing returns (newest first).
pub const CONFIRMATIONS_LISTED: i64 = 100;

/// One audit entry about a tool call.
#[derive(Debug, Clone)]
pub struct ToolAudit {
    pub at: Timestamp,
    /// `tool.checked`, `tool.confirmation_requested`, …
    pub event: &'static str,
    /// The confirmation, as the entry's subject.
    pub confirmation: Option<ConfirmationId>,
    pub thread: Option<String>,
    pub fingerprint: Option<String>,
    pub actor: Option<PersonId>,
    pub via: Option<DecisionPath>,
    /// The verdict: allow, or reject for a deny; none while it waits or when it expired (the
    /// event says which).
    pub decision: Option<Decision>,
    pub session: Option<String>,
    /// The action and the rule, in words (never the input).
    pub detail: String,
}

async fn append(tx: &mut Conn, a: &ToolAudit) -> Result<()> {
    query(
        "INSERT INTO audit_log (at, event, subject, thread_id, fingerprint, actor, via, decision, session, detail) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(a.at.0)
    .bind(a.event.to_owned())
    .bind(a.confirmation.as_ref().map(|c| c.as_str().to_owned()))
    .bind(a.thread.clone())
    .bind(a.fingerprint.clone())
    .bind(a.actor.as_ref().map(|p| p.as_str().to_owned()))
    .bind(a.via.map(|v| v.as_str()))
    .bind(a.decision.map(|d| d.as_str()))
    .bind(a.session.clone())
    .bind(a.detail.clone())
    .execute(tx)
    .await?;
    Ok(())
}

async fn one(tx: &mut Conn, id: &str) -> Result<Option<ConfirmationRecord>> {
    let sql = format!("SELECT {CONFIRMATION_COLUMNS} FROM tool_confirmations WHERE id = $1");
    query(sql)
        .bind(id.to_owned())
        .fetch_optional(tx)
        .await?
        .map(|r| confirmation(&r))
        .transpose()
}

fn event_detail(c: &ConfirmationRecord) -> String {
    format!("{} ({}; {})", c.summary.line(&c.tool), c.impact, c.rule)
}

impl Store {
    /// The tool rules `person` added herself, in her order (none when she has added none).
    pub async fn person_tool_rules(&self, person: &PersonId) -> Result<Vec<ToolRule>> {
        let row = query("SELECT rules FROM person_tool_rules WHERE person_id = $1")
            .bind(person.as_str().to_owned())
            .fetch_optional(&self.pool)
            .await?;
        match row {
            None => Ok(Vec::new()),
            Some(row) => serde_json::from_str(&row.try_get::<String, _>("rules")?)
                .map_err(|e| StoreError::Corrupt(format!("person_tool_rules: {e}"))),
        }
    }

    /// Replaces `person`'s own tool rules (none removes her row), with the change's audit entry.
    pub async fn set_person_tool_rules(
        &self,
        person: PersonId,
        rules: Vec<ToolRule>,
        audit: AdminChange,
    ) -> Result<()> {
        let json = serde_json::to_string(&rules).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        self.write(move |tx| {
            Box::pin(async move {
                query("DELETE FROM person_tool_rules WHERE person_id = $1")
                    .bind(person.as_str().to_owned())
                    .execute(&mut *tx)
                    .await?;
                if !rules.is_empty() {
                    query(
                        "INSERT INTO person_tool_rules (person_id, rules, updated_at) VALUES ($1, $2, $3)",
                    )
                    .bind(person.as_str().to_owned())
                    .bind(json)
                    .bind(audit.at.0)
                    .execute(&mut *tx)
                    .await?;
                }
                append_change(tx, &audit).await
            })
        })
        .await
    }

    /// Records a verdict given at once (allow, or deny by the rights), with no confirmation.
    pub async fn audit_tool_check(&self, entry: ToolAudit) -> Result<()> {
        self.write(move |tx| Box::pin(async move { append(tx, &entry).await }))
            .await
    }

    /// Asks for a confirmation of `c`, unless the same call already waits (or was allowed and
    /// not yet used), or its credential already has `cap` pending.
    pub async fn ask_confirmation(
        &self,
        c: ConfirmationRecord,
        cap: i64,
    ) -> Result<ConfirmationAsked> {
        let lock = self.for_update();
        let cache = self.webhooks.clone();
        self.write(move |tx| {
            Box::pin(async move {
                let now = c.created_at.0;
                let sql = format!(
                    "SELECT {CONFIRMATION_COLUMNS} FROM tool_confirmations \
                     WHERE fingerprint = $1 AND credential = $2 \
                     AND ((state = 'pending' AND expires_at > $3) OR state = 'allowed') \
                     ORDER BY created_at DESC LIMIT 1{lock}"
                );
                if let Some(row) = query(sql)
                    .bind(c.fingerprint.clone())
                    .bind(c.credential.clone())
                    .bind(now)
                    .fetch_optional(&mut *tx)
                    .await?
                {
                    return Ok(ConfirmationAsked::Existing(confirmation(&row)?));
                }
                let n: i64 = query(
                    "SELECT COUNT(*) AS n FROM tool_confirmations \
                     WHERE credential = $1 AND state = 'pending' AND expires_at > $2",
                )
                .bind(c.credential.clone())
                .bind(now)
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
                if n >= cap {
                    return Ok(ConfirmationAsked::TooMany(n));
                }
                let summary = serde_json::to_string(&c.summary)
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                query(format!(
                    "INSERT INTO tool_confirmations ({CONFIRMATION_COLUMNS}) VALUES \
                     ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)"
                ))
                .bind(c.id.as_str().to_owned())
                .bind(c.person.as_str().to_owned())
                .bind(c.credential.clone())
                .bind(c.connection.clone())
                .bind(c.agent.clone())
                .bind(c.thread.as_ref().map(|t| t.as_str().to_owned()))
                .bind(c.tool.clone())
                .bind(c.input_digest.clone())
                .bind(summary)
                .bind(c.impact.as_str())
                .bind(c.rule.clone())
                .bind(c.fingerprint.clone())
                .bind(ConfirmationState::Pending.as_str())
                .bind(None::<String>)
                .bind(None::<String>)
                .bind(None::<String>)
                .bind(None::<i64>)
                .bind(None::<i64>)
                .bind(c.created_at.0)
                .bind(c.expires_at.0)
                .execute(&mut *tx)
                .await?;
                append(
                    tx,
                    &ToolAudit {
                        at: c.created_at,
                        event: "tool.confirmation_requested",
                        confirmation: Some(c.id.clone()),
                        thread: c.thread.as_ref().map(|t| t.as_str().to_owned()),
                        fingerprint: Some(c.fingerprint.clone()),
                        actor: Some(c.person.clone()),
                        via: None,
                        decision: None,
                        session: c.agent.clone(),
                        detail: event_detail(&c),
                    },
                )
                .await?;
                let due = enqueue::on_confirmation_pending(tx, &cache, &c).await?;
                Ok(ConfirmationAsked::Created(c, due))
            })
        })
        .await
    }

    /// One confirmation, whoever's it is (the service decides who may see it).
    pub async fn confirmation(&self, id: &ConfirmationId) -> Result<Option<ConfirmationRecord>> {
        let sql = format!("SELECT {CONFIRMATION_COLUMNS} FROM tool_confirmations WHERE id = $1");
        query(sql)
            .bind(id.as_str().to_owned())
            .fetch_optional(&self.pool)
            .await?
            .map(|r| confirmation(&r))
            .transpose()
    }

    /// One confirmation of `person` (another's looks unknown).
    pub async fn confirmation_of(
        &self,
        person: &PersonId,
        id: &ConfirmationId,
    ) -> Result<Option<ConfirmationRecord>> {
        let sql = format!(
            "SELECT {CONFIRMATION_COLUMNS} FROM tool_confirmations WHERE id = $1 AND person_id = $2"
        );
        query(sql)
            .bind(id.as_str().to_owned())
            .bind(person.as_str().to_owned())
            .fetch_optional(&self.pool)
            .await?
            .map(|r| confirmation(&r))
            .transpose()
    }

    /// `person`'s confirmations still waiting for her at `now`, newest first.
    pub async fn pending_confirmations(
        &self,
        person: &PersonId,
        now: Timestamp,
    ) -> Result<Vec<ConfirmationRecord>> {
        let sql = format!(
            "SELECT {CONFIRMATION_COLUMNS} FROM tool_confirmations \
             WHERE person_id = $1 AND state = 'pending' AND expires_at > $2 \
             ORDER BY created_at DESC LIMIT {CONFIRMATIONS_LISTED}"
        );
        query(sql)
            .bind(person.as_str().to_owned())
            .bind(now.0)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(confirmation)
            .collect()
    }

    /// `person`'s confirmations made for the claimed command `thread`, oldest first.
    pub async fn confirmations_for_thread(
        &self,
        person: &PersonId,
        thread: &str,
    ) -> Result<Vec<ConfirmationRecord>> {
        let sql = format!(
            "SELECT {CONFIRMATION_COLUMNS} FROM tool_confirmations \
             WHERE person_id = $1 AND thread_id = $2 \
             ORDER BY created_at LIMIT {CONFIRMATIONS_LISTED}"
        );
        query(sql)
            .bind(person.as_str().to_owned())
            .bind(thread.to_owned())
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(confirmation)
            .collect()
    }

    /// The confirmations asked by `credential` settled (decided or expired) after `after`, oldest
    /// first, at most `limit`.
    pub async fn settled_confirmations(
        &self,
        credential: &str,
        after: Timestamp,
        limit: i64,
    ) -> Result<Vec<ConfirmationRecord>> {
        let sql = format!(
            "SELECT {CONFIRMATION_COLUMNS} FROM tool_confirmations \
             WHERE credential = $1 AND decided_at > $2 AND state <> 'pending' \
             ORDER BY decided_at, id LIMIT {limit}"
        );
        query(sql)
            .bind(credential.to_owned())
            .bind(after.0)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(confirmation)
            .collect()
    }

    /// Her decision: only on a pending one of hers, before its deadline.
    #[allow(clippy::too_many_arguments)]
    pub async fn decide_confirmation(
        &self,
        person: PersonId,
        id: ConfirmationId,
        decision: Decision,
        reason: Option<String>,
        via: DecisionPath,
        now: Timestamp,
    ) -> Result<ConfirmationDecided> {
        let cache = self.webhooks.clone();
        self.write(move |tx| {
            Box::pin(async move {
                let Some(current) = one(tx, id.as_str()).await? else {
                    return Ok(ConfirmationDecided::Unknown);
                };
                if current.person != person {
                    return Ok(ConfirmationDecided::Unknown);
                }
                let state = match decision {
                    Decision::Allow => ConfirmationState::Allowed,
                    Decision::Reject => ConfirmationState::Rejected,
                };
                let done = query(
                    "UPDATE tool_confirmations SET state = $1, reason = $2, decided_by = $3, \
                     decided_via = $4, decided_at = $5 \
                     WHERE id = $6 AND state = 'pending' AND expires_at > $5",
                )
                .bind(state.as_str())
                .bind(reason.clone())
                .bind(person.as_str().to_owned())
                .bind(via.as_str())
                .bind(now.0)
                .bind(id.as_str().to_owned())
                .execute(&mut *tx)
                .await?;
                let after = one(tx, id.as_str())
                    .await?
                    .ok_or_else(|| StoreError::Corrupt("confirmation vanished".into()))?;
                if done.rows_affected() == 0 {
                    return Ok(ConfirmationDecided::Settled(after));
                }
                append(
                    tx,
                    &ToolAudit {
                        at: now,
                        event: "tool.confirmation_decided",
                        confirmation: Some(after.id.clone()),
                        thread: after.thread.as_ref().map(|t| t.as_str().to_owned()),
                        fingerprint: Some(after.fingerprint.clone()),
                        actor: Some(person.clone()),
                        via: Some(via),
                        decision: Some(decision),
                        session: None,
                        detail: match &reason {
                            Some(r) => format!("{} — {r}", event_detail(&after)),
                            None => event_detail(&after),
                        },
                    },
                )
                .await?;
                let due = enqueue::on_confirmation_decided(tx, &cache, &after, now).await?;
                Ok(ConfirmationDecided::Decided(after, due))
            })
        })
        .await
    }

    /// Uses up an allowed confirmation for the credential that asked: true once, false after.
    pub async fn use_confirmation(
        &self,
        credential: String,
        id: ConfirmationId,
        now: Timestamp,
    ) -> Result<bool> {
        self.write(move |tx| {
            Box::pin(async move {
                let done = query(
                    "UPDATE tool_confirmations SET state = 'consumed', consumed_at = $1 \
                     WHERE id = $2 AND credential = $3 AND state = 'allowed'",
                )
                .bind(now.0)
                .bind(id.as_str().to_owned())
                .bind(credential)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() == 0 {
                    return Ok(false);
                }
                let c = one(tx, id.as_str())
                    .await?
                    .ok_or_else(|| StoreError::Corrupt("confirmation vanished".into()))?;
                append(
                    tx,
                    &ToolAudit {
                        at: now,
                        event: "tool.confirmation_used",
                        confirmation: Some(c.id.clone()),
                        thread: c.thread.as_ref().map(|t| t.as_str().to_owned()),
                        fingerprint: Some(c.fingerprint.clone()),
                        actor: Some(c.person.clone()),
                        via: None,
                        decision: Some(Decision::Allow),
                        session: c.agent.clone(),
                        detail: event_detail(&c),
                    },
                )
                .await?;
                Ok(true)
            })
        })
        .await
    }

    /// Expires the pending confirmations past their deadline (at most 500 at a time), each with
    /// its audit entry; returns them.
    pub async fn expire_confirmations(&self, now: Timestamp) -> Result<Vec<ConfirmationRecord>> {
        let lock = self.for_update();
        let cache = self.webhooks.clone();
        self.write(move |tx| {
            Box::pin(async move {
                let sql = format!(
                    "SELECT {CONFIRMATION_COLUMNS} FROM tool_confirmations \
                     WHERE state = 'pending' AND expires_at <= $1 ORDER BY expires_at LIMIT 500{lock}"
                );
                let due = query(sql)
                    .bind(now.0)
                    .fetch_all(&mut *tx)
                    .await?
                    .iter()
                    .map(confirmation)
                    .collect::<Result<Vec<_>>>()?;
                let mut expired = Vec::new();
                for mut c in due {
                    let done = query(
                        "UPDATE tool_confirmations SET state = 'expired', decided_at = $2 \
                         WHERE id = $1 AND state = 'pending'",
                    )
                    .bind(c.id.as_str().to_owned())
                    .bind(now.0)
                    .execute(&mut *tx)
                    .await?;
                    if done.rows_affected() == 0 {
                        continue;
                    }
                    c.state = ConfirmationState::Expired;
                    c.decided_at = Some(now);
                    append(
                        tx,
                        &ToolAudit {
                            at: now,
                            event: "tool.confirmation_expired",
                            confirmation: Some(c.id.clone()),
                            thread: c.thread.as_ref().map(|t| t.as_str().to_owned()),
                            fingerprint: Some(c.fingerprint.clone()),
                            actor: None,
                            via: None,
                            decision: None,
                            session: c.agent.clone(),
                            detail: event_detail(&c),
                        },
                    )
                    .await?;
                    enqueue::on_confirmation_decided(tx, &cache, &c, now).await?;
                    expired.push(c);
                }
                Ok(expired)
            })
        })
        .await
    }
}
