//! Posting and reading: the rules of kinds, impacts, outcomes, recipients, limits and visibility,
//! and the label on everything an agent reads.

use serde::Serialize;

use super::{Caller, ErrorCode, Result, Service, ServiceError, input};
use crate::bus::Topic;
use crate::domain::{
    Address, Attachment, ChannelName, Impact, Kind, Label, MAX_ATTACHMENTS, MAX_BODY_BYTES,
    MAX_SUBJECT_CHARS, MessageId, Outcome, PersonId, ReplyResult, Right, ThreadId, WrittenBy,
};
use crate::store::{
    ChannelRecord, ClaimRecord, MessageRecord, NewMessage, NewTask, PostOutcome, StoreError,
    ThreadRecord,
};

/// Most characters of body one read returns, and most characters of body any one result holds in
/// all (SPEC §3): a thread page or an inbox page cuts bodies to share this budget, and says so.
pub const MAX_SLICE_CHARS: usize = 20_000;

/// How much of a message's body a page shows, and where the rest is (SPEC §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BodyExtent {
    /// Length of the whole body, in characters.
    pub body_chars: usize,
    /// True when the page's body holds only the first part of it.
    pub body_truncated: bool,
    /// For a cut body: the characters left out and the `read_message` offset that continues it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_rest: Option<BodyRest>,
}

/// The part of a cut body a page left out: read it with `read_message` from `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BodyRest {
    pub chars_left_out: usize,
    pub offset: usize,
}

/// Cuts `record`'s body to at most `max` characters and `budget`, spending the budget.
pub(super) fn cut_body(record: &mut MessageRecord, max: usize, budget: &mut usize) -> BodyExtent {
    let body_chars = record.body.chars().count();
    let keep = body_chars.min(max).min(*budget);
    *budget -= keep;
    if keep == body_chars {
        return BodyExtent {
            body_chars,
            body_truncated: false,
            body_rest: None,
        };
    }
    record.body = record.body.chars().take(keep).collect();
    BodyExtent {
        body_chars,
        body_truncated: true,
        body_rest: Some(BodyRest {
            chars_left_out: body_chars - keep,
            offset: keep,
        }),
    }
}

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

/// A message as an agent receives it: the record, its label and the author's display name.
#[derive(Debug, Clone, Serialize)]
pub struct DeliveredMessage {
    pub label: Label,
    /// The connection that wrote it (SPEC §2: server-known, unlike the self-declared `agent`),
    /// shown as `author/author_connection`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author_connection: Option<crate::domain::ConnectionSlug>,
    #[serde(flatten)]
    pub message: MessageRecord,
}

/// One thread with its state, its live claim and a page of messages.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadView {
    pub thread: ThreadRecord,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimRecord>,
    /// The name of the connection holding the claim, when one does (the console shows it).
    #[serde(skip)]
    pub claim_connection: Option<crate::domain::ConnectionSlug>,
    /// The thread's approvals, oldest first; the newest request approval governs claims.
    pub approvals: Vec<crate::store::ApprovalRecord>,
    /// When the thread is delegated to a remote agent: its task there, as liaison follows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<crate::store::RemoteTaskRecord>,
    /// The newest progress notes the claim holders' tools added (at most 50), oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub progress: Vec<crate::store::ProgressRecord>,
    /// Bodies share a budget of [`MAX_SLICE_CHARS`] characters; a cut one says so and
    /// `read_message` returns the rest.
    pub messages: Vec<ThreadMessage>,
    /// Pass as `after` to get the next page; none when this page reaches the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<i64>,
}

/// A message of a thread page, its body possibly cut.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadMessage {
    #[serde(flatten)]
    pub message: DeliveredMessage,
    /// How much of the body `message.body` holds.
    #[serde(flatten)]
    pub body: BodyExtent,
    /// Per recipient: delivered, read by which consumer, acknowledged (SPEC §4).
    pub receipts: Vec<super::RecipientReceipt>,
}

/// A slice of one message's body.
#[derive(Debug, Clone, Serialize)]
pub struct MessageSlice {
    pub label: Label,
    pub message: MessageId,
    pub thread: ThreadId,
    pub kind: Kind,
    pub author: PersonId,
    /// The slice, at most 20,000 characters.
    pub body: String,
    /// Offset of the slice, in characters.
    pub offset: usize,
    /// Length of the whole body, in characters.
    pub total_chars: usize,
    /// Where the next slice starts; none when this one reaches the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
    pub attachments: Vec<Attachment>,
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

    /// One thread with a page of its messages (positions after `after`, at most `limit`, 1–100).
    pub async fn thread(
        &self,
        caller: &Caller,
        id: &ThreadId,
        after: Option<i64>,
        limit: Option<i64>,
    ) -> Result<ThreadView> {
        self.thread_page(caller, id, after, limit, None).await
    }

    /// The thread of the claim the caller has just taken, with its first page: the claim shown
    /// is that one, not read back.
    pub async fn thread_of_claim(
        &self,
        caller: &Caller,
        claim: &ClaimRecord,
    ) -> Result<ThreadView> {
        self.thread_page(caller, &claim.thread, None, None, Some(claim.clone()))
            .await
    }

    /// [`Service::thread`], with the live claim read unless `claim` is given.
    async fn thread_page(
        &self,
        caller: &Caller,
        id: &ThreadId,
        after: Option<i64>,
        limit: Option<i64>,
        claim: Option<ClaimRecord>,
    ) -> Result<ThreadView> {
        caller.require_participant()?;
        let limit = super::page_limit(limit)?;
        let (thread, _) = self.visible_thread(caller, id).await?;
        let after = after.unwrap_or(0).max(0);
        // A remote agent's message commits with its task's state (SPEC §8b): read the state
        // around the messages, and again if it moved meanwhile, so the page never shows the
        // remote's answer beside the state before it, nor the state without the answer.
        let mut remote = self.inner.store.remote_task(id).await?;
        let mut messages = Vec::new();
        for _ in 0..4 {
            messages = self
                .inner
                .store
                .thread_messages(id, after, limit + 1)
                .await?;
            let now = self.inner.store.remote_task(id).await?;
            let mark = |r: &Option<crate::store::RemoteTaskRecord>| {
                r.as_ref()
                    .map(|r| (r.task_id.clone(), r.state, r.updated_at, r.next_check_at))
            };
            let settled = mark(&now) == mark(&remote);
            remote = now;
            if settled {
                break;
            }
        }
        let next_cursor = if messages.len() as i64 > limit {
            messages.truncate(limit as usize);
            messages.last().map(|m| m.position)
        } else {
            None
        };
        let claim = match claim {
            Some(c) => Some(c),
            None => self.inner.store.live_claim(id, self.now()).await?,
        };
        let ids: Vec<MessageId> = messages.iter().map(|m| m.id.clone()).collect();
        let mut receipts = self.receipts(id, &ids).await?;
        let mut delivered = Vec::with_capacity(messages.len());
        let mut budget = MAX_SLICE_CHARS;
        for mut m in messages {
            let body = cut_body(&mut m, MAX_SLICE_CHARS, &mut budget);
            // Receipts are per recipient: her other agents' copy of her own post (SPEC §4b) is
            // not one, unless she addressed herself.
            let mut receipts = receipts.remove(&m.id).unwrap_or_default();
            if !m.recipients.contains(&m.author) {
                receipts.retain(|r| r.person != m.author);
            }
            delivered.push(ThreadMessage {
                message: self.deliver(caller, m).await?,
                body,
                receipts,
            });
        }
        let claim_connection = match claim.as_ref().and_then(|c| c.connection.as_deref()) {
            Some(token) => self.connection_name_for(caller, token).await?,
            None => None,
        };
        Ok(ThreadView {
            approvals: self.thread_approvals(id).await?,
            claim_connection,
            remote,
            progress: self.inner.store.progress_notes(id, 50).await?,
            thread,
            claim,
            messages: delivered,
            next_cursor,
        })
    }

    /// A slice of a message body: `max_chars` (1–20,000, default 20,000) characters from `offset`.
    pub async fn read_message(
        &self,
        caller: &Caller,
        id: &MessageId,
        offset: Option<usize>,
        max_chars: Option<usize>,
    ) -> Result<MessageSlice> {
        caller.require_participant()?;
        let max = max_chars.unwrap_or(MAX_SLICE_CHARS);
        if max == 0 || max > MAX_SLICE_CHARS {
            return Err(ServiceError::invalid(format!(
                "max_chars must be between 1 and {MAX_SLICE_CHARS}"
            )));
        }
        let message = self.visible_message(caller, id).await?;
        let offset = offset.unwrap_or(0);
        let total_chars = message.body.chars().count();
        if offset > total_chars {
            return Err(ServiceError::invalid(format!(
                "offset {offset} is beyond the body's {total_chars} characters"
            )));
        }
        let body: String = message.body.chars().skip(offset).take(max).collect();
        let end = offset + body.chars().count();
        let delivered = self.deliver(caller, message).await?;
        let m = delivered.message;
        Ok(MessageSlice {
            label: delivered.label,
            message: m.id,
            thread: m.thread,
            kind: m.kind,
            author: m.author,
            body,
            offset,
            total_chars,
            next_offset: (end < total_chars).then_some(end),
            attachments: m.attachments,
        })
    }

    /// Channels the caller is a member of, with members and policies.
    pub async fn channels(&self, caller: &Caller) -> Result<Vec<ChannelRecord>> {
        caller.require_participant()?;
        Ok(self.inner.store.channels(Some(caller.id())).await?)
    }

    /// Adds the server label to a message as `reader` receives it (SPEC §3): her own command,
    /// written by her in person, is her instruction to her own connection; a post of one of her
    /// agents, read by her or her other agents, names that agent's connection (read by the
    /// connection that wrote it, it keeps today's label).
    pub(super) async fn deliver(
        &self,
        reader: &Caller,
        message: MessageRecord,
    ) -> Result<DeliveredMessage> {
        let language = self.inner.settings.label_language;
        let (name, remote) = match self.inner.store.person(&message.author).await? {
            Some(p) => (p.display_name, p.kind == crate::domain::PersonKind::Remote),
            None => (message.author.to_string(), false),
        };
        let effect = if message.kind == Kind::Request {
            message.impact
        } else {
            None
        };
        let own = &message.author == reader.id();
        let author_connection = match &message.connection {
            Some(token) => self.connection_name_for(reader, token).await?,
            None => None,
        };
        let label = if remote {
            Label::remote(&name, language)
        } else if message.written_by == WrittenBy::Human {
            // Only what she addressed to this connection is her command to it: her message to
            // bob, read by her agent in the thread, stays data.
            let command = own
                && reader.connection.is_some()
                && self
                    .inner
                    .store
                    .addressed_to(
                        reader.id(),
                        reader.reader().key(),
                        &message.thread,
                        &message.id,
                    )
                    .await?;
            if command {
                Label::instruction(&name, effect, language)
            } else {
                Label::human(&name, effect, language)
            }
        } else if let (true, Some(connection)) = (
            own && message.connection.as_deref() != Some(reader.reader().key()),
            &author_connection,
        ) {
            Label::own_agent(&name, connection, effect, language)
        } else {
            Label::new(&name, effect, language)
        };
        Ok(DeliveredMessage {
            label,
            author_connection,
            message,
        })
    }

    /// A channel the caller is a member of (with the read right); anything else is "not found".
    pub(super) async fn visible_channel(
        &self,
        caller: &Caller,
        name: &ChannelName,
    ) -> Result<ChannelRecord> {
        let channel = self.inner.store.channel(name).await?;
        match channel {
            Some(c)
                if c.member(caller.id())
                    .is_some_and(|m| m.rights.contains(Right::Read)) =>
            {
                Ok(c)
            }
            _ => Err(ServiceError::not_found("channel", name)),
        }
    }

    /// A thread in a channel the caller can read, with that channel.
    pub(super) async fn visible_thread(
        &self,
        caller: &Caller,
        id: &ThreadId,
    ) -> Result<(ThreadRecord, ChannelRecord)> {
        let thread = self
            .inner
            .store
            .thread(id)
            .await?
            .ok_or_else(|| ServiceError::not_found("thread", id))?;
        let channel = self
            .visible_channel(caller, &thread.channel)
            .await
            .map_err(|_| ServiceError::not_found("thread", id))?;
        Ok((thread, channel))
    }

    pub(super) async fn visible_message(
        &self,
        caller: &Caller,
        id: &MessageId,
    ) -> Result<MessageRecord> {
        let message = self
            .inner
            .store
            .message(id)
            .await?
            .ok_or_else(|| ServiceError::not_found("message", id))?;
        self.visible_channel(caller, &message.channel)
            .await
            .map_err(|_| ServiceError::not_found("message", id))?;
        Ok(message)
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
