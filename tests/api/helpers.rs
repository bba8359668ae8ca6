//! Test harness: a fresh database per test on the chosen backend, a service with a manual clock,
//! and helpers to make people, channels and callers.

use std::sync::Arc;
use std::time::Duration;

use liaison::bus::LocalBus;
use liaison::clock::ManualClock;
use liaison::domain::{ChannelName, PersonId, PersonKind, Scope, Scopes, Timestamp};
use liaison::keys::ring::MasterKey;
use liaison::service::{Caller, ChannelSpec, Service, Settings, TokenSpec};
use liaison::store::Store;
use tokio_util::sync::CancellationToken;

/// A database that exists for one test: a temporary SQLite file, or a PostgreSQL database dropped
/// when the test ends.
pub(crate) struct TestDb {
    pub url: String,
    _dir: Option<tempfile::TempDir>,
    pg: Option<(String, String)>,
}

impl TestDb {
    pub(crate) async fn new() -> TestDb {
        liaison::net::tls::install_crypto_provider();
        match std::env::var("LIAISON_TEST_DATABASE_URL") {
            Ok(admin_url) if admin_url.starts_with("postgres") => {
                let name = format!("liaison_test_{}", uuid::Uuid::new_v4().simple());
                sqlx::any::install_default_drivers();
                let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&admin_url)
                    .await
                    .expect("connect to PostgreSQL");
                sqlx::Executor::execute(
                    &mut conn,
                    sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")),
                )
                .await
                .expect("create a test database");
                let base = admin_url
                    .rsplit_once('/')
                    .map_or(admin_url.as_str(), |(b, _)| b)
                    .to_owned();
                TestDb {
                    url: format!("{base}/{name}"),
                    _dir: None,
                    pg: Some((admin_url, name)),
                }
            }
            _ => {
                let dir = tempfile::tempdir().expect("a temporary directory");
                let url = format!("sqlite://{}", dir.path().join("liaison.db").display());
                TestDb {
                    url,
                    _dir: Some(dir),
                    pg: None,
                }
            }
        }
    }
}

impl TestDb {
    pub(crate) fn is_postgres(&self) -> bool {
        self.pg.is_some()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((admin_url, name)) = self.pg.take() {
            // Async drop does not exist; a short-lived runtime on a plain thread does the job.
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(async {
                    if let Ok(mut conn) =
                        <sqlx::AnyConnection as sqlx::Connection>::connect(&admin_url).await
                    {
                        let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                        let _ = sqlx::Executor::execute(&mut conn, sqlx::AssertSqlSafe(sql)).await;
                    }
                });
            })
            .join();
        }
    }
}

/// A service over a fresh database, with a clock that moves only when told.
pub(crate) struct TestEnv {
    pub service: Service,
    pub clock: ManualClock,
    pub admin: Caller,
    /// Held so the database lives as long as the test.
    pub _db: Option<TestDb>,
}

pub(crate) fn t0() -> Timestamp {
    Timestamp(1_800_000_000_000)
}

impl TestEnv {
    pub(crate) async fn new() -> TestEnv {
        Self::with_settings(Settings::default()).await
    }

    pub(crate) async fn with_settings(settings: Settings) -> TestEnv {
        Self::on(TestDb::new().await, Arc::new(LocalBus::default()), settings).await
    }

    /// A service with `settings` whose secrets are sealed under `master`.
    pub(crate) async fn with_master(settings: Settings, master: MasterKey) -> TestEnv {
        Self::with_master_on(settings, master, Arc::new(LocalBus::default())).await
    }

    /// A service with `settings` and secrets sealed under `master`, publishing on `bus`.
    pub(crate) async fn with_master_on(
        settings: Settings,
        master: MasterKey,
        bus: Arc<dyn liaison::bus::WakeBus>,
    ) -> TestEnv {
        Self::build(TestDb::new().await, bus, settings, Some(master)).await
    }

    /// A service over `db` with `bus` (e.g. one replica of several sharing a database).
    pub(crate) async fn on(
        db: TestDb,
        bus: Arc<dyn liaison::bus::WakeBus>,
        settings: Settings,
    ) -> TestEnv {
        Self::build(db, bus, settings, None).await
    }

    /// A service over `db` with `bus` and secrets sealed under `master`.
    pub(crate) async fn on_with_master(
        db: TestDb,
        bus: Arc<dyn liaison::bus::WakeBus>,
        settings: Settings,
        master: MasterKey,
    ) -> TestEnv {
        Self::build(db, bus, settings, Some(master)).await
    }

    async fn build(
        db: TestDb,
        bus: Arc<dyn liaison::bus::WakeBus>,
        settings: Settings,
        master: Option<MasterKey>,
    ) -> TestEnv {
        let store = Store::open(&db.url).await.expect("open the store");
        let clock = ManualClock::starting_at(t0());
        let service = Service::new(
            liaison::service::Deps::new(
                Arc::new(store),
                bus,
                Arc::new(clock.clone()),
                settings,
                CancellationToken::new(),
            )
            .unwrap()
            .with_optional_master(master),
        );
        let issued = service
            .bootstrap()
            .await
            .unwrap()
            .expect("a fresh database bootstraps");
        let admin = service.authenticate(&issued.secret).await.unwrap();
        TestEnv {
            service,
            clock,
            admin,
            _db: Some(db),
        }
    }

    /// Adds a member and returns an agent caller for them, declaring `agent`.
    pub(crate) async fn member(&self, id: &str, agent: &str) -> Caller {
        self.person(id, PersonKind::Member).await;
        self.caller(id, Scope::Agent, agent).await
    }

    pub(crate) async fn person(&self, id: &str, kind: PersonKind) {
        let name = format!("{}{}", id[..1].to_uppercase(), &id[1..]);
        self.service
            .add_person(&self.admin, pid(id), kind, name)
            .await
            .unwrap();
    }

    /// A new token for an existing person, authenticated, with a declared agent identity.
    pub(crate) async fn caller(&self, id: &str, scope: Scope, agent: &str) -> Caller {
        let spec = TokenSpec {
            person: pid(id),
            scopes: Scopes::default().with(scope),
            expires_in_s: None,
            description: String::new(),
        };
        let issued = self.service.issue_token(&self.admin, spec).await.unwrap();
        let caller = self.service.authenticate(&issued.secret).await.unwrap();
        caller.declaring(Some(liaison::domain::AgentIdentity::parse(agent).unwrap()))
    }

    /// Allows, as `person`'s human with the CLI path, every approval pending for them.
    pub(crate) async fn allow_pending(&self, person: &str) {
        let human = self
            .caller(person, Scope::Human, &format!("{person}@console:1"))
            .await;
        let page = self
            .service
            .approvals(&human, true, None, None)
            .await
            .unwrap();
        assert!(!page.approvals.is_empty(), "nothing pending for {person}");
        for a in page.approvals {
            self.service
                .decide(
                    &human,
                    &a.id,
                    liaison::domain::Decision::Allow,
                    None,
                    liaison::domain::DecisionPath::Cli,
                )
                .await
                .unwrap();
        }
    }

    pub(crate) async fn channel(&self, name: &str, members: &[&str]) {
        let spec = ChannelSpec {
            name: ChannelName::parse(name).unwrap(),
            description: String::new(),
            members: members.iter().map(|m| pid(m)).collect(),
            rights: None,
            policy: None,
        };
        self.service.add_channel(&self.admin, spec).await.unwrap();
    }
}

pub(crate) fn pid(s: &str) -> PersonId {
    PersonId::parse(s).unwrap()
}

pub(crate) fn channel(s: &str) -> ChannelName {
    ChannelName::parse(s).unwrap()
}

/// A post request with the fields most tests need.
pub(crate) fn post(
    kind: &str,
    channel_name: Option<&str>,
    thread: Option<&liaison::domain::ThreadId>,
    body: &str,
) -> liaison::service::PostRequest {
    liaison::service::PostRequest {
        kind: Some(kind.parse().unwrap()),
        channel: channel_name.map(channel),
        thread: thread.cloned(),
        body: body.to_owned(),
        ..Default::default()
    }
}

/// Waits until `service` counts at least `n` inbox long-polls waiting. The service counts a
/// long-poll only once it has subscribed to its wake-ups, so a post made after this returns is
/// one that must wake it (a post made before would be found by the poll's first read, and the
/// wake-up would go untested). The bound only keeps a poll that never waits from hanging the suite.
pub(crate) async fn until_waiting(service: &Service, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while service.waiting().0 < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {n} long-polls waiting after 30 s",
            service.waiting().0
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Asks `attempt` again until it answers `Some`. For what is written behind an answer (the "read"
/// of a receipt, SPEC §4: committed with the writer's next batch, or 50 ms later when none
/// comes). The bound only keeps a write that never lands from hanging the suite: it fails
/// the test, saying `what` did not happen.
pub(crate) async fn eventually<T, F, Fut>(what: &str, mut attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = attempt().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
