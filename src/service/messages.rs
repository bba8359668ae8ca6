//! Posting: the rules of kinds, impacts, outcomes, recipients and limits a message is checked
//! against before it is written. What a reader sees of it is `reading.rs`'s.

use serde::Serialize;

use super::{Caller, ErrorCode, Result, Service, ServiceError, input};
use crate::bus::Topic;
use crate::domain::{
    Address, Attachment, ChannelName, Impact, Kind, MAX_ATTACHMENTS, MAX_BODY_BYTES,
    MAX_SUBJECT_CHARS, MessageId, Outcome, PersonId, ReplyResult, Right, ThreadId,
};
use crate::store::{NewMessage, NewTask, PostOutcome, StoreError};

/// Longest idempotency key.
const MAX_IDEMPOTENCY_KEY: usize = 200;

/// A message to post, as a client asked for it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PostRequest {
    pub kind: Option<Kind>,
    /// Required for a new thread; optional (must match) in an existing one.
    pub channel: Option<ChannelName>,
    /// The thread to post in; none opens a new thread.
    pub thread: Option<ThreadId>,
    /// Persons and connections (`bob`, `bob/codex`) of the channel's members; default: the
    /// thread's participants, or for a new thread every other member who can read the channel
    /// (and the author's other connections).
    pub to: Option<Vec<Address>>,
    pub subject: Option<String>,
    pub body: String,
    pub impact: Option<Impact>,
    pub outcome: Option<Outcome>,
    pub attachments: Vec<Attachment>,
    pub refers_to: Option<MessageId>,
    pub idempotency_key: Option<String>,
    /// For a message to a remote agent that starts a round: the skill asked for (one of the
    /// skills its card lists).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    /// For a reply: its structured result (SPEC §4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<ReplyResult>,
    /// In a thread the caller's session claimed: the fencing token its claim returned. The post is
    /// refused with `stale_claim` (and nothing written) when another session claimed the thread
    /// since. Not part of what an idempotency key stands for: a retry carrying a newer token
    /// replays the earlier post.
    #[serde(skip)]
    pub fencing_token: Option<i64>,
}

/// What a post returns.
#[derive(Debug, Clone, Serialize)]
pub struct PostReceipt {
    pub message: MessageId,
    pub thread: ThreadId,
    pub channel: ChannelName,
    pub thread_state: &'static str,
    pub recipients: Vec<PersonId>,
    /// True when this repeats an earlier post with the same idempotency key (nothing was created).
    pub replayed: bool,
    /// The approval this post awaits (a request with an effect, or a message to a remote agent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<crate::domain::ApprovalId>,
    /// The remote agent this message goes to (SPEC §8b), through the outbox.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<PersonId>,
}

impl Service {
    /// Posts a message. See SPEC §3 for the rules enforced here.
    pub async fn post(&self, caller: &Caller, req: PostRequest) -> Result<PostReceipt> {
        caller.require_participant()?;
        let thread = req.thread.clone();
        self.traced(
            "service.post",
            thread.as_ref(),
            self.post_as(caller, req, None),
        )
        .await
    }

    /// Posts for any authenticated author (members through `post`, parties through the task
    /// methods); `task` makes a new thread an A2A task.
    pub(super) async fn post_as(
        &self,
        caller: &Caller,
        req: PostRequest,
        task: Option<NewTask>,
    ) -> Result<PostReceipt> {
        Ok(self.post_recorded(caller, req, task).await?.0)
    }

    /// [`Service::post_as`], also returning the rows as the post wrote them (or found them, for a
    /// replay): the message and its thread right after the commit.
    pub(super) async fn post_recorded(
        &self,
        caller: &Caller,
        req: PostRequest,
        task: Option<NewTask>,
    ) -> Result<(PostReceipt, PostOutcome)> {
        self.post_with(caller, req, task, None, None).await
    }

    /// A command of a personal session (`service::personal`): the thread it opens is recorded
    /// as the session's, with its pickup deadline, in the post's transaction.
    pub(super) async fn post_command(
        &self,
        caller: &Caller,
        req: PostRequest,
        command: crate::store::NewCommand,
    ) -> Result<PostReceipt> {
        let thread = req.thread.clone();
        let posting = self.post_with(caller, req, None, None, Some(command));
        Ok(self
            .traced("service.post", thread.as_ref(), posting)
            .await?
            .0)
    }

    /// A remote agent's message with the state of its task it reports: both commit together
    /// (the follower's post, SPEC §8b).
    pub(super) async fn post_observed(
        &self,
        caller: &Caller,
        req: PostRequest,
        observed: crate::store::RemoteObservation,
    ) -> Result<PostReceipt> {
        Ok(self
            .post_with(caller, req, None, Some(observed), None)
            .await?
            .0)
    }

    async fn post_with(
        &self,
        caller: &Caller,
        req: PostRequest,
        task: Option<NewTask>,
        observed: Option<crate::store::RemoteObservation>,
        command: Option<crate::store::NewCommand>,
    ) -> Result<(PostReceipt, PostOutcome)> {
        let json = input::storable_json("post", &req)?;
        let kind = req.kind.ok_or_else(|| {
            ServiceError::invalid(
                "kind is required: announce, question, request, handoff, reply or close",
            )
        })?;
        check_fields(kind, &req)?;
        if req.fencing_token.is_some() && caller.agent.is_none() {
            return Err(ServiceError::invalid(
                "a fencing token is your claim's: declare the agent identity (agent_id@host:session) \
                 that claimed the thread",
            ));
        }

        // Resolve the thread (if any) and the channel; unknown and invisible look the same.
        let existing = match &req.thread {
            Some(id) => Some(self.visible_thread(caller, id).await?.0),
            None if kind.opens_thread() => None,
            None => {
                return Err(ServiceError::new(
                    ErrorCode::ThreadRequired,
                    format!("a {kind} must be posted in an existing thread (give `thread`)"),
                ));
            }
        };
        let channel_name = match (&existing, &req.channel) {
            (Some(t), Some(c)) if &t.channel != c => {
                return Err(ServiceError::invalid(format!(
                    "thread {} is in channel {}, not {c}",
                    t.id, t.channel
                )));
            }
            (Some(t), _) => t.channel.clone(),
            (None, Some(c)) => c.clone(),
            (None, None) => {
                return Err(ServiceError::invalid(
                    "channel is required to open a thread",
                ));
            }
        };
        let channel = self.visible_channel(caller, &channel_name).await?;
        let rights = channel
            .member(caller.id())
            .map(|m| m.rights)
            .unwrap_or_default();
        if let Some(at) = channel.removed_at {
            return Err(ServiceError::forbidden(format!(
                "channel {channel_name} was removed at {at}: its threads stay readable, nothing \
                 new can be posted in it"
            )));
        }
        if !rights.contains(Right::Post) {
            return Err(ServiceError::forbidden(format!(
                "you may not post in channel {channel_name}"
            )));
        }
        if kind == Kind::Request
            && req.impact.is_some_and(|i| i != Impact::None)
            && !rights.contains(Right::Request)
        {
            return Err(ServiceError::forbidden(format!(
                "you may not send requests with an effect in channel {channel_name}"
            )));
        }
        if let Some(t) = &existing {
            self.command_gate(caller, t, false).await?;
        }
        if let Some(t) = &existing
            && let crate::domain::ThreadState::Closed { .. } = t.state
        {
            return Err(ServiceError::new(
                ErrorCode::ThreadClosed,
                "the thread is closed; start a new thread that refers_to it",
            ));
        }
        if let Some(r) = &req.refers_to {
            let target = self.inner.store.message(r).await?;
            let visible = match &target {
                Some(m) => self.visible_channel(caller, &m.channel).await.is_ok(),
                None => false,
            };
            if !visible {
                return Err(ServiceError::not_found("message", r));
            }
        }
        let (recipients, addressing) = self
            .recipients(caller, &channel, existing.as_ref(), req.to.as_deref())
            .await?;

        // What the client asked for, to recognise a retry with the same idempotency key.
        let request_hash = crate::domain::sha256_hex(&json);
        let opens = existing.is_none();
        let subject = if opens { Some(subject_of(&req)) } else { None };
        let id = MessageId::generate();
        let thread = existing
            .as_ref()
            .map_or_else(ThreadId::generate, |t| t.id.clone());
        let now = self.now();
        let outbound = self
            .outbound(super::remote_send::PostFacts {
                caller,
                channel: &channel,
                thread: &thread,
                existing: existing.as_ref(),
                message: &id,
                kind,
                impact: req.impact,
                recipients: &recipients,
                body: &req.body,
                attachments: &req.attachments,
                skill: req.skill.as_deref(),
                refers_to: req.refers_to.as_ref(),
                now,
            })
            .await?;
        let rights = self
            .rights_say(caller, kind, req.impact, &recipients, &addressing)
            .await?;
        let approval = match &outbound {
            Some(o) => o.approval.clone(),
            None => {
                self.approval_needed(super::approvals::RequestFacts {
                    channel: &channel,
                    kind,
                    impact: req.impact,
                    thread: &thread,
                    message: &id,
                    body: &req.body,
                    attachments: &req.attachments,
                    recipients: &recipients,
                    author: caller.id(),
                    rights,
                    external: caller.person.kind == crate::domain::PersonKind::External,
                    now,
                })
                .await?
            }
        };
        let new = NewMessage {
            id,
            thread,
            opens_thread: opens,
            channel: channel_name,
            kind,
            author: caller.id().clone(),
            agent: caller.agent.clone(),
            recipients,
            subject,
            body: req.body,
            attachments: req.attachments,
            impact: req.impact,
            outcome: match kind {
                Kind::Close => Some(req.outcome.unwrap_or(Outcome::Done)),
                _ => None,
            },
            refers_to: req.refers_to,
            idempotency_key: req.idempotency_key,
            request_hash,
            created_at: now,
            task,
            approval,
            remote: outbound.map(|o| o.hop),
            written_by: caller.writes_as(),
            result: req.result,
            observed,
            fencing_token: req.fencing_token,
            addressing,
            command,
        };
        let approval_id = new.approval.as_ref().map(|a| a.id.clone());
        let remote = new.remote.as_ref().map(|hop| hop.remote.clone());
        let outcome = match self.inner.store.post(new.clone()).await {
            // Two posts with one key raced on PostgreSQL: the loser finds the winner's message.
            Err(StoreError::Conflict(c)) if c.contains("idempotency") => {
                self.inner.store.post(new).await?
            }
            other => other?,
        };
        super::counted::posted(&outcome);
        self.outbox_due(outcome.outbox_due);
        self.withdrawn(&outcome.withdrawn);
        if !outcome.replayed {
            for person in &outcome.message.recipients {
                self.inner.bus.publish(&Topic::inbox(person));
            }
            self.thread_changed(
                &outcome.thread.channel,
                &outcome.thread.id,
                outcome.thread.task.is_some(),
            );
            // A new request, handoff or task no approval holds back: one claimer waiting for
            // work (per recipient) takes it.
            let opened = outcome.message.position == 1
                && (outcome.thread.opener_kind.claimable() || outcome.thread.task.is_some());
            if opened && approval_id.is_none() {
                for person in &outcome.message.recipients {
                    self.claimable_for(person);
                }
            }
            tracing::debug!(message = %outcome.message.id, thread = %outcome.thread.id, kind = %kind, "Message posted.");
        }
        let receipt = PostReceipt {
            message: outcome.message.id.clone(),
            thread: outcome.thread.id.clone(),
            channel: outcome.message.channel.clone(),
            thread_state: outcome.thread.state.name(),
            recipients: outcome.message.recipients.clone(),
            approval: approval_id.filter(|_| !outcome.replayed),
            remote: remote.filter(|_| !outcome.replayed),
            replayed: outcome.replayed,
        };
        Ok((receipt, outcome))
    }
}

/// Checks the fields that depend only on the request itself.
fn check_fields(kind: Kind, req: &PostRequest) -> Result<()> {
    match (kind, req.impact) {
        (Kind::Request, None) => {
            return Err(ServiceError::invalid(
                "a request needs an impact: none, code, database or production",
            ));
        }
        (Kind::Request, Some(_)) | (_, None) => {}
        (other, Some(_)) => {
            return Err(ServiceError::invalid(format!(
                "impact is only for requests, not for a {other}"
            )));
        }
    }
    if let Some(result) = &req.result {
        if kind != Kind::Reply {
            return Err(ServiceError::invalid(format!(
                "result is only for a reply, not for a {kind}"
            )));
        }
        result.validate()?;
    }
    if req.outcome.is_some() && kind != Kind::Close {
        return Err(ServiceError::invalid(format!(
            "outcome is only for close, not for a {kind}"
        )));
    }
    if req.body.len() > MAX_BODY_BYTES {
        return Err(ServiceError::invalid(format!(
            "body is {} bytes; the limit is {MAX_BODY_BYTES} (1 MiB): put large content in an attachment or split it",
            req.body.len()
        )));
    }
    if req.body.trim().is_empty() && req.attachments.is_empty() && kind != Kind::Close {
        return Err(ServiceError::invalid(
            "body is empty: say something, or attach something",
        ));
    }
    if req.attachments.len() > MAX_ATTACHMENTS {
        return Err(ServiceError::invalid(format!(
            "at most {MAX_ATTACHMENTS} attachments per message"
        )));
    }
    for (i, a) in req.attachments.iter().enumerate() {
        a.validate(i)?;
    }
    if let Some(subject) = &req.subject {
        if req.thread.is_some() {
            return Err(ServiceError::invalid(
                "subject is only for the first message of a thread",
            ));
        }
        if subject.chars().count() > MAX_SUBJECT_CHARS || subject.contains(['\n', '\r']) {
            return Err(ServiceError::invalid(format!(
                "subject must be one line of at most {MAX_SUBJECT_CHARS} characters"
            )));
        }
    }
    if let Some(token) = req.fencing_token {
        if req.thread.is_none() {
            return Err(ServiceError::invalid(
                "fencing_token is for a post in a thread your session claimed: give `thread`",
            ));
        }
        if token < 1 {
            return Err(ServiceError::invalid(format!(
                "no claim of this thread has fencing token {token}; pass the token your claim returned"
            )));
        }
    }
    if let Some(key) = &req.idempotency_key
        && (key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY || key.chars().any(char::is_control))
    {
        return Err(ServiceError::invalid(format!(
            "idempotency_key must be 1-{MAX_IDEMPOTENCY_KEY} printable characters"
        )));
    }
    Ok(())
}

/// The subject given, or the first line of the body (up to 80 characters).
fn subject_of(req: &PostRequest) -> String {
    match &req.subject {
        Some(s) if !s.trim().is_empty() => s.trim().to_owned(),
        _ => {
            let first = req
                .body
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("(no subject)");
            first.chars().take(80).collect()
        }
    }
}
