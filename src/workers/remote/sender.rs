//! The sender: turns a `remote.send` / `remote.cancel` delivery of the outbox into an A2A call
//! (SPEC §8b).
//!
//! `SendMessage` with `returnImmediately` (the task is followed, not waited for), the message id =
//! liaison's message id (so a retried send is the same message to the remote), the thread's
//! `contextId`, the task id when answering an interrupted task, `referenceTaskIds` for a new round,
//! the skill in `metadata.skill`, liaison's envelope (kind, impact, result) under
//! `metadata[ENVELOPE_EXTENSION]` when the remote's card declares it, and, when liaison follows by push, a push config pointing at its
//! own receiver with a token it keeps sealed. What the remote answers is recorded through the
//! service, and the follower ([`super::follower`]) takes over.

use crate::domain::delivery::{SendFailure, SendResult};
use crate::domain::{FollowMode, Timestamp};
use crate::remote::observe::{
    POLL_MIN, PUSH_SAFETY, message_update, ms, send_result, task_gone, task_update,
};
use crate::remote::{A2aClient, PUSH_PATH};
use crate::service::{OutboundSend, Service};
use crate::store::{DeliveryRecord, REMOTE_CANCEL};
use crate::wire::pb;

const DELIVERED: SendResult = SendResult::Status {
    code: 200,
    retry_after: None,
};

/// Sends the outbox's remote deliveries.
#[derive(Clone)]
pub struct Sender {
    service: Service,
    client: A2aClient,
    /// liaison's public URL: the base of the push receiver.
    public_url: String,
}

impl Sender {
    pub fn new(service: Service, client: A2aClient, public_url: String) -> Sender {
        Sender {
            service,
            client,
            public_url,
        }
    }

    /// One attempt of a `remote.send` or `remote.cancel` delivery.
    pub async fn deliver(&self, d: &DeliveryRecord) -> SendResult {
        let send = match self.service.outbound_send(d).await {
            Ok(s) => s,
            Err(f) => return SendResult::Failed(f),
        };
        let thread = send.task.thread.clone();
        if d.event_type == REMOTE_CANCEL {
            return self.cancel(&send).await;
        }
        let request = self.request(&send);
        let answer = match self.client.send_message(&send.target, request).await {
            Ok(a) => a,
            Err(e) => return send_result(&e),
        };
        let update = match &answer.payload {
            Some(pb::send_message_response::Payload::Task(t)) => task_update(t),
            Some(pb::send_message_response::Payload::Message(m)) => message_update(m),
            None => Err("the remote answered SendMessage with neither a task nor a message".into()),
        };
        let update = match update {
            Ok(u) => u,
            Err(why) => return SendResult::Failed(SendFailure::Refused(why)),
        };
        let now = self.service.clock_now();
        let (next, backoff) = first_check(send.task.follow, now);
        match self
            .service
            .remote_started(&thread, update, next, backoff)
            .await
        {
            Ok(()) => DELIVERED,
            // The remote has the message; recording it failed. A retry sends the same message id.
            Err(e) => SendResult::Failed(SendFailure::Request(e.message)),
        }
    }

    async fn cancel(&self, send: &OutboundSend) -> SendResult {
        let Some(task_id) = &send.continue_task else {
            return DELIVERED;
        };
        match self.client.cancel_task(&send.target, task_id).await {
            Ok(task) => {
                if let Ok(update) = task_update(&task) {
                    let now = self.service.clock_now();
                    let _ = self
                        .service
                        .remote_observed(&send.task.thread, update, now, 0)
                        .await;
                }
                DELIVERED
            }
            // The task ended by itself meanwhile, or the remote forgot it: nothing left to cancel.
            Err(e) if task_gone(&e) => DELIVERED,
            Err(e) => send_result(&e),
        }
    }

    /// The `SendMessage` request for a send.
    fn request(&self, send: &OutboundSend) -> pb::SendMessageRequest {
        let m = &send.message;
        let mut metadata = pbjson_types::Struct::default();
        if let Some(skill) = &send.task.skill {
            metadata.fields.insert(
                "skill".into(),
                pbjson_types::Value {
                    kind: Some(pbjson_types::value::Kind::StringValue(skill.clone())),
                },
            );
        }
        let mut extensions = Vec::new();
        if let Some(envelope) = &send.envelope
            && let Ok(value) = serde_json::from_value(envelope.to_json())
        {
            metadata
                .fields
                .insert(crate::domain::ENVELOPE_EXTENSION.into(), value);
            extensions.push(crate::domain::ENVELOPE_EXTENSION.to_owned());
        }
        let reference_task_ids = if send.continue_task.is_none() {
            send.task
                .task_id
                .iter()
                .chain(send.task.earlier_tasks.iter())
                .filter(|id| !id.starts_with("message:"))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        let message = pb::Message {
            message_id: m.id.to_string(),
            context_id: send.task.context_id.clone(),
            task_id: send.continue_task.clone().unwrap_or_default(),
            role: pb::Role::User as i32,
            parts: crate::wire::parts::parts_out(&m.body, &m.attachments),
            metadata: (!metadata.fields.is_empty()).then_some(metadata),
            extensions,
            reference_task_ids,
        };
        let push = send
            .push_token
            .as_ref()
            .map(|token| pb::TaskPushNotificationConfig {
                url: format!(
                    "{}{PUSH_PATH}/{}",
                    self.public_url.trim_end_matches('/'),
                    send.task.thread
                ),
                token: token.clone(),
                ..Default::default()
            });
        pb::SendMessageRequest {
            tenant: send.target.tenant.clone().unwrap_or_default(),
            message: Some(message),
            configuration: Some(pb::SendMessageConfiguration {
                accepted_output_modes: Vec::new(),
                task_push_notification_config: push,
                history_length: Some(0),
                return_immediately: true,
            }),
            metadata: None,
        }
    }
}

/// When the follower first looks at a task a send just recorded.
fn first_check(follow: FollowMode, now: Timestamp) -> (Timestamp, i64) {
    match follow {
        FollowMode::Stream => (now, 0),
        FollowMode::Poll => (Timestamp(now.0 + ms(POLL_MIN)), ms(POLL_MIN)),
        FollowMode::Push => (Timestamp(now.0 + ms(PUSH_SAFETY)), 0),
    }
}
