//! The gRPC binding of A2A (`lf.a2a.v1.A2AService`) over the service layer.
//!
//! Every RPC checks `a2a-version`, authenticates the `authorization: Bearer …` metadata, decodes
//! with [`convert`], calls the service, encodes with [`convert`] and maps errors through the one
//! error table (`convert::service_error(e).grpc_status(version)`).
//!
//! Streams (SendStreamingMessage, SubscribeToTask) send the Task snapshot first, then the task's
//! logged events after the snapshot's `last_event`, waiting on the task's bus subscription. A
//! stream ends after an event in a terminal or interrupted (`INPUT_REQUIRED`) state. A
//! SendStreamingMessage whose snapshot is already terminal or interrupted ends after the snapshot;
//! SubscribeToTask refuses a terminal task (UnsupportedOperation) and, on an interrupted task,
//! waits for the next terminal or interrupted event.
//!
//! Blocking SendMessage (no `returnImmediately`) waits on the task's subscription up to
//! [`BLOCKING_WAIT`] for a terminal or interrupted state, then returns the task as it stands.
//!
//! Authentication failures are plain `UNAUTHENTICATED` statuses (no A2A error covers them).
//! gRPC is served on the main port as HTTP/2 cleartext: [`grpc_routes`] is an axum router to merge.

use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use tokio::sync::mpsc;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use super::convert::{self, history_length, push_spec, task_id};
use super::errors::{A2aError, ErrorKind, SpecVersion};
use super::params::check_grpc_version;
use super::pb;
use super::pb::a2a_service_server::{A2aService, A2aServiceServer};
use crate::domain::{TaskState, ThreadId, Timestamp};
use crate::service::{
    Caller, ErrorCode, PushConfigSpec, Service, ServiceError, TaskMessage, TaskView,
};
use crate::store::{PushConfigRecord, TaskFilter};

/// Longest a blocking SendMessage waits for a terminal or interrupted state.
pub const BLOCKING_WAIT: Duration = Duration::from_secs(30);
/// ListTasks page size when the request gives none.
const DEFAULT_PAGE_SIZE: i64 = 50;
/// Stream responses buffered per stream before the producer waits for the client.
const STREAM_BUFFER: usize = 16;

/// The gRPC routes (`/lf.a2a.v1.A2AService/*`) as an axum router, to merge into the main router
/// (served on the same port; the client speaks HTTP/2 cleartext).
///
/// Only the service's own path prefix is routed and the router has no fallback (tonic's `Routes`
/// would add one answering `UNIMPLEMENTED` to every other path, and axum refuses to merge two
/// routers that both have a fallback).
pub fn grpc_routes(service: Service, version: SpecVersion) -> axum::Router {
    use tonic::server::NamedService as _;
    let server = A2aServiceServer::new(GrpcA2a::new(service, version));
    let path = format!("/{}/{{*rpc}}", A2aServiceServer::<GrpcA2a>::NAME);
    axum::Router::new().route_service(&path, server)
}

/// The A2A gRPC service: the tonic trait over [`Service`].
#[derive(Clone)]
pub struct GrpcA2a {
    service: Service,
    version: SpecVersion,
}

type ResponseStream = Pin<Box<dyn Stream<Item = Result<pb::StreamResponse, Status>> + Send>>;

impl GrpcA2a {
    pub fn new(service: Service, version: SpecVersion) -> Self {
        GrpcA2a { service, version }
    }

    fn a2a(&self, e: A2aError) -> Status {
        e.grpc_status(self.version)
    }

    fn svc(&self, e: ServiceError) -> Status {
        if e.code == ErrorCode::Internal {
            tracing::error!(error = %e.message, "A2A gRPC call failed");
        }
        self.a2a(convert::service_error(e))
    }

    /// The version check and authentication every RPC starts with.
    async fn begin(&self, metadata: &MetadataMap) -> Result<Caller, Status> {
        check_grpc_version(metadata).map_err(|e| self.a2a(e))?;
        let secret = bearer(metadata).ok_or_else(|| {
            Status::unauthenticated("send the metadata authorization: Bearer <token>")
        })?;
        match self.service.authenticate(secret).await {
            Ok(caller) => Ok(caller),
            Err(e) if is_auth_failure(e.code) => Err(Status::unauthenticated(e.message)),
            Err(e) => Err(self.svc(e)),
        }
    }

    /// Sends the message of a SendMessage request; returns the task and the requested history.
    async fn send(
        &self,
        caller: &Caller,
        req: pb::SendMessageRequest,
    ) -> Result<(TaskView, SendOptions), Status> {
        let (msg, options) = decode_send(req).map_err(|e| self.a2a(e))?;
        let view = self
            .service
            .send_task_message(caller, msg)
            .await
            .map_err(|e| self.svc(e))?;
        if let Some(spec) = options.push.clone() {
            self.service
                .set_push_config(caller, &view.thread.id, spec)
                .await
                .map_err(|e| self.svc(e))?;
        }
        Ok((view, options))
    }

    /// Waits on the task's subscription until it is terminal or interrupted, or `limit` passes.
    async fn wait_settled(
        &self,
        caller: &Caller,
        id: &ThreadId,
        mut after: i64,
        limit: Duration,
    ) -> Result<(), Status> {
        let deadline = tokio::time::Instant::now() + limit;
        let (events, sub) = self
            .service
            .task_events(caller, id, after, true)
            .await
            .map_err(|e| self.svc(e))?;
        let Some(mut sub) = sub else { return Ok(()) };
        let mut events = events;
        loop {
            for ev in &events {
                after = after.max(ev.seq);
                if settled(ev.state) {
                    return Ok(());
                }
            }
            if tokio::time::timeout_at(deadline, sub.woken())
                .await
                .is_err()
            {
                return Ok(());
            }
            events = self
                .service
                .task_events(caller, id, after, false)
                .await
                .map_err(|e| self.svc(e))?
                .0;
        }
    }

    /// A stream of the snapshot, then the task's events after it, until a terminal or
    /// interrupted event (or right after the snapshot when `end_if_settled` and it is settled).
    fn stream(
        &self,
        caller: Caller,
        snapshot: TaskView,
        include_history: bool,
        end_if_settled: bool,
    ) -> ResponseStream {
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let this = self.clone();
        tokio::spawn(async move {
            let first = pb::StreamResponse {
                payload: Some(pb::stream_response::Payload::Task(convert::task(
                    &snapshot,
                    include_history,
                ))),
            };
            if tx.send(Ok(first)).await.is_err() {
                return;
            }
            if end_if_settled && settled(snapshot.state()) {
                return;
            }
            if let Err(status) = this.follow(&caller, &snapshot, &tx).await {
                let _ = tx.send(Err(status)).await;
            }
        });
        Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        }))
    }

    /// Sends the events after the snapshot until a terminal or interrupted one, or the client
    /// goes away.
    async fn follow(
        &self,
        caller: &Caller,
        snapshot: &TaskView,
        tx: &mpsc::Sender<Result<pb::StreamResponse, Status>>,
    ) -> Result<(), Status> {
        let thread = &snapshot.thread;
        let mut after = thread.task.as_ref().map_or(0, |t| t.last_event);
        let (mut events, sub) = self
            .service
            .task_events(caller, &thread.id, after, true)
            .await
            .map_err(|e| self.svc(e))?;
        let Some(mut sub) = sub else { return Ok(()) };
        loop {
            for ev in &events {
                after = after.max(ev.seq);
                let cause = match convert::event_message(ev) {
                    Some(id) => Some(
                        self.service
                            .task_message(caller, id)
                            .await
                            .map_err(|e| self.svc(e))?,
                    ),
                    None => None,
                };
                for item in convert::event(ev, thread, cause.as_ref()) {
                    if tx.send(Ok(item)).await.is_err() {
                        return Ok(());
                    }
                }
                if settled(ev.state) {
                    return Ok(());
                }
            }
            tokio::select! {
                () = sub.woken() => {}
                () = tx.closed() => return Ok(()),
                () = self.service.stopping() => return Ok(()),
            }
            events = self
                .service
                .task_events(caller, &thread.id, after, false)
                .await
                .map_err(|e| self.svc(e))?
                .0;
        }
    }

    /// One push config of a task, by id.
    async fn push_config(
        &self,
        caller: &Caller,
        task: &ThreadId,
        id: &str,
    ) -> Result<PushConfigRecord, Status> {
        self.service
            .push_configs(caller, task)
            .await
            .map_err(|e| self.svc(e))?
            .into_iter()
            .find(|c| c.id == id)
            .ok_or_else(|| self.svc(ServiceError::not_found("push notification config", id)))
    }
}

/// Terminal or interrupted: where a blocking send stops waiting and a stream ends.
fn settled(state: TaskState) -> bool {
    state.is_terminal() || state.is_interrupted()
}

fn is_auth_failure(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::Unauthenticated | ErrorCode::TokenExpired | ErrorCode::TokenRevoked
    )
}

/// The bearer secret of the `authorization` metadata.
fn bearer(metadata: &MetadataMap) -> Option<&str> {
    let value = metadata.get("authorization")?.to_str().ok()?;
    let secret = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))?
        .trim();
    (!secret.is_empty()).then_some(secret)
}

/// What a SendMessage request asks besides the message.
#[derive(Debug, Clone, Default)]
struct SendOptions {
    return_immediately: bool,
    history_length: Option<usize>,
    push: Option<PushConfigSpec>,
}

fn invalid(why: impl Into<String>) -> A2aError {
    A2aError::new(ErrorKind::InvalidParams, why)
}

fn decode_send(req: pb::SendMessageRequest) -> Result<(TaskMessage, SendOptions), A2aError> {
    let message = req.message.ok_or_else(|| invalid("message is required"))?;
    let msg = convert::incoming_message(message)?;
    let config = req.configuration.unwrap_or_default();
    let options = SendOptions {
        return_immediately: config.return_immediately,
        history_length: history_length(config.history_length)?,
        push: config
            .task_push_notification_config
            .map(push_spec)
            .transpose()?,
    };
    Ok((msg, options))
}

fn list_filter(req: &pb::ListTasksRequest) -> Result<TaskFilter, A2aError> {
    let state = pb::TaskState::try_from(req.status)
        .map_err(|_| invalid(format!("unknown status {}", req.status)))?;
    let updated_since = req
        .status_timestamp_after
        .map(|t| {
            if !(0..1_000_000_000).contains(&t.nanos) {
                return Err(invalid("statusTimestampAfter has invalid nanos"));
            }
            t.seconds
                .checked_mul(1000)
                .and_then(|ms| ms.checked_add((i64::from(t.nanos) + 999_999) / 1_000_000))
                .map(Timestamp)
                .ok_or_else(|| invalid("statusTimestampAfter is out of range"))
        })
        .transpose()?;
    Ok(TaskFilter {
        context_id: (!req.context_id.is_empty()).then(|| req.context_id.clone()),
        state: convert::task_state_filter(state)?,
        updated_since,
        limit: req.page_size.map_or(DEFAULT_PAGE_SIZE, i64::from),
        offset: 0,
    })
}

#[tonic::async_trait]
impl A2aService for GrpcA2a {
    async fn send_message(
        &self,
        request: Request<pb::SendMessageRequest>,
    ) -> Result<Response<pb::SendMessageResponse>, Status> {
        let caller = self.begin(request.metadata()).await?;
        let (view, options) = self.send(&caller, request.into_inner()).await?;
        let id = view.thread.id.clone();
        let view = if options.return_immediately || settled(view.state()) {
            match options.history_length {
                None => view,
                Some(n) => self
                    .service
                    .task(&caller, &id, Some(n))
                    .await
                    .map_err(|e| self.svc(e))?,
            }
        } else {
            let after = view.thread.task.as_ref().map_or(0, |t| t.last_event);
            self.wait_settled(&caller, &id, after, BLOCKING_WAIT)
                .await?;
            self.service
                .task(&caller, &id, options.history_length)
                .await
                .map_err(|e| self.svc(e))?
        };
        let include_history = options.history_length != Some(0);
        Ok(Response::new(pb::SendMessageResponse {
            payload: Some(pb::send_message_response::Payload::Task(convert::task(
                &view,
                include_history,
            ))),
        }))
    }

    type SendStreamingMessageStream = ResponseStream;

    async fn send_streaming_message(
        &self,
        request: Request<pb::SendMessageRequest>,
    ) -> Result<Response<Self::SendStreamingMessageStream>, Status> {
        let caller = self.begin(request.metadata()).await?;
        let (view, options) = self.send(&caller, request.into_inner()).await?;
        let view = match options.history_length {
            None | Some(0) => view,
            Some(n) => self
                .service
                .task(&caller, &view.thread.id, Some(n))
                .await
                .map_err(|e| self.svc(e))?,
        };
        let include_history = options.history_length != Some(0);
        Ok(Response::new(self.stream(
            caller,
            view,
            include_history,
            true,
        )))
    }

    async fn get_task(
        &self,
        request: Request<pb::GetTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let caller = self.begin(request.metadata()).await?;
        let req = request.into_inner();
        let id = task_id(&req.id).map_err(|e| self.a2a(e))?;
        let history = history_length(req.history_length).map_err(|e| self.a2a(e))?;
        let view = self
            .service
            .task(&caller, &id, history)
            .await
            .map_err(|e| self.svc(e))?;
        Ok(Response::new(convert::task(&view, history != Some(0))))
    }

    async fn list_tasks(
        &self,
        request: Request<pb::ListTasksRequest>,
    ) -> Result<Response<pb::ListTasksResponse>, Status> {
        let caller = self.begin(request.metadata()).await?;
        let req = request.into_inner();
        let filter = list_filter(&req).map_err(|e| self.a2a(e))?;
        let history = history_length(req.history_length).map_err(|e| self.a2a(e))?;
        let listing = self
            .service
            .list_tasks(&caller, filter, Some(req.page_token.as_str()), history)
            .await
            .map_err(|e| self.svc(e))?;
        let include_artifacts = req.include_artifacts.unwrap_or(false);
        let tasks = listing
            .tasks
            .iter()
            .map(|view| {
                let mut task = convert::task(view, history != Some(0));
                if !include_artifacts {
                    task.artifacts.clear();
                }
                task
            })
            .collect();
        Ok(Response::new(pb::ListTasksResponse {
            tasks,
            next_page_token: listing.next_page_token.unwrap_or_default(),
            page_size: i32::try_from(listing.page_size).unwrap_or(i32::MAX),
            total_size: i32::try_from(listing.total).unwrap_or(i32::MAX),
        }))
    }

    async fn cancel_task(
        &self,
        request: Request<pb::CancelTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let caller = self.begin(request.metadata()).await?;
        let id = task_id(&request.get_ref().id).map_err(|e| self.a2a(e))?;
        let view = self
            .service
            .cancel_task(&caller, &id)
            .await
            .map_err(|e| self.svc(e))?;
        Ok(Response::new(convert::task(&view, true)))
    }

    type SubscribeToTaskStream = ResponseStream;

    async fn subscribe_to_task(
        &self,
        request: Request<pb::SubscribeToTaskRequest>,
    ) -> Result<Response<Self::SubscribeToTaskStream>, Status> {
        let caller = self.begin(request.metadata()).await?;
        let id = task_id(&request.get_ref().id).map_err(|e| self.a2a(e))?;
        let view = self
            .service
            .task(&caller, &id, None)
            .await
            .map_err(|e| self.svc(e))?;
        let state = view.state();
        if state.is_terminal() {
            return Err(self.a2a(A2aError::new(
                ErrorKind::UnsupportedOperation,
                format!("task {id} is {state}; a terminal task has no updates to subscribe to"),
            )));
        }
        Ok(Response::new(self.stream(caller, view, true, false)))
    }

    async fn create_task_push_notification_config(
        &self,
        request: Request<pb::TaskPushNotificationConfig>,
    ) -> Result<Response<pb::TaskPushNotificationConfig>, Status> {
        let caller = self.begin(request.metadata()).await?;
        let req = request.into_inner();
        let task = task_id(&req.task_id).map_err(|e| self.a2a(e))?;
        let spec = push_spec(req).map_err(|e| self.a2a(e))?;
        let record = self
            .service
            .set_push_config(&caller, &task, spec)
            .await
            .map_err(|e| self.svc(e))?;
        Ok(Response::new(convert::push_config(&record)))
    }

    async fn get_task_push_notification_config(
        &self,
        request: Request<pb::GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pb::TaskPushNotificationConfig>, Status> {
        let caller = self.begin(request.metadata()).await?;
        let req = request.into_inner();
        let task = task_id(&req.task_id).map_err(|e| self.a2a(e))?;
        let record = self.push_config(&caller, &task, &req.id).await?;
        Ok(Response::new(convert::push_config(&record)))
    }

    async fn list_task_push_notification_configs(
        &self,
        request: Request<pb::ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<pb::ListTaskPushNotificationConfigsResponse>, Status> {
        let caller = self.begin(request.metadata()).await?;
        let req = request.into_inner();
        let task = task_id(&req.task_id).map_err(|e| self.a2a(e))?;
        let configs = self
            .service
            .push_configs(&caller, &task)
            .await
            .map_err(|e| self.svc(e))?;
        // A task has few configs: one page holds them all.
        Ok(Response::new(pb::ListTaskPushNotificationConfigsResponse {
            configs: configs.iter().map(convert::push_config).collect(),
            next_page_token: String::new(),
        }))
    }

    async fn get_extended_agent_card(
        &self,
        request: Request<pb::GetExtendedAgentCardRequest>,
    ) -> Result<Response<pb::AgentCard>, Status> {
        self.begin(request.metadata()).await?;
        Err(self.a2a(A2aError::of(ErrorKind::ExtendedAgentCardNotConfigured)))
    }

    async fn delete_task_push_notification_config(
        &self,
        request: Request<pb::DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pbjson_types::Empty>, Status> {
        let caller = self.begin(request.metadata()).await?;
        let req = request.into_inner();
        let task = task_id(&req.task_id).map_err(|e| self.a2a(e))?;
        self.service
            .delete_push_config(&caller, &task, &req.id)
            .await
            .map_err(|e| self.svc(e))?;
        Ok(Response::new(pbjson_types::Empty {}))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::StreamExt as _;
    use tonic::Code;
    use tonic_types::StatusExt as _;

    use super::*;
    use crate::bus::LocalBus;
    use crate::clock::ManualClock;
    use crate::domain::{AgentIdentity, ChannelName, Kind, PersonId, PersonKind, Scope, Scopes};
    use crate::service::{ChannelSpec, PostRequest, Settings, SkillRoute, TokenSpec};
    use crate::store::Store;

    fn text(t: &str) -> pb::Part {
        pb::Part {
            content: Some(pb::part::Content::Text(t.into())),
            ..Default::default()
        }
    }

    fn user_message(id: &str, body: &str) -> pb::Message {
        pb::Message {
            message_id: id.into(),
            role: pb::Role::User as i32,
            parts: vec![text(body)],
            ..Default::default()
        }
    }

    fn reason(status: &Status) -> String {
        status
            .get_details_error_info()
            .expect("ErrorInfo in the status details")
            .reason
    }

    #[test]
    fn send_requests_decode_message_and_options() {
        let req = pb::SendMessageRequest {
            message: Some(user_message("m1", "hello")),
            configuration: Some(pb::SendMessageConfiguration {
                return_immediately: true,
                history_length: Some(3),
                task_push_notification_config: Some(pb::TaskPushNotificationConfig {
                    url: "https://hooks.test/a2a".into(),
                    token: "tok".into(),
                    authentication: Some(pb::AuthenticationInfo {
                        scheme: "Bearer".into(),
                        credentials: "secret".into(),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let (msg, options) = decode_send(req).unwrap();
        assert_eq!(msg.message_id, "m1");
        assert_eq!(msg.body, "hello");
        assert!(options.return_immediately);
        assert_eq!(options.history_length, Some(3));
        let push = options.push.unwrap();
        assert_eq!(push.id, None);
        assert_eq!(push.url, "https://hooks.test/a2a");
        assert_eq!(push.token.as_deref(), Some("tok"));
        assert_eq!(push.auth_scheme.as_deref(), Some("Bearer"));
        assert_eq!(push.auth_credentials.as_deref(), Some("secret"));

        let (_, defaults) = decode_send(pb::SendMessageRequest {
            message: Some(user_message("m2", "x")),
            ..Default::default()
        })
        .unwrap();
        assert!(!defaults.return_immediately);
        assert_eq!(defaults.history_length, None);
        assert!(defaults.push.is_none());
    }

    #[test]
    fn bad_send_requests_are_invalid_params() {
        let no_message = decode_send(pb::SendMessageRequest::default()).unwrap_err();
        assert_eq!(no_message.kind, ErrorKind::InvalidParams);
        let negative = decode_send(pb::SendMessageRequest {
            message: Some(user_message("m", "x")),
            configuration: Some(pb::SendMessageConfiguration {
                history_length: Some(-1),
                ..Default::default()
            }),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(negative.kind, ErrorKind::InvalidParams);
        let credentials_without_scheme = push_spec(pb::TaskPushNotificationConfig {
            url: "https://x.test".into(),
            authentication: Some(pb::AuthenticationInfo {
                scheme: String::new(),
                credentials: "c".into(),
            }),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(credentials_without_scheme.kind, ErrorKind::InvalidParams);
        let no_url = push_spec(pb::TaskPushNotificationConfig {
            url: "ftp://x.test".into(),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(no_url.kind, ErrorKind::InvalidParams);
    }

    #[test]
    fn task_ids_that_are_not_ours_are_not_found() {
        assert_eq!(task_id("").unwrap_err().kind, ErrorKind::InvalidParams);
        assert_eq!(
            task_id("not-a-thread").unwrap_err().kind,
            ErrorKind::TaskNotFound
        );
        let status = task_id("nope")
            .unwrap_err()
            .grpc_status(SpecVersion::V1_0_1);
        assert_eq!(status.code(), Code::NotFound);
        assert_eq!(reason(&status), "TASK_NOT_FOUND");
    }

    #[test]
    fn list_requests_become_filters() {
        let filter = list_filter(&pb::ListTasksRequest {
            context_id: "ctx".into(),
            status: pb::TaskState::InputRequired as i32,
            status_timestamp_after: Some(crate::a2a::wkt::Timestamp {
                seconds: 10,
                nanos: 1,
            }),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(filter.context_id.as_deref(), Some("ctx"));
        assert_eq!(filter.state, Some(TaskState::InputRequired));
        // Rounded up: the filter is "at or after", so 10.000000001 s starts at 10.001 s.
        assert_eq!(filter.updated_since, Some(Timestamp(10_001)));
        assert_eq!(filter.limit, DEFAULT_PAGE_SIZE);
        let none = list_filter(&pb::ListTasksRequest::default()).unwrap();
        assert_eq!(
            (none.context_id, none.state, none.updated_since),
            (None, None, None)
        );
        for bad in [
            pb::ListTasksRequest {
                status: 99,
                ..Default::default()
            },
            pb::ListTasksRequest {
                status: pb::TaskState::AuthRequired as i32,
                ..Default::default()
            },
        ] {
            assert_eq!(
                list_filter(&bad).unwrap_err().kind,
                ErrorKind::InvalidParams
            );
        }
    }

    #[test]
    fn the_bearer_secret_comes_from_the_authorization_metadata() {
        let mut md = MetadataMap::new();
        assert_eq!(bearer(&md), None);
        md.insert("authorization", "Basic abc".parse().unwrap());
        assert_eq!(bearer(&md), None);
        md.insert("authorization", "Bearer  lsn_x ".parse().unwrap());
        assert_eq!(bearer(&md), Some("lsn_x"));
    }

    #[test]
    fn service_errors_map_to_the_table_codes_per_version() {
        let terminal = ServiceError::new(ErrorCode::TaskTerminal, "ended");
        for (version, code) in [
            (SpecVersion::V1_0_1, Code::FailedPrecondition),
            (SpecVersion::V1_0_0, Code::Unimplemented),
        ] {
            let status = convert::service_error(terminal.clone()).grpc_status(version);
            assert_eq!(status.code(), code);
            assert_eq!(reason(&status), "UNSUPPORTED_OPERATION");
        }
    }

    /// One gRPC call through the axum router (no network): the response's `grpc-status`.
    async fn grpc_status_via_router(
        router: axum::Router,
        method: &str,
        md: &[(&str, &str)],
    ) -> (u16, Option<String>) {
        use tonic::codegen::Service as _;
        let mut frame = vec![0u8];
        frame.extend_from_slice(&0u32.to_be_bytes());
        let mut req = axum::http::Request::post(format!("/lf.a2a.v1.A2AService/{method}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        for (k, v) in md {
            req = req.header(*k, *v);
        }
        let req = req.body(axum::body::Body::from(frame)).unwrap();
        let mut router = router;
        let resp = router.call(req).await.unwrap();
        let status = resp.status().as_u16();
        // An error answer is "trailers-only": grpc-status is among the headers.
        let grpc = resp
            .headers()
            .get("grpc-status")
            .map(|v| v.to_str().unwrap().to_owned());
        (status, grpc)
    }

    #[tokio::test]
    async fn the_router_serves_the_service_path_only() {
        let env = env(SpecVersion::V1_0_1).await;
        let router = grpc_routes(env.service.clone(), SpecVersion::V1_0_1);
        // No a2a-version: FAILED_PRECONDITION (9).
        let (http, grpc) = grpc_status_via_router(router.clone(), "GetTask", &[]).await;
        assert_eq!((http, grpc.as_deref()), (200, Some("9")));
        // An unknown method of the service: UNIMPLEMENTED (12).
        let (_, grpc) = grpc_status_via_router(router.clone(), "Nope", &[]).await;
        assert_eq!(grpc.as_deref(), Some("12"));
        // With version and token: an empty GetTask is INVALID_ARGUMENT (3), through auth.
        let auth = format!("Bearer {}", env.partner_secret);
        let (_, grpc) = grpc_status_via_router(
            router.clone(),
            "GetTask",
            &[("a2a-version", "1.0"), ("authorization", &auth)],
        )
        .await;
        assert_eq!(grpc.as_deref(), Some("3"));
        // Other paths fall through: the router merges into one that has its own fallback.
        let merged = axum::Router::new()
            .fallback(|| async { axum::http::StatusCode::IM_A_TEAPOT })
            .merge(router);
        let (http, grpc) = {
            use tonic::codegen::Service as _;
            let mut merged = merged;
            let resp = merged
                .call(
                    axum::http::Request::get("/elsewhere")
                        .body(axum::body::Body::empty())
                        .unwrap(),
                )
                .await
                .unwrap();
            (
                resp.status().as_u16(),
                resp.headers().get("grpc-status").cloned(),
            )
        };
        assert_eq!((http, grpc), (418, None));
    }

    // In-process: the trait methods against a Service over a temporary SQLite database.

    struct Env {
        grpc: GrpcA2a,
        service: Service,
        /// A team member who answers tasks.
        alice: Caller,
        partner_secret: String,
        _dir: tempfile::TempDir,
    }

    async fn env(version: SpecVersion) -> Env {
        crate::tls::install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("liaison.db").display());
        let store = Store::open(&url).await.unwrap();
        let channel = ChannelName::parse("partners").unwrap();
        let settings = Settings {
            skills: vec![SkillRoute {
                id: "ask".into(),
                channel: channel.clone(),
                kind: Kind::Question,
                impact: None,
            }],
            default_skill: Some("ask".into()),
            ..Settings::default()
        };
        let service = Service::new(
            Arc::new(store),
            Arc::new(LocalBus::default()),
            Arc::new(ManualClock::starting_at(Timestamp(1_800_000_000_000))),
            settings,
            tokio_util::sync::CancellationToken::new(),
        );
        let issued = service.bootstrap().await.unwrap().unwrap();
        let admin = service.authenticate(&issued.secret).await.unwrap();
        let pid = |s: &str| PersonId::parse(s).unwrap();
        service
            .add_person(&admin, pid("alice"), PersonKind::Member, "Alice".into())
            .await
            .unwrap();
        service
            .add_person(
                &admin,
                pid("partner"),
                PersonKind::External,
                "Partner".into(),
            )
            .await
            .unwrap();
        service
            .add_channel(
                &admin,
                ChannelSpec {
                    name: channel,
                    description: String::new(),
                    members: vec![pid("alice"), pid("partner")],
                    rights: None,
                    policy: None,
                },
            )
            .await
            .unwrap();
        let token = |id: &str| TokenSpec {
            person: pid(id),
            scopes: Scopes::default().with(Scope::Agent),
            expires_in_s: None,
            description: String::new(),
        };
        let alice_secret = service
            .issue_token(&admin, token("alice"))
            .await
            .unwrap()
            .secret;
        let alice = service
            .authenticate(&alice_secret)
            .await
            .unwrap()
            .declaring(Some(AgentIdentity::parse("claude@a:1").unwrap()));
        let partner_secret = service
            .issue_token(&admin, token("partner"))
            .await
            .unwrap()
            .secret;
        Env {
            grpc: GrpcA2a::new(service.clone(), version),
            service,
            alice,
            partner_secret,
            _dir: dir,
        }
    }

    impl Env {
        fn request<T>(&self, message: T) -> Request<T> {
            let mut req = Request::new(message);
            req.metadata_mut()
                .insert("a2a-version", "1.0".parse().unwrap());
            req.metadata_mut().insert(
                "authorization",
                format!("Bearer {}", self.partner_secret).parse().unwrap(),
            );
            req
        }

        async fn send(&self, id: &str, return_immediately: bool) -> Result<pb::Task, Status> {
            let req = pb::SendMessageRequest {
                message: Some(user_message(id, "Which TLS version do you support?")),
                configuration: Some(pb::SendMessageConfiguration {
                    return_immediately,
                    ..Default::default()
                }),
                ..Default::default()
            };
            let resp = self.grpc.send_message(self.request(req)).await?;
            match resp.into_inner().payload {
                Some(pb::send_message_response::Payload::Task(t)) => Ok(t),
                other => panic!("expected a task, got {other:?}"),
            }
        }

        async fn team_posts(&self, kind: Kind, task: &str, body: &str) {
            self.service
                .post(
                    &self.alice,
                    PostRequest {
                        kind: Some(kind),
                        thread: Some(ThreadId::parse(task).unwrap()),
                        body: body.into(),
                        ..Default::default()
                    },
                )
                .await
                .unwrap();
        }
    }

    fn state_of(task: &pb::Task) -> pb::TaskState {
        pb::TaskState::try_from(task.status.as_ref().unwrap().state).unwrap()
    }

    #[tokio::test]
    async fn calls_need_a_version_and_a_token() {
        for (version, code) in [
            (SpecVersion::V1_0_1, Code::FailedPrecondition),
            (SpecVersion::V1_0_0, Code::Unimplemented),
        ] {
            let env = env(version).await;
            let mut req = env.request(pb::GetTaskRequest::default());
            req.metadata_mut().remove("a2a-version");
            let status = env.grpc.get_task(req).await.unwrap_err();
            assert_eq!(status.code(), code);
            assert_eq!(reason(&status), "VERSION_NOT_SUPPORTED");

            let mut req = env.request(pb::GetTaskRequest::default());
            req.metadata_mut()
                .insert("authorization", "Bearer lsn_unknown".parse().unwrap());
            let status = env.grpc.get_task(req).await.unwrap_err();
            assert_eq!(status.code(), Code::Unauthenticated);
            let mut req = env.request(pb::GetTaskRequest::default());
            req.metadata_mut().remove("authorization");
            let status = env.grpc.get_task(req).await.unwrap_err();
            assert_eq!(status.code(), Code::Unauthenticated);
        }
    }

    #[tokio::test]
    async fn send_get_list_cancel_and_push_configs() {
        let env = env(SpecVersion::V1_0_1).await;
        let task = env.send("m1", true).await.unwrap();
        assert_eq!(state_of(&task), pb::TaskState::Submitted);
        assert!(!task.context_id.is_empty());
        assert_eq!(task.history.len(), 1);

        let got = env
            .grpc
            .get_task(env.request(pb::GetTaskRequest {
                id: task.id.clone(),
                history_length: Some(0),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(got.id, task.id);
        assert!(got.history.is_empty());

        let missing = env
            .grpc
            .get_task(env.request(pb::GetTaskRequest {
                id: "thr_nope".into(),
                ..Default::default()
            }))
            .await
            .unwrap_err();
        assert_eq!(missing.code(), Code::NotFound);

        let listed = env
            .grpc
            .list_tasks(env.request(pb::ListTasksRequest::default()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(listed.total_size, 1);
        assert_eq!(listed.next_page_token, "");
        assert_eq!(listed.tasks[0].id, task.id);

        let created = env
            .grpc
            .create_task_push_notification_config(env.request(pb::TaskPushNotificationConfig {
                task_id: task.id.clone(),
                id: "hook".into(),
                url: "https://hooks.test/a2a".into(),
                authentication: Some(pb::AuthenticationInfo {
                    scheme: "Bearer".into(),
                    credentials: "secret".into(),
                }),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(created.id, "hook");
        assert_eq!(created.task_id, task.id);
        assert_eq!(created.authentication.as_ref().unwrap().credentials, "");
        let got = env
            .grpc
            .get_task_push_notification_config(env.request(
                pb::GetTaskPushNotificationConfigRequest {
                    task_id: task.id.clone(),
                    id: "hook".into(),
                    ..Default::default()
                },
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(got, created);
        let list = env
            .grpc
            .list_task_push_notification_configs(env.request(
                pb::ListTaskPushNotificationConfigsRequest {
                    task_id: task.id.clone(),
                    ..Default::default()
                },
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(list.configs, vec![created]);
        let delete = || {
            env.request(pb::DeleteTaskPushNotificationConfigRequest {
                task_id: task.id.clone(),
                id: "hook".into(),
                ..Default::default()
            })
        };
        env.grpc
            .delete_task_push_notification_config(delete())
            .await
            .unwrap();
        let gone = env
            .grpc
            .delete_task_push_notification_config(delete())
            .await
            .unwrap_err();
        assert_eq!(gone.code(), Code::NotFound);

        let cancel = || {
            env.request(pb::CancelTaskRequest {
                id: task.id.clone(),
                ..Default::default()
            })
        };
        let canceled = env.grpc.cancel_task(cancel()).await.unwrap().into_inner();
        assert_eq!(state_of(&canceled), pb::TaskState::Canceled);
        // Idempotent.
        env.grpc.cancel_task(cancel()).await.unwrap();

        let subscribe = env
            .grpc
            .subscribe_to_task(env.request(pb::SubscribeToTaskRequest {
                id: task.id.clone(),
                ..Default::default()
            }))
            .await
            .err()
            .expect("a terminal task cannot be subscribed to");
        assert_eq!(subscribe.code(), Code::FailedPrecondition);
        assert_eq!(reason(&subscribe), "UNSUPPORTED_OPERATION");

        let card = env
            .grpc
            .get_extended_agent_card(env.request(pb::GetExtendedAgentCardRequest::default()))
            .await
            .unwrap_err();
        assert_eq!(reason(&card), "EXTENDED_AGENT_CARD_NOT_CONFIGURED");
    }

    #[tokio::test]
    async fn a_subscription_streams_the_snapshot_then_events_until_completed() {
        let env = env(SpecVersion::V1_0_1).await;
        let task = env.send("m1", true).await.unwrap();
        let mut stream = env
            .grpc
            .subscribe_to_task(env.request(pb::SubscribeToTaskRequest {
                id: task.id.clone(),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        let first = stream.next().await.unwrap().unwrap();
        assert!(
            matches!(&first.payload, Some(pb::stream_response::Payload::Task(t)) if t.id == task.id)
        );
        env.team_posts(Kind::Announce, &task.id, "Looking into it")
            .await;
        env.team_posts(Kind::Reply, &task.id, "TLS 1.3").await;
        let rest: Vec<pb::StreamResponse> = stream.map(Result::unwrap).collect().await;
        let kinds: Vec<String> = rest
            .iter()
            .map(|r| match &r.payload {
                Some(pb::stream_response::Payload::StatusUpdate(s)) => {
                    pb::TaskState::try_from(s.status.as_ref().unwrap().state)
                        .unwrap()
                        .as_str_name()
                        .to_owned()
                }
                Some(pb::stream_response::Payload::ArtifactUpdate(a)) => {
                    format!("artifact:{}", a.artifact.as_ref().unwrap().artifact_id)
                }
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(kinds.len(), 3, "{kinds:?}");
        assert_eq!(kinds[0], "TASK_STATE_WORKING");
        assert!(kinds[1].starts_with("artifact:"), "{kinds:?}");
        assert_eq!(kinds[2], "TASK_STATE_COMPLETED");
    }

    #[tokio::test]
    async fn a_blocking_send_waits_for_the_answer() {
        let env = Arc::new(env(SpecVersion::V1_0_1).await);
        let sender = {
            let env = env.clone();
            tokio::spawn(async move { env.send("m1", false).await })
        };
        // The task exists once the service has taken the message; then the team answers.
        let partner = env.service.authenticate(&env.partner_secret).await.unwrap();
        let id = loop {
            let listing = env
                .service
                .list_tasks(
                    &partner,
                    TaskFilter {
                        limit: 10,
                        ..Default::default()
                    },
                    None,
                    None,
                )
                .await
                .unwrap();
            if let Some(t) = listing.tasks.first() {
                break t.thread.id.to_string();
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        env.team_posts(Kind::Reply, &id, "TLS 1.3").await;
        let task = sender.await.unwrap().unwrap();
        assert_eq!(task.id, id);
        assert_eq!(state_of(&task), pb::TaskState::Completed);
        assert_eq!(task.artifacts.len(), 1);
    }

    #[tokio::test]
    async fn a_streaming_send_ends_when_the_task_asks_for_input() {
        let env = env(SpecVersion::V1_0_1).await;
        let req = pb::SendMessageRequest {
            message: Some(user_message("m1", "Please change the config")),
            ..Default::default()
        };
        let mut stream = env
            .grpc
            .send_streaming_message(env.request(req))
            .await
            .unwrap()
            .into_inner();
        let Some(pb::stream_response::Payload::Task(task)) =
            stream.next().await.unwrap().unwrap().payload
        else {
            panic!("the snapshot comes first")
        };
        env.team_posts(Kind::Question, &task.id, "Which environment?")
            .await;
        let rest: Vec<_> = stream.map(Result::unwrap).collect().await;
        assert_eq!(rest.len(), 1);
        let Some(pb::stream_response::Payload::StatusUpdate(update)) = &rest[0].payload else {
            panic!("a status update")
        };
        let status = update.status.as_ref().unwrap();
        assert_eq!(status.state, pb::TaskState::InputRequired as i32);
        assert!(status.message.is_some());
    }
}
