//! Wiring: `App::build` prepares the data directory, opens the store, creates the bootstrap admin
//! (and with `--demo` the demo people), binds the listener, and returns an `App` whose bound address
//! is known before it serves; `run_until_stopped` serves until the cancellation token fires, then
//! ends long-polls, finishes in-flight requests and closes the store.

pub mod demo;
mod guard;

use futures::FutureExt as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::a2a;
use crate::a2a::card::{CardDefinition, CardSigner, Endpoints};
use crate::bus::{LocalBus, PgBus, WakeBus};
use crate::clock::SystemClock;
use crate::config::Config;
use crate::service::{Deps, Service};
use crate::store::Store;

/// Name of the file holding the bootstrap admin token, in the data directory.
pub const ADMIN_TOKEN_FILE: &str = "admin.token";
/// Name of the master key file, in the data directory.
pub const MASTER_KEY_FILE: &str = "master.key";

pub struct App {
    listener: TcpListener,
    /// Serves TLS when `[tls]` is configured.
    tls: Option<tokio_rustls::TlsAcceptor>,
    router: Router,
    /// Connection cap and timeouts of the listener.
    server: crate::net::ServerSettings,
    service: Service,
    /// The URL clients use: the configured public URL, else derived from the bound address.
    public_url: String,
    data_dir: PathBuf,
    /// Secret of the bootstrap admin token when this start created it (shown once).
    pub bootstrap_token: Option<String>,
    shutdown: CancellationToken,
    /// Drains the outbox while the server runs.
    worker: Arc<crate::workers::outbox::Worker>,
    /// Follows the tasks delegated to remote agents while the server runs.
    follower: Arc<crate::workers::remote::Follower>,
    bus: Arc<dyn WakeBus>,
    /// The signing keys: reloaded on every replica when one rotates.
    keys: Arc<crate::keys::KeyManager>,
    /// How long each kind of record is kept; the retention sweep runs when any is purged.
    retention: crate::service::Retention,
}

impl App {
    /// Initialises (if needed) and binds everything; serves nothing yet.
    pub async fn build(config: Config, shutdown: CancellationToken) -> anyhow::Result<App> {
        // Outbound clients (the JWT key set) and the TLS listener need the rustls provider.
        crate::net::tls::install_crypto_provider();
        // The port first: a start that cannot listen must create nothing (no bootstrap token
        // written but never printed).
        let listener = TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("Could not listen on {}", config.listen))?;
        create_private_dir(&config.data_dir)?;
        if config.uses_sqlite() {
            create_private_file(
                &config.data_dir.join(crate::config::SQLITE_FILE),
                &config.database_url,
            )?;
        }
        ensure_master_key(&config.data_dir)?;
        let mut card = card_definition(&config.card_dir)?;
        if let Some(name) = &config.card_name {
            card = card
                .renamed(name)
                .with_context(|| format!("Invalid [a2a] card_name {name:?}"))?;
        }
        if card.name() == crate::domain::DEFAULT_CARD_NAME {
            tracing::warn!(
                "The Agent Card keeps the shipped name \"{}\": every liaison this one federates \
                 with labels it \"remote agent {}\". Set [a2a] card_name \
                 (LIAISON_A2A__CARD_NAME) to your team's or organisation's name.",
                crate::domain::DEFAULT_CARD_NAME,
                crate::domain::DEFAULT_CARD_NAME
            );
        }
        let mut settings = config.settings.clone();
        settings.skills = card.skill_routes();
        settings.default_skill = Some(card.default_skill().to_owned());
        let addr = listener.local_addr()?;
        let public_url = config.public_url.clone().unwrap_or_else(|| {
            let scheme = if config.tls.is_some() {
                "https"
            } else {
                "http"
            };
            derived_public_url(scheme, addr)
        });
        // The authorization server issues tokens for this server's own /mcp only.
        settings.oauth.issuer = crate::service::issuer_for(&public_url);
        settings.oauth.resource = format!("{public_url}/mcp");
        let store = Store::open_with(&config.database_url, config.database)
            .await
            .with_context(|| {
                format!(
                    "Could not open the database {}",
                    redact(&config.database_url)
                )
            })?;
        let bus: Arc<dyn WakeBus> = if config.uses_sqlite() {
            Arc::new(LocalBus::default())
        } else {
            PgBus::start(&config.database_url, shutdown.clone())
                .await
                .context("Could not listen for wake-ups on PostgreSQL")?
        };
        let store = Arc::new(store);
        // Loaded once: it seals the service's secrets and opens the signing keys.
        let master = Arc::new(
            crate::keys::ring::MasterKey::load(&config.data_dir)
                .context("Could not read the master key")?,
        );
        let keys = Arc::new(
            key_manager(store.clone(), master.clone(), &config.data_dir, bus.clone()).await?,
        );
        let outbox = &config.settings.outbox;
        let outbound = crate::net::outbound::OutboundClient::new(
            outbox.allow.clone(),
            outbox.connect_timeout,
            outbox.timeout,
        )
        .context("Could not build the outbound HTTP client")?;
        // One A2A client: the registration, the sender and the follower share its OAuth2 tokens
        // and gRPC connections.
        let a2a_client = crate::remote::A2aClient::new(outbound.clone());
        let service = Service::new(Deps {
            store,
            bus: bus.clone(),
            clock: Arc::new(SystemClock),
            settings,
            shutdown: shutdown.clone(),
            master: Some(master),
            keys: Some(keys.clone()),
            outbound: outbound.clone(),
            a2a: a2a_client.clone(),
        });
        let bootstrap_token = match service.bootstrap().await? {
            Some(issued) => {
                write_secret_file(&config.data_dir.join(ADMIN_TOKEN_FILE), &issued.secret)?;
                Some(issued.secret)
            }
            None => None,
        };
        let tls = match &config.tls {
            Some(files) => Some(crate::net::tls::acceptor(
                &files.cert_file,
                &files.key_file,
            )?),
            None => None,
        };
        // The card advertises exactly the bindings served; gRPC shares the HTTP port (h2c, or TLS with [tls]).
        let endpoints = Endpoints {
            public_url: public_url.clone(),
            jsonrpc_url: format!("{public_url}{}", a2a::rpc::PATH),
            rest_url: format!("{public_url}{}", a2a::rest::PATH),
            grpc_authority: Endpoints::authority_of(&public_url),
        };
        let sender = crate::workers::remote::Sender::new(
            service.clone(),
            a2a_client.clone(),
            public_url.clone(),
        );
        let follower = Arc::new(crate::workers::remote::Follower::new(
            service.clone(),
            a2a_client,
        ));
        let worker = Arc::new(
            crate::workers::outbox::Worker::new(
                service.clone(),
                outbound,
                keys.live(),
                public_url.clone(),
            )
            .with_remote(sender),
        );
        // The card may only promise JWTs the server checks; JWTs accepted but not declared are
        // allowed (a party told out of band), with a warning.
        match (card.accepts_oidc(), config.jwt.is_some()) {
            (true, false) => anyhow::bail!(
                "agent-card/card.toml declares openid_connect_url, but [a2a.jwt] is not configured: \
                 configure the issuer, or remove the scheme from the card"
            ),
            (false, true) => tracing::warn!(
                "[a2a.jwt] is configured but the card does not declare an OpenID Connect scheme; \
                 set [security] openid_connect_url in card.toml so clients can discover it"
            ),
            _ => {}
        }
        let cards = Arc::new(CardSigner::live(card, endpoints, keys.live()));
        let signed =
            a2a::http::ServedCard::new(cards.public().context("Could not sign the Agent Card")?)
                .published_to(keys.published(), &public_url);
        {
            // A rotation (here or on another replica) re-signs the served card at once.
            let (cards, signed) = (cards.clone(), signed.clone());
            keys.on_change(move |_| match cards.public() {
                Ok(card) => signed.replace(card),
                Err(e) => tracing::error!(error = %e, "Could not re-sign the Agent Card."),
            });
        }
        let mut a2a_handler =
            a2a::handler::A2a::new(service.clone(), Duration::from_secs(config.blocking_wait_s))
                .with_version(config.spec_version)
                .with_rest_content_type(config.rest_content_type)
                .with_extended_cards(cards);
        if let Some(jwt) = config.jwt.clone() {
            // The operator's own identity provider, named in the configuration (often on a private
            // address the SSRF guard would refuse); only its key set is fetched.
            #[allow(clippy::disallowed_methods)]
            let http = reqwest::Client::builder()
                .build()
                .context("Could not build the HTTP client for the JWT key set")?;
            a2a_handler = a2a_handler.with_jwt(Arc::new(a2a::jwt::JwtVerifier::new(jwt, http)?));
        }
        let ready_timeout = config.ready_timeout;
        let router = Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route(
                "/readyz",
                get(move |State(service): State<Service>| readyz(service, ready_timeout)),
            )
            .with_state(service.clone())
            .merge(crate::admin::router(service.clone()))
            .merge(crate::api::router(service.clone()))
            .merge(crate::a2a::push_receiver::router(service.clone()))
            .merge(crate::console::router(service.clone(), &public_url))
            .merge(crate::oauth::router(service.clone()))
            .merge(a2a::http::router(signed))
            .merge(a2a::rpc::router(a2a_handler.clone()))
            .merge(a2a::rest::router(a2a_handler.clone()))
            .merge(a2a::grpc::grpc_routes(a2a_handler))
            .merge(crate::mcp::router(
                service.clone(),
                &config.mcp,
                &public_url,
                shutdown.clone(),
            ))
            .merge(crate::http::metrics::router(
                service.clone(),
                config.metrics_token.clone(),
            ))
            .route_layer(axum::middleware::from_fn(crate::http::access::tag_route))
            .fallback(crate::http::unknown_route)
            .layer(axum::middleware::from_fn_with_state(
                service.clone(),
                guard::auth_failures,
            ))
            .layer(axum::middleware::from_fn(
                crate::http::unread::close_when_unread,
            ))
            .layer(tower_http::trace::TraceLayer::new_for_http())
            .layer(axum::middleware::from_fn(crate::http::access::observe));
        Ok(App {
            listener,
            tls,
            router,
            server: config.server,
            service,
            public_url,
            data_dir: config.data_dir,
            bootstrap_token,
            shutdown,
            worker,
            follower,
            bus,
            keys,
            retention: config.retention,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    pub fn public_url(&self) -> &str {
        &self.public_url
    }

    pub fn service(&self) -> &Service {
        &self.service
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Serves until the shutdown token is cancelled, then drains and closes the store.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        let shutdown = self.shutdown.clone();
        // Every background task is named, and how each ended is logged: a panicked worker is
        // reported, never silently gone.
        let mut tasks = tokio::task::JoinSet::new();
        let mut names = std::collections::HashMap::new();
        let mut start = |name: &'static str, task: futures::future::BoxFuture<'static, ()>| {
            names.insert(tasks.spawn(task).id(), name);
        };
        start(
            "approval sweep",
            crate::workers::sweep::sweep_approvals(self.service.clone(), shutdown.clone()).boxed(),
        );
        start(
            "command expiry sweep",
            crate::workers::sweep::sweep_commands(self.service.clone(), shutdown.clone()).boxed(),
        );
        if self.retention.purges() {
            start(
                "retention sweep",
                crate::workers::sweep::sweep_retention(
                    self.service.clone(),
                    self.retention,
                    shutdown.clone(),
                )
                .boxed(),
            );
        }
        start(
            "outbox worker",
            self.worker
                .clone()
                .run(
                    self.bus.clone(),
                    self.service.settings().outbox.concurrency,
                    shutdown.clone(),
                )
                .boxed(),
        );
        start(
            "remote follower",
            self.follower
                .clone()
                .run(self.bus.clone(), shutdown.clone())
                .boxed(),
        );
        start(
            "key ring follower",
            self.keys.clone().follow(shutdown.clone()).boxed(),
        );
        tracing::info!(addr = %self.local_addr(), public_url = %self.public_url, "Serving.");
        let served = crate::net::serve(
            self.listener,
            self.router,
            self.tls,
            self.server,
            shutdown.clone(),
        )
        .await
        .context("The server failed");
        // The server may fail before the token is cancelled: stop the workers in any case.
        shutdown.cancel();
        while let Some(ended) = tasks.join_next_with_id().await {
            match ended {
                Ok((id, ())) => {
                    tracing::debug!(
                        task = names.get(&id).copied().unwrap_or("?"),
                        "A background task stopped."
                    );
                }
                Err(e) => {
                    let task = names.get(&e.id()).copied().unwrap_or("?");
                    if e.is_panic() {
                        tracing::error!(task, error = %e, "A background task panicked.");
                    } else {
                        tracing::warn!(task, error = %e, "A background task was cancelled.");
                    }
                }
            }
        }
        served?;
        self.service.store().close().await;
        tracing::info!("Stopped.");
        Ok(())
    }
}

/// Ready while the database answers and writes commit, answered within `deadline` whatever the
/// database does: 503 while every write fails (a full disk, a lost database) or a group commit
/// has waited on the database longer than `deadline` (a hung server, a lock held elsewhere), or
/// when the database does not answer a ping within it; back to 200 once it does and a write
/// commits again.
async fn readyz(service: Service, deadline: Duration) -> (StatusCode, String) {
    if let Some(since) = service.writes_failing_since() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("writes failing since {since}"),
        );
    }
    if let Some(since) = service.writes_stuck_since(deadline) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("a write has waited on the database since {since}"),
        );
    }
    match tokio::time::timeout(deadline, service.store().ping()).await {
        Ok(Ok(())) => (StatusCode::OK, "ready".into()),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "Readiness check failed.");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "database unavailable".into(),
            )
        }
        Err(_) => {
            tracing::warn!(
                deadline_ms = deadline.as_millis() as u64,
                "Readiness check failed: the database did not answer in time."
            );
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("database did not answer within {} ms", deadline.as_millis()),
            )
        }
    }
}

/// The signing key ring, kept in the store so every replica signs with the same keys and serves
/// the same JWKS. The first start creates it: from the `signing-keys.json` an earlier version left
/// in the data directory (keeping its key id), else with one new key.
async fn key_manager(
    store: Arc<crate::store::Store>,
    master: Arc<crate::keys::ring::MasterKey>,
    data_dir: &Path,
    bus: Arc<dyn WakeBus>,
) -> anyhow::Result<crate::keys::KeyManager> {
    let mut candidate = crate::keys::ring::load_records(data_dir)?;
    if candidate.is_empty() {
        candidate.push(crate::keys::ring::SigningKey::generate(&master)?.1);
    }
    crate::keys::KeyManager::open(store, master, bus, candidate).await
}

/// The card definition of `dir`, or the one built into the binary when `dir` has no `card.toml`.
fn card_definition(dir: &Path) -> anyhow::Result<CardDefinition> {
    if dir.join(a2a::card::CARD_FILE).exists() {
        return CardDefinition::load(dir)
            .with_context(|| format!("Invalid Agent Card in {}", dir.display()));
    }
    tracing::info!(dir = %dir.display(), "No card.toml there; using the built-in Agent Card.");
    Ok(CardDefinition::from_toml(include_str!(
        "../../agent-card/card.toml"
    ))?)
}

/// Creates the master key (32 random bytes, hex) with mode 0600 unless it exists or
/// `LIAISON_MASTER_KEY` provides one. It will encrypt signing keys.
fn ensure_master_key(dir: &Path) -> anyhow::Result<()> {
    let path = dir.join(MASTER_KEY_FILE);
    if std::env::var_os("LIAISON_MASTER_KEY").is_some() || path.exists() {
        return Ok(());
    }
    let key = crate::domain::secret::try_random::<32>()
        .ok_or_else(|| anyhow::anyhow!("No system randomness"))?;
    write_secret_file(&path, &crate::domain::hex(&key))
}

/// The public URL when none is configured: the bound address, except that an unspecified one
/// (`0.0.0.0`, `::`) is no address a client can use. Then the loopback address is advertised, and
/// a warning says to set `--public-url` (remote clients need it).
fn derived_public_url(scheme: &str, addr: SocketAddr) -> String {
    if !addr.ip().is_unspecified() {
        return format!("{scheme}://{addr}");
    }
    let loopback = if addr.is_ipv4() {
        SocketAddr::from(([127, 0, 0, 1], addr.port()))
    } else {
        SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, addr.port()))
    };
    tracing::warn!(
        listen = %addr,
        advertised = %loopback,
        "Listening on every address without --public-url: the Agent Card, the MCP metadata and \
         links advertise the loopback address, which only this machine can reach. Set \
         --public-url (LIAISON_PUBLIC_URL) to the URL clients use."
    );
    format!("{scheme}://{loopback}")
}

/// Creates `dir` (and its parents) if missing, the directory itself readable by its owner only:
/// it holds the master key, the bootstrap token and the database.
pub fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .with_context(|| format!("Could not create the data directory {}", dir.display()))
}

/// Creates the SQLite database file empty with mode 0600 unless it exists, so the database (and
/// the WAL files SQLite gives the database's mode) is never readable by others.
fn create_private_file(path: &Path, url: &str) -> anyhow::Result<()> {
    // Only the default database in the data directory; a database_url elsewhere is the operator's.
    if !url.ends_with(&path.display().to_string()) || path.exists() {
        return Ok(());
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options
        .open(path)
        .map(drop)
        .with_context(|| format!("Could not create the database file {}", path.display()))
}

/// Writes a secret to a new file readable only by its owner.
pub fn write_secret_file(path: &Path, secret: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("Could not write {}", path.display()))?;
    file.write_all(secret.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    Ok(())
}

/// A database URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{}:***{}", &url[..scheme + 3], user, &url[at..])
        }
        _ => url.to_owned(),
    }
}
