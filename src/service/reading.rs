//! Reading: a thread page and a message's body as a reader sees them, each message with its
//! server label (SPEC §3), bodies cut to one budget per answer, and what a caller may see at all
//! (a channel she reads, its threads and messages; anything else is "not found").

use serde::Serialize;

use super::{Caller, Result, Service, ServiceError};
use crate::domain::{
    Attachment, ChannelName, Kind, Label, MessageId, PersonId, Right, ThreadId, WrittenBy,
};
use crate::store::{ChannelRecord, ClaimRecord, MessageRecord, ThreadRecord};

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
