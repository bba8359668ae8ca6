//! Remote agents (SPEC §8b, part A): a second liaison on port 0 is a real, signed A2A agent serving
//! all three bindings. It is registered as a remote of the service under test (loopback allowed by
//! `[outbox] allow`), and the A2A client talks to it over each binding with a party token as its
//! bearer credential. Cards that are private, unreachable, tampered with, unsigned, or re-signed
//! with new keys are refused as the spec says; answers beyond the cap are refused cleanly.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use liaison::a2a::card::{CardDefinition, Endpoints, SignedCard};
use liaison::app::App;
use liaison::config::{Config, Overrides};
use liaison::domain::address::AddressPolicy;
use liaison::domain::delivery::OutboxSettings;
use liaison::domain::{PersonKind, Scope};
use liaison::keys::ring::{KeyRing, MasterKey, SigningKey};
use liaison::remote::{Binding, CallError, Credentials, RemoteAuth, RemoteTarget};
use liaison::service::{Caller, ErrorCode, PartySpec, RefreshSpec, RemoteSpec, Service, Settings};
use liaison::wire::pb;
use tokio_util::sync::CancellationToken;

use crate::helpers::{TestDb, TestEnv, pid, post};

pub(crate) const MASTER_HEX: &str =
    "5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d5d";

/// The second liaison: the remote agent (the console's remote pages use it too).
pub(crate) struct RemoteApp {
    url: String,
    admin_token: String,
    service: Service,
    /// The party token liaison presents as its bearer credential.
    pub(crate) party_token: String,
    /// Bob's agent answers the tasks that arrive in `partners`.
    bob: Caller,
    stop: CancellationToken,
    _dir: tempfile::TempDir,
    _db: TestDb,
}

impl Drop for RemoteApp {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl RemoteApp {
    pub(crate) async fn start() -> RemoteApp {
        let db = TestDb::new().await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("master.key"), MASTER_HEX).unwrap();
        let overrides = Overrides {
            data_dir: Some(dir.path().to_path_buf()),
            listen: Some("127.0.0.1:0".into()),
            database_url: Some(db.url.clone()),
            ..Default::default()
        };
        let stop = CancellationToken::new();
        let app = App::build(Config::load(&overrides, []).unwrap(), stop.clone())
            .await
            .unwrap();
        let service = app.service().clone();
        let url = app.public_url().to_owned();
        let admin_token = app.bootstrap_token.clone().unwrap();
        tokio::spawn(app.run_until_stopped());
        let admin = service.authenticate(&admin_token).await.unwrap();
        service
            .add_person(&admin, pid("bob"), PersonKind::Member, "Bob".into())
            .await
            .unwrap();
        let token = service
            .add_party(
                &admin,
                PartySpec {
                    id: pid("gateway"),
                    display_name: "The other gateway".into(),
                    default_skill: None,
                    jwt_subject: None,
                    issue_token: true,
                    channels: Vec::new(),
                },
            )
            .await
            .unwrap()
            .token;
        service
            .add_channel(
                &admin,
                liaison::service::ChannelSpec {
                    name: liaison::domain::ChannelName::parse("partners").unwrap(),
                    description: String::new(),
                    members: vec![pid("bob"), pid("gateway")],
                    rights: None,
                    policy: None,
                },
            )
            .await
            .unwrap();
        let issued = service
            .issue_token(
                &admin,
                liaison::service::TokenSpec {
                    person: pid("bob"),
                    scopes: liaison::domain::Scopes::default().with(Scope::Agent),
                    expires_in_s: None,
                    description: String::new(),
                },
            )
            .await
            .unwrap();
        let bob = service
            .authenticate(&issued.secret)
            .await
            .unwrap()
            .declaring(Some(
                liaison::domain::AgentIdentity::parse("codex@bob:1").unwrap(),
            ));
        RemoteApp {
            url,
            admin_token,
            service,
            party_token: token.unwrap().secret,
            bob,
            stop,
            _dir: dir,
            _db: db,
        }
    }

    pub(crate) fn card_url(&self) -> String {
        format!("{}/.well-known/agent-card.json", self.url)
    }

    /// Bob answers the task (its thread) with `body`.
    async fn reply(&self, task_id: &str, body: &str) {
        let thread = liaison::domain::ThreadId::parse(task_id).unwrap();
        self.service
            .post(&self.bob, post("reply", None, Some(&thread), body))
            .await
            .unwrap();
    }

    pub(crate) async fn rotate_keys(&self) {
        let response = reqwest::Client::new()
            .post(format!("{}/admin/v1/keys/rotate", self.url))
            .bearer_auth(&self.admin_token)
            .json(&serde_json::json!({ "overlap_s": 3600 }))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{response:?}");
    }
}

pub(crate) fn outbox(allow_loopback: bool) -> OutboxSettings {
    OutboxSettings {
        connect_timeout: Duration::from_secs(5),
        timeout: Duration::from_secs(20),
        allow: if allow_loopback {
            AddressPolicy::parse(&["127.0.0.1".into()]).unwrap()
        } else {
            AddressPolicy::default()
        },
        ..OutboxSettings::default()
    }
}

/// The gateway under test: alice in channel `team`.
async fn local(allow_loopback: bool) -> TestEnv {
    let env = TestEnv::with_master(
        Settings {
            outbox: outbox(allow_loopback),
            ..Settings::default()
        },
        MasterKey::from_hex(MASTER_HEX).unwrap(),
    )
    .await;

    env.member("alice", "claude@alice:1").await;
    env.channel("team", &["alice"]).await;
    env
}

fn spec(name: &str, card_url: &str, token: &str) -> RemoteSpec {
    RemoteSpec {
        name: pid(name),
        card_url: card_url.to_owned(),
        display_name: None,
        channels: vec![liaison::domain::ChannelName::parse("team").unwrap()],
        allow_unsigned: false,
        binding: None,
        credentials: Credentials {
            auth: Some(RemoteAuth::Bearer {
                token: token.to_owned(),
            }),
            headers: Vec::new(),
        },
    }
}

fn question(text: &str) -> pb::SendMessageRequest {
    pb::SendMessageRequest {
        tenant: String::new(),
        message: Some(pb::Message {
            message_id: uuid::Uuid::now_v7().to_string(),
            role: pb::Role::User as i32,
            parts: vec![pb::Part {
                content: Some(pb::part::Content::Text(text.to_owned())),
                ..Default::default()
            }],
            ..Default::default()
        }),
        configuration: Some(pb::SendMessageConfiguration {
            return_immediately: true,
            ..Default::default()
        }),
        metadata: None,
    }
}

fn task_of(r: pb::SendMessageResponse) -> pb::Task {
    match r.payload {
        Some(pb::send_message_response::Payload::Task(t)) => t,
        other => panic!("expected a task, got {other:?}"),
    }
}

fn state_of(t: &pb::Task) -> pb::TaskState {
    pb::TaskState::try_from(t.status.as_ref().unwrap().state).unwrap()
}

/// The task states a stream reports (the first task snapshot and each status update).
fn states(events: &[pb::StreamResponse]) -> Vec<pb::TaskState> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(pb::stream_response::Payload::Task(t)) => Some(state_of(t)),
            Some(pb::stream_response::Payload::StatusUpdate(u)) => {
                Some(pb::TaskState::try_from(u.status.as_ref().unwrap().state).unwrap())
            }
            _ => None,
        })
        .collect()
}

/// Reads a stream to its end (a bounded wait: a stream that never ends fails the test).
async fn drain(stream: liaison::remote::EventStream) -> Vec<pb::StreamResponse> {
    tokio::time::timeout(
        Duration::from_secs(30),
        stream.map(|e| e.expect("an event")).collect::<Vec<_>>(),
    )
    .await
    .expect("the stream ends at the terminal state")
}

async fn target(env: &TestEnv, name: &str) -> RemoteTarget {
    env.service
        .remote_target(&pid(name))
        .await
        .unwrap()
        .expect("a live remote")
}

#[tokio::test]
async fn a_signed_remote_is_registered_with_its_skills_interfaces_and_pinned_keys() {
    let remote = RemoteApp::start().await;
    let env = local(true).await;
    let s = &env.service;
    let view = s
        .add_remote(
            &env.admin,
            spec("helper", &remote.card_url(), &remote.party_token),
        )
        .await
        .unwrap();
    assert!(view.signed);
    assert_eq!(view.keys.len(), 1);
    // The card keeps the shipped name "liaison", which tells nobody which liaison it is: the
    // remote is shown by the name it was registered under.
    assert_eq!(view.display_name, "helper", "not the shipped card name");
    assert_eq!(view.binding, Binding::Grpc, "gRPC is preferred");
    assert!(!view.binding_forced);
    let bindings: Vec<Binding> = view.interfaces.iter().map(|i| i.binding).collect();
    assert_eq!(
        bindings,
        [Binding::JsonRpc, Binding::HttpJson, Binding::Grpc]
    );
    assert_eq!(
        view.url, remote.url,
        "gRPC's host:port, h2c as the card is http"
    );
    assert!(view.streaming && view.push);
    let skills: Vec<&str> = view.skills.iter().map(|k| k.id.as_str()).collect();
    assert_eq!(skills, ["ask", "request-change", "chat", "handoff"]);
    assert_eq!(view.channels.len(), 1);
    assert_eq!(view.credentials["auth"]["kind"], "bearer");

    // The secret is in no admin view.
    let listed = serde_json::to_string(&s.list_remotes(&env.admin).await.unwrap()).unwrap();
    let shown =
        serde_json::to_string(&s.show_remote(&env.admin, &pid("helper")).await.unwrap()).unwrap();
    for text in [&listed, &shown] {
        assert!(text.contains("helper"));
        assert!(
            !text.contains(&remote.party_token),
            "credentials leaked: {text}"
        );
    }
    assert!(!format!("{:?}", target(&env, "helper").await).contains(&remote.party_token));

    // Alice's agent sees whom it can ask for what.
    let alice = env.caller("alice", Scope::Agent, "claude@alice:2").await;
    let agents = s.remote_agents(&alice).await.unwrap();
    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0].name, pid("helper"));
    assert_eq!(agents[0].skills[0].name, "Ask the team");
    let channels = s.channels(&alice).await.unwrap();
    assert!(channels[0].member(&pid("helper")).is_some());

    // The name is taken now, even for another card; a remote gets no token and is no member.
    let again = s
        .add_remote(&env.admin, spec("helper", &remote.card_url(), "x"))
        .await
        .unwrap_err();
    assert_eq!(again.code, ErrorCode::AlreadyExists);
    let token = liaison::service::TokenSpec {
        person: pid("helper"),
        scopes: liaison::domain::Scopes::default().with(Scope::Agent),
        expires_in_s: None,
        description: String::new(),
    };
    assert_eq!(
        s.issue_token(&env.admin, token).await.unwrap_err().code,
        ErrorCode::InvalidInput
    );

    // Removed: out of its channels, no target, still not reusable; its person row stays.
    s.remove_remote(&env.admin, &pid("helper")).await.unwrap();
    assert!(s.remote_target(&pid("helper")).await.unwrap().is_none());
    assert!(s.remote_agents(&alice).await.unwrap().is_empty());
    assert!(
        s.channels(&alice).await.unwrap()[0]
            .member(&pid("helper"))
            .is_none()
    );
    assert_eq!(
        s.remove_remote(&env.admin, &pid("helper"))
            .await
            .unwrap_err()
            .code,
        ErrorCode::NotFound
    );
    assert_eq!(
        s.add_remote(&env.admin, spec("helper", &remote.card_url(), "x"))
            .await
            .unwrap_err()
            .code,
        ErrorCode::AlreadyExists
    );
}

/// A TCP forwarder to one address that counts the connections it carried: a card whose every
/// interface goes through its own forwarder shows which binding the client really used.
struct Forwarder {
    url: String,
    connections: Arc<std::sync::atomic::AtomicUsize>,
}

impl Forwarder {
    async fn start(to: &str) -> Forwarder {
        let to: std::net::SocketAddr = to.trim_start_matches("http://").parse().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = connections.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Forwarder { url, connections }
    }

    fn carried(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[tokio::test]
async fn the_client_sends_gets_cancels_streams_and_subscribes_over_every_binding() {
    let remote = RemoteApp::start().await;
    let env = local(true).await;
    let client = env.service.a2a_client().clone();
    // The remote's card, served with each binding's interface behind its own forwarder.
    let via_jsonrpc = Forwarder::start(&remote.url).await;
    let via_rest = Forwarder::start(&remote.url).await;
    let via_grpc = Forwarder::start(&remote.url).await;
    let cards = CardServer::start().await;
    cards.sign_endpoints(
        Endpoints {
            public_url: cards.url.clone(),
            jsonrpc_url: format!("{}/a2a/jsonrpc", via_jsonrpc.url),
            rest_url: format!("{}/a2a/rest", via_rest.url),
            grpc_authority: Endpoints::authority_of(&via_grpc.url),
        },
        &ring(&MasterKey::from_hex(MASTER_HEX).unwrap()),
    );
    let forwarders = [
        (Binding::Grpc, &via_grpc),
        (Binding::JsonRpc, &via_jsonrpc),
        (Binding::HttpJson, &via_rest),
    ];
    for (name, binding, forced) in [
        ("via-grpc", "grpc", Binding::Grpc),
        ("via-jsonrpc", "jsonrpc", Binding::JsonRpc),
        ("via-rest", "http-json", Binding::HttpJson),
    ] {
        let carried_before: Vec<usize> = forwarders.iter().map(|(_, f)| f.carried()).collect();
        let mut spec = spec(name, &cards.card_url(), &remote.party_token);
        spec.binding = Some(binding.into());
        let view = env.service.add_remote(&env.admin, spec).await.unwrap();
        assert!(view.binding_forced);
        assert_eq!(view.binding, forced, "{binding}");
        let t = target(&env, name).await;
        assert_eq!(t.binding, forced, "{binding}");

        // Send (returning at once), get, cancel.
        let task = task_of(client.send_message(&t, question("First?")).await.unwrap());
        assert_eq!(state_of(&task), pb::TaskState::Submitted, "{binding}");
        let got = client.get_task(&t, &task.id).await.unwrap();
        assert_eq!(got.id, task.id);
        let canceled = client.cancel_task(&t, &task.id).await.unwrap();
        assert_eq!(state_of(&canceled), pb::TaskState::Canceled, "{binding}");
        // Cancel is idempotent; an unknown task is the remote's own error, as such.
        let again = client.cancel_task(&t, &task.id).await.unwrap();
        assert_eq!(state_of(&again), pb::TaskState::Canceled, "{binding}");
        match client.get_task(&t, "thr_unknown").await.unwrap_err() {
            CallError::Remote(e) => {
                assert_eq!(e.reason.as_deref(), Some("TASK_NOT_FOUND"), "{binding}");
                assert!(!e.retryable);
            }
            other => panic!("{binding}: {other:?}"),
        }

        // A streamed send: the task first, then Bob's reply completes it.
        let mut stream = client
            .send_streaming_message(&t, question("Second?"))
            .await
            .unwrap();
        let first = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let Some(pb::stream_response::Payload::Task(task)) = &first.payload else {
            panic!("{binding}: the stream starts with the task, got {first:?}");
        };
        remote.reply(&task.id, "Streamed answer").await;
        let rest = drain(stream).await;
        assert_eq!(
            states(&rest).last(),
            Some(&pb::TaskState::Completed),
            "{binding}: {rest:?}"
        );

        // Subscribing to a task sent earlier follows it to its end.
        let task = task_of(client.send_message(&t, question("Third?")).await.unwrap());
        let mut stream = client.subscribe_to_task(&t, &task.id).await.unwrap();
        let first = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(states(&[first]), [pb::TaskState::Submitted], "{binding}");
        remote.reply(&task.id, "Subscribed answer").await;
        let rest = drain(stream).await;
        assert_eq!(states(&rest).last(), Some(&pb::TaskState::Completed));
        let done = client.get_task(&t, &task.id).await.unwrap();
        assert_eq!(state_of(&done), pb::TaskState::Completed);
        assert_eq!(
            done.artifacts.len(),
            1,
            "{binding}: the reply is the artifact"
        );
        // Every call went over the forced binding's interface, none over another.
        for ((used, forwarder), before) in forwarders.iter().zip(&carried_before) {
            let carried = forwarder.carried() - before;
            if *used == forced {
                assert!(carried > 0, "{binding}: nothing went over {used:?}");
            } else {
                assert_eq!(
                    carried, 0,
                    "{binding}: {carried} connection(s) over {used:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_wrong_credential_and_an_unknown_task_are_the_remote_s_errors() {
    let remote = RemoteApp::start().await;
    let env = local(true).await;
    let client = env.service.a2a_client().clone();
    for binding in ["grpc", "jsonrpc", "http-json"] {
        let name = format!("bad-{}", binding.replace('-', ""));
        let mut spec = spec(&name, &remote.card_url(), "not-a-token");
        spec.binding = Some(binding.into());
        env.service.add_remote(&env.admin, spec).await.unwrap();
        let t = target(&env, &name).await;
        let e = client.get_task(&t, "thr_x").await.unwrap_err();
        assert!(
            matches!(
                &e,
                CallError::Remote(_) | CallError::Status { code: 401, .. }
            ),
            "{binding}: {e:?}"
        );
        assert!(!e.retryable(), "{binding}: a refused credential is final");
        assert!(!e.to_string().contains("not-a-token"));
    }
    let mut spec = spec("good", &remote.card_url(), &remote.party_token);
    spec.binding = Some("jsonrpc".into());
    env.service.add_remote(&env.admin, spec).await.unwrap();
    match client
        .get_task(&target(&env, "good").await, "thr_unknown")
        .await
        .unwrap_err()
    {
        CallError::Remote(e) => assert_eq!(e.reason.as_deref(), Some("TASK_NOT_FOUND")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn answers_beyond_the_cap_are_refused_cleanly_on_every_binding() {
    let remote = RemoteApp::start().await;
    let env = local(true).await;
    let full = env.service.a2a_client().clone();
    let small = full.clone().with_max_answer_bytes(200);
    for binding in ["grpc", "jsonrpc", "http-json"] {
        let name = format!("capped-{}", binding.replace('-', ""));
        let mut spec = spec(&name, &remote.card_url(), &remote.party_token);
        spec.binding = Some(binding.into());
        env.service.add_remote(&env.admin, spec).await.unwrap();
        let t = target(&env, &name).await;
        let long = "x".repeat(1000);
        let task = task_of(full.send_message(&t, question(&long)).await.unwrap());
        let e = small.get_task(&t, &task.id).await.unwrap_err();
        assert_eq!(e, CallError::TooLarge { limit: 200 }, "{binding}");
        assert!(!e.retryable());
        let mut stream = small.subscribe_to_task(&t, &task.id).await.unwrap();
        let first = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .unwrap();
        assert_eq!(
            first,
            Some(Err(CallError::TooLarge { limit: 200 })),
            "{binding}"
        );
        assert!(stream.next().await.is_none(), "{binding}: the stream ends");
        // The full-size client still reads it.
        assert_eq!(full.get_task(&t, &task.id).await.unwrap().id, task.id);
    }
}

#[tokio::test]
async fn private_and_unreachable_card_urls_are_refused_with_clear_errors() {
    let remote = RemoteApp::start().await;
    let strict = local(false).await;
    let port = remote.url.rsplit(':').next().unwrap();
    for url in [
        remote.card_url(),
        format!("http://localhost:{port}/.well-known/agent-card.json"),
        "http://169.254.169.254/latest/meta-data".to_owned(),
        "ftp://example.com/card.json".to_owned(),
        "not a url".to_owned(),
    ] {
        let e = strict
            .service
            .add_remote(&strict.admin, spec("r", &url, "t"))
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput, "{url}: {e:?}");
    }
    assert!(
        strict
            .service
            .list_remotes(&strict.admin)
            .await
            .unwrap()
            .is_empty()
    );

    let env = local(true).await;
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = env
        .service
        .add_remote(
            &env.admin,
            spec(
                "r",
                &format!("http://127.0.0.1:{closed}/.well-known/agent-card.json"),
                "t",
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::RemoteUnreachable, "{e:?}");
    let e = env
        .service
        .add_remote(
            &env.admin,
            spec("r", &format!("{}/nothing-here", remote.url), "t"),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::RemoteUnreachable, "{e:?}");
    assert!(e.message.contains("404"), "{}", e.message);

    // Bad input changes nothing either.
    let mut bad = spec("r", &remote.card_url(), "t");
    bad.binding = Some("carrier-pigeon".into());
    assert_eq!(
        env.service
            .add_remote(&env.admin, bad)
            .await
            .unwrap_err()
            .code,
        ErrorCode::InvalidInput
    );
    let mut bad = spec("r", &remote.card_url(), "t");
    bad.credentials.headers.push(liaison::remote::ExtraHeader {
        name: "Authorization".into(),
        value: "Basic x".into(),
    });
    assert_eq!(
        env.service
            .add_remote(&env.admin, bad)
            .await
            .unwrap_err()
            .code,
        ErrorCode::InvalidInput
    );
    let mut bad = spec("r", &remote.card_url(), "t");
    bad.channels = vec![liaison::domain::ChannelName::parse("nowhere").unwrap()];
    assert_eq!(
        env.service
            .add_remote(&env.admin, bad)
            .await
            .unwrap_err()
            .code,
        ErrorCode::NotFound
    );
    assert!(
        env.service
            .list_remotes(&env.admin)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A card server the test controls: serves whatever card and key set it is given.
struct CardServer {
    url: String,
    served: Arc<Mutex<(Vec<u8>, Vec<u8>)>>,
}

impl CardServer {
    async fn start() -> CardServer {
        let served: Arc<Mutex<(Vec<u8>, Vec<u8>)>> = Arc::default();
        let (card, jwks) = (served.clone(), served.clone());
        let app = axum::Router::new()
            .route(
                "/.well-known/agent-card.json",
                axum::routing::get(move || {
                    let body = card.lock().unwrap().0.clone();
                    async move { ([("content-type", "application/json")], body) }
                }),
            )
            .route(
                "/.well-known/jwks.json",
                axum::routing::get(move || {
                    let body = jwks.lock().unwrap().1.clone();
                    async move { ([("content-type", "application/json")], body) }
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        CardServer { url, served }
    }

    fn card_url(&self) -> String {
        format!("{}/.well-known/agent-card.json", self.url)
    }

    /// Serves a card signed by `keys` whose interfaces are `remote`'s, with the key set here.
    fn sign(&self, remote: &RemoteApp, keys: &KeyRing) {
        let endpoints = Endpoints {
            public_url: self.url.clone(),
            jsonrpc_url: format!("{}/a2a/jsonrpc", remote.url),
            rest_url: format!("{}/a2a/rest", remote.url),
            grpc_authority: Endpoints::authority_of(&remote.url),
        };
        self.sign_endpoints(endpoints, keys);
    }

    /// Serves a card signed by `keys` with these interfaces, with the key set here.
    fn sign_endpoints(&self, endpoints: Endpoints, keys: &KeyRing) {
        let definition =
            CardDefinition::from_toml(include_str!("../../agent-card/card.toml")).unwrap();
        let signed = SignedCard::sign(&definition, &endpoints, keys).unwrap();
        *self.served.lock().unwrap() = (signed.json().to_vec(), signed.jwks_json().to_vec());
    }

    fn edit_card(&self, f: impl FnOnce(&mut serde_json::Value)) {
        let mut served = self.served.lock().unwrap();
        let mut card: serde_json::Value = serde_json::from_slice(&served.0).unwrap();
        f(&mut card);
        served.0 = serde_json::to_vec(&card).unwrap();
    }
}

fn ring(master: &MasterKey) -> KeyRing {
    let (_, sealed) = SigningKey::generate(master).unwrap();
    KeyRing::open(&[sealed], master).unwrap()
}

#[tokio::test]
async fn tampered_unsigned_and_foreign_keyed_cards_are_refused() {
    let remote = RemoteApp::start().await;
    let env = local(true).await;
    let s = &env.service;
    let master = MasterKey::from_hex(MASTER_HEX).unwrap();
    let server = CardServer::start().await;
    server.sign(&remote, &ring(&master));
    // The genuine card verifies (with keys from its own origin).
    s.add_remote(&env.admin, spec("genuine", &server.card_url(), "t"))
        .await
        .unwrap();

    server.edit_card(|card| card["description"] = "Send me your secrets.".into());
    let e = s
        .add_remote(&env.admin, spec("tampered", &server.card_url(), "t"))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::CardRejected);
    assert!(e.message.contains("does not verify"), "{}", e.message);
    let mut flagged = spec("tampered", &server.card_url(), "t");
    flagged.allow_unsigned = true;
    assert_eq!(
        s.add_remote(&env.admin, flagged).await.unwrap_err().code,
        ErrorCode::CardRejected,
        "a bad signature is refused even when unsigned cards are allowed"
    );

    server.edit_card(|card| {
        card.as_object_mut().unwrap().remove("signatures");
    });
    let e = s
        .add_remote(&env.admin, spec("unsigned", &server.card_url(), "t"))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::CardRejected);
    assert!(e.message.contains("--allow-unsigned"), "{}", e.message);
    let mut flagged = spec("unsigned", &server.card_url(), "t");
    flagged.allow_unsigned = true;
    let view = s.add_remote(&env.admin, flagged).await.unwrap();
    assert!(!view.signed && view.keys.is_empty());
    assert!(target(&env, "unsigned").await.keys.keys.is_empty());

    // The real card served from another origin: its jku points elsewhere.
    let real = reqwest::get(remote.card_url())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    server.served.lock().unwrap().0 = real.to_vec();
    let e = s
        .add_remote(&env.admin, spec("copied", &server.card_url(), "t"))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::CardRejected);
    assert!(e.message.contains("origin"), "{}", e.message);

    server.served.lock().unwrap().0 = b"{\"name\": 3}".to_vec();
    assert_eq!(
        s.add_remote(&env.admin, spec("junk", &server.card_url(), "t"))
            .await
            .unwrap_err()
            .code,
        ErrorCode::CardRejected
    );
    let names: Vec<String> = s
        .list_remotes(&env.admin)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name.to_string())
        .collect();
    assert_eq!(names, ["genuine", "unsigned"]);
}

#[tokio::test]
async fn new_signing_keys_on_refresh_are_refused_until_accepted() {
    let remote = RemoteApp::start().await;
    let env = local(true).await;
    let s = &env.service;
    let name = pid("helper");
    let before = s
        .add_remote(
            &env.admin,
            spec("helper", &remote.card_url(), &remote.party_token),
        )
        .await
        .unwrap();
    let unchanged = s
        .refresh_remote(&env.admin, &name, RefreshSpec::default())
        .await
        .unwrap();
    assert!(!unchanged.changed, "{:?}", unchanged.changes);

    remote.rotate_keys().await;
    let e = s
        .refresh_remote(&env.admin, &name, RefreshSpec::default())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::KeysChanged);
    let added = e.details.as_ref().unwrap()["keys_added"].clone();
    assert_eq!(added.as_array().unwrap().len(), 1, "{e:?}");
    assert_eq!(
        s.show_remote(&env.admin, &name).await.unwrap().keys,
        before.keys,
        "nothing changed"
    );

    let accepted = s
        .refresh_remote(
            &env.admin,
            &name,
            RefreshSpec {
                accept_new_keys: true,
                credentials: None,
            },
        )
        .await
        .unwrap();
    assert!(accepted.changed);
    assert_eq!(
        accepted.changes.keys_added,
        vec![added[0].as_str().unwrap().to_owned()]
    );
    assert_eq!(
        accepted.remote.keys.len(),
        2,
        "the previous key still co-signs"
    );
    assert_eq!(target(&env, "helper").await.keys.keys.len(), 2);
    let again = s
        .refresh_remote(&env.admin, &name, RefreshSpec::default())
        .await
        .unwrap();
    assert!(!again.changed);

    // New credentials through refresh replace the old ones (and are used at once).
    let report = s
        .refresh_remote(
            &env.admin,
            &name,
            RefreshSpec {
                accept_new_keys: false,
                credentials: Some(Credentials::default()),
            },
        )
        .await
        .unwrap();
    assert_eq!(report.remote.credentials["auth"], "none");
    assert!(target(&env, "helper").await.credentials.auth.is_none());
}

/// An OAuth2 token endpoint: answers each request with the next scripted token (the last one
/// repeats) and records the `Authorization` header and form body of each.
#[derive(Clone)]
struct TokenEndpoint {
    url: String,
    tokens: Arc<Mutex<Vec<String>>>,
    got: Arc<Mutex<Vec<(String, String)>>>,
}

impl TokenEndpoint {
    async fn start(tokens: &[&str]) -> TokenEndpoint {
        let endpoint = TokenEndpoint {
            url: String::new(),
            tokens: Arc::new(Mutex::new(tokens.iter().map(|t| t.to_string()).collect())),
            got: Arc::default(),
        };
        let state = endpoint.clone();
        let app = axum::Router::new().route(
            "/token",
            axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
                let state = state.clone();
                async move {
                    let auth = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_owned();
                    state.got.lock().unwrap().push((auth, body));
                    let mut tokens = state.tokens.lock().unwrap();
                    let token = if tokens.len() > 1 {
                        tokens.remove(0)
                    } else {
                        tokens[0].clone()
                    };
                    axum::Json(serde_json::json!({
                        "access_token": token, "token_type": "Bearer", "expires_in": 3600
                    }))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        TokenEndpoint { url, ..endpoint }
    }
}

#[tokio::test]
async fn oauth2_tokens_are_fetched_once_cached_and_renewed_when_refused() {
    let remote = RemoteApp::start().await;
    let env = local(true).await;
    let client = env.service.a2a_client().clone();
    // The first token is refused by the remote; the next one is the party's.
    let idp = TokenEndpoint::start(&["expired-token", &remote.party_token]).await;
    let mut billing = spec("billing", &remote.card_url(), "unused");
    billing.binding = Some("jsonrpc".into());
    billing.credentials.auth = Some(RemoteAuth::Oauth2 {
        token_url: idp.url.clone(),
        client_id: "liaison client".into(),
        client_secret: "s3cret:x".into(),
        scopes: vec!["a2a.invoke".into(), "read".into()],
    });
    let view = env.service.add_remote(&env.admin, billing).await.unwrap();
    assert_eq!(view.credentials["auth"]["kind"], "oauth2");
    assert!(!serde_json::to_string(&view).unwrap().contains("s3cret"));
    let t = target(&env, "billing").await;

    let refused = client
        .send_message(&t, question("Invoice?"))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, CallError::Remote(e) if e.http_status == Some(401)),
        "{refused:?}"
    );
    // Refused: the token was forgotten, so this call fetches the good one; the next reuses it.
    let task = task_of(client.send_message(&t, question("Invoice?")).await.unwrap());
    assert_eq!(client.get_task(&t, &task.id).await.unwrap().id, task.id);
    let got = idp.got.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "one fetch per token: {got:?}");
    use base64::Engine as _;
    let basic = base64::engine::general_purpose::STANDARD.encode("liaison+client:s3cret%3Ax");
    for (auth, body) in &got {
        assert_eq!(auth, &format!("Basic {basic}"));
        assert_eq!(body, "grant_type=client_credentials&scope=a2a.invoke+read");
    }

    // A token endpoint that does not answer is a credentials error, which may pass.
    let mut nowhere = spec("nowhere", &remote.card_url(), "unused");
    nowhere.credentials.auth = Some(RemoteAuth::Oauth2 {
        token_url: format!("{}/no-token-here", remote.url),
        client_id: "c".into(),
        client_secret: "s".into(),
        scopes: Vec::new(),
    });
    env.service.add_remote(&env.admin, nowhere).await.unwrap();
    let e = client
        .get_task(&target(&env, "nowhere").await, "thr_x")
        .await
        .unwrap_err();
    assert!(matches!(e, CallError::Credentials(_)), "{e:?}");
    assert!(e.retryable());
}

/// A database outage reaches an A2A client as its binding's retryable code: JSON-RPC -31503 with
/// the reason UNAVAILABLE, HTTP 503, gRPC UNAVAILABLE; never INTERNAL, which clients do not retry.
#[tokio::test]
async fn a_database_outage_is_a_retryable_error_on_every_binding() {
    let remote = RemoteApp::start().await;
    let env = local(true).await;
    let client = env.service.a2a_client().clone();
    let bindings = ["grpc", "jsonrpc", "http-json"];
    let mut targets = Vec::new();
    for binding in bindings {
        let name = format!("down-{}", binding.replace('-', ""));
        let mut spec = spec(&name, &remote.card_url(), &remote.party_token);
        spec.binding = Some(binding.into());
        env.service.add_remote(&env.admin, spec).await.unwrap();
        let t = target(&env, &name).await;
        // Served while the database is up: an unknown task is the remote's TASK_NOT_FOUND.
        match client.get_task(&t, "thr_unknown").await.unwrap_err() {
            CallError::Remote(e) => assert_eq!(e.reason.as_deref(), Some("TASK_NOT_FOUND")),
            other => panic!("{binding}: {other:?}"),
        }
        targets.push((binding, t));
    }
    // The remote's store goes away under it: its writer and its read connections are closed.
    remote.service.store().close().await;
    for (binding, t) in &targets {
        let request = pb::SendMessageRequest {
            message: Some(pb::Message {
                message_id: format!("m-{binding}"),
                role: pb::Role::User as i32,
                parts: vec![pb::Part {
                    content: Some(pb::part::Content::Text("are you there?".into())),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let e = match client.send_message(t, request).await.unwrap_err() {
            CallError::Remote(e) => e,
            other => panic!("{binding}: {other:?}"),
        };
        assert!(e.retryable, "{binding}: {e:?}");
        assert_eq!(e.reason.as_deref(), Some("UNAVAILABLE"), "{binding}: {e:?}");
        match *binding {
            "grpc" => assert_eq!(e.code, tonic::Code::Unavailable as i64, "{e:?}"),
            "jsonrpc" => assert_eq!(e.code, -31503, "{e:?}"),
            _ => assert_eq!(e.http_status, Some(503), "{e:?}"),
        }
    }
}
