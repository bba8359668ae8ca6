//! The A2A operations on wire types, shared by the bindings: each takes the authenticated caller
//! and a decoded request, calls the service, and returns wire types or an `A2aError`. A binding only
//! frames (JSON-RPC envelope, REST routes, gRPC) around these.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;

use super::card::{Capabilities, CardSigner};
use super::convert::{self, history_length, task_id};
use super::jwt::JwtVerifier;
use crate::bus::Subscription;
use crate::domain::{TaskState, ThreadId};
use crate::service::{
    Caller, CredentialHold, ErrorCode, Service, ServiceError, StreamPermit, TaskView,
};
use crate::wire::errors::{A2aError, ErrorKind, SpecVersion};
use crate::wire::pb;

/// A stream of responses: SubscribeToTask's ends after a terminal state, SendStreamingMessage's
/// also after an interrupted one (README.md, "Streams").
pub type Events = Pin<Box<dyn Stream<Item = Result<pb::StreamResponse, A2aError>> + Send>>;

#[derive(Clone)]
pub struct A2a {
    service: Service,
    /// How long a blocking SendMessage waits for a terminal or interrupted state.
    blocking_wait: Duration,
    /// The error table the bindings answer with.
    version: SpecVersion,
    /// Signs a party's extended card; `None` when the card does not offer one.
    cards: Option<Arc<CardSigner>>,
    /// What the card declares; an operation of a feature switched off is refused before any
    /// lookup, with the error the spec names for it.
    capabilities: Capabilities,
    /// Accepts JWTs of the configured issuer as party credentials; `None` when not configured.
    jwt: Option<Arc<JwtVerifier>>,
    /// The media type of HTTP+JSON responses.
    rest_content_type: axum::http::HeaderValue,
}

/// The media types an HTTP+JSON response may be labelled with.
pub const REST_CONTENT_TYPES: [&str; 2] = ["application/json", "application/a2a+json"];

/// Where a blocking SendMessage returns: the task ended or asks for input (spec §3.2.2).
fn ends_wait(state: TaskState) -> bool {
    state.is_terminal() || state.is_interrupted()
}

impl A2a {
    /// The operations over `service`, answering with the v1.0.1 error table, without an extended
    /// card or JWT parties (see the `with_*` methods).
    pub fn new(service: Service, blocking_wait: Duration) -> Self {
        Self {
            service,
            blocking_wait,
            version: SpecVersion::default(),
            cards: None,
            capabilities: Capabilities::default(),
            jwt: None,
            rest_content_type: axum::http::HeaderValue::from_static(REST_CONTENT_TYPES[0]),
        }
    }

    /// Labels HTTP+JSON responses with `media`, one of [`REST_CONTENT_TYPES`].
    pub fn with_rest_content_type(mut self, media: &'static str) -> Self {
        debug_assert!(REST_CONTENT_TYPES.contains(&media));
        self.rest_content_type = axum::http::HeaderValue::from_static(media);
        self
    }

    pub fn rest_content_type(&self) -> &axum::http::HeaderValue {
        &self.rest_content_type
    }

    pub fn with_version(mut self, version: SpecVersion) -> Self {
        self.version = version;
        self
    }

    /// Takes the card's capability switches (push notifications, extended card), and serves
    /// GetExtendedAgentCard, signed by `cards`, when the card offers it.
    pub fn with_extended_cards(mut self, cards: Arc<CardSigner>) -> Self {
        self.capabilities = cards.capabilities();
        self.cards = cards.offers_extended_card().then_some(cards);
        self
    }

    /// Sets the capability switches directly (a server takes them from its card with
    /// [`A2a::with_extended_cards`]; without a card, every optional feature is off).
    pub fn with_capabilities(mut self, capabilities: Capabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// The push-notification operations, refused when the card does not offer them.
    fn require_push(&self) -> Result<(), A2aError> {
        if self.capabilities.push_notifications {
            return Ok(());
        }
        Err(A2aError::new(
            ErrorKind::PushNotificationNotSupported,
            "push notifications are not supported by this agent (capabilities.pushNotifications is false); \
             follow the task with SubscribeToTask or GetTask",
        ))
    }

    pub fn with_jwt(mut self, jwt: Arc<JwtVerifier>) -> Self {
        self.jwt = Some(jwt);
        self
    }

    pub fn service(&self) -> &Service {
        &self.service
    }

    /// The spec version whose error table the bindings answer with.
    pub fn version(&self) -> SpecVersion {
        self.version
    }

    /// The caller behind a bearer credential: a token issued by this gateway (`lsn_…`), or a JWT of
    /// the configured issuer whose subject is a party's. Anything else is unauthenticated.
    pub async fn authenticate(&self, credential: &str) -> Result<Caller, ServiceError> {
        match &self.jwt {
            Some(jwt) if JwtVerifier::looks_like_jwt(credential) => {
                let jwt = jwt.verify(credential).await.map_err(|e| {
                    tracing::debug!(error = %e, "A JWT was refused.");
                    ServiceError::new(ErrorCode::Unauthenticated, format!("invalid JWT: {e}"))
                })?;
                self.service
                    .party_caller(&jwt.subject, Some(jwt.expires_at))
                    .await
            }
            _ => self.service.authenticate(credential).await,
        }
    }

    /// GetExtendedAgentCard: the card as this party sees it (only the skills it may use), signed.
    pub async fn extended_card(
        &self,
        caller: &Caller,
        _req: pb::GetExtendedAgentCardRequest,
    ) -> Result<pb::AgentCard, A2aError> {
        if !self.capabilities.extended_agent_card {
            return Err(A2aError::new(
                ErrorKind::UnsupportedOperation,
                "this agent has no extended card (capabilities.extendedAgentCard is false)",
            ));
        }
        let cards = self
            .cards
            .as_ref()
            .ok_or_else(|| A2aError::of(ErrorKind::ExtendedAgentCardNotConfigured))?;
        let skills = self.service.skills_for(caller).await?;
        let ids: Vec<&str> = skills.iter().map(|s| s.id.as_str()).collect();
        cards.extended(&ids).map_err(|e| {
            tracing::error!(error = %e, "Could not sign an extended card.");
            A2aError::new(ErrorKind::InternalError, "could not sign the extended card")
        })
    }

    /// Sends a message; unless `returnImmediately`, waits (up to the configured cap) for the task to
    /// end or ask for input, then returns it as it stands, or the team's answer as a bare message
    /// when it is a direct one (SPEC §8 "Direct answers"; never when the send asked for pushes,
    /// which follow the task).
    pub async fn send_message(
        &self,
        caller: &Caller,
        req: pb::SendMessageRequest,
    ) -> Result<pb::SendMessageResponse, A2aError> {
        use pb::send_message_response::Payload;
        let config = req.configuration.clone().unwrap_or_default();
        let view = self.send(caller, req).await?;
        let id = view.thread.id.clone();
        let view = if config.return_immediately {
            view
        } else {
            self.wait_for_end(caller, &id, view).await?
        };
        if config.task_push_notification_config.is_none()
            && let Some(answer) = self.direct_answer(&view)
        {
            return Ok(pb::SendMessageResponse {
                payload: Some(Payload::Message(answer)),
            });
        }
        let view = self
            .trim(caller, &id, view, history_length(config.history_length)?)
            .await?;
        Ok(pb::SendMessageResponse {
            payload: Some(Payload::Task(convert::task(&view, true))),
        })
    }

    /// The team's direct answer in `view` (a whole task), as the message the party receives.
    fn direct_answer(&self, view: &TaskView) -> Option<pb::Message> {
        self.service
            .direct_answer(view)
            .map(|reply| convert::direct_message(reply, &view.thread))
    }

    async fn send(
        &self,
        caller: &Caller,
        req: pb::SendMessageRequest,
    ) -> Result<TaskView, A2aError> {
        let message = req
            .message
            .ok_or_else(|| A2aError::new(ErrorKind::InvalidParams, "message is required"))?;
        let message = convert::incoming_message(message)?;
        let push = req
            .configuration
            .and_then(|c| c.task_push_notification_config);
        if push.is_some() {
            // Refused before the message is taken: nothing changes.
            self.require_push()?;
        }
        let view = self.service.send_task_message(caller, message).await?;
        if let Some(push) = push {
            self.create_push(caller, &view.thread.id, push).await?;
        }
        Ok(view)
    }

    /// Blocking SendMessage's wait: returns the task once it has ended or asks for input, or as
    /// it stands after the configured cap. `seen` is the task as the send read it, which may be
    /// stale by now (the agent may have answered since): the wait subscribes first and then reads
    /// the task again, so an answer committed at any point is either read or wakes the wait.
    pub async fn wait_for_end(
        &self,
        caller: &Caller,
        id: &ThreadId,
        seen: TaskView,
    ) -> Result<TaskView, A2aError> {
        if ends_wait(seen.state()) {
            return Ok(seen);
        }
        let deadline = tokio::time::Instant::now() + self.blocking_wait;
        let hold = self.service.hold_credential(caller).await?;
        // Whatever changed since `seen` shows in this read, made once subscribed.
        let (now, mut sub) = self
            .service
            .task_when_subscribed(caller, id, ends_wait)
            .await?;
        if let Some(view) = now {
            return Ok(view);
        }
        // Each wake-up reads the task's thread alone; its messages only once the wait ends (a
        // claim wakes it too, and moves the task to WORKING only). The credential is read again
        // only when there is something to hand over, after what is handed over was read: a
        // revocation committed before that read refuses it, and one after it ends the hold.
        loop {
            tokio::select! {
                () = sub.woken() => {}
                () = tokio::time::sleep_until(deadline) => {
                    return Ok(self.service.task(caller, id, None).await?);
                }
                // What the wait would return is no longer the caller's to read.
                why = hold.ended() => return Err(why.into()),
            }
            hold.check()?;
            if let Some(view) = self.service.task_when(caller, id, ends_wait).await? {
                hold.check()?;
                self.service.check_credential(caller).await?;
                return Ok(view);
            }
        }
    }

    async fn trim(
        &self,
        caller: &Caller,
        id: &ThreadId,
        view: TaskView,
        n: Option<usize>,
    ) -> Result<TaskView, A2aError> {
        match n {
            None => Ok(view),
            Some(_) => Ok(self.service.task(caller, id, n).await?),
        }
    }

    /// SendStreamingMessage: the task snapshot, then its events until it ends or asks for input
    /// (§11.7, like blocking SendMessage: the answer goes in a new request, with its own stream).
    /// On a conversational skill the stream first waits (up to the blocking cap) for the task's
    /// first event: a direct answer is then the stream's only item, a `Message`; anything else
    /// streams the task from the snapshot taken at the send, so no event is lost.
    pub async fn send_streaming(
        &self,
        caller: &Caller,
        req: pb::SendMessageRequest,
    ) -> Result<Events, A2aError> {
        let permit = self.service.open_stream(caller)?;
        let hold = self.service.hold_credential(caller).await?;
        let pushes = req
            .configuration
            .as_ref()
            .is_some_and(|c| c.task_push_notification_config.is_some());
        let view = self.send(caller, req).await?;
        if !pushes && self.service.answers_directly(&view) {
            // Only a task nothing has happened to yet is held; a retry of an answered message
            // has its answer, or its task, already. The wait ends with the credential, and the
            // answer is handed over only while the credential still stands.
            let answer = if view.state() == TaskState::Submitted {
                let after = view.thread.task.as_ref().map_or(0, |t| t.last_event);
                tokio::select! {
                    waited = self.first_event(caller, &view.thread.id, after) => waited?,
                    why = hold.ended() => return Err(why.into()),
                }
                let now = self.service.task(caller, &view.thread.id, None).await?;
                self.direct_answer(&now)
            } else {
                self.direct_answer_of_retry(caller, &view).await?
            };
            if let Some(answer) = answer {
                hold.check()?;
                self.service.check_credential(caller).await?;
                return Ok(one_message(answer, permit));
            }
        }
        Ok(self.follow(caller.clone(), view, ends_wait, (permit, hold)))
    }

    /// The direct answer a retried message already has, if the send's view is of an answered
    /// task (the view of a retry may hold only part of the history, so it is read whole).
    async fn direct_answer_of_retry(
        &self,
        caller: &Caller,
        view: &TaskView,
    ) -> Result<Option<pb::Message>, A2aError> {
        if view.state() != TaskState::Completed {
            return Ok(None);
        }
        let whole = self.service.task(caller, &view.thread.id, None).await?;
        Ok(self.direct_answer(&whole))
    }

    /// Waits until task `id` logs an event after `after`, up to the blocking cap (or until the
    /// server stops).
    async fn first_event(
        &self,
        caller: &Caller,
        id: &ThreadId,
        after: i64,
    ) -> Result<(), A2aError> {
        let deadline = tokio::time::Instant::now() + self.blocking_wait;
        let (events, mut sub) = self.service.task_events(caller, id, after, true).await?;
        let sub = sub.as_mut().expect("asked for a subscription");
        if !events.is_empty() {
            return Ok(());
        }
        loop {
            tokio::select! {
                () = sub.woken() => {}
                () = tokio::time::sleep_until(deadline) => return Ok(()),
                () = self.service.stopping() => return Ok(()),
            }
            let (events, _) = self.service.task_events(caller, id, after, false).await?;
            if !events.is_empty() {
                return Ok(());
            }
        }
    }

    /// SubscribeToTask: the snapshot, then the task's events until it ends (§3.1.6), through any
    /// INPUT_REQUIRED on the way; an ended task cannot be followed.
    pub async fn subscribe(
        &self,
        caller: &Caller,
        req: pb::SubscribeToTaskRequest,
    ) -> Result<Events, A2aError> {
        let id = task_id(&req.id)?;
        let permit = self.service.open_stream(caller)?;
        let hold = self.service.hold_credential(caller).await?;
        let view = self.service.task(caller, &id, None).await?;
        if view.state().is_terminal() {
            return Err(A2aError::new(
                ErrorKind::UnsupportedOperation,
                format!("task {id} has ended; get it with GetTask"),
            ));
        }
        Ok(self.follow(caller.clone(), view, TaskState::is_terminal, (permit, hold)))
    }

    /// The task's stream, closed after the first event whose state `ends`; `permit` counts the
    /// stream against the party's limit while it is open. It ends with the caller's credential
    /// (revoked, removed, expired), its last item the error a new request would get.
    fn follow(
        &self,
        caller: Caller,
        view: TaskView,
        ends: fn(TaskState) -> bool,
        (permit, hold): (StreamPermit, CredentialHold),
    ) -> Events {
        use futures::StreamExt as _;
        let service = self.service.clone();
        let events = async_stream(service, caller, view, ends).inspect(move |_| {
            let _ = &permit;
        });
        Box::pin(hold.bound(events, |why| Some(Err(why.into()))))
    }

    pub async fn get_task(
        &self,
        caller: &Caller,
        req: pb::GetTaskRequest,
    ) -> Result<pb::Task, A2aError> {
        let id = task_id(&req.id)?;
        let view = self
            .service
            .task(caller, &id, history_length(req.history_length)?)
            .await?;
        Ok(convert::task(&view, true))
    }

    pub async fn list_tasks(
        &self,
        caller: &Caller,
        req: pb::ListTasksRequest,
    ) -> Result<pb::ListTasksResponse, A2aError> {
        let filter = convert::list_filter(&req)?;
        let page_size = i32::try_from(filter.limit).unwrap_or(i32::MAX);
        let history = history_length(req.history_length)?;
        let listing = self
            .service
            .list_tasks(caller, filter, Some(req.page_token.as_str()), history)
            .await?;
        let include_artifacts = req.include_artifacts.unwrap_or(false);
        let tasks = listing
            .tasks
            .iter()
            .map(|v| {
                let mut t = convert::task(v, history != Some(0));
                if !include_artifacts {
                    t.artifacts.clear();
                }
                t
            })
            .collect();
        Ok(pb::ListTasksResponse {
            tasks,
            next_page_token: listing.next_page_token.unwrap_or_default(),
            page_size,
            total_size: i32::try_from(listing.total).unwrap_or(i32::MAX),
        })
    }

    pub async fn cancel_task(
        &self,
        caller: &Caller,
        req: pb::CancelTaskRequest,
    ) -> Result<pb::Task, A2aError> {
        let id = task_id(&req.id)?;
        let view = self.service.cancel_task(caller, &id).await?;
        Ok(convert::task(&view, true))
    }

    async fn create_push(
        &self,
        caller: &Caller,
        task: &ThreadId,
        c: pb::TaskPushNotificationConfig,
    ) -> Result<pb::TaskPushNotificationConfig, A2aError> {
        let spec = convert::push_spec(c)?;
        let record = self.service.set_push_config(caller, task, spec).await?;
        Ok(convert::push_config(&record))
    }

    pub async fn create_push_config(
        &self,
        caller: &Caller,
        c: pb::TaskPushNotificationConfig,
    ) -> Result<pb::TaskPushNotificationConfig, A2aError> {
        self.require_push()?;
        let task = task_id(&c.task_id)?;
        self.create_push(caller, &task, c).await
    }

    pub async fn get_push_config(
        &self,
        caller: &Caller,
        req: pb::GetTaskPushNotificationConfigRequest,
    ) -> Result<pb::TaskPushNotificationConfig, A2aError> {
        self.require_push()?;
        let task = task_id(&req.task_id)?;
        let configs = self.service.push_configs(caller, &task).await?;
        configs
            .iter()
            .find(|c| c.id == req.id)
            .map(convert::push_config)
            .ok_or_else(|| {
                A2aError::new(
                    ErrorKind::TaskNotFound,
                    format!("no push notification config {}", req.id),
                )
            })
    }

    pub async fn list_push_configs(
        &self,
        caller: &Caller,
        req: pb::ListTaskPushNotificationConfigsRequest,
    ) -> Result<pb::ListTaskPushNotificationConfigsResponse, A2aError> {
        self.require_push()?;
        let task = task_id(&req.task_id)?;
        let configs = self.service.push_configs(caller, &task).await?;
        Ok(pb::ListTaskPushNotificationConfigsResponse {
            configs: configs.iter().map(convert::push_config).collect(),
            next_page_token: String::new(),
        })
    }

    pub async fn delete_push_config(
        &self,
        caller: &Caller,
        req: pb::DeleteTaskPushNotificationConfigRequest,
    ) -> Result<(), A2aError> {
        self.require_push()?;
        let task = task_id(&req.task_id)?;
        Ok(self
            .service
            .delete_push_config(caller, &task, &req.id)
            .await?)
    }
}

/// A stream of one direct answer; `permit` counts it against the party's streams until sent.
fn one_message(answer: pb::Message, permit: StreamPermit) -> Events {
    let item = pb::StreamResponse {
        payload: Some(pb::stream_response::Payload::Message(answer)),
    };
    Box::pin(futures::stream::once(async move {
        let _ = &permit;
        Ok(item)
    }))
}

/// The task snapshot first, then every logged event after it, rendered in order, until the task
/// reaches a state that `ends` the stream. Every follower reads the same persisted log, so all see the same
/// sequence.
fn async_stream(
    service: Service,
    caller: Caller,
    view: TaskView,
    ends: fn(TaskState) -> bool,
) -> impl Stream<Item = Result<pb::StreamResponse, A2aError>> + Send {
    let follower = Follower {
        first: Some(pb::StreamResponse {
            payload: Some(pb::stream_response::Payload::Task(convert::task(
                &view, true,
            ))),
        }),
        queue: VecDeque::new(),
        after: view.thread.task.as_ref().map_or(0, |t| t.last_event),
        done: ends(view.state()),
        ends,
        subscription: None,
        id: view.thread.id,
        service,
        caller,
    };
    futures::stream::unfold(follower, |mut f| async move {
        f.next().await.map(|item| (item, f))
    })
}

/// The state of one task stream.
struct Follower {
    service: Service,
    caller: Caller,
    id: ThreadId,
    /// The snapshot, until sent.
    first: Option<pb::StreamResponse>,
    /// Rendered events not sent yet.
    queue: VecDeque<pb::StreamResponse>,
    /// The last event read from the log.
    after: i64,
    /// Which states close the stream.
    ends: fn(TaskState) -> bool,
    /// An ending event was read (or the snapshot ended the task): stop once the queue is empty.
    done: bool,
    /// Wakes when the task logs an event; taken on the first read of the log.
    subscription: Option<Subscription>,
}

impl Follower {
    async fn next(&mut self) -> Option<Result<pb::StreamResponse, A2aError>> {
        if let Some(first) = self.first.take() {
            return Some(Ok(first));
        }
        loop {
            if let Some(item) = self.queue.pop_front() {
                return Some(Ok(item));
            }
            if self.done {
                return None;
            }
            match self.read().await {
                Ok(true) => {}
                // The server stopping ends the stream, so shutdown is not held open.
                Ok(false) => return None,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }

    /// Renders the events logged after `after` into the queue, first waiting for one if there are
    /// none. `false` when the server is stopping.
    async fn read(&mut self) -> Result<bool, A2aError> {
        let (events, fresh) = self
            .service
            .task_events(
                &self.caller,
                &self.id,
                self.after,
                self.subscription.is_none(),
            )
            .await?;
        if fresh.is_some() {
            self.subscription = fresh;
        }
        if events.is_empty() {
            if let Some(s) = self.subscription.as_mut() {
                tokio::select! {
                    () = s.woken() => {}
                    () = self.service.stopping() => return Ok(false),
                }
            }
            return Ok(true);
        }
        // What was read is handed over only while the credential stands (its hold ends an idle
        // stream; this catches a write that raced the revocation's notice).
        self.service.check_credential(&self.caller).await?;
        let view = self.service.task(&self.caller, &self.id, Some(0)).await?;
        let (thread, approval) = (view.thread, view.approval);
        for ev in events {
            self.after = ev.seq;
            let cause = match &ev.message {
                Some(m) => self.service.task_message(&self.caller, m).await.ok(),
                None => None,
            };
            self.queue.extend(convert::event(
                &ev,
                &thread,
                cause.as_ref(),
                approval.as_ref(),
            ));
            if (self.ends)(ev.state) {
                self.done = true;
                break;
            }
        }
        Ok(true)
    }
}
