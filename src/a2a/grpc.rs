//! The gRPC binding of A2A (`lf.a2a.v1.A2AService`): a thin frame around [`A2a`].
//!
//! Every RPC checks `a2a-version`, authenticates the `authorization: Bearer …` metadata, then
//! calls the same [`A2a`] operation the JSON bindings call; errors become statuses through the one
//! error table ([`A2aError::grpc_status`] for the configured spec version), with
//! `google.rpc.ErrorInfo` in the details. Streams are the handler's event streams, item by item.
//!
//! Authentication failures are plain `UNAUTHENTICATED` statuses (no A2A error covers them).
//! gRPC is served on the main port (HTTP/2 cleartext, or TLS when the server has a certificate):
//! [`grpc_routes`] is an axum router to merge.

use std::pin::Pin;

use futures::{Stream, StreamExt as _};
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use super::handler::A2a;
use crate::service::Caller;
use crate::wire::errors::{A2aError, ErrorKind};
use crate::wire::params::check_grpc_version;
use crate::wire::pb;
use crate::wire::pb::a2a_service_server::{A2aService, A2aServiceServer};

/// The gRPC routes (`/lf.a2a.v1.A2AService/*`) as an axum router, to merge into the main router
/// (served on the same port).
///
/// Only the service's own path prefix is routed and the router has no fallback (tonic's `Routes`
/// would add one answering `UNIMPLEMENTED` to every other path, and axum refuses to merge two
/// routers that both have a fallback).
pub fn grpc_routes(a2a: A2a) -> axum::Router {
    use tonic::server::NamedService as _;
    let server = A2aServiceServer::new(GrpcA2a::new(a2a))
        .max_decoding_message_size(crate::wire::params::MAX_REQUEST_BYTES);
    let path = format!("/{}/{{*rpc}}", A2aServiceServer::<GrpcA2a>::NAME);
    axum::Router::new()
        .route_service(&path, server)
        .layer(axum::middleware::map_response(oversize_as_a2a_error))
}

/// tonic refuses a message over the decoding limit itself, before any handler runs, with a bare
/// `OUT_OF_RANGE` (trailers-only, no details; no handler of ours answers that code): the same
/// refusal as the A2A error every binding gives, PayloadTooLarge with `google.rpc.ErrorInfo`.
async fn oversize_as_a2a_error(mut response: axum::response::Response) -> axum::response::Response {
    let headers = response.headers_mut();
    let oversize = headers
        .get("grpc-status")
        .is_some_and(|v| v.as_bytes() == b"11")
        && !headers.contains_key("grpc-status-details-bin");
    if oversize {
        let message = headers
            .remove("grpc-message")
            .and_then(|v| v.to_str().ok().map(str::to_owned))
            .unwrap_or_default();
        let status = A2aError::new(
            ErrorKind::PayloadTooLarge,
            format!(
                "the request is larger than {} bytes, the largest valid request ({message})",
                crate::wire::params::MAX_REQUEST_BYTES
            ),
        )
        .grpc_status(crate::wire::errors::SpecVersion::default());
        if let Err(e) = status.add_header(headers) {
            tracing::error!(error = %e, "Could not render the oversize gRPC status.");
        }
    }
    response
}

/// The A2A gRPC service: the tonic trait over [`A2a`].
#[derive(Clone)]
pub struct GrpcA2a {
    a2a: A2a,
}

type ResponseStream = Pin<Box<dyn Stream<Item = Result<pb::StreamResponse, Status>> + Send>>;

impl GrpcA2a {
    pub fn new(a2a: A2a) -> Self {
        GrpcA2a { a2a }
    }

    fn status(&self, e: A2aError) -> Status {
        e.grpc_status(self.a2a.version())
    }

    /// The version check and authentication every RPC starts with.
    async fn begin(&self, metadata: &MetadataMap) -> Result<Caller, Status> {
        check_grpc_version(metadata).map_err(|e| self.status(e))?;
        let secret = bearer(metadata).ok_or_else(|| {
            self.status(A2aError::new(
                ErrorKind::Unauthenticated,
                "send the metadata authorization: Bearer <token>",
            ))
        })?;
        self.a2a
            .authenticate(secret)
            .await
            .map_err(|e| self.status(e.into()))
    }

    /// Authenticates, then runs one unary operation of the handler.
    async fn unary<T, R, F>(&self, request: Request<T>, op: F) -> Result<Response<R>, Status>
    where
        F: AsyncFnOnce(&A2a, &Caller, T) -> Result<R, A2aError>,
    {
        let caller = self.begin(request.metadata()).await?;
        op(&self.a2a, &caller, request.into_inner())
            .await
            .map(Response::new)
            .map_err(|e| self.status(e))
    }

    /// The handler's events as gRPC stream items.
    fn frames(&self, events: super::handler::Events) -> Response<ResponseStream> {
        let version = self.a2a.version();
        Response::new(Box::pin(
            events.map(move |item| item.map_err(|e| e.grpc_status(version))),
        ))
    }
}

/// The bearer secret of the `authorization` metadata.
fn bearer(metadata: &MetadataMap) -> Option<&str> {
    crate::http::bearer_credential(metadata.get("authorization")?.to_str().ok()?)
}

#[tonic::async_trait]
impl A2aService for GrpcA2a {
    async fn send_message(
        &self,
        request: Request<pb::SendMessageRequest>,
    ) -> Result<Response<pb::SendMessageResponse>, Status> {
        self.unary(request, async |a2a, caller, req| {
            a2a.send_message(caller, req).await
        })
        .await
    }

    type SendStreamingMessageStream = ResponseStream;

    async fn send_streaming_message(
        &self,
        request: Request<pb::SendMessageRequest>,
    ) -> Result<Response<Self::SendStreamingMessageStream>, Status> {
        let caller = self.begin(request.metadata()).await?;
        match self.a2a.send_streaming(&caller, request.into_inner()).await {
            Ok(events) => Ok(self.frames(events)),
            Err(e) => Err(self.status(e)),
        }
    }

    async fn get_task(
        &self,
        request: Request<pb::GetTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        self.unary(request, async |a2a, caller, req| {
            a2a.get_task(caller, req).await
        })
        .await
    }

    async fn list_tasks(
        &self,
        request: Request<pb::ListTasksRequest>,
    ) -> Result<Response<pb::ListTasksResponse>, Status> {
        self.unary(request, async |a2a, caller, req| {
            a2a.list_tasks(caller, req).await
        })
        .await
    }

    async fn cancel_task(
        &self,
        request: Request<pb::CancelTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        self.unary(request, async |a2a, caller, req| {
            a2a.cancel_task(caller, req).await
        })
        .await
    }

    type SubscribeToTaskStream = ResponseStream;

    async fn subscribe_to_task(
        &self,
        request: Request<pb::SubscribeToTaskRequest>,
    ) -> Result<Response<Self::SubscribeToTaskStream>, Status> {
        let caller = self.begin(request.metadata()).await?;
        match self.a2a.subscribe(&caller, request.into_inner()).await {
            Ok(events) => Ok(self.frames(events)),
            Err(e) => Err(self.status(e)),
        }
    }

    async fn create_task_push_notification_config(
        &self,
        request: Request<pb::TaskPushNotificationConfig>,
    ) -> Result<Response<pb::TaskPushNotificationConfig>, Status> {
        self.unary(request, async |a2a, caller, req| {
            a2a.create_push_config(caller, req).await
        })
        .await
    }

    async fn get_task_push_notification_config(
        &self,
        request: Request<pb::GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pb::TaskPushNotificationConfig>, Status> {
        self.unary(request, async |a2a, caller, req| {
            a2a.get_push_config(caller, req).await
        })
        .await
    }

    async fn list_task_push_notification_configs(
        &self,
        request: Request<pb::ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<pb::ListTaskPushNotificationConfigsResponse>, Status> {
        self.unary(request, async |a2a, caller, req| {
            a2a.list_push_configs(caller, req).await
        })
        .await
    }

    async fn get_extended_agent_card(
        &self,
        request: Request<pb::GetExtendedAgentCardRequest>,
    ) -> Result<Response<pb::AgentCard>, Status> {
        self.unary(request, async |a2a, caller, req| {
            a2a.extended_card(caller, req).await
        })
        .await
    }

    async fn delete_task_push_notification_config(
        &self,
        request: Request<pb::DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pbjson_types::Empty>, Status> {
        self.unary(request, async |a2a, caller, req| {
            a2a.delete_push_config(caller, req).await?;
            Ok(pbjson_types::Empty {})
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::StreamExt as _;
    use tonic::Code;
    use tonic_types::StatusExt as _;

    use super::*;
    use crate::a2a::card::Capabilities;
    use crate::a2a::convert::{self, task_id};
    use crate::bus::LocalBus;
    use crate::clock::ManualClock;
    use crate::domain::{AgentIdentity, ChannelName, Kind, PersonId, PersonKind, Scope, Scopes};
    use crate::domain::{ThreadId, Timestamp};
    use crate::service::{ChannelSpec, PostRequest, Settings, SkillRoute, TokenSpec};
    use crate::service::{ErrorCode, Service, ServiceError};
    use crate::store::{Store, TaskFilter};
    use crate::wire::errors::{ErrorKind, SpecVersion};
    use std::time::Duration;

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
        let router = grpc_routes(A2a::new(env.service.clone(), Duration::from_secs(30)));
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

    // In-process: the trait methods against a Service over a fresh database (SQLite, or PostgreSQL
    // when LIAISON_TEST_DATABASE_URL names a server).

    struct Env {
        grpc: GrpcA2a,
        service: Service,
        /// A team member who answers tasks.
        alice: Caller,
        partner_secret: String,
        _db: crate::store::test_db::TestDb,
    }

    async fn env(version: SpecVersion) -> Env {
        crate::net::tls::install_crypto_provider();
        let db = crate::store::test_db::TestDb::new().await;
        let store = Store::open(&db.url).await.unwrap();
        let channel = ChannelName::parse("partners").unwrap();
        let settings = Settings {
            skills: vec![SkillRoute {
                id: "ask".into(),
                channel: channel.clone(),
                kind: Kind::Question,
                impact: None,
                direct_answers: false,
            }],
            default_skill: Some("ask".into()),
            ..Settings::default()
        };
        let service = Service::new(
            crate::service::Deps::new(
                Arc::new(store),
                Arc::new(LocalBus::default()),
                Arc::new(ManualClock::starting_at(Timestamp(1_800_000_000_000))),
                settings,
                tokio_util::sync::CancellationToken::new(),
            )
            .unwrap(),
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
            grpc: GrpcA2a::new(
                A2a::new(service.clone(), Duration::from_secs(30))
                    .with_version(version)
                    .with_capabilities(Capabilities {
                        push_notifications: true,
                        ..Capabilities::default()
                    }),
            ),
            service,
            alice,
            partner_secret,
            _db: db,
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
        // Deleting again succeeds: delete is idempotent (TCK PUSH-DEL-002).
        env.grpc
            .delete_task_push_notification_config(delete())
            .await
            .unwrap();

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
        // The card offers no extended card: the operation is unsupported.
        assert_eq!(reason(&card), "UNSUPPORTED_OPERATION");
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
