//! The outbound bridge's sending rules (SPEC §8b), once: which messages may go to a remote agent,
//! the `outbound` approval that holds them, and what the sender needs for one delivery. What comes
//! back is `remote_follow.rs`'s. The network side is `crate::remote` (the A2A client) and
//! `crate::workers::remote` (the sender and the follower); the rows are `store/remote_tasks.rs`'s.
//!
//! - **Who is a recipient.** A remote agent is never an implicit recipient of a new thread: it is
//!   named in `to`. In a thread delegated to it, it is a participant, so replies and closes go to
//!   it by default. A message to a remote agent goes to it alone, from a member's agent.
//! - **What may be sent.** A `question`, `request` or `handoff` starts a round (a new remote task;
//!   later rounds name the earlier tasks in `referenceTaskIds`); a `reply` answers the remote while
//!   its task waits for input (same task id); a `close` cancels a running remote task. Nothing
//!   else goes out: an announcement to a remote agent, a reply it did not ask for, or a new round
//!   while one runs is refused with the reason.
//! - **The envelope.** Data leaving the team is an effect: the channel's `outbound` policy
//!   (`approve` by default) and, for a request, its impact's policy both apply, the stricter
//!   winning. With `approve`, the sender's own human allows the exact message (fingerprint over
//!   the thread, the message, the content and the remote agent) before anything is sent; the allow
//!   enqueues the send and consumes the approval; a rejection or an expiry closes the thread. A
//!   `close` carries no data and needs no approval.
//! - **What comes back** is posted in the thread as the remote agent's own messages (see
//!   `domain::remote`), each with an idempotency key derived from the remote task and the event,
//!   so following a task again after a restart posts nothing twice.

use super::{Caller, ErrorCode, Result, Service, ServiceError};
use crate::domain::{
    ApprovalKind, Attachment, FollowMode, Impact, Kind, MessageId, PersonId, PersonKind,
    PolicyDecision, RemoteState, ThreadId, Timestamp, outbound_fingerprint,
};
use crate::store::{
    ChannelRecord, DeliveryRecord, MessageRecord, NewApproval, NewRemoteTask, REMOTE_CANCEL,
    REMOTE_SEND, RemoteHop, RemoteTaskRecord, StoreError, ThreadRecord,
};

/// Longest skill id an agent may ask for.
const MAX_SKILL_CHARS: usize = 200;

/// The part of a post that concerns a remote agent, decided before it is stored.
pub(super) struct Outbound {
    pub hop: RemoteHop,
    pub approval: Option<NewApproval>,
}

/// The facts of a post that decide whether (and how) it goes to a remote agent.
pub(super) struct PostFacts<'a> {
    pub caller: &'a Caller,
    pub channel: &'a ChannelRecord,
    pub thread: &'a ThreadId,
    pub existing: Option<&'a ThreadRecord>,
    pub message: &'a MessageId,
    pub kind: Kind,
    pub impact: Option<Impact>,
    pub recipients: &'a [PersonId],
    pub body: &'a str,
    pub attachments: &'a [Attachment],
    pub skill: Option<&'a str>,
    pub refers_to: Option<&'a MessageId>,
    pub now: Timestamp,
}

/// What the sender needs to send one `remote.send` or `remote.cancel` delivery.
#[derive(Debug, Clone)]
pub struct OutboundSend {
    pub target: crate::remote::RemoteTarget,
    pub message: MessageRecord,
    pub task: RemoteTaskRecord,
    /// The remote task this message continues (the remote waits for input); none starts a new one.
    pub continue_task: Option<String>,
    /// The token to give the remote for push notifications, when liaison follows it by push.
    pub push_token: Option<String>,
    /// The message's envelope (kind, impact, result), when the remote's card declares liaison's
    /// envelope extension ([`crate::domain::ENVELOPE_EXTENSION`]); none for any other agent.
    pub envelope: Option<crate::domain::Envelope>,
}

/// Whether a card (its JSON as fetched) declares liaison's envelope extension.
fn declares_envelope(card: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(card).is_ok_and(|c| {
        c["capabilities"]["extensions"]
            .as_array()
            .is_some_and(|list| {
                list.iter()
                    .any(|e| e["uri"] == crate::domain::ENVELOPE_EXTENSION)
            })
    })
}

/// Why a delivery cannot be sent (permanent: the delivery dies, and a send closes the thread).
fn gone(why: impl Into<String>) -> crate::domain::delivery::SendFailure {
    crate::domain::delivery::SendFailure::Gone(why.into())
}

fn policy_severity(d: PolicyDecision) -> u8 {
    match d {
        PolicyDecision::Auto => 0,
        PolicyDecision::Approve => 1,
        PolicyDecision::Deny => 2,
    }
}

/// The push token's sealing context: bound to its thread.
fn push_token_id(thread: &ThreadId) -> String {
    format!("remote-push:{thread}")
}

impl Service {
    /// Remote agents among `people` (the channel's members), by the directory's person kinds.
    pub(super) async fn remote_people(&self, people: &[PersonId]) -> Result<Vec<PersonId>> {
        let mut out = Vec::new();
        for p in people {
            if let Some(person) = self.inner.store.person(p).await?
                && person.kind == PersonKind::Remote
            {
                out.push(p.clone());
            }
        }
        Ok(out)
    }

    /// Decides whether a post goes to a remote agent, and how; `None` when it does not.
    pub(super) async fn outbound(&self, f: PostFacts<'_>) -> Result<Option<Outbound>> {
        if f.caller.person.kind == PersonKind::Remote {
            // What a remote agent says comes in through `remote_observed`, never goes out.
            return Ok(None);
        }
        let remotes = self.remote_people(f.recipients).await?;
        let Some(remote) = remotes.first().cloned() else {
            if f.skill.is_some() {
                return Err(ServiceError::invalid(
                    "skill is for messages to a remote agent; name one in `to`",
                ));
            }
            return Ok(None);
        };
        if f.recipients.len() > 1 {
            return Err(ServiceError::invalid(format!(
                "a message to the remote agent {remote} goes to it alone; name only it in `to` \
                 and address members in another message"
            )));
        }
        if f.caller.person.kind != PersonKind::Member {
            return Err(ServiceError::forbidden(
                "only members' agents may write to a remote agent",
            ));
        }
        let task = self.inner.store.remote_task(f.thread).await?;
        if let Some(t) = &task
            && t.remote != remote
        {
            return Err(ServiceError::invalid(format!(
                "this thread is delegated to the remote agent {}; open a new thread for {remote}",
                t.remote
            )));
        }
        if f.existing.is_some() && task.is_none() && f.kind != Kind::Close {
            return Err(ServiceError::invalid(format!(
                "this thread was not opened with the remote agent {remote}; open a new thread \
                 addressed to it"
            )));
        }
        let state = task.as_ref().and_then(|t| t.state);
        let started = task.as_ref().is_some_and(|t| t.task_id.is_some());
        let event_type = match f.kind {
            Kind::Announce => {
                return Err(ServiceError::invalid(format!(
                    "announcements are not sent to the remote agent {remote}; send it a \
                     question, request or handoff, or address members with `to`"
                )));
            }
            Kind::Close => {
                if f.skill.is_some() {
                    return Err(ServiceError::invalid(
                        "skill is for the message that starts a round",
                    ));
                }
                // Cancels a running remote task; otherwise nothing goes out.
                if !started || state.is_some_and(RemoteState::is_terminal) {
                    return Ok(None);
                }
                REMOTE_CANCEL
            }
            Kind::Reply => {
                if !state.is_some_and(RemoteState::is_interrupted) {
                    return Err(ServiceError::invalid(format!(
                        "the remote agent {remote} is not waiting for an answer in this thread; \
                         wait for its answer, ask it something new once it has answered, or close \
                         the thread"
                    )));
                }
                REMOTE_SEND
            }
            Kind::Question | Kind::Request | Kind::Handoff => {
                if let Some(t) = &task {
                    let running =
                        t.task_id.is_none() || !state.is_some_and(RemoteState::is_terminal);
                    if running {
                        return Err(ServiceError::invalid(format!(
                            "the remote agent {remote} has not finished the task of this thread \
                             (it is {}); answer it with a reply if it asked something, wait for \
                             its answer, or close the thread",
                            state.map_or("not started yet", RemoteState::as_str)
                        )));
                    }
                }
                REMOTE_SEND
            }
        };
        let target = self.remote_target(&remote).await?.ok_or_else(|| {
            ServiceError::invalid(format!(
                "{remote} is no longer a registered remote agent; nothing was posted"
            ))
        })?;
        let start = match &task {
            Some(_) => None,
            None => Some(self.new_remote_task(&f, &target).await?),
        };
        let approval = if event_type == REMOTE_SEND {
            self.outbound_approval(&f, &remote)?
        } else {
            None
        };
        Ok(Some(Outbound {
            hop: RemoteHop {
                remote,
                url: target.url.clone(),
                event_type,
                held: approval.is_some(),
                start,
            },
            approval,
        }))
    }

    /// The approval a message to `remote` needs under the channel's policy (none for `auto`), or
    /// the refusal of a `deny`.
    fn outbound_approval(
        &self,
        f: &PostFacts<'_>,
        remote: &PersonId,
    ) -> Result<Option<NewApproval>> {
        let policy = &f.channel.policy;
        let mut decision = policy.outbound;
        if f.kind == Kind::Request
            && let Some(impact) = f.impact.filter(|i| *i != Impact::None)
            && policy_severity(policy.decision(impact)) > policy_severity(decision)
        {
            decision = policy.decision(impact);
        }
        match decision {
            PolicyDecision::Deny => Err(ServiceError::new(
                ErrorCode::DeniedByPolicy,
                format!(
                    "channel {} does not let messages leave the team for remote agents (its \
                     policy says deny); nothing was posted",
                    f.channel.name
                ),
            )),
            PolicyDecision::Auto => Ok(None),
            PolicyDecision::Approve => {
                let impact = f.impact.unwrap_or(Impact::None);
                Ok(Some(NewApproval {
                    id: crate::domain::ApprovalId::generate(),
                    kind: ApprovalKind::Outbound,
                    impact,
                    fingerprint: outbound_fingerprint(
                        f.thread,
                        f.message,
                        impact,
                        f.body,
                        f.attachments,
                        remote,
                    ),
                    // The sender's own human decides what leaves in their name.
                    approvers: vec![f.caller.id().clone()],
                    expires_at: f.now.plus_secs(policy.approval_ttl_s),
                }))
            }
        }
    }

    /// The row of a thread's first message to a remote agent: its context (the conversation of
    /// the thread it refers to, when that one was delegated to the same agent; else the thread's
    /// own id), the skill, how to follow it, and the push token.
    async fn new_remote_task(
        &self,
        f: &PostFacts<'_>,
        target: &crate::remote::RemoteTarget,
    ) -> Result<NewRemoteTask> {
        let skill = match f.skill.map(str::trim) {
            None => None,
            Some(s) if s.is_empty() || s.chars().count() > MAX_SKILL_CHARS => {
                return Err(ServiceError::invalid(format!(
                    "skill must be 1-{MAX_SKILL_CHARS} characters"
                )));
            }
            Some(s) => {
                if !target.skills.is_empty() && !target.skills.iter().any(|k| k == s) {
                    return Err(ServiceError::invalid(format!(
                        "the remote agent {} has no skill {}; its skills: {}",
                        target.person,
                        crate::domain::text::quote(s),
                        target.skills.join(", ")
                    )));
                }
                Some(s.to_owned())
            }
        };
        let mut context_id = f.thread.to_string();
        if let Some(earlier) = f.refers_to
            && let Some(m) = self.inner.store.message(earlier).await?
            && let Some(t) = self.inner.store.remote_task(&m.thread).await?
            && t.remote == target.person
        {
            context_id = t.context_id;
        }
        let follow = FollowMode::choose(target.streaming, target.push);
        let sealed_push_token = if follow == FollowMode::Push {
            use base64::Engine as _;
            let token = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(super::delivery::random_bytes()?);
            Some(self.seal_secret(&push_token_id(f.thread), &token)?)
        } else {
            None
        };
        Ok(NewRemoteTask {
            context_id,
            skill,
            follow,
            sealed_push_token,
        })
    }

    /// What the sender needs for a `remote.send` or `remote.cancel` delivery; a permanent
    /// failure when it cannot be sent any more (the thread was closed before the send, the
    /// remote agent was removed, the message is gone).
    pub async fn outbound_send(
        &self,
        d: &DeliveryRecord,
    ) -> std::result::Result<OutboundSend, crate::domain::delivery::SendFailure> {
        let internal = |e: StoreError| crate::domain::delivery::SendFailure::Request(e.to_string());
        let payload: serde_json::Value =
            serde_json::from_str(d.payload.as_deref().unwrap_or_default())
                .map_err(|_| gone("the delivery's payload"))?;
        let message = payload["message"]
            .as_str()
            .and_then(|m| MessageId::parse(m).ok())
            .ok_or_else(|| gone("the delivery's message id"))?;
        let message = self
            .inner
            .store
            .message(&message)
            .await
            .map_err(internal)?
            .ok_or_else(|| gone("the message no longer exists"))?;
        let task = self
            .inner
            .store
            .remote_task(&message.thread)
            .await
            .map_err(internal)?
            .ok_or_else(|| gone("the thread is not delegated to a remote agent"))?;
        if d.event_type == REMOTE_SEND {
            let thread = self
                .inner
                .store
                .thread(&message.thread)
                .await
                .map_err(internal)?
                .ok_or_else(|| gone("the thread no longer exists"))?;
            if matches!(thread.state, crate::domain::ThreadState::Closed { .. }) {
                return Err(gone(
                    "the thread was closed before the message was sent; nothing was sent",
                ));
            }
        }
        let target = self
            .remote_target(&task.remote)
            .await
            .map_err(|e| crate::domain::delivery::SendFailure::Request(e.message))?
            .ok_or_else(|| {
                gone(format!(
                    "{} is no longer a registered remote agent",
                    task.remote
                ))
            })?;
        let continue_task = match (&task.task_id, task.state) {
            (Some(id), Some(s)) if message.kind == Kind::Reply && s.is_interrupted() => {
                Some(id.clone())
            }
            (Some(id), _) if d.event_type == REMOTE_CANCEL => Some(id.clone()),
            _ => None,
        };
        let push_token = match &task.sealed_push_token {
            Some(sealed) => Some(
                self.open_secret(&push_token_id(&task.thread), sealed)
                    .map_err(|e| crate::domain::delivery::SendFailure::Request(e.message))?,
            ),
            None => None,
        };
        let declared = self
            .inner
            .store
            .remote(&task.remote)
            .await
            .map_err(internal)?
            .is_some_and(|r| declares_envelope(&r.card));
        let envelope = declared.then(|| crate::domain::Envelope {
            kind: message.kind,
            impact: message.impact,
            result: message.result.clone(),
        });
        Ok(OutboundSend {
            target,
            message,
            task,
            continue_task,
            push_token,
            envelope,
        })
    }

    /// Whether `token` is the push token liaison gave for `thread`'s remote task.
    pub async fn remote_push_token_ok(&self, thread: &ThreadId, token: &str) -> Result<bool> {
        let Some(task) = self.inner.store.remote_task(thread).await? else {
            return Ok(false);
        };
        let Some(sealed) = &task.sealed_push_token else {
            return Ok(false);
        };
        let expected = self.open_secret(&push_token_id(thread), sealed)?;
        Ok(crate::domain::secret::same(&expected, token))
    }

    /// The send an outbound approval holds, for its allow to enqueue.
    pub(super) async fn held_send(&self, a: &crate::store::ApprovalRecord) -> Result<RemoteHop> {
        let message = self
            .inner
            .store
            .message(&a.message)
            .await?
            .ok_or_else(|| ServiceError::not_found("message", &a.message))?;
        let remote = self
            .remote_people(&message.recipients)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| ServiceError::not_found("remote agent", &a.message))?;
        let url = match self.remote_target(&remote).await? {
            Some(t) => t.url,
            None => {
                return Err(ServiceError::invalid(format!(
                    "{remote} is no longer a registered remote agent; the message cannot be sent \
                     (reject the approval to close the thread)"
                )));
            }
        };
        Ok(RemoteHop {
            remote,
            url,
            event_type: REMOTE_SEND,
            held: false,
            start: None,
        })
    }

    /// The cancel of a thread's running remote task, for a close the server posts (none when
    /// no remote task runs).
    pub(super) async fn cancel_hop(&self, thread: &ThreadId) -> Result<Option<RemoteHop>> {
        let Some(task) = self.inner.store.remote_task(thread).await? else {
            return Ok(None);
        };
        if task.task_id.is_none() || task.state.is_some_and(RemoteState::is_terminal) {
            return Ok(None);
        }
        let url = self
            .remote_target(&task.remote)
            .await?
            .map(|t| t.url)
            .unwrap_or_default();
        Ok(Some(RemoteHop {
            remote: task.remote,
            url,
            event_type: REMOTE_CANCEL,
            held: false,
            start: None,
        }))
    }
}
