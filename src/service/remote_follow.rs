//! The outbound bridge's follower side (SPEC §8b): the operations the follower and the push
//! receiver call on a delegated task (claim, renew, record what was seen, trouble, abandon), and
//! what a remote task's changes become in the thread: the remote agent's own messages, each with an
//! idempotency key derived from the remote task and the event, so following a task again after a
//! restart posts nothing twice. The sending side is `remote_send.rs`.

use super::{Caller, ErrorCode, Result, Service, ServiceError};
use crate::domain::{
    ChannelName, Kind, MessageId, Outcome, PersonId, RemoteState, RemoteUpdate, Scope, Scopes,
    ThreadId, Timestamp,
};
use crate::store::{
    DeliveryRecord, NewMessage, REMOTE_SEND, RemoteObservation, RemoteTaskRecord, StoreError,
};

impl Service {
    /// The thread's remote task row (for the follower and the receiver).
    pub async fn remote_task(&self, thread: &ThreadId) -> Result<Option<RemoteTaskRecord>> {
        Ok(self.inner.store.remote_task(thread).await?)
    }

    /// Records what a send got back (a new or continued task) and posts what it means.
    /// `next_check_at` and `backoff_ms` say when the follower looks next.
    pub async fn remote_started(
        &self,
        thread: &ThreadId,
        update: RemoteUpdate,
        next_check_at: Timestamp,
        backoff_ms: i64,
    ) -> Result<()> {
        let task = self
            .inner
            .store
            .remote_task(thread)
            .await?
            .ok_or_else(|| ServiceError::not_found("remote task", thread))?;
        // A task that has ended already (an agent answering at once) gives a follower nothing
        // to claim: waking them would only cost each an empty claim, a write.
        let followed = !update.state.is_terminal();
        self.apply_remote(&task, update, next_check_at, backoff_ms)
            .await?;
        if followed {
            self.inner.bus.publish(&crate::bus::Topic::remote());
        }
        Ok(())
    }

    /// Records one look at a followed task and posts what it means. False when the update is
    /// about a task that is not the thread's current one (a late event of an earlier round, or a
    /// task liaison does not know): it changes nothing.
    pub async fn remote_observed(
        &self,
        thread: &ThreadId,
        update: RemoteUpdate,
        next_check_at: Timestamp,
        backoff_ms: i64,
    ) -> Result<bool> {
        let Some(task) = self.inner.store.remote_task(thread).await? else {
            return Ok(false);
        };
        if task.task_id.as_deref() != Some(update.task_id.as_str()) {
            return Ok(false);
        }
        self.apply_remote(&task, update, next_check_at, backoff_ms)
            .await?;
        Ok(true)
    }

    /// Records that following a task failed for now (the follower retries after `backoff_ms`).
    pub async fn remote_follow_trouble(
        &self,
        thread: &ThreadId,
        error: String,
        backoff_ms: i64,
    ) -> Result<()> {
        let now = self.now();
        Ok(self
            .inner
            .store
            .remote_task_trouble(
                thread,
                error,
                Timestamp(now.0 + backoff_ms),
                backoff_ms,
                now,
            )
            .await?)
    }

    /// Claims remote tasks for a follower (see `Store::claim_remote_tasks`).
    pub async fn claim_remote_tasks(
        &self,
        owner: &str,
        lease_ms: i64,
        limit: i64,
    ) -> Result<Vec<RemoteTaskRecord>> {
        let now = self.now();
        Ok(self
            .inner
            .store
            .claim_remote_tasks(owner.to_owned(), now, Timestamp(now.0 + lease_ms), limit)
            .await?)
    }

    /// Extends a follower's lease (`lease_ms` ≤ 0 gives it up). False when it was lost.
    pub async fn renew_remote_task(
        &self,
        thread: &ThreadId,
        owner: &str,
        lease_ms: i64,
    ) -> Result<bool> {
        let until = Timestamp(self.now().0 + lease_ms);
        Ok(self
            .inner
            .store
            .renew_remote_task(thread, owner.to_owned(), until)
            .await?)
    }

    /// When a follower should look next without being woken.
    pub async fn next_remote_check(&self) -> Result<Option<Timestamp>> {
        Ok(self.inner.store.next_remote_check().await?)
    }

    /// A push said the thread's remote task changed: make it due now and wake the followers.
    pub async fn remote_nudge(&self, thread: &ThreadId) -> Result<()> {
        if self
            .inner
            .store
            .nudge_remote_task(thread, self.now())
            .await?
        {
            self.inner.bus.publish(&crate::bus::Topic::remote());
        }
        Ok(())
    }

    /// Gives up following a thread's remote task for good (its answer cannot be read, or the
    /// remote agent is gone): the server closes the thread `failed` with the reason.
    pub async fn remote_abandon(&self, thread: &ThreadId, reason: &str) -> Result<()> {
        let Some(task) = self.inner.store.remote_task(thread).await? else {
            return Ok(());
        };
        self.close_failed(&task, reason).await?;
        self.inner
            .store
            .record_remote_task(RemoteObservation {
                thread: thread.clone(),
                task_id: task.task_id.clone().unwrap_or_default(),
                state: RemoteState::Failed,
                next_check_at: self.now(),
                backoff_ms: 0,
                now: self.now(),
            })
            .await?;
        self.thread_id_changed(thread).await
    }

    /// The server closes a delegated thread `failed` with `reason` (unless it is closed).
    async fn close_failed(&self, task: &RemoteTaskRecord, reason: &str) -> Result<()> {
        let Some(t) = self.inner.store.thread(&task.thread).await? else {
            return Ok(());
        };
        if matches!(t.state, crate::domain::ThreadState::Closed { .. }) {
            return Ok(());
        }
        let name = self
            .names(std::slice::from_ref(&task.remote))
            .await?
            .join("");
        let close = self.server_close_message(
            &task.thread,
            &t.channel,
            vec![t.opened_by.clone()],
            Outcome::Failed,
            format!(
                "liaison stopped following the task of the remote agent {}: {reason}\nThe \
                 thread is closed.",
                crate::domain::text::quote(&name)
            ),
            None,
        );
        match self.inner.store.post(close).await {
            Ok(posted) => {
                super::counted::posted(&posted);
                self.outbox_due(posted.outbox_due);
                self.withdrawn(&posted.withdrawn);
                for p in &posted.message.recipients {
                    self.inner.bus.publish(&crate::bus::Topic::inbox(p));
                }
                self.thread_changed(
                    &posted.thread.channel,
                    &posted.thread.id,
                    posted.thread.task.is_some(),
                );
                Ok(())
            }
            // Closed meanwhile (by the remote's own close, or an internal one).
            Err(StoreError::Transition(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The server's `close` (outcome `failed`) of a thread whose send to a remote agent died:
    /// posted in the transaction that records the death, so the thread never waits in silence.
    pub async fn remote_failure_close(
        &self,
        d: &DeliveryRecord,
        reason: &str,
    ) -> Result<Option<NewMessage>> {
        if d.event_type != REMOTE_SEND {
            return Ok(None);
        }
        let Some(thread) = &d.thread else {
            return Ok(None);
        };
        let message =
            serde_json::from_str::<serde_json::Value>(d.payload.as_deref().unwrap_or_default())
                .ok()
                .and_then(|p| p["message"].as_str().and_then(|m| MessageId::parse(m).ok()));
        let Some(message) = message else {
            return Ok(None);
        };
        let Some(sent) = self.inner.store.message(&message).await? else {
            return Ok(None);
        };
        let remote = sent.recipients.first().cloned();
        let name = match &remote {
            Some(r) => self.names(std::slice::from_ref(r)).await?.join(""),
            None => "the remote agent".into(),
        };
        Ok(Some(self.server_close_message(
            thread,
            &sent.channel,
            vec![sent.author.clone()],
            Outcome::Failed,
            format!(
                "liaison could not deliver message {} to the remote agent {} after {} attempts: \
                 {reason}\nThe thread is closed; open a new one to try again.",
                sent.id,
                crate::domain::text::quote(&name),
                d.attempts
            ),
            Some(sent.id.clone()),
        )))
    }

    /// A `close` in the server's own voice (person `liaison`), for every close the server posts
    /// (a rejected or expired approval, a delegation that failed).
    pub(super) fn server_close_message(
        &self,
        thread: &ThreadId,
        channel: &ChannelName,
        recipients: Vec<PersonId>,
        outcome: Outcome,
        body: String,
        refers_to: Option<MessageId>,
    ) -> NewMessage {
        NewMessage {
            id: MessageId::generate(),
            thread: thread.clone(),
            opens_thread: false,
            channel: channel.clone(),
            kind: Kind::Close,
            author: PersonId::parse(crate::domain::SERVER_PERSON).expect("a valid slug"),
            agent: None,
            recipients,
            subject: None,
            body,
            attachments: Vec::new(),
            impact: None,
            outcome: Some(outcome),
            refers_to,
            idempotency_key: None,
            request_hash: String::new(),
            created_at: self.now(),
            task: None,
            approval: None,
            remote: None,
            written_by: crate::domain::WrittenBy::Agent,
            result: None,
            observed: None,
            fencing_token: None,
            addressing: crate::store::Addressing::default(),
            command: None,
        }
    }

    /// Posts what an update means in the thread, as the remote agent, with the state it reports
    /// in the same transaction; an update that posts nothing (or whose post is refused) records
    /// the state alone.
    async fn apply_remote(
        &self,
        task: &RemoteTaskRecord,
        update: RemoteUpdate,
        next_check_at: Timestamp,
        backoff_ms: i64,
    ) -> Result<()> {
        let thread = &task.thread;
        let observation = RemoteObservation {
            thread: thread.clone(),
            task_id: update.task_id.clone(),
            state: update.state,
            next_check_at,
            backoff_ms,
            now: self.now(),
        };
        if let Some((kind, outcome)) = update.state.message()
            && !(kind == Kind::Announce && update.text.trim().is_empty())
        {
            let body = if update.text.trim().is_empty() {
                match update.state {
                    RemoteState::InputRequired => {
                        "The remote agent needs more input to continue.".into()
                    }
                    RemoteState::AuthRequired => {
                        "The remote agent needs authorization to continue.".into()
                    }
                    RemoteState::Completed if !update.attachments.is_empty() => {
                        "The remote agent's answer is attached.".into()
                    }
                    other => format!("The remote task is {other}."),
                }
            } else {
                update.text.clone()
            };
            let key = format!(
                "remote:{}",
                crate::domain::sha256_hex(
                    format!("{}\0{}\0{}", update.task_id, update.state, update.event_key)
                        .as_bytes()
                )
            );
            let caller = self.remote_caller(&task.remote).await?;
            let req = super::messages::PostRequest {
                kind: Some(kind),
                thread: Some(thread.clone()),
                body,
                outcome,
                attachments: update.attachments.clone(),
                idempotency_key: Some(key),
                result: if kind == Kind::Reply {
                    update.result.clone()
                } else {
                    None
                },
                ..Default::default()
            };
            match self.post_observed(&caller, req, observation.clone()).await {
                Ok(_) => return Ok(()),
                Err(e) if e.code == ErrorCode::ThreadClosed => {
                    tracing::debug!(thread = %thread, "A remote task changed after its thread was closed.");
                }
                Err(e) if e.code == ErrorCode::IdempotencyConflict => {
                    tracing::debug!(thread = %thread, "A remote event was seen again with other content; the first stands.");
                }
                Err(e) if e.code == ErrorCode::InvalidInput => {
                    // The remote's answer cannot be stored (too large, malformed): the thread ends
                    // `failed` with the reason rather than waiting for it.
                    self.close_failed(
                        task,
                        &format!("its answer could not be stored: {}", e.message),
                    )
                    .await?;
                }
                Err(e) => return Err(e),
            }
        }
        let thread = observation.thread.clone();
        self.inner.store.record_remote_task(observation).await?;
        // The thread's remote state (and any answer recorded above) shows on every reader's page.
        self.thread_id_changed(&thread).await
    }

    /// The remote agent as the author of what it returns (never a token holder).
    async fn remote_caller(&self, remote: &PersonId) -> Result<Caller> {
        let person = self
            .inner
            .store
            .person(remote)
            .await?
            .ok_or_else(|| ServiceError::not_found("person", remote))?;
        Ok(Caller {
            person,
            scopes: Scopes::default().with(Scope::Agent),
            token_id: "remote".into(),
            agent: None,
            connection: None,
            via: crate::domain::DecisionPath::Api,
            expires_at: None,
        })
    }
}
